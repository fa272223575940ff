/**
 * What every command that runs a team sets up the same way from its resolved config: the model,
 * the coordinator options, the secrets to scrub, the optional inspector. Shared by commands.ts
 * and serve.ts (kept apart from both so neither imports the other).
 * @module
 */
import type { CoordinatorOptions } from '../host/options.js';
import { ConfigError } from '../errors.js';
import { openaiModel } from '../model/openaiModel.js';
import type { Model } from '../model/types.js';
import type { OpenStoreOptions } from '../store/sqliteStore.js';
import { number, type Io } from './args.js';
import { defined, MODEL_HINT, type CliConfig } from './config.js';

export const LOG_FILE = '.troupe/troupe.log';

/**
 * The API key a command ends up with becomes a secret of `io.redactor` (scrubbed from the output
 * streams); returns the options that scrub it from the database and the log too.
 */
export function secrets(io: Io, config?: Pick<CliConfig, 'apiKey'>): Pick<OpenStoreOptions, 'redactor'> {
  io.redactor?.add(config?.apiKey);
  return io.redactor ? { redactor: io.redactor } : {};
}

export async function inspector(flags: { inspect?: boolean; 'inspect-port'?: string }, io: Io): Promise<{ inspect?: CoordinatorOptions['inspect']; close: () => Promise<void> }> {
  if (!flags.inspect) return { close: () => Promise.resolve() };
  const port = flags['inspect-port'] === undefined ? 8080 : number('inspect', flags['inspect-port'], true);
  const { startInspector } = await import('../inspect/server.js');
  const handle = await startInspector({ port: port ?? 8080 });
  io.err.write(`${handle.hint}\n`);
  return { inspect: handle.inspect, close: () => handle.close() };
}

export function modelFor(config: CliConfig): Model {
  if (!config.model) throw new ConfigError(MODEL_HINT);
  return openaiModel({
    model: config.model,
    ...defined({ baseURL: config.baseURL, apiKey: config.apiKey, stream: config.stream, maxOutputTokens: config.maxOutputTokens, timeoutMs: config.timeoutMs }),
  });
}

export function coordinatorOptions(config: CliConfig): Omit<CoordinatorOptions, 'model' | 'store'> {
  return defined({
    interactive: config.interactive,
    budget: config.budget,
    limits: config.limits,
    concurrency: config.concurrency,
    rateLimit: config.rateLimit,
    idleResumeMs: config.idleResumeMs,
    review: config.review,
  });
}
