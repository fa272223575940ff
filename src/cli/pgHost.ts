/**
 * `troupe worker`'s hosting: a worker over a PostgreSQL schema whose runs follow the settings saved
 * with each (hostSettings.ts says which wins).
 * @module
 */
import type { PostgresStore } from '../store/postgres/store.js';
import { startWorker, type Worker, type WorkerOptions } from '../worker/worker.js';
import type { Io } from './args.js';
import { defined, fromEnv, loadConfigFile, mergeConfig } from './config.js';
import { hostSettings } from './hostSettings.js';
import { cliLogger } from './logs.js';
import { LOG_FILE, secrets } from './setup.js';
import type { FlagName, Values } from './flags.js';
import { ConfigError } from '../errors.js';
import { openPostgresStore } from '../store/postgres/store.js';

/** A worker over `store` with the worker flags of `values` (`onHost` / `onEnd`: told each time it hosts a run and stops). */
export async function hostRuns(
  store: PostgresStore,
  values: Values,
  io: Io,
  options: Pick<WorkerOptions, 'concurrency' | 'onHost' | 'onEnd' | 'logger'> = {},
): Promise<Worker> {
  const defaults = mergeConfig(loadConfigFile(values.config), fromEnv(io.env));
  const overrides = defined({ model: values.model, baseURL: values.baseUrl, apiKey: values.apiKey });
  secrets(io, mergeConfig(defaults, overrides));
  const logger = options.logger ?? cliLogger(LOG_FILE, values.verbose ?? false, io.redactor);
  return startWorker({
    store,
    ...defined({ concurrency: options.concurrency, onHost: options.onHost, onEnd: options.onEnd }),
    logger,
    hostOptions: hostSettings(store.reads, defaults, overrides, logger),
  });
}

/** A flag given that the PostgreSQL form of `command` does not honour is a usage error, never ignored. */
export function only(command: string, values: Values, allowed: readonly FlagName[]): void {
  for (const [name, value] of Object.entries(values)) {
    if (value === undefined || (allowed as readonly string[]).includes(name)) continue;
    const flag = `--${name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
    throw new ConfigError(`troupe ${command} does not take ${flag} with a PostgreSQL --db (see "Scale out" in the README)`);
  }
}

export const openPg = (values: Values, io: Io): Promise<PostgresStore> => openPostgresStore({ url: values.db!, ...secrets(io) });
