/**
 * Time goes through one injectable clock: XState's scheduler, idle timers, retry backoff, tool
 * timeouts and scripted delays all use it, so tests drive everything with XState's
 * `SimulatedClock` (which has this exact shape).
 * @module
 */

export interface Clock {
  now(): number;
  setTimeout(fn: (...args: unknown[]) => void, ms: number): unknown;
  clearTimeout(id: unknown): void;
}

/** Node runs a timeout longer than this (about 24.8 days) after 1 ms: longer ones are chained. */
const MAX_TIMEOUT_MS = 2 ** 31 - 1;

/** A timeout of more than MAX_TIMEOUT_MS: re-armed in steps until its deadline (a sleep_until of up to 30 days). */
class LongTimeout {
  timer: ReturnType<typeof setTimeout>;
  constructor(fn: () => void, ms: number) {
    const due = Date.now() + ms;
    const arm = (): ReturnType<typeof setTimeout> => {
      const left = due - Date.now();
      return left > MAX_TIMEOUT_MS ? setTimeout(() => (this.timer = arm()), MAX_TIMEOUT_MS) : setTimeout(fn, Math.max(0, left));
    };
    this.timer = arm();
  }
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => (ms > MAX_TIMEOUT_MS ? new LongTimeout(fn, ms) : setTimeout(fn, ms)),
  clearTimeout: (id) => clearTimeout(id instanceof LongTimeout ? id.timer : (id as ReturnType<typeof setTimeout>)),
};

/** Resolves after `ms` on `clock`; rejects with the signal's reason when it aborts first. */
export function sleep(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clock.clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = clock.setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
