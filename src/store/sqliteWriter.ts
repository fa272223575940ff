/**
 * A SQLite file's commits on a worker thread (`openStore`'s `commitThread`: `true`, or `'auto'`, the
 * default, once the main thread's commits outgrow it): the thread (sqliteWriterThread.ts) holds a
 * second read-write connection to the file and applies each batch the port commits, in the order
 * posted, in one transaction; the main thread only posts the ops (a structured clone) and never
 * waits on SQLite's work or the disk's sync for a commit.
 *
 * Measured (scale bench, K = 10,000 on FULL, 2 cores): a file store's commits were a third of the
 * main thread's run, ~450 µs a turn, ~60 % of it CPU and the rest the disk; the worker runs them
 * on the second core.
 *
 * Invariants:
 * - one thread per store, started at the first commit it is given (`'auto'` commits on the main
 *   thread until then, synchronously, so none is in flight when the thread takes over); batches are applied in the order posted
 *   (one message port, one thread), so a batch's commit resolves only after every earlier one's;
 * - the thread is this process's: it writes under the owner lock the main thread holds, stamps the
 *   same boot, and scrubs with the same secrets (sent again when the redactor learns one);
 * - an I/O error or damage stops the store (fails closed, reliability.md §5.4): the thread's error
 *   becomes `failure`, and every later commit rejects with it; a thread that dies stops it too
 *   (a commit in flight then is not known to be applied, which is what a rejection says);
 * - `close()` waits (blocking, bounded) until the thread has applied what was posted and closed its
 *   connection, so the owner lock is released only after the last write.
 * @module
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { ERROR_CODES, TroupeError, type ErrorCode } from '../errors.js';
import type { Redactor } from '../logging/redact.js';
import { secretsOf } from '../logging/redact.js';
import type { FileIdentity } from './files.js';
import type { WriteOp } from './port.js';

/** What the thread needs to open its connection (`workerData`). */
export interface WriterSetup {
  path: string;
  /** The file the owner opened: the thread refuses another at `path`. */
  identity: FileIdentity;
  synchronous: 'FULL' | 'NORMAL';
  busyTimeoutMs: number | undefined;
  maxSizeBytes: number | undefined;
  boot: number;
  secrets: readonly string[];
  /** Set to 1 (and notified) once the thread closed its connection after a `close`. */
  closed: Int32Array;
}

export type ToWriter = { t: 'commit'; id: number; ops: readonly WriteOp[]; secrets?: readonly string[] } | { t: 'close' };

/** An error crossing the thread boundary: a TroupeError's code, or a SQLite error's. */
export interface WireStoreError {
  name: string;
  message: string;
  code: string | undefined;
  retryable: boolean | undefined;
}

export type FromWriter =
  | { t: 'ok'; id: number }
  /** `fatal`: the thread's store failed closed (every later commit would fail the same way). */
  | { t: 'err'; id: number; error: WireStoreError; fatal: boolean }
  /** The thread could not open its connection; it exits. */
  | { t: 'dead'; error: WireStoreError };

export const toWireStoreError = (err: unknown): WireStoreError => {
  const e = err instanceof Error ? err : new Error(String(err));
  const code = (e as { code?: unknown }).code;
  const retryable = (e as { retryable?: unknown }).retryable;
  return {
    name: e.name,
    message: e.message,
    code: typeof code === 'string' ? code : undefined,
    retryable: typeof retryable === 'boolean' ? retryable : undefined,
  };
};

const isErrorCode = (code: string | undefined): code is ErrorCode => code !== undefined && Object.hasOwn(ERROR_CODES, code);

function fromWire(wire: WireStoreError): Error {
  if (isErrorCode(wire.code)) return new TroupeError(wire.code, wire.message, wire.retryable === undefined ? {} : { retryable: wire.retryable });
  const error = Object.assign(new Error(wire.message), wire.code === undefined ? {} : { code: wire.code });
  error.name = wire.name;
  return error;
}

/** How long `close()` waits for the thread to finish what was posted. */
const CLOSE_WAIT_MS = 30_000;

export interface CommitThread {
  commit(ops: readonly WriteOp[]): Promise<void>;
  /** What stopped the thread's commits, if anything did. */
  readonly failure: TroupeError | null;
  /** Whether the thread was started (by a first commit). */
  readonly started: boolean;
  /** Let the thread apply what was posted, close its connection and exit (blocking, bounded). */
  close(): void;
}

export type CommitThreadOptions = Omit<WriterSetup, 'secrets' | 'closed'> & { redactor: Redactor };

