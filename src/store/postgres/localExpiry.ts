/**
 * A lease's local expiry: the time its last claim or renewal was *sent*, plus the time-to-live,
 * less a margin. The database's `lease_until` is at least that late (it counts from when the
 * statement ran), so a host past its local expiry stops before another worker can claim the run.
 *
 * The time is counted on two clocks, and the lease is over when either says so:
 * - this process's monotonic clock, immune to steps of the wall clock;
 * - the wall clock, because the database's clock is a wall clock: a step forward of it (NTP, a VM
 *   resumed from a pause, a machine waking from suspend, which the monotonic clock does not count)
 *   expires every lease early by the step. CI's failover trials met one (a call allowed 150 ms
 *   after another worker had claimed the run). A host whose clock is the database's, or
 *   synchronised with it, sees the same step and stops in time; a backward step gives no extra
 *   time, the monotonic clock still bounds it.
 * @module
 */
import { performance } from 'node:perf_hooks';

/** The clocks a lease's local expiry is counted on (tests drive both). */
export interface LeaseClocks {
  /** A monotonic clock in ms (default `performance.now`). */
  now?: () => number;
  /** The wall clock in ms (default `Date.now`). */
  wallClock?: () => number;
}

/** When a claim or renewal was sent, on both clocks. */
export interface SentAt {
  mono: number;
  wall: number;
}

/** `clocks` with their defaults: the one place they are chosen. */
const clocksOf = (clocks: LeaseClocks) => ({ mono: clocks.now ?? (() => performance.now()), wall: clocks.wallClock ?? Date.now });

/** The moment now on both of `clocks`. */
export const sentNow = (clocks: LeaseClocks): SentAt => {
  const { mono, wall } = clocksOf(clocks);
  return { mono: mono(), wall: wall() };
};

export interface LocalExpiry {
  /** Milliseconds left: the lesser on the two clocks (zero or less once past). */
  remaining(): number;
  /** A renewal sent at `at` was accepted: each clock's expiry moves to it (never back). */
  extend(at: SentAt): void;
}

/** The local expiry of a lease of `ttl` ms claimed by a statement sent at `sentAt`. */
export function localExpiry(clocks: LeaseClocks, ttl: number, sentAt: SentAt): LocalExpiry {
  const { mono, wall } = clocksOf(clocks);
  // Clock rates differ by parts per million; the margin also covers the time between a check and
  // the call it allows.
  const margin = Math.min(Math.floor(ttl / 10), 1_000);
  let monoUntil = sentAt.mono + ttl - margin;
  let wallUntil = sentAt.wall + ttl - margin;
  return {
    // Called before every model or tool call, commit and read: two clock reads, nothing allocated.
    remaining: () => Math.min(monoUntil - mono(), wallUntil - wall()),
    extend(at) {
      monoUntil = Math.max(monoUntil, at.mono + ttl - margin);
      wallUntil = Math.max(wallUntil, at.wall + ttl - margin);
    },
  };
}
