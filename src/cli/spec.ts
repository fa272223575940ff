/**
 * Every `troupe` command and flag, as data: the parser (program.ts), `--help` and the README's
 * CLI tables (generated from here, see test/unit/docs) all read this one table. Adding a flag is
 * one entry in FLAGS plus its name in the commands that take it; adding a command is one entry in
 * COMMANDS whose `load` imports its handler.
 * @module
 */
import { isPostgresUrl, type Io } from './args.js';

/** One flag: how it is written (commander syntax) and what it does. */
export interface FlagSpec {
  readonly syntax: string;
  readonly help: string;
}

export const FLAGS = {
  model: { syntax: '--model <id>', help: 'the model name sent to the server (or config "model")' },
  baseUrl: { syntax: '--base-url <url>', help: 'any OpenAI-compatible endpoint (or OPENAI_BASE_URL, config "baseURL")' },
  apiKey: { syntax: '--api-key <key>', help: 'the API key (prefer OPENAI_API_KEY or the config file: a command line shows in ps)' },
  budget: { syntax: '--budget <usd>', help: 'stop the run before it spends more than this many USD' },
  price: { syntax: '--price <in,out[,cached]>', help: "the model's price in USD per 1M input, output (and cached input) tokens, for models troupe has no price for" },
  interactive: { syntax: '--interactive', help: 'a human is attached: lines typed go to the root, finished agents can be revived' },
  stream: { syntax: '--stream', help: 'stream answers: text shows as it is written' },
  config: { syntax: '--config <file>', help: 'the config file (default ./troupe.config.json when present)' },
  db: { syntax: '--db <file-or-url>', help: 'the database file (default .troupe/troupe.db), or a postgres:// URL (see Scale out: workers host the runs)' },
  concurrency: { syntax: '--concurrency <n>', help: 'runs this worker hosts at once (default 10)' },
  run: { syntax: '--run <id>', help: 'the run to act on (default: the latest run no trigger started)' },
  resume: { syntax: '--resume', help: 'host the latest main run of the database again' },
  killAfter: { syntax: '--kill-after <turns>', help: 'kill the process (SIGKILL) after this many turns, to try resume' },
  json: { syntax: '--json', help: 'JSON lines on stdout instead of the live view' },
  inspect: { syntax: '--inspect [port]', help: 'serve the XState inspector on 127.0.0.1 (default port 8080; 0 picks a free one)' },
  ui: { syntax: '--ui [port]', help: 'serve the web dashboard beside the run on 127.0.0.1 (default port 7070; 0 picks a free one); it keeps serving after the run until Ctrl-C' },
  port: { syntax: '--port <n>', help: 'the port (default 7070; 0 picks a free one)' },
  otel: { syntax: '--otel', help: 'export OpenTelemetry GenAI spans and metrics over OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT (no message content)' },
  verbose: { syntax: '-v, --verbose', help: 'also print the log on stderr' },
} as const satisfies Record<string, FlagSpec>;

export type FlagName = keyof typeof FLAGS;

/** What a command's handler gets: the parsed flags (camelCase names) and its positional arguments. */
export interface Values {
  model?: string;
  baseUrl?: string;
  apiKey?: string;
  budget?: string;
  price?: string;
  interactive?: boolean;
  stream?: boolean;
  config?: string;
  db?: string;
  run?: string;
  resume?: boolean;
  killAfter?: string;
  json?: boolean;
  inspect?: string;
  otel?: boolean;
  ui?: string;
  port?: string;
  verbose?: boolean;
  concurrency?: string;
}

export type Handler = (args: string[], values: Values, io: Io) => Promise<number>;

export interface CommandSpec {
  readonly name: string;
  /** Positional arguments in commander syntax: `<agent> <text>`, `[task]`. */
  readonly args: string;
  readonly summary: string;
  readonly flags: readonly FlagName[];
  /** Imported when the command runs, so `troupe status` does not load the model client. */
  readonly load: () => Promise<Handler>;
}

/** The command's handler, or its PostgreSQL twin (pg.ts) when `--db` is a postgres:// URL. */
const orPostgres =
  (name: string, local: () => Promise<Handler>) =>
  async (): Promise<Handler> =>
  async (args, values, io) =>
    (isPostgresUrl(values.db) ? (await import('./pg.js')).pgHandler(name) : await local())(args, values, io);

const VIEW: readonly FlagName[] = ['json', 'inspect', 'verbose'];
const MODEL: readonly FlagName[] = ['model', 'baseUrl', 'apiKey', 'budget', 'price'];

export const COMMANDS: readonly CommandSpec[] = [
  {
    name: 'demo',
    args: '',
    summary: 'the offline demo team: real SQLite and openai client, a bundled fake server; no key, no network',
    flags: ['db', 'killAfter', 'otel', 'ui', ...VIEW],
    load: orPostgres('demo', async () => (await import('./runCommands.js')).demo),
  },
  {
    name: 'run',
    args: '<task>',
    summary: 'start a team on any OpenAI-compatible model',
    flags: [...MODEL, 'interactive', 'stream', 'config', 'db', 'otel', 'ui', ...VIEW],
    load: orPostgres('run', async () => (await import('./runCommands.js')).run),
  },
  {
    name: 'resume',
    args: '',
    summary: 'continue a run with its saved settings (flags given override them)',
    flags: [...MODEL, 'config', 'stream', 'db', 'run', 'otel', 'ui', ...VIEW],
    load: orPostgres('resume', async () => (await import('./runCommands.js')).resume),
  },
  {
    name: 'ui',
    args: '',
    summary: 'the web dashboard of a live or finished run, on 127.0.0.1',
    flags: ['db', 'run', 'port'],
    load: async () => (await import('./ui.js')).ui,
  },
  {
    name: 'status',
    args: '',
    summary: "a run's state: root, agents, mail, budget, report, whether a process hosts it",
    flags: ['db', 'run', 'json'],
    load: orPostgres('status', async () => (await import('./readCommands.js')).status),
  },
  {
    name: 'tree',
    args: '',
    summary: 'the agent tree with status, turns, spend and last tool',
    flags: ['db', 'run', 'json'],
    load: orPostgres('tree', async () => (await import('./readCommands.js')).tree),
  },
  {
    name: 'send',
    args: '<agent> <text>',
    summary: 'message an agent by name or id: a live run at once, otherwise on resume',
    flags: ['db', 'run'],
    load: orPostgres('send', async () => (await import('./mail.js')).send),
  },
  {
    name: 'stop',
    args: '<agent>',
    summary: 'stop an agent and its descendants, in a live run or not',
    flags: ['db', 'run'],
    load: orPostgres('stop', async () => (await import('./mail.js')).stop),
  },
  {
    name: 'serve',
    args: '[task]',
    summary: 'long-running: proactive triggers, a watchdog, an optional interactive main run',
    flags: [...MODEL, 'config', 'stream', 'resume', 'db', 'otel', 'ui', ...VIEW],
    load: orPostgres('serve', async () => (await import('./serve.js')).serveCommand),
  },
  {
    name: 'worker',
    args: '',
    summary: 'long-running: host runs of a shared PostgreSQL --db; Ctrl-C releases them',
    flags: ['db', 'concurrency', 'model', 'baseUrl', 'apiKey', 'config', 'verbose'],
    load: async () => (await import('./pg.js')).pgHandler('worker'),
  },
];

export const ENVIRONMENT = `Environment: OPENAI_API_KEY, OPENAI_BASE_URL. Config file: ./troupe.config.json or --config.
Logs: .troupe/troupe.log (-v also prints them).`;
