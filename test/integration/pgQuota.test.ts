import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { Quota, type QuotaStore } from '../../src/providers/quota.js';
import { pgQuotaStore } from '../../src/providers/quotaPg.js';
import type { PostgresStore } from '../../src/store/postgres/store.js';
import { pgAvailable, pgTitle, twoHostsOnOneSchema } from '../helpers/pg.js';

const available = await pgAvailable();

/** Every query the quota made has answered and its caller had a loop turn to act on it (arm its timer). */
let pending = 0;
const tracked = (store: QuotaStore): QuotaStore => {
  const track =
    <A extends unknown[], R>(op: (...args: A) => Promise<R>) =>
    (...args: A): Promise<R> => {
      pending++;
      return op(...args).finally(() => pending--);
    };
  return { take: track(store.take.bind(store)), adjust: track(store.adjust.bind(store)), pause: track(store.pause.bind(store)) };
};
const settle = async () => {
  for (let idle = 0; idle < 3;) {
    await new Promise<void>((resolve) => setImmediate(resolve));
    idle = pending === 0 ? idle + 1 : 0;
  }
};

describe.skipIf(!available)(pgTitle(available, 'the endpoint quota shared by a PostgreSQL cluster'), () => {
  let a: PostgresStore;
  let b: PostgresStore;
  twoHostsOnOneSchema((x, y) => ([a, b] = [x, y]));

  const limits = { requestsPerMinute: 4, tokensPerMinute: null };

  it('two hosts on one schema take at most N requests per minute in total, and a pause by one holds the other', async () => {
    const clock = new SimulatedClock();
    clock.set(600_000);
    // Two hosts: each its own pool and its own Quota, one table.
    const qa = new Quota({ clock, store: tracked(pgQuotaStore(a.pool)), limits });
    const qb = new Quota({ clock, store: tracked(pgQuotaStore(b.pool)), limits });
    const started: number[] = [];
    const all = Array.from({ length: 10 }, (_, i) => (i % 2 ? qa : qb).acquire('https://fake/v1#k', 0).then(() => started.push(clock.now())));
    for (let minute = 0; minute < 3; minute++) {
      await settle();
      expect(started.filter((at) => at === 600_000 + minute * 60_000)).toHaveLength(4 * Number(minute < 2) + 2 * Number(minute === 2));
      clock.increment(60_000);
    }
    await Promise.all(all);
    expect(started).toHaveLength(10);

    // A 429 on host a pauses the endpoint for host b's callers too.
    const pausedAt = clock.now();
    await qa.pause('https://fake/v1#k', 5_000);
    let bStarted = -1;
    void qb.acquire('https://fake/v1#k', 0).then(() => (bStarted = clock.now()));
    await settle();
    clock.increment(4_999);
    await settle();
    expect(bStarted).toBe(-1);
    clock.increment(1);
    await settle();
    expect(bStarted).toBe(pausedAt + 5_000);
  });

  it('settles tokens to the real usage in the shared row', async () => {
    const clock = new SimulatedClock();
    const tokens = { requestsPerMinute: null, tokensPerMinute: 1_000 };
    const qa = new Quota({ clock, store: tracked(pgQuotaStore(a.pool)), limits: tokens });
    const qb = new Quota({ clock, store: tracked(pgQuotaStore(b.pool)), limits: tokens });
    const first = await qa.acquire('ep-tokens', 700);
    let second = false;
    void qb.acquire('ep-tokens', 700).then(() => (second = true));
    await settle();
    expect(second).toBe(false);
    await qa.settle(first, 200);
    // Host b's waiter finds the room at its next try (the next minute at the latest); a new caller finds it now.
    // 200 used + 400 fits in 1 000 only because the 500 unused tokens went back.
    let third = false;
    void qa.acquire('ep-tokens', 400).then(() => (third = true));
    await settle();
    expect(third).toBe(true);
    clock.increment(60_000);
    await settle();
    expect(second).toBe(true);
  });
});
