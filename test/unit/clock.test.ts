/**
 * The system clock keeps timeouts longer than Node's limit (2^31 − 1 ms, about 24.8 days): Node
 * would run them after 1 ms, and a 30-day sleep_until would wake at once.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { systemClock } from '../../src/clock.js';

const DAY = 86_400_000;

describe('the system clock', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('runs a 30-day timeout after 30 days, not before, and clears it at any point', () => {
    vi.useFakeTimers({ now: 0 });
    const fired: number[] = [];
    systemClock.setTimeout(() => fired.push(Date.now()), 30 * DAY);
    const cleared = systemClock.setTimeout(() => fired.push(-1), 30 * DAY);
    vi.advanceTimersByTime(25 * DAY);
    systemClock.clearTimeout(cleared);
    vi.advanceTimersByTime(5 * DAY - 1);
    expect(fired).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(fired).toEqual([30 * DAY]);
    vi.advanceTimersByTime(30 * DAY);
    expect(fired).toEqual([30 * DAY]);
  });

  it('runs a short timeout as Node does', () => {
    vi.useFakeTimers({ now: 0 });
    const fired: number[] = [];
    systemClock.setTimeout(() => fired.push(Date.now()), 1_000);
    vi.advanceTimersByTime(1_000);
    expect(fired).toEqual([1_000]);
  });
});
