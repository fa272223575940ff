/**
 * The circuit breaker's reducer (src/providers/breakerState.ts) under any sequence of claims,
 * answers, outage failures and unused tickets from any number of callers, on a clock that only
 * moves forward: calls go only when closed; one probe at a time; probes no sooner than `cooldownMs`
 * after the breaker (re)opened; the outage's start kept until it closes and every claim expired
 * from `openTimeoutMs` after it; `failureThreshold` outage failures in a row open it.
 */
import { fc, test } from '@fast-check/vitest';
import { expect } from 'vitest';
import { CLOSED, PROBE_LEASE_MS, stepBreaker, type BreakerEvent, type BreakerPolicy, type BreakerRow } from '../../src/providers/breakerState.js';

/** Replay a failure with PROPERTY_SEED=<seed> PROPERTY_PATH=<path> (both printed by fast-check). */
const replay = process.env.PROPERTY_SEED
  ? { seed: Number(process.env.PROPERTY_SEED), ...(process.env.PROPERTY_PATH ? { path: process.env.PROPERTY_PATH } : {}), endOnFailure: true }
  : {};

const policy = fc.record({
  failureThreshold: fc.integer({ min: 1, max: 4 }),
  cooldownMs: fc.integer({ min: 1, max: 5_000 }),
  openTimeoutMs: fc.integer({ min: 1, max: 300_000 }),
});

/** One caller's act after `advance` ms: claim, or report how its last ticket went. */
const act = fc.record({
  advance: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 3_000 }), fc.integer({ min: 0, max: 2 * PROBE_LEASE_MS })),
  caller: fc.integer({ min: 0, max: 3 }),
  kind: fc.constantFrom('claim', 'claim', 'succeeded', 'failed', 'failed', 'unused'),
});

test.prop([policy, fc.array(act, { minLength: 1, maxLength: 120 })], { numRuns: 400, ...replay })(
  'calls go only when closed, one probe at a time, spaced by the cooldown, and the outage ends at openTimeoutMs',
  (p: BreakerPolicy, acts) => {
    let row: BreakerRow = CLOSED;
    let now = 1_000;
    /** What each caller holds: a ticket (probe or not) or nothing. */
    const held = new Map<number, { probe: number | null }>();
    /** The probe out and when it was claimed (the model's own account). */
    let probeOut: { caller: number; at: number } | null = null;
    /** When the breaker last went open (probes not before this + cooldown). */
    let openedAt: number | null = null;
    let outageStart: number | null = null;
    let closedFailures = 0;

    for (const a of acts) {
      now += a.advance;
      const ticket = held.get(a.caller);
      let event: BreakerEvent;
      if (a.kind === 'claim' || !ticket) event = { type: 'claim', now };
      else if (a.kind === 'succeeded') event = { type: 'succeeded' };
      else event = { type: a.kind, now, probe: ticket.probe };
      /** The caller holds the probe out (not one whose claim lapsed and was taken over). */
      const theProbe = ticket?.probe !== null && ticket?.probe !== undefined && probeOut?.caller === a.caller && probeOut.at === ticket.probe;
      const before = row;
      const { row: after, verdict } = stepBreaker(before, event, p);
      row = after;

      // The row is well-formed.
      if (row.state === 'closed') {
        expect(row.openSince).toBeNull();
        expect(row.probeClaimedAt).toBeNull();
        expect(row.failures).toBeLessThan(p.failureThreshold);
      } else {
        expect(row.openSince).not.toBeNull();
        expect(row.openSince!).toBeLessThanOrEqual(now);
      }
      // The outage's start stays until it closes.
      if (before.state !== 'closed' && row.state !== 'closed') expect(row.openSince).toBe(before.openSince);

      if (event.type === 'claim') {
        expect(verdict.kind === 'go').toBe(before.state === 'closed');
        if (verdict.kind === 'go' || verdict.kind === 'probe') held.set(a.caller, { probe: verdict.kind === 'probe' ? now : null });
        if (before.state !== 'closed') {
          const deadline = before.openSince! + p.openTimeoutMs;
          expect(verdict.kind === 'expired').toBe(now >= deadline);
          if (verdict.kind === 'wait') {
            expect(verdict.until).toBeGreaterThan(now);
            expect(verdict.until).toBeLessThanOrEqual(deadline);
          }
        }
        if (verdict.kind === 'probe') {
          // One probe at a time: another is out only if its claim lapsed.
          if (probeOut) expect(now - probeOut.at).toBeGreaterThanOrEqual(PROBE_LEASE_MS);
          if (openedAt !== null) expect(now).toBeGreaterThanOrEqual(openedAt + p.cooldownMs);
          probeOut = { caller: a.caller, at: now };
          expect(row.state).toBe('halfOpen');
        }
      } else {
        held.delete(a.caller);
        if (theProbe) probeOut = null;
        if (event.type === 'succeeded') {
          expect(row).toEqual(CLOSED);
          probeOut = null;
        }
        if (event.type === 'failed') {
          if (before.state === 'closed') {
            closedFailures = before.failures + 1;
            expect(verdict.kind === 'park').toBe(closedFailures >= p.failureThreshold);
          } else expect(verdict.kind).toBe('park');
          if (verdict.kind === 'park' && before.state === 'closed') expect(row.state).toBe('open');
          // The probe's outage failure opens it for another cooldown; a lapsed probe's is an ordinary failure.
          if (theProbe && before.state === 'halfOpen') {
            expect(row.state).toBe('open');
            expect(row.probeAt).toBe(now + p.cooldownMs);
          } else if (before.state !== 'closed') {
            // Any other failure while down leaves the probe out where it was.
            expect(row.state).toBe(before.state);
            expect(row.probeClaimedAt).toBe(before.probeClaimedAt);
          }
        }
      }
      if (row.state === 'open' && before.state !== 'open' && !(event.type === 'unused')) openedAt = now;
      if (row.state === 'closed') {
        openedAt = null;
        outageStart = null;
        probeOut = null;
      } else outageStart ??= row.openSince;
      expect(row.openSince).toBe(outageStart);
    }
  },
);
