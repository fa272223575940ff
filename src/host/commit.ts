/**
 * Decide in memory, commit in groups, act after commit (DESIGN §12).
 *
 * The owner of a run is its single writer: every decision is taken in memory at once, and its
 * writes are staged here. The first write staged in a tick schedules a flush for the end of the
 * tick (setImmediate: after every microtask of the tick has run, so the writes of every agent that
 * moved in this tick travel together); the flush hands them all to the store in one transaction.
 * A store whose commits cost no I/O (`port.inMemory`, the memory store) gains nothing from the
 * wait for the end of the loop turn (~4 µs of CPU each, two per turn): its flush runs at the end of
 * the microtask drain instead (process.nextTick), and every YIELD_EVERY-th such flush still waits
 * for the loop, so a team that never waits on I/O (an instant model) cannot starve timers and I/O.
 * Only once that commit resolves do the effects staged with them run — a `send()` resolving, a
 * notice waking its parent, the next model or tool call starting — so nothing leaves the process
 * or is acknowledged before the commit that makes it true. One commit is in flight at a time;
 * writes staged meanwhile wait for the next, so batches commit in the order they were staged.
 *
 * A commit that fails is fatal (crash-only): memory and store may have diverged, so the committer
 * stops, rejects every barrier, drops every effect, and reports the error once.
 *
 * A port whose commits complete off the event loop (`commitsOffLoop`: a SQLite file in FULL syncs
 * its WAL on libuv's thread pool) lets timers and I/O run while a commit is out. What comes from
 * outside meanwhile — a model's answer, an input — is held (`admit`) until that commit's effects
 * have run, then admitted in order, each in an immediate of its own queued before the next flush:
 * the order a commit that blocked the loop in fsync gave (those callbacks then ran in the next
 * loop turn, after the effects and before the next flush). The call log's commit windows and a
 * replay's (replay/driver.ts) rest on that order; without the hold, an answer landing while the
 * sync was out ran before the effects of the commit before it, and replays of latent runs on a
 * file diverged under load.
 * @module
 */
import type { StorePort, WriteOp } from '../store/port.js';

/** One promise shared by every `durable()` call waiting for the same commit. */
interface Barrier {
  promise: Promise<void>;
  resolve: () => void;
  reject: (err: unknown) => void;
}