/**
 * When `commitThread: 'auto'` (the default) moves a file's commits from the main thread to the
 * thread: once, over a window of `windowMs`, the main thread spent at least `share` of it in
 * commits that took `commitMs` each on average. Both conditions are needed: a single agent's turns
 * can spend a large share of a quiet loop in short commits (its fsyncs) and gain nothing from
 * the thread but a round trip per commit; a team of thousands stalls the loop in long ones.
 */
export interface CommitThreadRule {
  windowMs: number;
  share: number;
  commitMs: number;
}

/**
 * The default rule. Measured (scale bench, 2 cores, 10 tool turns per agent, main-thread commits):
 * 10,000 agents spent 29-36 % of the run in commits of 6-9 ms (14-21 turns each; event-loop delay
 * p99 61-342 ms, 36 ms with the thread); 1,000 agents 16-30 % in commits under 1.5 ms (loop p99
 * ≤ 32 ms either way); one agent's FULL turns, commits of ~0.5 ms.
 */
export const AUTO_COMMIT_THREAD: CommitThreadRule = { windowMs: 1_000, share: 0.2, commitMs: 2 };

/** How a store commits: always here, always on the thread, or here until `rule` says to move. */
export type CommitThreadMode = { kind: 'off' } | { kind: 'on' } | { kind: 'auto'; rule: CommitThreadRule };

type CommitThreadOption = boolean | 'auto' | CommitThreadRule;

const ENTRY = new URL('./sqliteWriterThread.js', import.meta.url);

/**
 * `openStore`'s `commitThread`, checked (CONFIG_INVALID) and resolved. `true` or a rule is a
 * request: refused unless a file this process owns, with a redactor the thread can rebuild.
 * `'auto'` (also when unset) is the default: it stays off where the thread cannot run (`':memory:'`,
 * read-only, a redactor of the caller's own, the TypeScript sources without the compiled entry).
 */
export function commitThreadMode(options: { path: string; readonly?: boolean; redactor?: Redactor; commitThread?: unknown }): CommitThreadMode {
  const option = checkOption(options.commitThread ?? 'auto');
  if (option === false) return { kind: 'off' };
  const requested = option !== 'auto';
  const owner = options.path !== ':memory:' && options.readonly !== true;
  if (requested && !owner) {
    throw new TroupeError(
      'CONFIG_INVALID',
      `commitThread needs a file this process owns, not ${options.readonly === true ? 'a read-only store' : "':memory:'"}`,
    );
  }
  const secrets = options.redactor === undefined ? [] : threadSecrets(options.redactor);
  if (secrets instanceof TroupeError) {
    if (requested) throw secrets;
    return { kind: 'off' };
  }
  if (option === true) return { kind: 'on' };
  if (!owner || !existsSync(fileURLToPath(ENTRY))) return { kind: 'off' };
  return { kind: 'auto', rule: option === 'auto' ? AUTO_COMMIT_THREAD : option };
}

function checkOption(value: unknown): CommitThreadOption {
  if (typeof value === 'boolean' || value === 'auto') return value;
  const rule = value as Partial<Record<keyof CommitThreadRule, unknown>> | null;
  const number = (v: unknown, max: number) => typeof v === 'number' && Number.isFinite(v) && v >= 0 && v <= max;
  if (typeof rule === 'object' && rule !== null && number(rule.windowMs, 3_600_000) && number(rule.share, 1) && number(rule.commitMs, 3_600_000)) {
    return { windowMs: rule.windowMs as number, share: rule.share as number, commitMs: rule.commitMs as number };
  }
  throw new TroupeError(
    'CONFIG_INVALID',
    `Expected commitThread to be true, false, 'auto' or { windowMs, share (0..1), commitMs }, got ${JSON.stringify(value)}`,
  );
}

/** Whether the commits of one window outgrew the main thread under `rule`. */
export const outgrewMainThread = (rule: CommitThreadRule, window: { elapsedMs: number; busyMs: number; commits: number }): boolean =>
  window.elapsedMs >= rule.windowMs && window.busyMs >= rule.share * window.elapsedMs && window.busyMs >= rule.commitMs * window.commits;

/** Times the main thread's commits window by window; `record` answers true when they should move. */
export function commitMeter(rule: CommitThreadRule): { record(startMs: number, endMs: number): boolean } {
  let start = -1;
  let busyMs = 0;
  let commits = 0;
  return {
    record(startMs, endMs) {
      if (start < 0) start = startMs;
      busyMs += endMs - startMs;
      commits++;
      const elapsedMs = endMs - start;
      if (elapsedMs < rule.windowMs) return false;
      const move = outgrewMainThread(rule, { elapsedMs, busyMs, commits });
      start = -1;
      busyMs = 0;
      commits = 0;
      return move;
    },
  };
}

