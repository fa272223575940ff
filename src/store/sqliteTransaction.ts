/**
 * The SQLite store's write transactions. Every write runs in one `BEGIN IMMEDIATE` transaction; a
 * write inside another joins it (one transaction, one commit). Invariants:
 * - an undo log (`onRollback`) collects how to revert the in-memory caches; when the transaction
 *   rolls back, the log runs newest first, so the caches match the file again;
 * - the owner's boot row is written with its first committed write, not at open (a refused command
 *   leaves the file exactly as it found it), and un-written again if that transaction rolls back;
 * - I/O errors are crashes (reliability.md §5.4): on SQLITE_IOERR*, FULL, CORRUPT or NOTADB the
 *   transactor fails closed — that write and every later one throw the same STORE_IO /
 *   STORE_CORRUPT (`failure`);
 * - a read-only store refuses every write with CONFIG_INVALID.
 * @module
 */
import type Database from 'better-sqlite3';
import { TroupeError } from '../errors.js';
import { classify } from './openFile.js';

export interface Transactor {
  /** Run `fn` in a BEGIN IMMEDIATE transaction (joining an open one), failing closed on I/O errors. */
  transaction<T>(fn: () => T): T;
  /** Inside a transaction: how to undo an in-memory change if it rolls back. Outside one: ignored. */
  onRollback(fn: () => void): void;
  /** The fatal error that stopped all writes, if any. */
  readonly failure: TroupeError | null;
}

export interface TransactorOptions {
  /** The file's path, for the read-only error. */
  path: string;
  readonly: boolean;
  /** This owner's fencing token, recorded in `boots` with its first write. */
  boot: number;
  insertBoot: Database.Statement;
}

export function createTransactor(db: Database.Database, { path, readonly, boot, insertBoot }: TransactorOptions): Transactor {
  let undo: (() => void)[] | null = null;
  let failure: TroupeError | null = null;
  let depth = 0;
  // The boot is recorded with this owner's first write, not at open: a command that is refused
  // (a message over the limit, an unknown agent) leaves the file exactly as it found it.
  let booted = false;
  const immediate = db.transaction((fn: () => unknown) => fn());

  /** Run `fn` in a BEGIN IMMEDIATE transaction (joining an open one), failing closed on I/O errors. */
  function transaction<T>(fn: () => T): T {
    if (failure) throw failure;
    if (readonly) throw new TroupeError('CONFIG_INVALID', `${path} was opened read-only`);
    if (depth > 0) return fn();
    const log: (() => void)[] = [];
    undo = log;
    depth = 1;
    try {
      return immediate.immediate(() => {
        if (!booted) {
          insertBoot.run(boot, Date.now(), process.pid);
          booted = true;
          onRollback(() => (booted = false));
        }
        return fn();
      }) as T;
    } catch (err) {
      for (let i = log.length - 1; i >= 0; i--) log[i]!();
      const fatal = classify(err, 'a write');
      if (fatal) {
        failure = fatal;
        throw fatal;
      }
      throw err;
    } finally {
      depth = 0;
      undo = null;
    }
  }

  function onRollback(fn: () => void): void {
    undo?.push(fn);
  }

  return {
    transaction,
    onRollback,
    get failure() {
      return failure;
    },
  };
}
