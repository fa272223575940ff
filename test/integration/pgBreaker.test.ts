/**
 * The circuit breaker shared by a PostgreSQL cluster (issue 34 item 1): what one worker opens parks
 * every worker's calls before they go, and one probe across the cluster decides when it closes.
 * First two breakers of one process on two pools (a simulated clock), then two `troupe worker`
 * processes against one fake endpoint that goes down and comes back.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { ProviderError } from '../../src/errors.js';
import { Breaker, type BreakerStore, type Ticket } from '../../src/providers/breaker.js';
import { pgBreakerStore } from '../../src/providers/breakerPg.js';
import type { PostgresStore } from '../../src/store/postgres/store.js';
import { createFakeOpenAIServer, type FakeRequest } from '../../src/testing/fakeOpenAIServer.js';
import { spawnTroupe, troupe, workdir, type Spawned, until } from '../helpers/cli.js';
import { adminQuery, freshSchema, PG_URL, pgAvailable, pgTitle, twoHostsOnOneSchema } from '../helpers/pg.js';

const available = await pgAvailable();

/** Every query a store made has answered and its caller had a loop turn to act on it. */
let pending = 0;
const tracked = (store: BreakerStore): BreakerStore => ({
  read: (...args) => {
    pending++;
    return store.read(...args).finally(() => pending--);
  },
  step: (...args) => {
    pending++;
    return store.step(...args).finally(() => pending--);
  },
});
const settle = async () => {
  for (let idle = 0; idle < 3;) {
    await new Promise<void>((resolve) => setImmediate(resolve));
    idle = pending === 0 ? idle + 1 : 0;
  }
};

/** A parked caller: its ticket once given (or its error). */
function park(breaker: Breaker) {
  const out: { ticket?: Ticket; error?: unknown } = {};
  breaker.wait(new AbortController().signal).then(
    (t) => (out.ticket = t),
    (e: unknown) => (out.error = e),
  );
  return out;
}

const down = () => new ProviderError('PROVIDER_CONNECTION', 'connect ECONNREFUSED');
const policy = { failureThreshold: 2, cooldownMs: 30_000, openTimeoutMs: 600_000 };

describe.skipIf(!available)(pgTitle(available, 'the circuit breaker shared by a PostgreSQL cluster'), () => {
  let a: PostgresStore;
  let b: PostgresStore;
  twoHostsOnOneSchema((x, y) => ([a, b] = [x, y]));

  it("one host's open breaker parks the other's calls at no cost; one probe across both closes it", async () => {
    const clock = new SimulatedClock();
    clock.set(1_000_000);
    const endpoint = 'http://fake/v1#shared';
    const share = (store: PostgresStore) => ({ store: tracked(pgBreakerStore(store.pool)), syncMs: 1_000 });
    const onA = new Breaker(endpoint, clock, policy, share(a));
    const onB = new Breaker(endpoint, clock, policy, share(b));
    const bStates: string[] = [];
    onB.listen((c) => bStates.push(c.state));

    // Both closed: the first call of each reads the row first, then goes.
    expect(onA.now()).toBeNull();
    const first = park(onA);
    const firstB = park(onB);
    await settle();
    expect(first.ticket).toEqual({ probe: false });
    expect(firstB.ticket).toEqual({ probe: false });
    expect(onA.now()).toEqual({ probe: false });

    // Host a's calls fail twice: it opens, in the row too.
    expect(onA.failed(first.ticket!, down())).toBe('surface');
    expect(onA.failed(first.ticket!, down())).toBe('park');
    await settle();
    expect((await pgBreakerStore(a.pool).read(endpoint)).state).toBe('open');

    // Host b's next call, its copy a second old, reads the row and parks: no call goes.
    clock.increment(1_000);
    expect(onB.now()).toBeNull();
    const parkedB = Array.from({ length: 3 }, () => park(onB));
    const parkedA = Array.from({ length: 3 }, () => park(onA));
    await settle();
    expect([...parkedA, ...parkedB].filter((p) => p.ticket || p.error)).toEqual([]);
    expect(bStates).toEqual(['open']);

    // Each second the parked copies re-read the row; none probes before the cooldown.
    for (let s = 1; s < 29; s++) {
      clock.increment(1_000);
      await settle();
    }
    expect([...parkedA, ...parkedB].filter((p) => p.ticket || p.error)).toEqual([]);
    // The cooldown is over: exactly one probe across both hosts.
    clock.increment(1_000);
    await settle();
    clock.increment(1_000);
    await settle();
    const tickets = [...parkedA, ...parkedB].filter((p) => p.ticket);
    expect(tickets.map((p) => p.ticket?.probe)).toEqual([true]);
    const prober = parkedA.includes(tickets[0]!) ? onA : onB;

    // It answers: the row closes and every parked call of both hosts goes within a second.
    prober.succeeded(tickets[0]!.ticket!);
    await settle();
    clock.increment(1_000);
    await settle();
    const all = [...parkedA, ...parkedB];
    expect(all.filter((p) => p.ticket?.probe === false)).toHaveLength(all.length - 1);
    expect((await pgBreakerStore(b.pool).read(endpoint)).state).toBe('closed');
    // (It may have seen the probe under way: half-open.)
    expect([bStates[0], bStates.at(-1)]).toEqual(['open', 'closed']);
  });
});

