/**
 * The WAL's checkpoint off the main thread (issue 36 item 2: commits never make the event loop
 * wait on the disk). With SQLite's automatic checkpoint, the commit that pushes the WAL past 1,000
 * pages also copies them into the database file and syncs it, on the owner's thread: at 10,000
 * agents on a FULL store those commits led the event loop's stalls.
 *
 * The owner's connection runs with `wal_autocheckpoint = 0`; a worker thread holds a second
 * connection to the same file (the owner lock is the separate `.lock` file, and SQLite lets any
 * number of connections share a WAL database) and runs `PRAGMA wal_checkpoint(PASSIVE)` when the
 * owner tells it to: at most one request in flight, after `every` commits and `minIntervalMs` since
 * the last (a checkpoint syncs the WAL and the database: every 16 commits, one agent's FULL turns
 * on their own were 1.2-1.9x slower, its syncs beside each commit's). A checkpoint is not
 * on a commit's durability path — a commit is durable in the WAL before it returns, whatever the
 * checkpoint does — so none of this moves a commit or an acknowledgement. A PASSIVE checkpoint
 * never blocks the writer: it copies what was committed when it began and leaves the rest.
 *
 * Bound (the rule): when the WAL file is over `capBytes` at a commit, the owner checkpoints on its
 * own connection, as the automatic checkpoint did (a writer that never pauses can keep the thread's
 * checkpoints from ever catching up, and SQLite restarts the WAL only once every frame was copied);
 * `journal_size_limit` (set by the owner: `capBytes / 4`) then truncates the file when the next
 * write restarts it. So the WAL never exceeds `capBytes` by more than one commit's frames.
 *
 * Failures: a checkpoint that fails (I/O error, SQLITE_BUSY, the thread died) loses nothing — the
 * frames stay in the WAL, which SQLite reads first — so it is logged (warn) and the next request
 * retries (a dead thread is started again). `close()` stops the thread and waits for it (the owner's
 * own close then checkpoints the rest, as before: the last connection to close does).
 *
 * The thread is started at the first request, not at open: a command that opens the store for a
 * few commits (`troupe send`) never starts one. The worker's code is `checkpointThread` below, sent
 * as source (`eval`): a module file would load only from the compiled package, and the store is
 * used from source too (tests, tsx).
 * @module
 */
import { statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { Worker, type MessagePort } from 'node:worker_threads';
import type { Logger } from 'pino';

/** A checkpoint's result, as SQLite reports it: busy (another checkpoint ran), frames in the WAL, frames copied. */
export interface CheckpointResult {
  busy: number;
  log: number;
  checkpointed: number;
}

/** What the worker answers a request with. */
type FromThread = ({ t: 'done' } & CheckpointResult) | { t: 'failed'; code: string; message: string };

interface ThreadData {
  path: string;
  sqlite: string;
  synchronous: 'FULL' | 'NORMAL';
  /** Set to 1 by the worker once its connection is closed (the owner waits on it in `close`). */
  closed: Int32Array;
  /** Test seam: how many checkpoints fail first (as SQLITE_IOERR). */
  failFirst: number;
}

/**
 * The worker's body, sent as source: it may use only its parameters. One connection; each request
 * runs one PASSIVE checkpoint and answers; 'close' closes the connection and flags it.
 */
function checkpointThread(port: MessagePort, data: ThreadData, Database: typeof import('better-sqlite3')): void {
  const db = new Database(data.path, { fileMustExist: true, timeout: 0 });
  // A checkpoint syncs the WAL before copying and the database after, as the owner's own would.
  db.pragma(`synchronous = ${data.synchronous}`);
  let failFirst = data.failFirst;
  port.on('message', (msg: 'checkpoint' | 'close') => {
    if (msg === 'close') {
      db.close();
      Atomics.store(data.closed, 0, 1);
      Atomics.notify(data.closed, 0);
      port.close();
      return;
    }
    try {
      if (failFirst > 0) {
        failFirst--;
        throw Object.assign(new Error('disk I/O error (injected)'), { code: 'SQLITE_IOERR' });
      }
      const row = (db.pragma('wal_checkpoint(PASSIVE)') as CheckpointResult[])[0]!;
      port.postMessage({ t: 'done', ...row } satisfies FromThread);
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      port.postMessage({ t: 'failed', code: typeof code === 'string' ? code : '', message: (err as Error).message } satisfies FromThread);
    }
  });
}

const SOURCE = `const { parentPort, workerData } = require('node:worker_threads');
(${checkpointThread.toString()})(parentPort, workerData, require(workerData.sqlite));`;

interface CheckpointerOptions {
  path: string;
  synchronous: 'FULL' | 'NORMAL';
  logger: Logger;
  /** The owner's own checkpoint (PASSIVE, on its connection), for the bound. */
  ownerCheckpoint(): CheckpointResult;
  /** Commits between two requests to the thread, and at least this many ms (fewer syncs beside the commits'). */
  every: number;
  minIntervalMs: number;
  /** Milliseconds, monotonic (default `performance.now`). */
  now?: () => number;
  /** The WAL file's size past which the owner checkpoints itself. */
  capBytes: number;
  /** Test seam: how many of the thread's checkpoints fail first. */
  failFirst?: number;
}

/** What the checkpointer did (tests, benches). */
export interface CheckpointStats {
  /** Threads started (a dead one is started again at the next request). */
  started: number;
  /** The thread's checkpoints that completed, and that failed. */
  done: number;
  failed: number;
  /** The owner's checkpoints past the cap. */
  owner: number;
  /** The largest WAL file size seen at a commit. */
  peakWalBytes: number;
}

export interface Checkpointer {
  /** After each commit of the owner's: a request to the thread every `every` commits, the bound checked. */
  committed(): void;
  /** Stop the thread and wait for it (up to 10 s); idempotent. */
  close(): void;
  readonly stats: Readonly<CheckpointStats>;
  /** Resolves once no request is in flight (tests). */
  settled(): Promise<void>;
}

const CLOSE_WAIT_MS = 10_000;

export function createCheckpointer(options: CheckpointerOptions): Checkpointer {
  const { path, logger, every, capBytes, minIntervalMs } = options;
  const now = options.now ?? (() => performance.now());
  let lastRequest = -Infinity;
  const wal = `${path}-wal`;
  const stats: CheckpointStats = { started: 0, done: 0, failed: 0, owner: 0, peakWalBytes: 0 };
  let worker: Worker | null = null;
  let closedFlag: Int32Array | null = null;
  let inFlight = false;
  let commits = 0;
  let closed = false;
  let failFirst = options.failFirst ?? 0;
  let waiters: (() => void)[] = [];

  const settle = () => {
    inFlight = false;
    const woken = waiters;
    waiters = [];
    for (const wake of woken) wake();
  };

  function start(): Worker {
    closedFlag = new Int32Array(new SharedArrayBuffer(4));
    const data: ThreadData = { path, sqlite: createRequire(import.meta.url).resolve('better-sqlite3'), synchronous: options.synchronous, closed: closedFlag, failFirst };
    failFirst = 0;
    const started = new Worker(SOURCE, { eval: true, workerData: data });
    stats.started++;
    started.unref();
    started.on('message', (msg: FromThread) => {
      if (msg.t === 'done') {
        stats.done++;
      } else {
        stats.failed++;
        logger.warn({ path, code: msg.code, err: msg.message }, 'WAL checkpoint failed; retried later');
      }
      settle();
    });
    started.on('error', (err) => logger.warn({ path, err: err.message }, 'WAL checkpoint thread failed; started again at the next checkpoint'));
    started.on('exit', () => {
      if (worker !== started) return;
      worker = null;
      if (inFlight) stats.failed++;
      settle();
    });
    return started;
  }

  function request(): void {
    inFlight = true;
    try {
      worker ??= start();
      worker.postMessage('checkpoint');
    } catch (err) {
      stats.failed++;
      logger.warn({ path, err: (err as Error).message }, 'WAL checkpoint thread could not start; retried later');
      settle();
    }
  }

  function bound(): void {
    let size: number;
    try {
      size = statSync(wal).size;
    } catch {
      return; // no WAL yet
    }
    stats.peakWalBytes = Math.max(stats.peakWalBytes, size);
    if (size <= capBytes) return;
    try {
      const result = options.ownerCheckpoint();
      stats.owner++;
      logger.debug({ path, walBytes: size, ...result }, 'WAL over its cap: checkpointed on the owner');
    } catch (err) {
      logger.warn({ path, err: (err as Error).message }, "WAL over its cap: the owner's checkpoint failed; retried at the next commit");
    }
  }

  return {
    stats,
    committed() {
      if (closed) return;
      bound();
      if (++commits < every || inFlight || now() - lastRequest < minIntervalMs) return;
      commits = 0;
      lastRequest = now();
      request();
    },
    close() {
      if (closed) return;
      closed = true;
      const running = worker;
      worker = null;
      if (running === null || closedFlag === null) return;
      running.postMessage('close');
      // Synchronous, as the store's close is: the thread finishes a checkpoint under way, closes its
      // connection and flags it, so the owner's close is the last and checkpoints the rest.
      if (Atomics.wait(closedFlag, 0, 0, CLOSE_WAIT_MS) === 'timed-out') {
        logger.warn({ path }, 'WAL checkpoint thread did not close in time; terminated');
      }
      void running.terminate();
      settle();
    },
    settled: () => (inFlight ? new Promise<void>((resolve) => waiters.push(resolve)) : Promise.resolve()),
  };
}
