/**
 * `thread: 'auto'`'s router (src/model/threadRoute.ts): when an openaiModel's calls move to the
 * model thread and back, on a loop clock the test drives.
 */
import { describe, expect, it } from 'vitest';
import { AUTO_MODEL_THREAD, onThreadNext, threadRouter, type LoopClock } from '../../../src/model/threadRoute.js';

const rule = { windowMs: 1_000, share: 0.5, calls: 100 };

/** A loop clock moved by hand: `tick(ms, busy)` advances time by `ms` with the loop busy `busy` of it. */
function loopClock() {
  let now = 0;
  let active = 0;
  let reads = 0;
  const clock: LoopClock = {
    now: () => now,
    activeMs: () => {
      reads++;
      return active;
    },
  };
  return {
    clock,
    tick(ms: number, busy: number) {
      now += ms;
      active += ms * busy;
    },
    reads: () => reads,
  };
}

describe('onThreadNext', () => {
  it('moves only with both a busy loop and many calls out, and moves back once few are out', () => {
    expect(onThreadNext(rule, false, { busy: null, inFlight: 1_000 })).toBe(false);
    expect(onThreadNext(rule, false, { busy: 0.9, inFlight: 99 })).toBe(false);
    expect(onThreadNext(rule, false, { busy: 0.49, inFlight: 1_000 })).toBe(false);
    expect(onThreadNext(rule, false, { busy: 0.5, inFlight: 100 })).toBe(true);
    // Once there, the loop's share is the thread's doing: only the calls out decide the way back.
    expect(onThreadNext(rule, true, { busy: 0, inFlight: 25 })).toBe(true);
    expect(onThreadNext(rule, true, { busy: 1, inFlight: 24 })).toBe(false);
  });

  it('the default waits for a team of over a thousand: 1,001 calls out on a saturated loop stay here', () => {
    expect(onThreadNext(AUTO_MODEL_THREAD, false, { busy: 1, inFlight: 1_001 })).toBe(false);
    expect(onThreadNext(AUTO_MODEL_THREAD, false, { busy: 0.59, inFlight: 1_500 })).toBe(false);
    expect(onThreadNext(AUTO_MODEL_THREAD, false, { busy: 0.8, inFlight: 1_400 })).toBe(true);
  });
});

describe('threadRouter', () => {
  it('reads the loop once per window, routes by the last window, and counts the calls in flight', () => {
    const loop = loopClock();
    const router = threadRouter(rule, loop.clock);
    // The first call starts the first window: nothing measured yet.
    expect(router.route()).toBe(false);
    expect(loop.reads()).toBe(1);
    for (let i = 0; i < 150; i++) router.begin();
    loop.tick(999, 0.9);
    expect(router.route()).toBe(false);
    expect(loop.reads(), 'inside a window the loop is not read').toBe(1);
    loop.tick(1, 0.9);
    expect(router.route()).toBe(true);
    expect(loop.reads()).toBe(2);
    // Calls end; a window later, 24 out: back.
    for (let i = 0; i < 100; i++) router.end();
    loop.tick(1_000, 0.2);
    expect(router.route(), '50 out: a quarter of 100 or more stays there').toBe(true);
    for (let i = 0; i < 26; i++) router.end();
    loop.tick(1_000, 0.2);
    expect(router.route()).toBe(false);
  });

  it('a busy loop with few calls out, or many calls out on a quiet loop, stays here', () => {
    const loop = loopClock();
    const router = threadRouter(rule, loop.clock);
    router.route();
    for (let i = 0; i < 10; i++) router.begin();
    loop.tick(1_000, 1);
    expect(router.route()).toBe(false);
    for (let i = 0; i < 1_000; i++) router.begin();
    loop.tick(1_000, 0.1);
    expect(router.route()).toBe(false);
    loop.tick(1_000, 0.6);
    expect(router.route()).toBe(true);
  });
});
