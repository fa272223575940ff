/**
 * Process exit codes of the `troupe` command, mapped from error codes. `EXIT_ROWS` is the one
 * source of the README's exit-code table (generated from it).
 * @module
 */

/** Every exit code: its number, what it means, and the error codes that map to it. */
export const EXIT_ROWS = {
  OK: { code: 0, meaning: 'the root completed, or the command succeeded', errors: [] },
  RUN_NOT_COMPLETED: { code: 1, meaning: 'the root failed, crashed or stopped, not for the provider', errors: [] },
  USAGE: {
    code: 2,
    meaning: 'usage or configuration: unknown command or flag, bad config, no model, a budget without a price, a busy port, a note decided already',
    errors: ['CONFIG_INVALID', 'NOTE_ALREADY_DECIDED'],
  },
  LOCKED: { code: 3, meaning: 'another process owns the database, or another worker the run', errors: ['RUN_LOCKED', 'LEASE_LOST'] },
  NOT_FOUND: {
    code: 4,
    meaning: 'no such run, agent, execution, approval, note or committed turn',
    errors: ['RUN_NOT_FOUND', 'AGENT_NOT_FOUND', 'EXECUTION_NOT_FOUND', 'APPROVAL_NOT_FOUND', 'NOTE_NOT_FOUND', 'FORK_POINT_NOT_FOUND'],
  },
  STORE: {
    code: 5,
    meaning: 'the database cannot be used',
    errors: ['STORE_OPEN_FAILED', 'STORE_CORRUPT', 'STORE_SCHEMA_TOO_NEW', 'STORE_IO', 'STORE_UNREACHABLE', 'STORE_AUTH_FAILED', 'STORE_FOREIGN'],
  },
  PROVIDER: { code: 6, meaning: 'the root failed with a provider error (401, 403, bad request, retries exhausted, …)', errors: ['PROVIDER_*'] },
  MESSAGE_TOO_LARGE: { code: 7, meaning: 'the message or task is over `limits.maxMessageBytes`', errors: ['MESSAGE_TOO_LARGE'] },
  NOT_REACHABLE: { code: 8, meaning: '`send`: nothing will read it (agent finished, run not interactive)', errors: ['AGENT_NOT_REACHABLE'] },
  MAILBOX_FULL: { code: 9, meaning: "`send`: the agent's mailbox is full; try later", errors: ['MAILBOX_FULL'] },
  MAX_CHILDREN: { code: 10, meaning: "`send`: reviving the child would pass its parent's `limits.maxChildren`; try later", errors: ['MAX_CHILDREN_EXCEEDED'] },
  MCP: { code: 11, meaning: 'with `--strict-mcp`: an MCP server failed to start, and the run did not go on without it', errors: ['MCP_SERVER_UNAVAILABLE'] },
  INTERRUPTED: { code: 130, meaning: 'Ctrl-C or SIGTERM stopped the run; saved, `troupe resume` carries on', errors: [] },
  INTERNAL: { code: 70, meaning: 'anything else: a bug', errors: ['INTERNAL'] },
} as const satisfies Record<string, { code: number; meaning: string; errors: readonly string[] }>;

type ExitName = keyof typeof EXIT_ROWS;

export const EXIT = Object.fromEntries(Object.entries(EXIT_ROWS).map(([name, row]) => [name, row.code])) as {
  readonly [K in ExitName]: (typeof EXIT_ROWS)[K]['code'];
};

const BY_CODE: ReadonlyMap<string, number> = new Map(Object.values(EXIT_ROWS).flatMap((row) => row.errors.map((e): [string, number] => [e, row.code])));

export function exitCodeFor(code: string | undefined): number {
  if (code === undefined) return EXIT.INTERNAL;
  const exact = BY_CODE.get(code);
  if (exact !== undefined) return exact;
  if (code.startsWith('STORE_')) return EXIT.STORE;
  if (code.startsWith('PROVIDER_')) return EXIT.PROVIDER;
  return EXIT.INTERNAL;
}
