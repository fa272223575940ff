/**
 * What the commands that host runs (demo, run, resume, serve) share: the config a command ends up
 * with, its model, its coordinator options, the inspector, and the secrets to scrub.
 * @module
 */
import type { CoordinatorOptions } from '../host/options.js';
import { ConfigError } from '../errors.js';
import { openaiModel } from '../model/openaiModel.js';
import type { Model } from '../model/types.js';
import type { OpenStoreOptions } from '../store/sqliteStore.js';
import { number, type Io } from './args.js';
import { defined, MODEL_HINT, parsePrice, type CliConfig } from './config.js';
import { mcpSecrets, mcpServersOf } from './mcpConfig.js';
import type { Values } from './flags.js';

export const LOG_FILE = '.troupe/troupe.log';

/** The config the flags of a command say (undefined where a flag is absent, so earlier sources stay). */
export function fromFlags(values: Values, model: string | undefined): Partial<CliConfig> {
  const limitUsd = number('budget', values.budget);
  if (values.price !== undefined && !model) throw new ConfigError('--price needs a model (--model or config "model") to price');
  const prices = values.price === undefined ? undefined : { [model!]: parsePrice(values.price) };
  const budget = defined({ limitUsd, prices });
  return defined({
    model: values.model,
    baseURL: values.baseUrl,
    apiKey: values.apiKey,
    interactive: values.interactive,
    stream: values.stream,
    otel: values.otel,
    strictMcp: values.strictMcp,
    db: values.db,
    ...(Object.keys(budget).length > 0 ? { budget } : {}),
  });
}

/**
 * The API key a command ends up with becomes a secret of `io.redactor` (scrubbed from the output
 * streams); returns the options that scrub it from the database and the log too.
 */
export function secrets(io: Io, config?: Pick<CliConfig, 'apiKey' | 'mcpServers'>): Pick<OpenStoreOptions, 'redactor'> {
  io.redactor?.add(config?.apiKey);
  for (const secret of mcpSecrets(mcpServersOf(config?.mcpServers))) io.redactor?.add(secret);
  return io.redactor ? { redactor: io.redactor } : {};
}

export function modelFor(config: CliConfig): Model {
  if (!config.model) throw new ConfigError(MODEL_HINT);
  return openaiModel({
    model: config.model,
    ...defined({
      baseURL: config.baseURL,
      apiKey: config.apiKey,
      stream: config.stream,
      maxOutputTokens: config.maxOutputTokens,
      timeoutMs: config.timeoutMs,
      idleTimeoutMs: config.idleTimeoutMs,
    }),
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
    strictMcp: config.strictMcp,
    ...(config.mcpServers ? { tools: mcpServersOf(config.mcpServers) } : {}),
  });
}

export interface Inspection {
  inspect?: CoordinatorOptions['inspect'];
  /** The page's address, printed again when the run ends and the inspector keeps serving. */
  url?: string;
  close: () => Promise<void>;
}

/** `--inspect[=port]`: start the inspector server (its address on stderr), or nothing. */
export async function inspector(values: Pick<Values, 'inspect'>, io: Io): Promise<Inspection> {
  if (values.inspect === undefined) return { close: () => Promise.resolve() };
  const port = number('inspect', values.inspect, true, true) ?? 8080;
  const { startInspector } = await import('../inspect/server.js');
  const handle = await startInspector({ port });
  io.err.write(`${handle.hint}\n`);
  return { inspect: handle.inspect, url: handle.url, close: () => handle.close() };
}
