import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { RateLimiter } from '../../../src/turn/rateLimiter.js';

const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('RateLimiter (sliding window on the injected clock)', () => {
  it('lets `requests` calls start per interval, in arrival order', async () => {
    const clock = new SimulatedClock();
    const limiter = new RateLimiter(clock, 2, 1_000);
    const started: [number, number][] = [];
    const all = [0, 1, 2, 3, 4].map((i) => limiter.acquire().then(() => started.push([i, clock.now()])));
    await flush();
    expect(started).toEqual([
      [0, 0],
      [1, 0],
    ]);
    clock.increment(999);
    await flush();
    expect(started).toHaveLength(2);
    clock.increment(1);
    await flush();
    expect(started).toEqual([
      [0, 0],
      [1, 0],
      [2, 1_000],
      [3, 1_000],
    ]);
    clock.increment(1_000);
    await Promise.all(all);
    expect(started.at(-1)).toEqual([4, 2_000]);
  });

  it('a caller that aborts while waiting is not counted and does not block the next', async () => {
    const clock = new SimulatedClock();
    const limiter = new RateLimiter(clock, 1, 1_000);
    await limiter.acquire();
    const controller = new AbortController();
    const gaveUp = limiter.acquire(controller.signal);
    let next = -1;
    const later = limiter.acquire().then(() => (next = clock.now()));
    controller.abort(new Error('stopped'));
    await expect(gaveUp).rejects.toThrow('stopped');
    clock.increment(1_000);
    await later;
    expect(next).toBe(1_000);
  });
});
