/**
 * A lease's local expiry on two clocks (src/store/postgres/localExpiry.ts), without a database:
 * the lesser of the two decides, a forward step of the wall clock ends the lease, a backward one
 * gives no extra time, and a renewal never moves the expiry back.
 */
import { describe, expect, it } from 'vitest';
import { localExpiry } from '../../../src/store/postgres/localExpiry.js';

function clocks(mono = 0, wall = 1_000_000) {
  const c = { mono, wall };
  return { c, lease: { now: () => c.mono, wallClock: () => c.wall } };
}

describe('a lease’s local expiry', () => {
  it('runs for the TTL less a tenth (at most 1 s) on the monotonic clock', () => {
    const { c, lease } = clocks();
    const expiry = localExpiry(lease, 2_000, { mono: 0, wall: 1_000_000 });
    c.wall = 1_000_000 + 1_799;
    c.mono = 1_799;
    expect(expiry.remaining()).toBe(1);
    c.mono = 1_800;
    c.wall += 1;
    expect(expiry.remaining()).toBe(0);
    const long = localExpiry(lease, 60_000, { mono: 0, wall: 1_000_000 });
    c.mono = 58_999;
    c.wall = 1_000_000 + 58_999;
    expect(long.remaining()).toBe(1);
  });

  it('a forward step of the wall clock ends it at once; a backward step gives no extra time', () => {
    const { c, lease } = clocks();
    const stepped = localExpiry(lease, 2_000, { mono: 0, wall: 1_000_000 });
    c.mono = 100;
    c.wall = 1_000_000 + 100 + 2_000; // the step
    expect(stepped.remaining()).toBeLessThanOrEqual(0);

    const { c: d, lease: back } = clocks();
    const held = localExpiry(back, 2_000, { mono: 0, wall: 1_000_000 });
    d.wall = 1_000_000 - 600_000;
    d.mono = 1_799;
    expect(held.remaining()).toBe(1);
    d.mono = 1_800;
    expect(held.remaining()).toBe(0);
  });

  it('a renewal extends it on each clock from when it was sent, never back', () => {
    const { c, lease } = clocks();
    const expiry = localExpiry(lease, 2_000, { mono: 0, wall: 1_000_000 });
    expiry.extend({ mono: 1_000, wall: 1_001_000 });
    c.mono = 2_799;
    c.wall = 1_002_799;
    expect(expiry.remaining()).toBe(1);
    // A renewal answered late, sent before the last one, moves nothing.
    expiry.extend({ mono: 500, wall: 1_000_500 });
    expect(expiry.remaining()).toBe(1);
    // A renewal sent after a forward step counts from the stepped wall time.
    c.wall += 5_000;
    expect(expiry.remaining()).toBeLessThanOrEqual(0);
    expiry.extend({ mono: 2_799, wall: c.wall });
    expect(expiry.remaining()).toBe(1_800);
  });
});
