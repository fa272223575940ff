/**
 * A FIFO concurrency limiter: the shared model queue and the shared tool queue. It replaces
 * p-queue, of which troupe used only add/size/pending/concurrency/clear: p-queue's `add` cost
 * ~2 µs (an event emitter, options objects, a priority queue with binary insertion) on a turn
 * that costs ~15 µs in memory, and every turn adds twice (its model call and its tool).
 *
 * Timing matches p-queue's, which the budget's rules are written against: a task starts
 * synchronously inside `add` when a slot is free; when a task settles, its caller's promise is
 * resolved first and the next waiting task starts right after, in the same microtask, so the
 * caller's continuation runs after the next task has begun (a budget stop decided in that
 * continuation reaches every task still waiting: host/calls/gateway.ts re-checks when a task starts).
 * @module
 */

export class Limiter {
  readonly concurrency: number;
  #running = 0;
  /** Waiting tasks, oldest first from `#head` (an array with a moving head: O(1) per task). */
  #waiting: ((() => void) | undefined)[] = [];
  #head = 0;

  constructor(concurrency: number) {
    if (!(Number.isInteger(concurrency) && concurrency >= 1) && concurrency !== Infinity) {
      throw new TypeError(`concurrency must be a positive integer or Infinity, got ${concurrency}`);
    }
    this.concurrency = concurrency;
  }

  /** Tasks waiting for a slot. */
  get size(): number {
    return this.#waiting.length - this.#head;
  }

  /** Tasks running. */
  get pending(): number {
    return this.#running;
  }

  /**
   * Run `fn` when a slot is free (at once if one is); settles as `fn` does. With a free slot the
   * caller gets `fn`'s own promise (no wrapper: a turn adds twice, and each wrapper was three more
   * promises); the slot's release is the first reaction on it, so it runs before the caller's.
   */
  add<T>(fn: () => T | PromiseLike<T>): Promise<T> {
    if (this.#running < this.concurrency) return this.#start(fn);
    return new Promise<T>((resolve, reject) => {
      this.#waiting.push(() => void this.#start(fn).then(resolve, reject));
    });
  }

  /**
   * As `add`, but a task that finishes synchronously in a free slot gives back its value itself,
   * and its slot is free again at once (nobody waits while a slot is free, so nothing starts
   * inside this call): a synchronous tool costs no promise and no microtask. A task that throws
   * still comes back as a rejected promise, and a waiting or asynchronous one as `add` gives it.
   */
  run<T>(fn: () => T | PromiseLike<T>): T | Promise<T> {
    if (this.#running >= this.concurrency) return this.add(fn);
    this.#running++;
    let value: T | PromiseLike<T>;
    try {
      value = fn();
    } catch (err) {
      this.#release();
      return Promise.reject(err);
    }
    if (isThenable(value)) {
      const task = value instanceof Promise ? (value as Promise<T>) : Promise.resolve(value);
      task.then(this.#release, this.#release);
      return task;
    }
    this.#release();
    return value;
  }

  readonly #release = (): void => {
    this.#running--;
    this.#next();
  };

  #start<T>(fn: () => T | PromiseLike<T>): Promise<T> {
    this.#running++;
    let task: Promise<T>;
    try {
      const value = fn();
      task = value instanceof Promise ? (value as Promise<T>) : Promise.resolve(value);
    } catch (err) {
      task = Promise.reject(err);
    }
    task.then(this.#release, this.#release);
    return task;
  }

  /** Drop every waiting task (their promises never settle, as with p-queue's `clear`). */
  clear(): void {
    this.#waiting = [];
    this.#head = 0;
  }

  #next(): void {
    if (this.#running >= this.concurrency || this.#head === this.#waiting.length) return;
    const run = this.#waiting[this.#head]!;
    this.#waiting[this.#head++] = undefined;
    if (this.#head === this.#waiting.length) {
      this.#waiting = [];
      this.#head = 0;
    } else if (this.#head >= 1024 && this.#head * 2 >= this.#waiting.length) {
      // A queue that never drains would otherwise keep every slot it ever used.
      this.#waiting = this.#waiting.slice(this.#head);
      this.#head = 0;
    }
    run();
  }
}

const isThenable = <T>(value: T | PromiseLike<T>): value is PromiseLike<T> =>
  (typeof value === 'object' || typeof value === 'function') && value !== null && typeof (value as { then?: unknown }).then === 'function';
