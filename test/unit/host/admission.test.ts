/**
 * The adaptive admission of model calls (host/calls/admission.ts): the pure policy on simulated
 * event-loop delay samples, and the controller that applies it to a queue's concurrency when a
 * call ends, once per window of the run's clock.
 */
import { fc, test } from '@fast-check/vitest';
import { SimulatedClock } from 'xstate';
import { describe, expect, it } from 'vitest';
import { AdaptiveAdmission, admissionPolicy, nextLimit, WINDOW_MS } from '../../../src/host/calls/admission.js';

describe('the admission policy (pure)', () => {
  // Lags quiet, in between and high, long enough to reach the floor and the cap.
  const lags = fc.array(fc.oneof(fc.constant(0), fc.double({ min: 25, max: 50, noNaN: true }), fc.double({ min: 50.001, max: 5_000, noNaN: true })), {
    minLength: 40,
    maxLength: 200,
  });
  test.prop([fc.integer({ min: 1, max: 5_000 }), lags])('the limit stays within [min(cap, 8), cap] whatever the lag', (cap, lags) => {
    const policy = admissionPolicy(cap);
    let limit = cap;
    for (const lag of lags) {
      limit = nextLimit(limit, lag, policy);
      expect(Number.isInteger(limit)).toBe(true);
      expect(limit).toBeLessThanOrEqual(cap);
      expect(limit).toBeGreaterThanOrEqual(Math.min(cap, 8));
    }
  });

  it('lag above maxLagMs lowers the limit by 0.7 down to the floor; below half of it raises by cap/16; between holds', () => {
    const policy = admissionPolicy(1_000, 50);
    expect(nextLimit(1_000, 51, policy)).toBe(700);
    expect(nextLimit(700, 400, policy)).toBe(490);
    expect(nextLimit(10, 400, policy)).toBe(8);
    expect(nextLimit(490, 50, policy)).toBe(490);
    expect(nextLimit(490, 25, policy)).toBe(490);
    expect(nextLimit(490, 24.9, policy)).toBe(553);
    expect(nextLimit(990, 0, policy)).toBe(1_000);
  });

  it('a sustained lag brings the limit to the floor, and a quiet loop back to the cap within 16 windows', () => {
    const policy = admissionPolicy(1_000);
    let limit = 1_000;
    for (let i = 0; i < 20; i++) limit = nextLimit(limit, 200, policy);
    expect(limit).toBe(8);
    let windows = 0;
    while (limit < 1_000) {
      limit = nextLimit(limit, 0, policy);
      windows++;
    }
    expect(windows).toBe(16);
  });

  it('at the default cap (8) it changes nothing', () => {
    const policy = admissionPolicy(8);
    for (const lag of [0, 30, 60, 5_000]) expect(nextLimit(8, lag, policy)).toBe(8);
  });
});

describe('the admission controller', () => {
  it('reads the lag once per window, when a call ends, and sets the queue concurrency from it', () => {
    const clock = new SimulatedClock();
    const queue = { concurrency: 0 };
    const lags = [200, 200, 0];
    let reads = 0;
    const admission = new AdaptiveAdmission(queue, admissionPolicy(100), { clock, lag: () => lags[reads++]! });
    expect(queue.concurrency).toBe(100);
    // Calls ending within the first window: nothing read, nothing changed.
    admission.ended();
    clock.increment(WINDOW_MS - 1);
    admission.ended();
    expect(reads).toBe(0);
    expect(queue.concurrency).toBe(100);
    clock.increment(1);
    admission.ended();
    admission.ended();
    expect(reads).toBe(1);
    expect(queue.concurrency).toBe(70);
    clock.increment(WINDOW_MS);
    admission.ended();
    expect(queue.concurrency).toBe(49);
    clock.increment(WINDOW_MS);
    admission.ended();
    expect(queue.concurrency).toBe(56);
    expect(reads).toBe(3);
  });
});
