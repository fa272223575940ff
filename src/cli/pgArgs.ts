import { parseArgs } from 'node:util';
import { ConfigError } from '../errors.js';

/** Whether a command line points at PostgreSQL (`--db postgres://…`): those commands run in pg.ts. */
export const PG_COMMANDS: ReadonlySet<string> = new Set(['run', 'status', 'tree', 'send', 'stop', 'worker']);

const isPostgresUrl = (value: string | undefined) => value !== undefined && /^postgres(ql)?:\/\//.test(value);

/** The `--db` value when it is a postgres:// URL. */
export function postgresDb(argv: readonly string[]): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--db' && isPostgresUrl(argv[i + 1])) return argv[i + 1];
    if (arg.startsWith('--db=') && isPostgresUrl(arg.slice(5))) return arg.slice(5);
  }
  return undefined;
}

const PG_FLAGS = {
  db: { type: 'string' },
  json: { type: 'boolean', default: false },
  verbose: { type: 'boolean', short: 'v', default: false },
  model: { type: 'string' },
  'base-url': { type: 'string' },
  'api-key': { type: 'string' },
  budget: { type: 'string' },
  interactive: { type: 'boolean' },
  config: { type: 'string' },
  run: { type: 'string' },
  concurrency: { type: 'string' },
} as const;

type PgFlag = keyof typeof PG_FLAGS;

const PG_USAGE = `Usage with PostgreSQL (see "Scale out" in the README):
  troupe worker --db postgres://… [--concurrency <n>] [--model <id>] [--base-url <url>] [--api-key <key>] [--config <file>] [-v]
  troupe run "<task>" --db postgres://… [--model <id>] [--base-url <url>] [--api-key <key>] [--budget <usd>] [--interactive] [--config <file>] [--json]
  troupe status|tree --db postgres://… [--run <id>] [--json]
  troupe send <agent> "<text>" --db postgres://… [--run <id>]
  troupe stop <agent> --db postgres://… [--run <id>]`;

/**
 * Parse the arguments of a PostgreSQL command (pg.ts); a flag the command does not take is a usage
 * error. These commands are dispatched before the commander program (program.ts), by their --db.
 */
export function parse(command: string, argv: string[], allowed: readonly PgFlag[], positionals: number) {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: PG_FLAGS, allowPositionals: positionals > 0, strict: true });
  } catch (err) {
    throw new ConfigError(`${(err as Error).message}\n\n${PG_USAGE}`);
  }
  const given = argv.filter((a) => a.startsWith('-')).map((a) => a.replace(/^--?/, '').split('=')[0]!);
  for (const flag of given) {
    const name = flag === 'v' ? 'verbose' : flag;
    if (!(allowed as readonly string[]).includes(name)) throw new ConfigError(`troupe ${command} does not take --${flag} with a PostgreSQL --db\n\n${PG_USAGE}`);
  }
  if (parsed.positionals.length > positionals) throw new ConfigError(`Unexpected argument "${parsed.positionals[positionals]}"`);
  return parsed;
}