describe.skipIf(!available)(pgTitle(available, 'the circuit breaker of two troupe worker processes'), () => {
  const { schema, drop } = freshSchema();
  const db = `${PG_URL}?schema=${schema}`;
  const running: Spawned[] = [];
  afterAll(async () => {
    for (const r of running) if (r.child.exitCode === null && r.child.signalCode === null) r.child.kill('SIGKILL');
    await drop();
  });

  const breakerRow = () => adminQuery(`SELECT state FROM ${schema}.provider_breaker`).then((r) => r.rows.map((row: { state: string }) => row.state));

  it("one worker's open breaker parks the other's agents before they call; one probe per cooldown across both; both finish once it answers", async () => {
    const cooldownMs = 4_000;
    let down = true;
    const seen: { at: number; task: string; down: boolean }[] = [];
    const taskOf = (request: FakeRequest) => (JSON.stringify(request.body).includes('Task two') ? 'two' : 'one');
    await using server = await createFakeOpenAIServer((request) => {
      seen.push({ at: request.at, task: taskOf(request), down });
      if (down) return { status: 503 };
      return { message: { toolCalls: [{ name: 'finish', arguments: { summary: `task ${taskOf(request)} done` } }] } };
    });
    const cwd = workdir();
    writeFileSync(join(cwd, 'troupe.config.json'), JSON.stringify({ breaker: { failureThreshold: 2, cooldownMs, openTimeoutMs: 300_000 } }));
    const worker = () => {
      const w = spawnTroupe(['worker', '--db', db, '--concurrency', '1', '--model', 'm', '--base-url', server.url, '--api-key', 'k'], cwd);
      running.push(w);
      return w;
    };

    // Worker a hosts run one; its agent's two failures open the breaker, in the database.
    const a = worker();
    await a.line(/^worker .* hosting runs of/);
    expect((await troupe(['run', 'Task one', '--detach', '--db', db], cwd)).code).toBe(0);
    await until('the breaker open', breakerRow, (states) => states[0] === 'open');
    expect(seen.map((s) => s.task)).toEqual(['one', 'one']);

    // Worker b hosts run two (a's one slot is taken): its agent parks without calling.
    const b = worker();
    await b.line(/^worker .* hosting runs of/);
    expect((await troupe(['run', 'Task two', '--detach', '--db', db], cwd)).code).toBe(0);
    await b.line(/^hosting +run /);
    // Its run is told: the breaker is open.
    await until(
      'run two told',
      () => adminQuery(`SELECT data FROM ${schema}.events WHERE type = 'provider.breaker'`).then((r) => r.rows.length),
      (n) => n >= 2,
    );
    // Down for three more cooldowns: only probes, one per cooldown across both workers.
    const wentDown = seen[1]!.at;
    await until(
      'three cooldowns',
      () => Promise.resolve(Date.now()),
      (now) => now >= wentDown + 3 * cooldownMs + 500,
    );
    down = false;
    await until(
      'both runs done',
      () => Promise.resolve([...a.lines, ...b.lines].filter((l) => /^done +run /.test(l)).length),
      (n) => n === 2,
    );

    const whileDown = seen.filter((s) => s.down);
    // After the two failures that opened it, every call while down was a probe: spaced by the cooldown.
    for (let i = 2; i < whileDown.length; i++) expect(whileDown[i]!.at - whileDown[i - 1]!.at).toBeGreaterThanOrEqual(cooldownMs);
    expect(whileDown.length).toBeGreaterThanOrEqual(3);
    expect(whileDown.length).toBeLessThanOrEqual(2 + 4);
    // Both finished with one call each once it answered (the probe that closed it among them).
    expect(
      seen
        .filter((s) => !s.down)
        .map((s) => s.task)
        .sort(),
    ).toEqual(['one', 'two']);
    expect(await breakerRow()).toEqual(['closed']);
  });
});
