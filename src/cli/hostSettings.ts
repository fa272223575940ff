/**
 * How a CLI process hosts a run it did not boot (`troupe worker`, `serve`, a resumed demo): with the
 * settings saved with the run. Which wins: the host's config file and environment are defaults,
 * the run's saved settings override them, and the host's own flags override both. API keys come
 * only from the host (its flags, environment or config file), never from the run.
 * @module
 */
import type { Logger } from 'pino';
import type { CoordinatorOptions } from '../host/options.js';
import type { StorePort } from '../store/port.js';
import type { PortReads } from '../store/postgres/reads.js';
import type { HostedOptions } from '../worker/runHosting.js';
import type { Values } from './flags.js';
import { mergeConfig, type CliConfig } from './config.js';
import { demoModel, demoScript } from './demoModel.js';
import { savedSettings } from './runs.js';
import { coordinatorOptions, fromFlags, modelFor } from './setup.js';

/** What a command's flags say about a run's settings, to be saved with it (no key, no database URL). */
export function flagSettings(values: Values, model: string | undefined): Partial<CliConfig> {
  const { db: _db, apiKey: _key, ...rest } = fromFlags(values, model);
  return rest;
}

/** Calls each agent's model has answered, by agent name (what a re-hosted demo must not replay). */
export async function answeredCalls(reads: Pick<StorePort, 'listAgents' | 'loadSession'>, runId: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const agent of await reads.listAgents(runId)) out[agent.name] = (await reads.loadSession(agent.id)).filter((i) => i.role === 'assistant').length;
  return out;
}

/**
 * How this process hosts a run: the run's saved settings between `defaults` and `overrides`.
 * `extra` (an inspector, telemetry) goes to every run.
 */
export function hostSettings(
  reads: PortReads,
  defaults: CliConfig,
  overrides: Partial<CliConfig>,
  logger: Logger,
  extra: Pick<CoordinatorOptions<StorePort>, 'inspect' | 'telemetry'> = {},
) {
  // A run's interactivity is its own (its row), never a host's.
  const { interactive: _i, ...hostDefaults } = defaults;
  return async (runId: string): Promise<HostedOptions> => {
    const saved = await savedSettings({ reads }, runId);
    const config = mergeConfig(hostDefaults, saved, overrides);
    if (saved.demo) {
      const { model, server } = await demoModel(demoScript(), await answeredCalls(reads, runId));
      return { ...coordinatorOptions(config), ...extra, model, logger, retry: { baseDelayMs: 200 }, dispose: () => server.close() };
    }
    return { ...coordinatorOptions(config), ...extra, model: modelFor(config), logger };
  };
}
