/**
 * Requests per interval for the shared model queue, on troupe's clock. Not p-queue's `interval` /
 * `intervalCap` (issue 36 weighed it): p-queue 9 reads Date.now and arms its own setInterval and
 * setTimeout, with no clock to inject, so simulated-clock tests cannot drive it without faking the
 * global timers; and its default window is fixed (twice the cap may start across a boundary).
 * This one is a sliding window: at most `requests` calls start in any `intervalMs`; callers are
 * served first come, first served.
 * @module
 */
import { sleep, type Clock } from '../clock.js';

export class RateLimiter {
  readonly #clock: Clock;
  readonly #requests: number;
  readonly #intervalMs: number;
  /** Start times inside the current window, oldest first. */
  readonly #starts: number[] = [];
  #queue: Promise<void> = Promise.resolve();

  constructor(clock: Clock, requests: number, intervalMs: number) {
    this.#clock = clock;
    this.#requests = requests;
    this.#intervalMs = intervalMs;
  }

  /** Resolves when one more request may start (and counts it); rejects if `signal` aborts first. */
  acquire(signal?: AbortSignal): Promise<void> {
    const mine = this.#queue.then(() => this.#take(signal));
    // A caller that gave up must not hold up the ones behind it.
    this.#queue = mine.catch(() => undefined);
    return mine;
  }

  async #take(signal: AbortSignal | undefined): Promise<void> {
    for (;;) {
      if (signal?.aborted) throw signal.reason;
      const now = this.#clock.now();
      while (this.#starts.length > 0 && this.#starts[0]! <= now - this.#intervalMs) this.#starts.shift();
      if (this.#starts.length < this.#requests) {
        this.#starts.push(now);
        return;
      }
      await sleep(this.#clock, this.#starts[0]! + this.#intervalMs - now, signal);
    }
  }
}