function barrier(): Barrier {
  let resolve!: () => void;
  let reject!: (err: unknown) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** In-memory commits at the end of a microtask drain in a row, before one waits for the event loop. */
const YIELD_EVERY = 32;

/** Counters for benchmarks and health: how well writes are grouped. */
export interface CommitStats {
  commits: number;
  ops: number;
}

/** What an arrival from outside sees of the commit pipeline (`GroupCommitter.admit`). */
export type ArrivalGate = Pick<GroupCommitter, 'holding' | 'admit'>;

/**
 * `fn()` now, or, while `commit` holds arrivals, a promise of it once admitted (a throw becomes
 * the rejection). Inside a promise reaction it costs no extra hop unless held.
 */
export function admitted<T>(commit: ArrivalGate, fn: () => T | Promise<T>): T | Promise<T> {
  if (!commit.holding) return fn();
  return new Promise<T>((resolve, reject) =>
    commit.admit(() => {
      try {
        resolve(fn());
      } catch (err) {
        reject(err);
      }
    }),
  );
}

/** What a part sees of the commit pipeline: stage writes, act after their commit, wait for it. */
export type CommitPort = Pick<GroupCommitter, 'stage' | 'after' | 'durable'>;

export class GroupCommitter {
  readonly #port: StorePort;
  readonly #onFatal: (err: unknown) => unknown;
  #ops: WriteOp[] = [];
  #effects: (() => void)[] = [];
  /** The barrier of the next commit (null: nobody waits for it yet). */
  #barrier: Barrier | null = null;
  #scheduled = false;
  /** In-memory flushes scheduled in a row without waiting for the event loop. */
  #soon = 0;
  readonly #run = () => this.#flush();
  #committing = false;
  /** The group being committed: how many writes, the effects that wait for it, its barrier. */
  #inFlight: { ops: number; effects: (() => void)[]; waiting: Barrier | null } | null = null;
  #failure: unknown = null;
  #closed = false;
  readonly stats: CommitStats = { commits: 0, ops: 0 };
  /** Flushes done, their effects run (empty ones too): the call log marks answers within one (callLog.ts `window`). */
  #flushes = 0;
  /** Writes that ride along with any commit that happens anyway (the live stream's rows). */
  readonly #riders: (() => WriteOp | null)[] = [];
  readonly #journal: ((ops: readonly WriteOp[]) => WriteOp | null) | null;
  /** Arrivals held while a commit is out off the loop, in order (`admit`). */
  #held: (() => void)[] = [];

  /**
   * @param onFatal told once when a commit fails; what it returns is what every barrier rejects with.
   * @param journal the record of a commit's writes that goes out in the same commit (fork/journal.ts).
   */
  constructor(port: StorePort, onFatal: (err: unknown) => unknown, journal?: (ops: readonly WriteOp[]) => WriteOp | null) {
    this.#port = port;
    this.#onFatal = onFatal;
    this.#journal = journal ?? null;
  }

  /** The error that stopped the committer, if any. */
  get failure(): unknown {
    return this.#failure;
  }

  /** Flushes completed so far. */
  get flushes(): number {
    return this.#flushes;
  }

  /** Writes waiting for a commit (or in the commit under way). */
  get pending(): number {
    return this.#ops.length;
  }

  /**
   * `take` is asked for writes each time a commit is about to go out with other writes in it: what
   * it returns joins that commit (so it costs no commit of its own).
   */
  beforeCommit(take: () => WriteOp | null): void {
    this.#riders.push(take);
  }

  /** Whether an arrival from outside is held now: a commit is out off the event loop (`admit`). */
  get holding(): boolean {
    return this.#committing && this.#port.commitsOffLoop === true;
  }

  /**
   * Run `arrive` (what comes from outside: an answer, an input) now, or, while a commit is out off
   * the event loop, once its effects have run (see the module comment). A failed commit admits
   * what it held too (the run is failing; nothing may wait forever).
   */
  admit(arrive: () => void): void {
    if (this.holding) this.#held.push(arrive);
    else arrive();
  }

  /** Null when an arrival is admitted now; else a promise resolved when it is (`admit`). */
  admission(): Promise<void> | null {
    if (!this.holding) return null;
    return new Promise<void>((resolve) => this.#held.push(resolve));
  }

  /** Stage writes for the next group commit. */
  stage(...ops: WriteOp[]): void {
    if (this.#failure !== null || this.#closed) return;
    for (const op of ops) this.#ops.push(op);
    this.#schedule();
  }

  /**
   * Run `effect` once everything staged so far is committed (at once if nothing is staged or
   * committing). Dropped if the commit fails.
   */
  after(effect: () => void): void {
    if (this.#failure !== null || this.#closed) return;
    if (this.#ops.length === 0 && !this.#committing) {
      effect();
      return;
    }
    this.#effects.push(effect);
    this.#schedule();
  }

  /** Resolves once everything staged so far is durable; rejects with the failure if a commit failed. */
  durable(): Promise<void> {
    if (this.#failure !== null) return Promise.reject(this.#failure);
    if (this.#ops.length === 0 && !this.#committing) return Promise.resolve();
    if (this.#barrier === null) {
      this.#barrier = barrier();
      this.#schedule();
    }
    return this.#barrier.promise;
  }

  /** Stop accepting writes (shutdown): what is staged is still committed; later writes are dropped. */
  close(): Promise<void> {
    const done = this.durable().catch(() => undefined);
    this.#closed = true;
    return done;
  }

  #schedule(): void {
    if (this.#scheduled || this.#committing) return;
    this.#scheduled = true;
    if (this.#port.inMemory === true && ++this.#soon < YIELD_EVERY) {
      process.nextTick(this.#run);
    } else {
      this.#soon = 0;
      setImmediate(this.#run);
    }
  }

  /**
   * Not an async function: a flush runs twice per turn, and `.then` on the commit costs the same
   * one microtask as `await` without an async function's own promise and frame. The group in flight
   * is held in fields, so the commit's own reaction is `#committed` (no closure forwarding to it).
   */
  #flush(): void {
    this.#scheduled = false;
    if (this.#failure !== null) return;
    const ops = this.#ops;
    this.#inFlight = { ops: ops.length, effects: this.#effects, waiting: this.#barrier };
    this.#ops = [];
    this.#effects = [];
    this.#barrier = null;
    this.#committing = true;
    if (ops.length === 0) {
      this.#committed();
      return;
    }
    const entry = this.#journal?.(ops);
    if (entry) ops.push(entry);
    for (const take of this.#riders) {
      const rider = take();
      if (rider) ops.push(rider);
    }
    this.#inFlight.ops = ops.length;
    let commit: Promise<void>;
    try {
      commit = this.#port.commit(ops);
    } catch (err) {
      commit = Promise.reject(err);
    }
    commit.then(this.#committed, this.#failed);
  }

  /** The group in flight is committed (or was empty): its effects run, its barrier resolves. */
  readonly #committed = (): void => {
    const { ops, effects, waiting } = this.#inFlight!;
    this.#inFlight = null;
    this.#committing = false;
    // Queued before anything the effects schedule (the next flush): held arrivals come after the
    // effects and their microtasks, and their writes join the next group, as after a blocking sync.
    this.#admitHeld();
    if (ops > 0) {
      this.stats.commits += 1;
      this.stats.ops += ops;
    }
    this.#flushes++;
    // Effects may stage more writes; those go to the next group.
    for (const effect of effects) effect();
    waiting?.resolve();
    if (this.#ops.length > 0 || this.#effects.length > 0 || this.#barrier !== null) this.#schedule();
  };

  readonly #failed = (err: unknown): void => {
    const { waiting } = this.#inFlight!;
    this.#inFlight = null;
    this.#committing = false;
    this.#admitHeld();
    this.#fail(err, waiting);
  };

  /** Admit the held arrivals, each in an immediate of its own (a timer callback of its own after a blocking sync). */
  #admitHeld(): void {
    if (this.#held.length === 0) return;
    const held = this.#held;
    this.#held = [];
    for (const arrive of held) setImmediate(arrive);
  }

  #fail(err: unknown, waiting: Barrier | null): void {
    const reported = this.#onFatal(err) ?? err;
    this.#failure = reported;
    const next = this.#barrier;
    this.#ops = [];
    this.#effects = [];
    this.#barrier = null;
    waiting?.reject(reported);
    next?.reject(reported);
  }
}
