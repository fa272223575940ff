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
  /** Another process owns the database (RUN_LOCKED). */
  LOCKED: 3,
  /** No such run or agent (RUN_NOT_FOUND, AGENT_NOT_FOUND). */
  NOT_FOUND: 4,
  /** The database cannot be used (STORE_OPEN_FAILED, STORE_CORRUPT, STORE_SCHEMA_TOO_NEW, STORE_IO). */
  STORE: 5,
  /** The model provider refused to work (PROVIDER_AUTH and the other PROVIDER_* codes). */
  PROVIDER: 6,
  /** Anything else, including bugs (INTERNAL). */
  INTERNAL: 70,
} as const;

export function exitCodeFor(code: string | undefined): number {
  if (code === undefined) return EXIT.INTERNAL;
  if (code === 'CONFIG_INVALID') return EXIT.USAGE;
  if (code === 'RUN_LOCKED') return EXIT.LOCKED;
  if (code === 'RUN_NOT_FOUND' || code === 'AGENT_NOT_FOUND') return EXIT.NOT_FOUND;
  if (code.startsWith('STORE_')) return EXIT.STORE;
  if (code.startsWith('PROVIDER_')) return EXIT.PROVIDER;
  return EXIT.INTERNAL;
}
