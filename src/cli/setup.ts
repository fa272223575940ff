/**
 * What the commands that host runs (demo, run, resume, serve) share: the config a command ends up
 * with, its model, its coordinator options, the inspector, and the secrets to scrub.
 * @module
 */
import type { ApprovalRules } from '../host/async/approvalRules.js';
import type { CoordinatorOptions } from '../host/options.js';
import { ConfigError } from '../errors.js';
import { openaiModel } from '../model/openaiModel.js';
import type { Model } from '../model/types.js';
import type { InspectorOptions } from '../inspect/server.js';
import type { OpenStoreOptions } from '../store/sqliteStore.js';
import { isPostgresUrl, number, type Io } from './args.js';
import { defined, MODEL_HINT, parsePrice, type CliConfig } from './config.js';
import { mcpSecrets, mcpServersOf } from './mcpConfig.js';
import type { Values } from './flags.js';
import { forTerminal } from './terminal.js';

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
      contextWindow: config.contextWindow,
    }),
  });
}

/** The config's profiles as the coordinator takes them: each `model` a model on the run's server. */
function profilesOf(config: CliConfig): CoordinatorOptions['profiles'] {
  return Object.fromEntries(
    Object.entries(config.profiles ?? {}).map(([name, { model, ...profile }]) => [
      name,
      model === undefined ? profile : { ...profile, model: modelFor({ ...config, model }) },
    ]),
  );
}

const DEFAULT_CLI_APPROVALS: ApprovalRules = { ask: ['destructive'] };

export function coordinatorOptions(config: CliConfig): Omit<CoordinatorOptions, 'model' | 'store'> {
  return defined({
    interactive: config.interactive,
    budget: config.budget,
    limits: config.limits,
    concurrency: config.concurrency,
    rateLimit: config.rateLimit,
    quota: config.quota,
    breaker: config.breaker,
    // The CLI's default (issue 33): a destructive step asks a person, and without one is refused.
    approvals: config.approvals === false ? undefined : (config.approvals ?? DEFAULT_CLI_APPROVALS),
    idleResumeMs: config.idleResumeMs,
    review: config.review,
    notes: config.notes,
    session: config.session,
    auxiliaryModel: config.auxiliaryModel === undefined ? undefined : modelFor({ ...config, model: config.auxiliaryModel }),
    profiles: config.profiles === undefined ? undefined : profilesOf(config),
    strictMcp: config.strictMcp,
    ...(config.mcpServers ? { tools: mcpServersOf(config.mcpServers) } : {}),
  });
}

export interface Inspection {
  inspect?: CoordinatorOptions['inspect'];
  /** The page's address, printed again when the run ends and the inspector keeps serving. */
  url?: string;
  close: () => Promise<void>;
  /** Why this machine cannot reach the inspector UI the page embeds, once the background check has found so; else undefined. */
  unreachable?: () => string | undefined;
  /**
   * Where the one line saying so goes from now on (until then: stderr), e.g. above a live view's
   * frame; it is said once, whoever says it.
   */
  tellWith?: (tell: (line: string) => void) => void;
}

/** What to do offline, given the flags that address the run: the dashboard, and where it shows the agents' lifecycles. */
export function offlineDashboard(address: string): string {
  return `\`troupe ui${address}\` shows the same run offline: its Timeline tab draws every agent's lifecycle states over time`;
}

/** How to open the dashboard on this command's run, completing "the dashboard shows the same run: …" (`where`: where to type the command). */
function dashboardWay(values: Pick<Values, 'db' | 'ui'>, where: string): string {
  if (values.ui !== undefined) return 'open the dashboard this command serves (--ui; its address is printed on the terminal)';
  const db = values.db === undefined ? '' : isPostgresUrl(values.db) ? ' --db postgres://…' : ` --db ${forTerminal(values.db)}`;
  return `run \`troupe ui${db}\` ${where} (or start the team with --ui)`;
}

/** The line for a terminal when this machine cannot reach the inspector UI (`why`: the probe's words). */
function unreachableLine(url: string, why: string, values: Pick<Values, 'db' | 'ui'>, env: NodeJS.ProcessEnv): string {
  const proxy = env.HTTPS_PROXY ?? env.https_proxy;
  return (
    `--inspect: this machine could not reach ${forTerminal(url)} (${forTerminal(why)}), which the inspector page loads from the internet, ` +
    `so the page will say it did not load instead of showing the run. Offline, the dashboard shows the same run: ${dashboardWay(values, 'in another shell')}; ` +
    `its Timeline tab draws every agent's lifecycle states over time.` +
    (proxy ? ' (This check does not use the HTTPS_PROXY set here: a browser that does may still load the page.)' : '')
  );
}

/**
 * `--inspect[=port]`: start the inspector server (its address on stderr), or nothing. In the
 * background, without delaying anything, it checks that this machine reaches the hosted inspector
 * the page embeds; if not, one line says so (see {@link Inspection.tellWith}) and what to open
 * instead. `options` are for tests (a probe that needs no network).
 */
export async function inspector(
  values: Pick<Values, 'inspect' | 'db' | 'ui'>,
  io: Io,
  options: Pick<InspectorOptions, 'probe' | 'probeTimeoutMs' | 'inspectorUrl'> = {},
): Promise<Inspection> {
  if (values.inspect === undefined) return { close: () => Promise.resolve() };
  const port = number('inspect', values.inspect, true, true) ?? 8080;
  const { startInspector } = await import('../inspect/server.js');
  const handle = await startInspector({ ...options, port, dashboard: dashboardWay(values, 'on the machine that runs troupe') });
  io.err.write(`${handle.hint}\n`);
  let tell = (line: string) => io.err.write(`troupe: ${line}\n`);
  let why: string | undefined;
  void handle.unreachable.then((found) => {
    if (found === null) return;
    why = found;
    tell(unreachableLine(handle.inspectorUrl, found, values, io.env));
  });
  return {
    inspect: handle.inspect,
    url: handle.url,
    close: () => handle.close(),
    unreachable: () => why,
    tellWith: (next) => (tell = next),
  };
}
