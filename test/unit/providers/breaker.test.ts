/**
 * The circuit breaker's rules on a simulated clock (issue 34 item 1, seed 000): opened by outage
 * failures in a row, one probe per cooldown, closed by an answer, a typed end after openTimeoutMs.
 */
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { ProviderError } from '../../../src/errors.js';
import { Breaker, breakerFor, type BreakerChange, type Ticket } from '../../../src/providers/breaker.js';

const policy = { failureThreshold: 3, cooldownMs: 30_000, openTimeoutMs: 120_000 };
const down = () => new ProviderError('PROVIDER_CONNECTION', 'connect ECONNREFUSED');
const refused = () => new ProviderError('PROVIDER_BAD_REQUEST', 'HTTP 400');
const flush = () => new Promise((resolve) => setImmediate(resolve));

function setup() {
  const clock = new SimulatedClock();
  const breaker = new Breaker('http://fake/v1#k', clock, policy);
  const changes: BreakerChange['state'][] = [];
  breaker.listen((c) => changes.push(c.state));
  const go = breaker.now()!;
  /** Open it: threshold failures in a row (the last one parks). */
  const open = () => {
    const verdicts = Array.from({ length: policy.failureThreshold }, () => breaker.failed(go, down()));
    return verdicts;
  };
  return { clock, breaker, changes, go, open };
}

/** A parked caller: its ticket once given (or its error). */
function park(breaker: Breaker, signal = new AbortController().signal) {
  const out: { ticket?: Ticket; error?: unknown } = {};
  breaker.wait(signal).then(
    (t) => (out.ticket = t),
    (e: unknown) => (out.error = e),
  );
  return out;
}

describe('the circuit breaker', () => {
  it('outage failures in a row open it; the last one parks instead of surfacing', () => {
    const { breaker, changes, open } = setup();
    expect(open()).toEqual(['surface', 'surface', 'park']);
    expect(breaker.state).toBe('open');
    expect(breaker.now()).toBeNull();
    expect(changes).toEqual(['open']);
  });

  it('an answer from the endpoint, even a 4xx, resets the count: failures must be in a row', () => {
    const { breaker, go } = setup();
    breaker.failed(go, down());
    breaker.failed(go, down());
    expect(breaker.failed(go, refused())).toBe('surface');
    expect(breaker.failed(go, down())).toBe('surface');
    expect(breaker.failed(go, down())).toBe('surface');
    expect(breaker.state).toBe('closed');
    // A non-provider error (a bug, a lost lease) says nothing about the endpoint.
    expect(breaker.failed(go, new Error('bug'))).toBe('surface');
    expect(breaker.failed(go, down())).toBe('park');
  });

  it('while open, callers park; after the cooldown exactly one goes as the probe', async () => {
    const { clock, breaker, open } = setup();
    open();
    const parked = Array.from({ length: 5 }, () => park(breaker));
    await flush();
    clock.increment(policy.cooldownMs - 1);
    await flush();
    expect(parked.filter((p) => p.ticket)).toHaveLength(0);
    clock.increment(1);
    await flush();
    expect(parked.filter((p) => p.ticket).map((p) => p.ticket)).toEqual([{ probe: true, claimedAt: clock.now() }]);
    expect(breaker.state).toBe('halfOpen');
  });

  it("a failed probe opens it for another cooldown; a probe's success closes it and releases every parked caller", async () => {
    const { clock, breaker, changes, open } = setup();
    open();
    const parked = Array.from({ length: 4 }, () => park(breaker));
    clock.increment(policy.cooldownMs);
    await flush();
    const probe = parked.find((p) => p.ticket)!;
    expect(breaker.failed(probe.ticket!, down())).toBe('park');
    expect(breaker.state).toBe('open');
    // The failed prober waits again, like the others; the next probe is a full cooldown later.
    parked.splice(parked.indexOf(probe), 1, park(breaker));
    clock.increment(policy.cooldownMs - 1);
    await flush();
    expect(parked.filter((p) => p.ticket)).toHaveLength(0);
    clock.increment(1);
    await flush();
    const second = parked.filter((p) => p.ticket);
    expect(second.map((p) => p.ticket)).toEqual([{ probe: true, claimedAt: clock.now() }]);
    breaker.succeeded(second[0]!.ticket!);
    await flush();
    expect(parked.map((p) => p.ticket)).toEqual(
      parked.map((p) => (p === second[0] ? { probe: true, claimedAt: second[0]!.ticket!.claimedAt } : { probe: false })),
    );
    expect(changes).toEqual(['open', 'halfOpen', 'open', 'halfOpen', 'closed']);
  });

  it('open for openTimeoutMs since the outage began, every parked caller fails with PROVIDER_CIRCUIT_OPEN', async () => {
    const { clock, breaker, open } = setup();
    open();
    const parked = Array.from({ length: 3 }, () => park(breaker));
    for (let t = 0; t < policy.openTimeoutMs; t += policy.cooldownMs) {
      clock.increment(policy.cooldownMs);
      await flush();
      const probe = parked.find((p) => p.ticket);
      if (probe) {
        breaker.failed(probe.ticket!, down());
        parked.splice(parked.indexOf(probe), 1, park(breaker));
        await flush();
      }
    }
    await flush();
    expect(parked.map((p) => (p.error as ProviderError | undefined)?.code)).toEqual([
      'PROVIDER_CIRCUIT_OPEN',
      'PROVIDER_CIRCUIT_OPEN',
      'PROVIDER_CIRCUIT_OPEN',
    ]);
    expect((parked[0]!.error as ProviderError).retryable).toBe(false);
  });

  it('a probe that never went (halted or cancelled) hands the probe to the next caller at once', async () => {
    const { clock, breaker, open } = setup();
    open();
    const parked = [park(breaker), park(breaker)];
    clock.increment(policy.cooldownMs);
    await flush();
    const probe = parked.find((p) => p.ticket)!;
    breaker.unused(probe.ticket!);
    await flush();
    expect(parked.find((p) => p !== probe)!.ticket).toEqual({ probe: true, claimedAt: clock.now() });
  });

  it('a parked caller whose agent is stopped leaves at once with the abort reason', async () => {
    const { breaker, open } = setup();
    open();
    const controller = new AbortController();
    const parked = park(breaker, controller.signal);
    controller.abort(new Error('stopped'));
    await flush();
    expect((parked.error as Error).message).toBe('stopped');
  });

  it('one breaker per endpoint and clock: models that share an endpoint share it; a model without one has its own', () => {
    const clock = new SimulatedClock();
    const complete = () => Promise.reject(new Error('unused'));
    const a = breakerFor({ endpoint: 'http://x/v1#k1', complete }, clock, policy);
    expect(breakerFor({ endpoint: 'http://x/v1#k1', complete }, clock, policy)).toBe(a);
    expect(breakerFor({ endpoint: 'http://x/v1#k2', complete }, clock, policy)).not.toBe(a);
    expect(breakerFor({ endpoint: 'http://x/v1#k1', complete }, new SimulatedClock(), policy)).not.toBe(a);
    const anonymous = { complete };
    expect(breakerFor(anonymous, clock, policy)).toBe(breakerFor(anonymous, clock, policy));
    expect(breakerFor({ complete }, clock, policy)).not.toBe(breakerFor(anonymous, clock, policy));
  });
});