/** A redactor the thread can rebuild (made by `createRedactor`), or the CONFIG_INVALID saying why not. */
function threadSecrets(redactor: Redactor): readonly string[] | TroupeError {
  return (
    secretsOf(redactor) ??
    new TroupeError('CONFIG_INVALID', 'commitThread needs a redactor made by createRedactor (the commit thread rebuilds it from its secrets)')
  );
}

export function commitThread(options: CommitThreadOptions): CommitThread {
  const known = threadSecrets(options.redactor);
  if (known instanceof TroupeError) throw known;
  const secrets: readonly string[] = known;
  let worker: Worker | null = null;
  let sent = 0;
  let nextId = 1;
  let failure: TroupeError | null = null;
  let closed: Int32Array | null = null;
  let shut = false;
  const pending = new Map<number, { resolve(): void; reject(err: unknown): void }>();

  const fail = (err: TroupeError) => {
    failure ??= err;
    const waiting = [...pending.values()];
    pending.clear();
    for (const p of waiting) p.reject(failure);
  };

  function start(): Worker {
    closed = new Int32Array(new SharedArrayBuffer(4));
    sent = secrets.length;
    const setup: WriterSetup = {
      path: options.path,
      identity: options.identity,
      synchronous: options.synchronous,
      busyTimeoutMs: options.busyTimeoutMs,
      maxSizeBytes: options.maxSizeBytes,
      boot: options.boot,
      secrets: [...secrets],
      closed,
    };
    const w = new Worker(ENTRY, { workerData: setup, execArgv: [] });
    w.unref();
    w.on('message', (msg: FromWriter) => {
      if (msg.t === 'dead') return fail(new TroupeError('STORE_OPEN_FAILED', `The commit thread could not open ${options.path}: ${msg.error.message}`));
      const p = pending.get(msg.id);
      if (!p) return;
      pending.delete(msg.id);
      if (pending.size === 0) w.unref();
      if (msg.t === 'ok') return p.resolve();
      const error = fromWire(msg.error);
      if (msg.fatal && error instanceof TroupeError) fail(error);
      p.reject(error);
    });
    let why: Error | null = null;
    w.on('error', (err) => (why = err));
    w.on('exit', (code) => {
      worker = null;
      if (pending.size > 0 || why) {
        fail(new TroupeError('STORE_IO', `The commit thread of ${options.path} stopped (${why ? why.message : `exit code ${code}`}); restart and resume`));
      }
    });
    return w;
  }

  return {
    get failure() {
      return failure;
    },
    get started() {
      return closed !== null;
    },
    commit(ops) {
      if (failure) return Promise.reject(failure);
      // A closed store's thread is gone; another would write without the owner lock.
      if (shut) return Promise.reject(new TroupeError('STORE_IO', `${options.path} was closed: the commit was not applied`));
      if (ops.length === 0) return Promise.resolve();
      const w = (worker ??= start());
      const id = nextId++;
      const message: ToWriter = { t: 'commit', id, ops: forThread(ops), ...(secrets.length > sent ? { secrets: secrets.slice(sent) } : {}) };
      try {
        w.postMessage(message);
      } catch {
        // Something in it cannot be cloned (a function in an event's data): sent as the JSON the store would write.
        w.postMessage(JSON.parse(JSON.stringify(message)) as ToWriter);
      }
      sent = secrets.length;
      if (pending.size === 0) w.ref();
      return new Promise<void>((resolve, reject) => pending.set(id, { resolve, reject }));
    },
    close() {
      shut = true;
      const w = worker;
      if (!w || !closed) return;
      w.postMessage({ t: 'close' } satisfies ToWriter);
      // Blocking on purpose: the owner lock is released after this returns, never before the last write.
      Atomics.wait(closed, 0, 0, CLOSE_WAIT_MS);
    },
  };
}

/** The ops as the thread needs them: a rewrite's `replaced` (for the commit journal, already written) stays here. */
function forThread(ops: readonly WriteOp[]): readonly WriteOp[] {
  let out: WriteOp[] | null = null;
  for (let i = 0; i < ops.length; i++) {
    const w = ops[i]!;
    if (w.op === 'replaceSession' && w.replaced !== undefined) {
      out ??= ops.slice();
      out[i] = { op: 'replaceSession', agentId: w.agentId, items: w.items };
    }
  }
  return out ?? ops;
}
