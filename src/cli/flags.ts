/**
 * The vocabulary of the `troupe` command line: every flag (FLAGS: how it is written and what it
 * does), what a command's handler is given (Values) and what it is (Handler). The command table
 * (spec.ts) and every handler import it; it imports no command, so handlers and the table that
 * loads them never import each other.
 * @module
 */
import type { Io } from './args.js';

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
  price: {
    syntax: '--price <in,out[,cached]>',
    help: "the model's price in USD per 1M input, output (and cached input) tokens, for models troupe has no price for",
  },
  interactive: { syntax: '--interactive', help: 'a human is attached: lines typed go to the root, finished agents can be revived' },
  stream: { syntax: '--stream', help: 'stream answers: text shows as it is written' },
  config: { syntax: '--config <file>', help: 'the config file (default ./troupe.config.json when present)' },
  db: { syntax: '--db <file-or-url>', help: 'the database file (default .troupe/troupe.db), or a postgres:// URL (see Scale out)' },
  concurrency: { syntax: '--concurrency <n>', help: 'runs this worker hosts at once (default 10)' },
  run: { syntax: '--run <id>', help: 'the run to act on (default: the latest run no trigger started)' },
  resume: { syntax: '--resume', help: 'host the latest main run of the database again' },
  detach: { syntax: '--detach', help: 'PostgreSQL: hand the run to the workers and return, instead of hosting it here' },
  killAfter: { syntax: '--kill-after <turns>', help: 'kill the process (SIGKILL) after this many turns, to try resume' },
  json: { syntax: '--json', help: 'JSON lines on stdout instead of the live view' },
  inspect: { syntax: '--inspect [port]', help: 'serve the XState inspector on 127.0.0.1 (default port 8080; 0 picks a free one)' },
  ui: {
    syntax: '--ui [port]',
    help: 'serve the web dashboard beside the run on 127.0.0.1 (default port 7070; 0 picks a free one); it keeps serving after the run until Ctrl-C',
  },
  after: { syntax: '--after <seq>', help: "start after this event of the run's stream (the last seq you saw; default 0: from the first)" },
  port: { syntax: '--port <n>', help: 'the port (default 7070; 0 picks a free one)' },
  otel: { syntax: '--otel', help: 'export OpenTelemetry GenAI spans and metrics over OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT (no message content)' },
  strictMcp: {
    syntax: '--strict-mcp',
    help: 'an MCP server that fails to start ends the run (MCP_SERVER_UNAVAILABLE) instead of it going on without its tools',
  },
  verbose: { syntax: '-v, --verbose', help: 'also print the log on stderr' },
  args: { syntax: '--args <json>', help: 'approve with these arguments (a JSON object) instead of the ones the agent asked with' },
  reason: { syntax: '--reason <text>', help: 'why: the agent is told' },
  at: { syntax: '--at <agent:turn>', help: "the committed point to fork from: an agent's name or id and one of its turns (0: right after it was spawned)" },
  liveFrom: {
    syntax: '--live-from <agent:turn>',
    help: "from this agent's turn on, the live model answers (--model/--base-url, or the run's saved settings) and tools run for real; the recording is checked up to there",
  },
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
  detach?: boolean;
  killAfter?: string;
  json?: boolean;
  inspect?: string;
  otel?: boolean;
  strictMcp?: boolean;
  ui?: string;
  port?: string;
  after?: string;
  verbose?: boolean;
  concurrency?: string;
  args?: string;
  reason?: string;
  at?: string;
  liveFrom?: string;
}

export type Handler = (args: string[], values: Values, io: Io) => Promise<number>;
