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
