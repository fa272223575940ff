/**
 * How a PostgreSQL CLI process hosts runs (`troupe worker`, `serve`, `demo`): a worker whose runs
 * follow the settings saved with each (see pg.ts for which wins).
 * @module
 */
import type { Logger } from 'pino';
import type { PortReads } from '../store/postgres/reads.js';
import type { PostgresStore } from '../store/postgres/store.js';
import { startWorker, type HostedOptions, type Worker, type WorkerOptions } from '../worker/worker.js';
import type { Io } from './args.js';
import { defined, fromEnv, loadConfigFile, mergeConfig, type CliConfig, type SavedRunConfig } from './config.js';
import { demoModel, demoScript } from './demoModel.js';
import { cliLogger } from './logs.js';
import { coordinatorOptions, fromFlags, LOG_FILE, modelFor, secrets } from './setup.js';
import type { Values } from './spec.js';

/** The settings a run was submitted with (the latest `cli.run` event: a resume with flags appends one). */
export async function runSettings(reads: Pick<PortReads, 'eventsOf'>, runId: string): Promise<SavedRunConfig> {
  return ((await reads.eventsOf(runId, 'cli.run')).at(-1)?.data ?? {}) as SavedRunConfig;
}

/** What a command's flags say about a run's settings, to be saved with it (no key, no database URL). */
export function flagSettings(values: Values, model: string | undefined): Partial<CliConfig> {
  const { db: _db, apiKey: _key, ...rest } = fromFlags(values, model);
  return rest;
}

/** Calls each agent's model has answered, by agent name (what a re-hosted demo must not replay). */
async function answeredCalls(reads: PortReads, runId: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const agent of await reads.listAgents(runId)) out[agent.name] = (await reads.loadSession(agent.id)).filter((i) => i.role === 'assistant').length;
  return out;
}

/** How this worker hosts a run: the run's saved settings between the worker's defaults and its flags. */
export function hostSettings(store: PostgresStore, defaults: CliConfig, overrides: Partial<CliConfig>, logger: Logger) {
  // A run's interactivity is its own (its row), never a worker's.
  const { interactive: _i, ...workerDefaults } = defaults;
  return async (runId: string): Promise<HostedOptions> => {
    const saved = await runSettings(store.reads, runId);
    const config = mergeConfig(workerDefaults, saved, overrides);
    if (saved.demo) {
      const { model, server } = await demoModel(demoScript(), await answeredCalls(store.reads, runId));
      return { ...coordinatorOptions(config), model, logger, retry: { baseDelayMs: 200 }, dispose: () => server.close() };
    }
    return { ...coordinatorOptions(config), model: modelFor(config), logger };
  };
}

/** A worker over `store` with the worker flags of `values` (`onHost`: told each time it hosts a run). */
export async function hostRuns(store: PostgresStore, values: Values, io: Io, options: Pick<WorkerOptions, 'concurrency' | 'onHost' | 'logger'> = {}): Promise<Worker> {
  const defaults = mergeConfig(loadConfigFile(values.config), fromEnv(io.env));
  const overrides = defined({ model: values.model, baseURL: values.baseUrl, apiKey: values.apiKey });
  secrets(io, mergeConfig(defaults, overrides));
  const logger = options.logger ?? cliLogger(LOG_FILE, values.verbose ?? false, io.redactor);
  return startWorker({ store, ...defined({ concurrency: options.concurrency, onHost: options.onHost }), logger, hostOptions: hostSettings(store, defaults, overrides, logger) });
}
