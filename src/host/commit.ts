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
    this.#fail(err, waiting);
  };

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
