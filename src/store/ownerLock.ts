/**
 * One process drives a database: a lock database beside it (`<path>.lock`) in
 * `locking_mode=EXCLUSIVE`, taken with `BEGIN EXCLUSIVE` before anything else is read, and held
 * until the process closes it or dies (the kernel drops POSIX locks of a dead process, so there
 * is no stale lock to clean up). Measured here (reliability.md §5.6): exactly one leader in 150/150
 * start races, takeover after kill -9 in 150/150. Its `boot` counter is the fencing token stamped
 * on rows.
 * @module
 */
import Database from 'better-sqlite3';
import { TroupeError } from '../errors.js';
import { createFileIfMissing } from './files.js';

export interface OwnerLock {
  /** Increases by one every time a process takes the lock. */
  readonly boot: number;
  release(): void;
}

const isBusy = (err: unknown) => typeof (err as { code?: unknown })?.code === 'string' && (err as { code: string }).code.startsWith('SQLITE_BUSY');

function tryAcquire(lockPath: string): OwnerLock {
  const lock = new Database(lockPath, { timeout: 0 });
  try {
    lock.pragma('locking_mode = EXCLUSIVE');
    lock.exec('BEGIN EXCLUSIVE'); // the write lock first: read-then-write can deadlock into zero leaders
    lock.exec('CREATE TABLE IF NOT EXISTS owner (id INTEGER PRIMARY KEY CHECK (id = 1), pid INTEGER NOT NULL, boot INTEGER NOT NULL)');
    lock
      .prepare('INSERT INTO owner (id, pid, boot) VALUES (1, ?, 1) ON CONFLICT (id) DO UPDATE SET pid = excluded.pid, boot = owner.boot + 1')
      .run(process.pid);
    const { boot } = lock.prepare('SELECT boot FROM owner WHERE id = 1').get() as { boot: number };
    lock.exec('COMMIT'); // EXCLUSIVE locking mode keeps the OS lock after the commit
    return { boot, release: () => lock.close() };
  } catch (err) {
    lock.close();
    throw err;
  }
}

/** Take the single-writer lock of `dbPath`, or throw RUN_LOCKED if another process holds it. */
export function acquireOwnerLock(dbPath: string): OwnerLock {
  const lockPath = `${dbPath}.lock`;
  createFileIfMissing(lockPath);
  let lastError: unknown;
  // Losers retry briefly with jitter rather than rely on a busy timeout (which measured worse).
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      return tryAcquire(lockPath);
    } catch (err) {
      lastError = err;
      if (!isBusy(err)) break;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5 + Math.floor(Math.random() * 20));
    }
  }
  if (isBusy(lastError)) {
    throw new TroupeError('RUN_LOCKED', `${dbPath} is owned by another process (its lock ${lockPath} is held)`, { cause: lastError });
  }
  throw new TroupeError('STORE_OPEN_FAILED', `Cannot take the lock ${lockPath}: ${(lastError as Error).message}`, { cause: lastError });
}

/**
 * Whether a process owns `dbPath` now (its lock is held), found by a read that writes nothing: a
 * held lock refuses even readers. False when there is no lock file (no process ever drove it).
 */
export function isOwned(dbPath: string): boolean {
  let lock: Database.Database;
  try {
    lock = new Database(`${dbPath}.lock`, { readonly: true, fileMustExist: true, timeout: 0 });
  } catch {
    return false;
  }
  try {
    lock.prepare('SELECT count(*) FROM sqlite_master').get();
    return false;
  } catch (err) {
    return isBusy(err);
  } finally {
    lock.close();
  }
}
