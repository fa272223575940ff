/**
 * Process exit codes of the `troupe` command, mapped from error codes (listed in the README).
 * @module
 */
export const EXIT = {
  OK: 0,
  /** The run ended, but its root did not complete (failed, crashed or stopped). */
  RUN_NOT_COMPLETED: 1,
  /** Bad usage or configuration (CONFIG_INVALID, an unknown command or flag, no model). */
  USAGE: 2,
  /** Another process owns the database, or another worker the run (RUN_LOCKED, LEASE_LOST). */
  LOCKED: 3,
  /** No such run or agent (RUN_NOT_FOUND, AGENT_NOT_FOUND). */
  NOT_FOUND: 4,
  /** The database cannot be used (STORE_OPEN_FAILED, STORE_CORRUPT, STORE_SCHEMA_TOO_NEW, STORE_IO, and PostgreSQL's STORE_UNREACHABLE, STORE_AUTH_FAILED, STORE_FOREIGN). */
  STORE: 5,
  /** The model provider refused to work (PROVIDER_AUTH and the other PROVIDER_* codes). */
  PROVIDER: 6,
  /** The message (or a run's task) is larger than limits.maxMessageBytes (MESSAGE_TOO_LARGE): shorten it. */
  MESSAGE_TOO_LARGE: 7,
  /** Nothing will read the message: the agent is completed or stopped in a run that is not interactive (AGENT_NOT_REACHABLE). */
  NOT_REACHABLE: 8,
  /** The agent's mailbox is full (MAILBOX_FULL): try again once it has read some. */
  MAILBOX_FULL: 9,
  /** The message would revive a finished child whose parent already has limits.maxChildren active children (MAX_CHILDREN_EXCEEDED): try again once one finishes. */
  MAX_CHILDREN: 10,
  /** Anything else, including bugs (INTERNAL). */
  INTERNAL: 70,
} as const;

const BY_CODE: Readonly<Record<string, number>> = {
  CONFIG_INVALID: EXIT.USAGE,
  RUN_LOCKED: EXIT.LOCKED,
  LEASE_LOST: EXIT.LOCKED,
  RUN_NOT_FOUND: EXIT.NOT_FOUND,
  AGENT_NOT_FOUND: EXIT.NOT_FOUND,
  MESSAGE_TOO_LARGE: EXIT.MESSAGE_TOO_LARGE,
  AGENT_NOT_REACHABLE: EXIT.NOT_REACHABLE,
  MAILBOX_FULL: EXIT.MAILBOX_FULL,
  MAX_CHILDREN_EXCEEDED: EXIT.MAX_CHILDREN,
};

export function exitCodeFor(code: string | undefined): number {
  if (code === undefined) return EXIT.INTERNAL;
  if (Object.hasOwn(BY_CODE, code)) return BY_CODE[code]!;
  if (code.startsWith('STORE_')) return EXIT.STORE;
  if (code.startsWith('PROVIDER_')) return EXIT.PROVIDER;
  return EXIT.INTERNAL;
}
