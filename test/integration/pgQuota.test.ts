import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { Quota, type QuotaStore } from '../../src/providers/quota.js';
import { pgQuotaStore } from '../../src/providers/quotaPg.js';
import type { PostgresStore } from '../../src/store/postgres/store.js';
import { createFakeOpenAIServer } from '../../src/testing/fakeOpenAIServer.js';
import { spawnTroupe, troupe, workdir, type Spawned, until } from '../helpers/cli.js';
import { adminQuery, freshSchema, PG_URL, pgAvailable, pgTitle, twoHostsOnOneSchema } from '../helpers/pg.js';

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

describe.skipIf(!available)(pgTitle(available, 'the endpoint quota of two troupe worker processes'), () => {
  /** Other processes decide: at most 120 s (a minute's quota window and more). */
  const untilLong = <T>(what: string, read: () => Promise<T>, ok: (value: T) => boolean) => until(what, read, ok, 120_000);
  const { schema, drop } = freshSchema();
  const db = `${PG_URL}?schema=${schema}`;
  const running: Spawned[] = [];
  afterAll(async () => {
    for (const r of running) if (r.child.exitCode === null && r.child.signalCode === null) r.child.kill('SIGKILL');
    await drop();
  });

  it('N requests per minute in total across both; one 429 with retry-after: 5 pauses both workers', async () => {
    const N = 3;
    const seen: { at: number; run: string }[] = [];
    const pausedUntil = () =>
      adminQuery(`SELECT paused_until FROM ${schema}.provider_quota`).then((r) =>
        Number((r.rows[0] as { paused_until?: string } | undefined)?.paused_until ?? 0),
      );
    await using server = await createFakeOpenAIServer(async (request) => {
      const run = JSON.stringify(request.body).includes('Task one') ? 'one' : 'two';
      seen.push({ at: request.at, run });
      // The first call of either run: 429, retry-after 5 — once the other run's first call is in
      // too (a worker slow to start under load would otherwise see the first run's retry come first).
      if (request.index === 0) {
        await untilLong(
          "the other run's first call",
          () => Promise.resolve(seen.length),
          (n) => n >= 2,
        );
        return { status: 429, headers: { 'retry-after': '5' } };
      }
      // The other run's first call (on the other worker) is answered once the pause is in the database: its next call comes during the pause.
      if (request.index === 1) {
        await untilLong('the endpoint paused', pausedUntil, (at) => at > 0);
        return { message: { toolCalls: [{ name: 'view_agent_graph', arguments: {} }] } };
      }
      return { message: { toolCalls: [{ name: 'finish', arguments: { summary: 'done' } }] } };
    });
    const cwd = workdir();
    writeFileSync(join(cwd, 'troupe.config.json'), JSON.stringify({ quota: { requestsPerMinute: N } }));
    for (const task of ['Task one', 'Task two']) expect((await troupe(['run', task, '--detach', '--db', db], cwd)).code).toBe(0);
    // One slot each: each worker hosts one of the two runs.
    const workers = [0, 1].map(() => {
      const w = spawnTroupe(['worker', '--db', db, '--concurrency', '1', '--model', 'm', '--base-url', server.url, '--api-key', 'k'], cwd);
      running.push(w);
      return w;
    });
    await untilLong(
      'both runs done',
      () => Promise.resolve(workers.flatMap((w) => w.lines).filter((l) => /^done +run /.test(l)).length),
      (n) => n === 2,
    );
    for (const w of workers) expect(w.lines.filter((l) => /^hosting +run /.test(l))).toHaveLength(1);

    // The pause is the 429's time (the worker's clock) + 5 s; no call of either run went before it ended.
    const paused = await pausedUntil();
    expect(paused).toBeGreaterThanOrEqual(seen[0]!.at + 5_000);
    expect(new Set(seen.slice(0, 2).map((s) => s.run)).size).toBe(2);
    expect(seen).toHaveLength(4);
    for (const { at } of seen.slice(2)) expect(at).toBeGreaterThanOrEqual(paused);
    // At most N a minute (troupe's windows are clock minutes), in total. A call takes its slot by the
    // worker's clock a moment before the server sees it: one seen within LATE ms of a minute's start
    // may have been taken in the minute before (a full suite's load once put a first call's connect
    // across the boundary, and the four calls seemed to fall in one minute).
    const LATE = 2_000;
    const minutesOf = (at: number) => [...new Set([Math.floor(at / 60_000), Math.floor((at - LATE) / 60_000)])];
    const fits = (i: number, taken: ReadonlyMap<number, number>): boolean =>
      i === seen.length || minutesOf(seen[i]!.at).some((m) => (taken.get(m) ?? 0) < N && fits(i + 1, new Map(taken).set(m, (taken.get(m) ?? 0) + 1)));
    expect(fits(0, new Map()), JSON.stringify(seen)).toBe(true);
    // (Up to a minute for the next window.)
  }, 150_000);
});
