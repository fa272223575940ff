/**
 * FULL durability without making the event loop wait on the disk (issue 36 item 2).
 *
 * In WAL mode the only thing `synchronous=FULL` adds over `NORMAL` is a sync of the `-wal` file
 * at every commit; NORMAL already syncs the WAL before each checkpoint and the database after it,
 * and a restarted WAL's header, so it is corruption-safe (sqlite.org/pragma.html#pragma_synchronous).
 * A FULL store therefore runs its connection in NORMAL and does that one sync itself:
 * - `now()` — `fdatasync` on this thread: the synchronous `Store` API (a CLI command posting to the
 *   inbox, a direct write) is durable when it returns, as with FULL;
 * - `later()` — `fdatasync` on libuv's thread pool: the store port's commit resolves only after it,
 *   so nothing is acknowledged before it is durable, but the event loop runs on meanwhile.
 *
 * The file synced is the one SQLite writes: the `-wal` is opened (read-only) at the first sync,
 * after a commit has written it, and kept open. While the owner's connection is open SQLite never
 * deletes it (a closing connection deletes the WAL only when it is the last one), and a checkpoint
 * restarts or truncates it in place (same inode). SQLite takes no lock on the `-wal` itself, so
 * this descriptor cannot drop one when it closes (the POSIX lock quirk concerns the database file
 * and `-shm`). A newly created WAL's directory entry is synced once with the first sync, as SQLite
 * does for a WAL it created (its DIRSYNC on the first sync).
 *
 * A sync that fails is fatal (reliability.md §5.4: after a failed fsync the kernel may have dropped
 * the dirty pages, so a retry that succeeds proves nothing): the error is returned as STORE_IO and
 * the caller fails closed.
 * @module
 */
import { closeSync, fdatasync, fdatasyncSync, fsyncSync, openSync } from 'node:fs';
import { dirname } from 'node:path';
import { TroupeError } from '../errors.js';

export interface WalSync {
  /** Sync the WAL on this thread; throws STORE_IO if it fails. */
  now(): void;
  /** Sync the WAL off the main thread; rejects with STORE_IO if it fails. */
  later(): Promise<void>;
  /** Close the descriptor (after a sync under way, if any). */
  close(): void;
}

/** The off-thread syncs under way in this process. */
const underWay = new Set<Promise<void>>();

/**
 * Resolves once no WAL sync is under way in this process. For tests on a simulated clock: a
 * commit now waits for a thread-pool sync, not only for the end of a loop turn, so "everything due
 * has run" means the loop turned and no sync is still out (testing/simulate.ts, test helpers).
 */
export async function syncsSettled(): Promise<void> {
  while (underWay.size > 0) await Promise.allSettled([...underWay]);
}

const ioError = (err: unknown, path: string) =>
  new TroupeError('STORE_IO', `syncing ${path} failed: ${(err as NodeJS.ErrnoException).code ?? ''} ${(err as Error).message}`.trim(), {
    cause: err,
  });

/** The WAL sync of the database at `path` (its `-wal` beside it). */
export function createWalSync(path: string): WalSync {
  const wal = `${path}-wal`;
  let fd: number | null = null;
  let inFlight = 0;
  let closed = false;

  /** The WAL's descriptor, opened (and its directory entry synced) at the first sync. */
  function walFd(): number {
    if (fd !== null) return fd;
    try {
      fd = openSync(wal, 'r');
      const dir = openSync(dirname(wal), 'r');
      try {
        fsyncSync(dir);
      } finally {
        closeSync(dir);
      }
    } catch (err) {
      throw ioError(err, wal);
    }
    return fd;
  }

  const release = () => {
    if (closed && inFlight === 0 && fd !== null) {
      closeSync(fd);
      fd = null;
    }
  };

  return {
    now() {
      const target = walFd();
      try {
        fdatasyncSync(target);
      } catch (err) {
        throw ioError(err, wal);
      }
    },
    later() {
      let target: number;
      try {
        target = walFd();
      } catch (err) {
        return Promise.reject(err as Error);
      }
      inFlight++;
      let settle!: (err: NodeJS.ErrnoException | null) => void;
      const synced = new Promise<void>((resolve, reject) => {
        settle = (err) => (err ? reject(ioError(err, wal)) : resolve());
      });
      underWay.add(synced);
      fdatasync(target, (err) => {
        inFlight--;
        underWay.delete(synced);
        release();
        settle(err);
      });
      return synced;
    },
    close() {
      closed = true;
      release();
    },
  };
}
