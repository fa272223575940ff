/**
 * The circuit breaker's state and its transitions as one pure reducer (issue 34 item 1): the
 * process's breaker (breaker.ts) steps its copy with it, and on PostgreSQL the cluster's row
 * (breakerPg.ts) is stepped with the very same function under a row lock, so every worker decides
 * alike.
 *
 * - **closed**: a `claim` goes. `failureThreshold` outage failures in a row open it; an answer
 *   from the endpoint (`succeeded`) resets the count.
 * - **open**: a `claim` waits until `probeAt`; the first claim from then on is the **probe** and
 *   the breaker goes half-open with that claim's time.
 * - **halfOpen**: every other claim waits; the probe's success closes it, its outage failure opens
 *   it for another `cooldownMs`, a probe that never went (`unused`) makes the next claim the probe.
 *   A claim whose probe has not been heard of for `probeLeaseMs` is taken over (its worker died).
 * - Open or half-open for `openTimeoutMs` since the outage began: every claim is `expired`.
 * @module
 */

export interface BreakerPolicy {
  failureThreshold: number;
  cooldownMs: number;
  openTimeoutMs: number;
}

export type BreakerState = 'closed' | 'open' | 'halfOpen';

export interface BreakerRow {
  readonly state: BreakerState;
  /** Outage failures in a row. */
  readonly failures: number;
  /** When the outage began (null when closed). */
  readonly openSince: number | null;
  /** Open: when the next probe may go. */
  readonly probeAt: number;
  /** Half-open: when the probe was claimed (null otherwise). */
  readonly probeClaimedAt: number | null;
}

export const CLOSED: BreakerRow = Object.freeze({ state: 'closed', failures: 0, openSince: null, probeAt: 0, probeClaimedAt: null });

/**
 * A probe claim not heard of for this long is another's to take (the worker that claimed it is
 * gone); a live probe is heard of when it answers, fails or goes unused.
 */
export const PROBE_LEASE_MS = 120_000;

export type BreakerEvent =
  /** A caller asks to call. */
  | { type: 'claim'; now: number }
  /** The endpoint answered (even with a refusal or a 429): it is up. */
  | { type: 'succeeded' }
  /**
   * A call failed because the endpoint is down (no connection, a timeout, a 5xx). `probe`: when
   * the probe this ticket was claimed (null: not a probe).
   */
  | { type: 'failed'; now: number; probe: number | null }
  /** A ticket was not used (the call never left). */
  | { type: 'unused'; now: number; probe: number | null };

/** What a step tells the caller. */
type BreakerVerdict =
  /** claim: call. */
  | { kind: 'go' }
  /** claim: call as the one probe. */
  | { kind: 'probe' }
  /** claim: wait until `until` (or a change) and claim again. */
  | { kind: 'wait'; until: number }
  /** claim: the outage has lasted `openTimeoutMs`; `since` is when it began. */
  | { kind: 'expired'; since: number }
  /** failed: the agent's own recovery handles the failure. */
  | { kind: 'surface' }
  /** failed: the endpoint is down; claim again (no attempt spent). */
  | { kind: 'park' }
  /** succeeded, unused. */
  | { kind: 'noted' };

export interface BreakerStep {
  row: BreakerRow;
  verdict: BreakerVerdict;
}

const NOTED: BreakerVerdict = Object.freeze({ kind: 'noted' });

function opened(row: BreakerRow, now: number, policy: BreakerPolicy, failures: number): BreakerRow {
  return { state: 'open', failures, openSince: row.openSince ?? now, probeAt: now + policy.cooldownMs, probeClaimedAt: null };
}

/**
 * Whether a probe ticket claimed at `claimedAt` is the row's probe out. A probe whose claim lapsed
 * and was taken over may still report: it is then an ordinary call (one probe at a time).
 */
const isTheProbe = (row: BreakerRow, claimedAt: number | null): boolean => claimedAt !== null && row.state === 'halfOpen' && row.probeClaimedAt === claimedAt;

/** One transition of `row` by `event` (pure: the same in every process). */
export function stepBreaker(row: BreakerRow, event: BreakerEvent, policy: BreakerPolicy): BreakerStep {
  switch (event.type) {
    case 'claim': {
      if (row.state === 'closed') return { row, verdict: { kind: 'go' } };
      const since = row.openSince ?? event.now;
      const deadline = since + policy.openTimeoutMs;
      if (event.now >= deadline) return { row, verdict: { kind: 'expired', since } };
      const leaseEnd = (row.probeClaimedAt ?? event.now) + PROBE_LEASE_MS;
      const due = row.state === 'open' ? event.now >= row.probeAt : event.now >= leaseEnd;
      if (due) return { row: { ...row, state: 'halfOpen', openSince: since, probeClaimedAt: event.now }, verdict: { kind: 'probe' } };
      return { row, verdict: { kind: 'wait', until: Math.min(row.state === 'open' ? row.probeAt : leaseEnd, deadline) } };
    }
    case 'succeeded':
      return { row: row.state === 'closed' && row.failures === 0 ? row : CLOSED, verdict: NOTED };
    case 'failed': {
      const failures = row.failures + 1;
      if (isTheProbe(row, event.probe)) return { row: opened(row, event.now, policy, failures), verdict: { kind: 'park' } };
      if (row.state === 'closed') {
        if (failures < policy.failureThreshold) return { row: { ...row, failures }, verdict: { kind: 'surface' } };
        return { row: opened(row, event.now, policy, failures), verdict: { kind: 'park' } };
      }
      // Open or half-open: the outage is the breaker's to wait out.
      return { row: { ...row, failures }, verdict: { kind: 'park' } };
    }
    case 'unused':
      // A probe that never went: the next claim probes at once.
      if (isTheProbe(row, event.probe)) return { row: { ...row, state: 'open', probeAt: event.now, probeClaimedAt: null }, verdict: NOTED };
      return { row, verdict: NOTED };
  }
}
