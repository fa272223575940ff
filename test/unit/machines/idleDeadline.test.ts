/**
 * The idle deadline is one rule (machines/types.ts idleDeadline): a wait on agents times out at its
 * start plus its own timeout, else the run's idle auto-resume delay; a sleep_until timer at its
 * start plus its length; nothing else has a deadline.
 * The dormant agents' timers, a restored agent's remaining timer and a worker's release (its
 * `nextDeadline`) all read it.
 */
import { describe, expect, it } from 'vitest';
import { idleDeadline } from '../../../machines/types.js';
import { nextDeadline } from '../../../src/hosting/release.js';
import { agentRow } from '../store/storeContract.js';

describe('the idle deadline', () => {
  it('is the wait start plus its own timeout, else the idle resume delay, for waits on agents and timers only', () => {
    expect(idleDeadline('waiting', { waitKind: 'agents', waitingSince: 1_000, waitTimeoutMs: 30_000 }, 300_000)).toBe(31_000);
    expect(idleDeadline('waiting', { waitKind: 'agents', waitingSince: 1_000, waitTimeoutMs: null }, 300_000)).toBe(301_000);
    expect(idleDeadline('waiting', { waitKind: 'agents', waitingSince: 1_000 }, 300_000)).toBe(301_000);
    expect(idleDeadline('waiting', { waitKind: 'user', waitingSince: 1_000, waitTimeoutMs: 30_000 }, 300_000)).toBeNull();
    // A sleep_until timer: the deadline the agent chose, persisted as the wait's start and length.
    expect(idleDeadline('waiting', { waitKind: 'timer', waitingSince: 1_000, waitTimeoutMs: 86_400_000 }, 300_000)).toBe(86_401_000);
    expect(idleDeadline('waiting', { waitKind: 'agents', waitingSince: null, waitTimeoutMs: 30_000 }, 300_000)).toBeNull();
    for (const status of ['running', 'stalled', 'budgetPaused', 'completed', 'stopped', 'failed', 'crashed'] as const) {
      expect(idleDeadline(status, { waitKind: 'agents', waitingSince: 1_000, waitTimeoutMs: 30_000 }, 300_000)).toBeNull();
    }
  });

  it('a worker lets a parked run go until the earliest deadline of its agents', () => {
    const rows = [
      agentRow('a', { status: 'waiting', waitKind: 'agents', waitingSince: 5_000, waitTimeoutMs: 60_000 }),
      agentRow('b', { status: 'waiting', waitKind: 'agents', waitingSince: 1_000, waitTimeoutMs: null }),
      agentRow('c', { status: 'waiting', waitKind: 'user', waitingSince: 0, waitTimeoutMs: 1 }),
      agentRow('d', { status: 'stalled', waitKind: null, waitingSince: 0, waitTimeoutMs: 1 }),
    ];
    // A run whose only agent sleeps is let go until its timer.
    expect(nextDeadline([agentRow('e', { status: 'waiting', waitKind: 'timer', waitingSince: 0, waitTimeoutMs: 86_400_000 })], 1_000)).toBe(86_400_000);
    expect(nextDeadline(rows, 300_000)).toBe(65_000);
    expect(nextDeadline(rows, 10_000)).toBe(11_000);
    expect(nextDeadline(rows.slice(2), 10_000)).toBeNull();
  });
});
