/**
 * The CLI's streams and argument parsing, shared by every command.
 * @module
 */
import { parseArgs } from 'node:util';
import { ConfigError } from '../errors.js';
import type { Redactor } from '../logging/redact.js';
import type { Output } from './view.js';

export interface Io {
  out: Output;
  err: Output;
  env: NodeJS.ProcessEnv;
  /** Whether stdout is a terminal (the live tree redraws in place). */
  tty: boolean;
  /**
   * The secrets to scrub from what is stored and logged (the CLI's output streams already scrub
   * them); commands add the API key they end up with.
   */
  redactor?: Redactor;
}

export const USAGE = `troupe — a durable coordinator for teams of LLM agents

Usage:
  troupe demo [--json] [--kill-after <turns>] [--inspect[=port]] [-v]
                                         the offline demo team (SQLite, the real openai client, a local fake server)
  troupe run "<task>" [--model <id>] [--base-url <url>] [--api-key <key>] [--budget <usd>]
                      [--interactive] [--db <file>] [--config <file>] [--json] [--inspect[=port]] [-v]
  troupe resume [--db <file>] [--api-key <key>] [--json] [--inspect[=port]] [-v]
  troupe status [--db <file>] [--json]   the run's state, read from the database
  troupe tree   [--db <file>] [--json]   the agent tree, read from the database
  troupe send <agent> "<text>" [--db <file>]   message an agent (a live run gets it at once; otherwise on resume)
  troupe stop <agent> [--db <file>]            stop an agent and its descendants (live or not)
  troupe worker --db postgres://… [--concurrency <n>] [--model <id>] [--base-url <url>] [--api-key <key>] [--config <file>] [-v]
                                         long-running: hosts runs of a shared PostgreSQL (any number of workers)
  troupe serve ["<task>" | --resume] [--model <id>] [--base-url <url>] [--api-key <key>] [--budget <usd>]
               [--db <file>] [--config <file>] [--stream] [--json] [--inspect[=port]] [-v]
                                         long-running: proactive triggers (config "proactive") start or
                                         message runs, a watchdog checks the store, model and queues;
                                         with a task (or --resume) it also hosts an interactive main run

  resume, status, tree, send and stop take --run <id> (default: the latest run no trigger started).
  With --db postgres://… (see "Scale out" in the README): run submits the run for the workers and
  prints its id; status, tree, send and stop work from any machine.

Environment: OPENAI_API_KEY, OPENAI_BASE_URL. Config file: ./troupe.config.json or --config.
Prefer OPENAI_API_KEY or the config file for the key: --api-key shows in the process list (ps) to
every user of this machine.
Logs: .troupe/troupe.log (-v also prints them).`;

/** `--inspect=9000` → `--inspect --inspect-port 9000` (parseArgs has no optional values). */
function splitInspect(argv: string[]): string[] {
  return argv.flatMap((a) => (a.startsWith('--inspect=') ? ['--inspect', '--inspect-port', a.slice('--inspect='.length)] : [a]));
}

const FLAGS = {
  db: { type: 'string' },
  json: { type: 'boolean', default: false },
  verbose: { type: 'boolean', short: 'v', default: false },
  inspect: { type: 'boolean', default: false },
  'inspect-port': { type: 'string' },
  'kill-after': { type: 'string' },
  model: { type: 'string' },
  'base-url': { type: 'string' },
  'api-key': { type: 'string' },
  budget: { type: 'string' },
  interactive: { type: 'boolean' },
  config: { type: 'string' },
  stream: { type: 'boolean' },
  resume: { type: 'boolean' },
  run: { type: 'string' },
  concurrency: { type: 'string' },
} as const;

export type Flag = keyof typeof FLAGS;

/** Parse one command's arguments; a flag the command does not take is a usage error. */
export function parse(command: string, argv: string[], allowed: readonly Flag[], positionals: number) {
  let parsed;
  try {
    parsed = parseArgs({ args: splitInspect(argv), options: FLAGS, allowPositionals: positionals > 0, strict: true });
  } catch (err) {
    throw new ConfigError(`${(err as Error).message}\n\n${USAGE}`);
  }
  const given = argv.filter((a) => a.startsWith('-')).map((a) => a.replace(/^--?/, '').split('=')[0]!);
  for (const flag of given) {
    const name = flag === 'v' ? 'verbose' : flag;
    if (!(allowed as readonly string[]).includes(name)) throw new ConfigError(`troupe ${command} does not take --${flag}\n\n${USAGE}`);
  }
  if (parsed.positionals.length > positionals) throw new ConfigError(`Unexpected argument "${parsed.positionals[positionals]}"`);
  return parsed;
}

export const VIEW_FLAGS: Flag[] = ['db', 'json', 'verbose', 'inspect', 'inspect-port'];

export function number(name: string, value: string | undefined, integer = false): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || n <= 0 || (integer && !Number.isInteger(n))) {
    throw new ConfigError(`Expected --${name} to be ${integer ? 'a whole number' : 'a number'} > 0, got "${value}"`);
  }
  return n;
}
