import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { endpointOf, MemoryQuotaStore, Quota, type QuotaNotice } from '../../../src/providers/quota.js';

const flush = async () => {
  for (let i = 0; i < 5; i++) await new Promise<void>((resolve) => setImmediate(resolve));
};

const quota = (clock: SimulatedClock, store: MemoryQuotaStore, limits: { requestsPerMinute?: number; tokensPerMinute?: number }, notices: QuotaNotice[] = []) =>
  new Quota({
    clock,
    store,
    limits: { requestsPerMinute: limits.requestsPerMinute ?? null, tokensPerMinute: limits.tokensPerMinute ?? null },
    notify: (n) => notices.push(n),
  });

describe('Quota (one per endpoint, fixed minutes on the injected clock)', () => {
  it('lets requestsPerMinute calls start per minute, shared by every Quota on one store', async () => {
    const clock = new SimulatedClock();
    const store = new MemoryQuotaStore();
    // Two runs of one process: each its own Quota, one store.
    const a = quota(clock, store, { requestsPerMinute: 3 });
    const b = quota(clock, store, { requestsPerMinute: 3 });
    const started: [string, number][] = [];
    const all = [a, b, a, b, a, b].map((q, i) => q.acquire('ep', 0).then(() => started.push([`c${i}`, clock.now()])));
    await flush();
    expect(started).toHaveLength(3);
    clock.increment(59_999);
    await flush();
    expect(started).toHaveLength(3);
    clock.increment(1);
    await Promise.all(all);
    expect(started.filter(([, at]) => at === 60_000)).toHaveLength(3);
  });

  it('another endpoint has its own quota', async () => {
    const clock = new SimulatedClock();
    const q = quota(clock, new MemoryQuotaStore(), { requestsPerMinute: 1 });
    await q.acquire('ep1', 0);
    let other = false;
    void q.acquire('ep2', 0).then(() => (other = true));
    await flush();
    expect(other).toBe(true);
  });

  it('reserves tokens before the call and settles them to the real usage: the unused room goes back', async () => {
    const clock = new SimulatedClock();
    const q = quota(clock, new MemoryQuotaStore(), { tokensPerMinute: 1_000 });
    const first = await q.acquire('ep', 600);
    let second = false;
    void q.acquire('ep', 600).then(() => (second = true));
    await flush();
    expect(second).toBe(false);
    await q.settle(first, 100);
    clock.increment(1);
    await flush();
    expect(second).toBe(true);
  });

  it('a call larger than the whole token quota starts alone in an empty minute', async () => {
    const clock = new SimulatedClock();
    const q = quota(clock, new MemoryQuotaStore(), { tokensPerMinute: 100 });
    await expect(q.acquire('ep', 5_000)).resolves.toMatchObject({ tokens: 5_000 });
  });

  it('a 429 pause holds every caller of the endpoint until it ends, and is told', async () => {
    const clock = new SimulatedClock();
    const store = new MemoryQuotaStore();
    const notices: QuotaNotice[] = [];
    const a = quota(clock, store, { requestsPerMinute: 100 }, notices);
    const b = quota(clock, store, { requestsPerMinute: 100 });
    await a.pause('ep', 5_000);
    expect(notices).toEqual([{ state: 'paused', endpoint: 'ep', until: 5_000 }]);
    const started: number[] = [];
    const all = [a, b].map((q) => q.acquire('ep', 0).then(() => started.push(clock.now())));
    await flush();
    clock.increment(4_999);
    await flush();
    expect(started).toEqual([]);
    clock.increment(1);
    await Promise.all(all);
    expect(started).toEqual([5_000, 5_000]);
    // A shorter pause never cuts a longer one short.
    await a.pause('ep', 10_000);
    await b.pause('ep', 1_000);
    let after = -1;
    void a.acquire('ep', 0).then(() => (after = clock.now()));
    await flush();
    clock.increment(1_000);
    await flush();
    expect(after).toBe(-1);
    clock.increment(8_999);
    await flush();
    expect(after).toBe(-1);
    clock.increment(1);
    await flush();
    expect(after).toBe(15_000);
  });

  it("a run that meets another's 429 pause is told of it once", async () => {
    const clock = new SimulatedClock();
    const store = new MemoryQuotaStore();
    const told: QuotaNotice[] = [];
    const a = quota(clock, store, { requestsPerMinute: 100 });
    const b = quota(clock, store, { requestsPerMinute: 100 }, told);
    await a.pause('ep', 5_000);
    const calls = [b.acquire('ep', 0), b.acquire('ep', 0)];
    await flush();
    clock.increment(2_000);
    await flush();
    expect(told).toEqual([{ state: 'paused', endpoint: 'ep', until: 5_000 }]);
    clock.increment(3_000);
    await Promise.all(calls);
    expect(told).toHaveLength(1);
  });

  it('a waiter that aborts holds nothing and rejects with the reason', async () => {
    const clock = new SimulatedClock();
    const q = quota(clock, new MemoryQuotaStore(), { requestsPerMinute: 1 });
    await q.acquire('ep', 0);
    const controller = new AbortController();
    const gaveUp = q.acquire('ep', 0, controller.signal);
    const later = q.acquire('ep', 0);
    controller.abort(new Error('stopped'));
    await expect(gaveUp).rejects.toThrow('stopped');
    clock.increment(60_000);
    await later;
    // The next minute had room for one: the later waiter took it, the aborted one took nothing.
    let third = false;
    void q.acquire('ep', 0).then(() => (third = true));
    await flush();
    expect(third).toBe(false);
  });

  it('keys a model by its endpoint, else by the model object', () => {
    expect(endpointOf({ endpoint: 'https://x/v1#k1' })).toBe('https://x/v1#k1');
    const m = {};
    expect(endpointOf(m)).toBe(endpointOf(m));
    expect(endpointOf(m)).not.toBe(endpointOf({}));
  });
});
