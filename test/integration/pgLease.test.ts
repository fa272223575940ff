/**
 * Leases with fencing on a real PostgreSQL: exactly one host per run however claims race, a
 * second claimer gets RUN_LOCKED, and a worker that lost its run (it stalled past its lease and
 * another claimed it) cannot write a single row — in process, and with a real SIGSTOP.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type pg from 'pg';
import { openPostgresStore, type PostgresStore } from '../../src/store/postgres/store.js';
import { startFaultProxy } from '../helpers/faultProxy.js';
import { adminQuery, PG_URL, pgAvailable, pgTitle, twoHostsOnOneSchema } from '../helpers/pg.js';
import { agentRow } from '../unit/store/storeContract.js';

const available = await pgAvailable();
const CHILD = fileURLToPath(new URL('../../dist/test/integration/pg/leaseChild.js', import.meta.url));

describe.skipIf(!available)(pgTitle(available, 'run leases on PostgreSQL'), () => {
  let a: PostgresStore;
  let b: PostgresStore;
  const { schema } = twoHostsOnOneSchema((x, y) => ([a, b] = [x, y]));

  const dbNow = async () => Number((await adminQuery('SELECT (extract(epoch from clock_timestamp()) * 1000)::bigint AS now')).rows[0].now);
  const leaseOf = async (runId: string) => (await a.leases()).find((l) => l.run_id === runId)!;
  /** Resolve once the database's clock is past the run's lease (a condition, polled on the database). */
  async function expired(runId: string): Promise<void> {
    for (;;) {
      const until = (await leaseOf(runId)).lease_until;
      if ((await dbNow()) > until) return;
      const left = Math.max(1, until - (await dbNow()));
      await new Promise((resolve) => setTimeout(resolve, left));
    }
  }

  it('100 races of two workers claiming one run: exactly one host each time, the other gets RUN_LOCKED', async () => {
    const winners = { a: 0, b: 0 };
    for (let i = 0; i < 100; i++) {
      const runId = `race-${i}`;
      const results = await Promise.allSettled([a.claim(runId, { owner: 'A', heartbeatMs: 0 }), b.claim(runId, { owner: 'B', heartbeatMs: 0 })]);
      const won = results.filter((r) => r.status === 'fulfilled');
      expect(won).toHaveLength(1);
      const lost = results.find((r) => r.status === 'rejected') as PromiseRejectedResult;
      expect(lost.reason).toMatchObject({ code: 'RUN_LOCKED' });
      winners[results[0]!.status === 'fulfilled' ? 'a' : 'b'] += 1;
      expect((await leaseOf(runId)).epoch).toBe(1);
    }
    expect(winners.a + winners.b).toBe(100);
  });

  it('100 races of two workers taking the next runnable run: exactly one host each time', async () => {
    for (let i = 0; i < 100; i++) {
      const runId = `next-${i}`;
      const first = await a.claim(runId, { owner: 'submitter', heartbeatMs: 0 });
      await first.release({ state: 'runnable' });
      const [x, y] = await Promise.all([a.claimNext({ owner: 'A', heartbeatMs: 0 }), b.claimNext({ owner: 'B', heartbeatMs: 0 })]);
      const hosts = [x, y].filter((l) => l !== null);
      expect(hosts.map((l) => l.runId)).toEqual([runId]);
      expect(hosts[0]!.epoch).toBe(2);
      await hosts[0]!.release({ state: 'done' });
    }
  });

  it('a worker past its lease is fenced: the new host writes, the old one writes nothing and learns it lost the run', async () => {
    const old = await a.claim('fenced', { owner: 'A', ttlMs: 300, heartbeatMs: 0 });
    await old.port.commit([
      {
        op: 'insertRun',
        run: {
          id: 'fenced',
          createdAt: 1,
          interactive: false,
          rootId: null,
          budget: { limitUsd: null, budgetStopped: false, reserveStopped: false, paused: false, resumeEpoch: 0, reserveNoticeClaimed: false },
        },
      },
    ]);
    await expect(b.claim('fenced', { owner: 'B', heartbeatMs: 0 })).rejects.toMatchObject({ code: 'RUN_LOCKED' });
    await expired('fenced');
    const lostWith: string[] = [];
    old.onLost((err) => lostWith.push(err.code));
    const next = await b.claim('fenced', { owner: 'B', heartbeatMs: 0 });
    expect(next.epoch).toBe(old.epoch + 1);
    await next.port.commit([{ op: 'appendEvent', row: { runId: 'fenced', agentId: null, type: 'new-host', data: {}, at: 2 } }]);
    await expect(old.port.commit([{ op: 'appendEvent', row: { runId: 'fenced', agentId: null, type: 'old-host', data: {}, at: 3 } }])).rejects.toMatchObject({
      code: 'LEASE_LOST',
    });
    expect(lostWith).toEqual(['LEASE_LOST']);
    expect(await old.renew()).toBe(false);
    expect(await old.release({ state: 'runnable' })).toBe(false);
    // And never again, even without asking the database.
    await expect(old.port.commit([{ op: 'appendEvent', row: { runId: 'fenced', agentId: null, type: 'old-host', data: {}, at: 4 } }])).rejects.toMatchObject({
      code: 'LEASE_LOST',
    });
    expect((await a.reads.listEvents('fenced')).map((e) => e.type)).toEqual(['new-host']);
    expect((await leaseOf('fenced')).owner).toBe('B');
  });

  it('a renewed lease is kept: a claimer meanwhile gets RUN_LOCKED', async () => {
    const held = await a.claim('renewed', { owner: 'A', ttlMs: 400, heartbeatMs: 0 });
    const before = (await leaseOf('renewed')).lease_until;
    expect(await held.renew()).toBe(true);
    expect((await leaseOf('renewed')).lease_until).toBeGreaterThanOrEqual(before);
    await expect(b.claim('renewed', { owner: 'B', heartbeatMs: 0 })).rejects.toMatchObject({ code: 'RUN_LOCKED' });
    expect(await b.claimNext({ owner: 'B', heartbeatMs: 0 })).toBeNull();
  });

  it('commits called at once are applied one after the other, each of them: none is taken for an earlier one already applied', async () => {
    const held = await a.claim('concurrent', { owner: 'A', heartbeatMs: 0 });
    const budget = { limitUsd: null, budgetStopped: false, reserveStopped: false, paused: false, resumeEpoch: 0, reserveNoticeClaimed: false };
    await held.port.commit([{ op: 'insertRun', run: { id: 'concurrent', createdAt: 1, interactive: false, rootId: null, budget } }]);
    // Two callers of one port at the same moment (a host writing its own event beside its group commit).
    await Promise.all(
      ['first', 'second', 'third'].map((type, i) =>
        held.port.commit([{ op: 'appendEvent', row: { runId: 'concurrent', agentId: null, type, data: {}, at: i } }]),
      ),
    );
    expect((await a.reads.listEvents('concurrent')).map((e) => e.type)).toEqual(['first', 'second', 'third']);
    await held.release({ state: 'done' });
  });

  /**
   * Make the pool's next connections misbehave as a commit is sent: `how` is called with the client
   * when the query that commits goes out (a commit is one query: its fence, its rows, all in one).
   */
  function atCommit(store: PostgresStore, how: (client: pg.PoolClient, send: () => Promise<unknown>, text: string) => Promise<unknown>): () => void {
    const connect = store.pool.connect.bind(store.pool) as () => Promise<pg.PoolClient>;
    store.pool.connect = (async () => {
      const client = await connect();
      const query = client.query.bind(client) as (...args: unknown[]) => Promise<unknown>;
      // Every argument passes through (the pool's own queries pass a callback).
      (client as unknown as { query: (...args: unknown[]) => Promise<unknown> }).query = (...args) => {
        const config = args[0];
        const text = typeof config === 'string' ? config : (config as { text: string }).text;
        // A commit's query sets its statement timeout (its fence is an EXECUTE once prepared).
        return text.includes('SET LOCAL statement_timeout') ? how(client, () => query(...args), text) : query(...args);
      };
      return client;
    }) as typeof store.pool.connect;
    return () => void (store.pool.connect = connect as typeof store.pool.connect);
  }
  const pid = (client: pg.PoolClient) => (client as unknown as { processID: number }).processID;

  it("a commit that fails at its last statement leaves nothing in the host's write cache; one whose commit is cut is retried on a new connection and applied once, answered or not", async () => {
    const runId = 'cache';
    const budget = { limitUsd: null, budgetStopped: false, reserveStopped: false, paused: false, resumeEpoch: 0, reserveNoticeClaimed: false };
    const held = await a.claim(runId, { owner: 'A', heartbeatMs: 0 });
    const mail = {
      runId,
      to: 'x',
      from: 'user',
      fromName: 'user',
      type: 'instruction',
      priority: 'normal' as const,
      content: 'hi',
      interrupt: false,
      createdAt: 1,
    };
    await held.port.commit([
      { op: 'insertRun', run: { id: runId, createdAt: 1, interactive: false, rootId: 'x', budget } },
      { op: 'registerAgent', agent: agentRow('x', { runId }), firstInput: [{ role: 'user', content: 'task' }] },
      { op: 'enqueueMessage', message: { ...mail, id: 'cache-m1' } },
    ]);
    // Every op is applied (and staged in the cache); the batch fails at the multi-row insert of its
    // messages (a message id that exists), after its session rows were written in the transaction:
    // not a connection error, so it is not retried.
    await expect(
      held.port.commit([
        { op: 'appendSession', agentId: 'x', items: [{ role: 'assistant', content: 'lost 1' }] },
        { op: 'updateAgent', id: 'x', patch: { turns: 7 } },
        { op: 'enqueueMessage', message: { ...mail, id: 'cache-m1' } },
      ]),
    ).rejects.toMatchObject({ code: 'AGENT_EXISTS' });
    // The connection is killed as the commit is sent, once: nothing committed, so the retry applies it.
    let cuts = 0;
    let restore = atCommit(a, async (client, send) => {
      if (cuts++ === 0) await adminQuery('SELECT pg_terminate_backend($1)', [pid(client)]);
      return send();
    });
    try {
      await held.port.commit([
        {
          op: 'appendSession',
          agentId: 'x',
          items: [
            { role: 'assistant', content: 'two' },
            { role: 'assistant', content: 'three' },
          ],
        },
        { op: 'updateAgent', id: 'x', patch: { status: 'waiting', waitKind: 'agents' } },
      ]);
    } finally {
      restore();
    }
    expect(cuts).toBe(2);
    expect((await a.reads.loadSession('x')).map((i) => i.content)).toEqual(['task', 'two', 'three']);
    // The commit applied, its answer lost (the connection dies right after): the retry finds the
    // commit's number already written and applies nothing twice.
    let answersLost = 0;
    restore = atCommit(a, async (client, send) => {
      if (answersLost++ > 0) return send();
      await send();
      await adminQuery('SELECT pg_terminate_backend($1)', [pid(client)]);
      throw Object.assign(new Error('Connection terminated unexpectedly'), {});
    });
    try {
      await held.port.commit([
        { op: 'appendSession', agentId: 'x', items: [{ role: 'assistant', content: 'four' }] },
        { op: 'enqueueMessage', message: { ...mail, id: 'cache-m2', content: 'once' } },
      ]);
    } finally {
      restore();
    }
    // Sent twice: the retry's fence found the commit's number written, so it applied nothing.
    expect(answersLost).toBe(2);
    expect((await a.reads.loadSession('x')).map((i) => i.content)).toEqual(['task', 'two', 'three', 'four']);
    expect((await a.reads.listMessages(runId)).filter((m) => m.content === 'once')).toHaveLength(1);
    // No read in between: the next commit numbers session rows and merges the agent's row from the
    // cache, which holds what committed (not the failed batch's turns: 7). It goes out on the retry's
    // connection, whose PREPAREs ran before its fence refused the batch: they are known, and used
    // (the session rows' insert was among them; the agent's update was not).
    const kept: string[] = [];
    restore = atCommit(a, (_, send, text) => (kept.push(text), send()));
    try {
      await held.port.commit([
        { op: 'appendSession', agentId: 'x', items: [{ role: 'assistant', content: 'kept' }] },
        { op: 'updateAgent', id: 'x', patch: { stint: 2 } },
      ]);
    } finally {
      restore();
    }
    expect(kept).toHaveLength(1);
    expect(kept[0]).toMatch(/^EXECUTE /m);
    expect(kept[0]).not.toMatch(/^PREPARE \w+ AS INSERT INTO session_items/m);
    const seqs = await adminQuery(`SELECT seq FROM ${schema}.session_items WHERE agent_id = 'x' ORDER BY seq`);
    expect(seqs.rows.map((r: { seq: number }) => r.seq)).toEqual([0, 1, 2, 3, 4]);
    expect((await a.reads.loadSession('x')).map((i) => i.content)).toEqual(['task', 'two', 'three', 'four', 'kept']);
    expect((await a.reads.listAgents(runId))[0]).toMatchObject({ status: 'waiting', waitKind: 'agents', turns: 0, stint: 2 });
    await held.release({ state: 'done' });
  });

  it('a commit is retried only while the lease holds locally: past its local expiry it is LEASE_LOST, and nothing more leaves the host', async () => {
    const runId = 'expiring';
    let clock = 0;
    const held = await a.claim(runId, { owner: 'A', ttlMs: 1_000, heartbeatMs: 0, now: () => clock, wallClock: () => clock });
    const lostWith: string[] = [];
    held.port.guard!.onLost((err) => lostWith.push(err.code));
    expect(held.port.guard!.check()).toBeNull();
    // Every commit is cut: it is retried until the local expiry (the margin is 100 ms).
    const restore = atCommit(a, async (client, send) => {
      clock += 150;
      await adminQuery('SELECT pg_terminate_backend($1)', [pid(client)]);
      return send();
    });
    try {
      await expect(held.port.commit([{ op: 'appendEvent', row: { runId, agentId: null, type: 'never', data: {}, at: 1 } }])).rejects.toMatchObject({
        code: 'LEASE_LOST',
        message: expect.stringContaining('may have expired'),
      });
    } finally {
      restore();
    }
    expect(lostWith).toEqual(['LEASE_LOST']);
    expect(held.port.guard!.check()).toMatchObject({ code: 'LEASE_LOST' });
    await expect(held.port.listRuns()).rejects.toMatchObject({ code: 'LEASE_LOST' });
    expect(await a.reads.listEvents(runId)).toEqual([]);
  });

  it('a read of a hosted run cut by a reset connection is repeated on a new one (a resume does not fail on it)', async () => {
    const runId = 'reread';
    await runnableRun(runId);
    const proxy = await startFaultProxy(PG_URL);
    const via = await openPostgresStore({ url: proxy.url(PG_URL), schema });
    try {
      const held = await via.claim(runId, { owner: 'A', heartbeatMs: 0 });
      // The answer is on its way (delayed in the proxy) when every connection is reset.
      proxy.delay(150);
      const read = held.port.getRun(runId);
      await expect.poll(() => proxy.stats().held, { timeout: 5_000 }).toBeGreaterThan(0);
      proxy.dropAll();
      proxy.pass();
      expect(await read).toMatchObject({ id: runId });
      expect(proxy.stats().accepted).toBeGreaterThan(1);
      await held.release({ state: 'done' });
    } finally {
      await via.close();
      await proxy.close();
    }
  });

  it('the guard counts from when the claim was sent: a lease unrenewed for its TTL is lost locally before any other worker could claim it', async () => {
    let clock = 0;
    const held = await a.claim('local', { owner: 'A', ttlMs: 2_000, heartbeatMs: 0, now: () => clock, wallClock: () => clock });
    clock = 1_799;
    expect(held.check()).toBeNull();
    // Renewal moves the local expiry to when the renewal was sent, plus the TTL, less the margin.
    expect(await held.renew()).toBe(true);
    clock = 3_598;
    expect(held.check()).toBeNull();
    clock = 3_599;
    expect(held.check()).toMatchObject({ code: 'LEASE_LOST' });
    expect(held.lost).toMatchObject({ code: 'LEASE_LOST' });
    // Lost for good: the database still shows the lease (nobody claimed it), but this host is done.
    expect(await held.renew()).toBe(false);
    expect((await leaseOf('local')).owner).toBe('A');
  });

  it("a step forward of the database's clock expires a lease early: the host sees the step on its wall clock and stops before another worker can claim the run", async () => {
    let mono = 0;
    let wall = 1_000_000;
    const held = await a.claim('stepped', { owner: 'A', ttlMs: 2_000, heartbeatMs: 0, now: () => mono, wallClock: () => wall });
    mono += 100;
    wall += 100;
    expect(held.check()).toBeNull();
    // The machine's wall clock steps forward by the TTL (NTP, a VM resumed), and with it the
    // database's: the row's lease is over at once. The monotonic clock does not step.
    wall += 2_000;
    await a.pool.query("UPDATE run_leases SET lease_until = lease_until - 2000 WHERE run_id = 'stepped'");
    const next = await b.claim('stepped', { owner: 'B', ttlMs: 2_000, heartbeatMs: 0 });
    expect(next.epoch).toBe(held.epoch + 1);
    expect(held.check()).toMatchObject({ code: 'LEASE_LOST' });
    await next.release({ state: 'done' });

    // A step backward gives no extra time: the monotonic clock still ends the lease at its TTL less the margin.
    mono = 0;
    wall = 1_000_000;
    const back = await a.claim('stepped-back', { owner: 'A', ttlMs: 2_000, heartbeatMs: 0, now: () => mono, wallClock: () => wall });
    wall -= 600_000;
    mono = 1_799;
    expect(back.check()).toBeNull();
    mono = 1_800;
    expect(back.check()).toMatchObject({ code: 'LEASE_LOST' });

    // A renewal sent after a forward step counts from the stepped time: the lease goes on.
    mono = 0;
    wall = 1_000_000;
    const renewed = await a.claim('stepped-renewed', { owner: 'A', ttlMs: 2_000, heartbeatMs: 0, now: () => mono, wallClock: () => wall });
    wall += 1_000;
    mono += 10;
    expect(await renewed.renew()).toBe(true);
    wall += 1_700;
    mono += 1_700;
    expect(renewed.check()).toBeNull();
    wall += 100;
    expect(renewed.check()).toMatchObject({ code: 'LEASE_LOST' });
  });

  /** The lease child (pg/leaseChild.ts) committing rows of `runId` one after another, and a wait on its output. */
  function leaseChild(runId: string, ttl: number) {
    const child = spawn(process.execPath, [CHILD, PG_URL, schema, runId, String(ttl)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    let exitedEarly = false;
    const waiters = new Set<() => void>();
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      for (const w of waiters) w();
    });
    // 'close', not 'exit': the last lines may still be in the pipe when the process has exited.
    child.once('close', () => {
      exitedEarly = true;
      for (const w of waiters) w();
    });
    const waitFor = (pattern: RegExp) =>
      new Promise<RegExpExecArray>((resolve, reject) => {
        const check = () => {
          const m = pattern.exec(out);
          if (m) {
            waiters.delete(check);
            resolve(m);
          } else if (exitedEarly) {
            waiters.delete(check);
            reject(new Error(`child exited; output:\n${out.slice(-500)}`));
          }
        };
        waiters.add(check);
        check();
      });
    return { child, waitFor, output: () => out };
  }

  async function runnableRun(runId: string): Promise<void> {
    const setup = await a.claim(runId, { owner: 'setup', heartbeatMs: 0 });
    await setup.port.commit([
      {
        op: 'insertRun',
        run: {
          id: runId,
          createdAt: 1,
          interactive: false,
          rootId: null,
          budget: { limitUsd: null, budgetStopped: false, reserveStopped: false, paused: false, resumeEpoch: 0, reserveNoticeClaimed: false },
        },
      },
    ]);
    await setup.release({ state: 'runnable' });
  }

  it('a SIGSTOPped worker past its lease cannot write a row after waking', async () => {
    const runId = 'stopped';
    await runnableRun(runId);
    const ttl = 600;
    const { child, waitFor, output } = leaseChild(runId, ttl);
    await waitFor(/WROTE 5\n/);
    const childEpoch = (await leaseOf(runId)).epoch;
    child.kill('SIGSTOP');
    await expired(runId);
    // The claim waits for the stalled child's open transaction (if any) to be ended by the server.
    const next = await b.claim(runId, { owner: 'B', heartbeatMs: 0 });
    expect(next.epoch).toBe(childEpoch + 1);
    const rowsAtClaim = (await a.reads.listEvents(runId)).length;
    const exited = new Promise<number | null>((resolve) => child.once('close', resolve));
    child.kill('SIGCONT');
    const [, code] = (await waitFor(/STOPPED (\w+)\n/)) as unknown as [string, string];
    expect(code).toBe('LEASE_LOST');
    expect(await exited).toBe(0);
    const events = await a.reads.listEvents(runId);
    expect(events).toHaveLength(rowsAtClaim);
    // Every row the child wrote committed before the claim; the last acknowledged one is among them.
    const acked = Math.max(...[...output().matchAll(/WROTE (\d+)\n/g)].map((m) => Number(m[1])));
    expect(events.map((e) => e.data.n)).toContain(acked);
    await next.release({ state: 'done' });
  }, 30_000);

  it("a worker frozen in the middle of a commit holds no lock past its lease: the next claim waits at most the TTL, not the server's idle timeout", async () => {
    const runId = 'frozen';
    await runnableRun(runId);
    // Writing each row from the fifth on takes 150 ms on the server: the child is stopped while its
    // transaction is open. Every one, not just the fifth: a poll slowed by load missed a single
    // 150 ms sleep, and then waited for one that never came (the test timed out as the normal user
    // beside a full root run, load ~10).
    await adminQuery(`CREATE FUNCTION ${schema}.slow_write() RETURNS trigger AS $$ BEGIN
        IF NEW.run_id = 'frozen' AND NEW.type = 'child.write' AND (NEW.data::json->>'n')::int >= 5 THEN PERFORM pg_sleep(0.15); END IF;
        RETURN NEW; END $$ LANGUAGE plpgsql`);
    await adminQuery(`CREATE TRIGGER slow_write BEFORE INSERT ON ${schema}.events FOR EACH ROW EXECUTE FUNCTION ${schema}.slow_write()`);
    const ttl = 600;
    const { child, waitFor } = leaseChild(runId, ttl);
    await waitFor(/WROTE 4\n/);
    // Stopped while the server sleeps inside its insert (a condition polled on the server; the
    // commit's text names its rows' type, its statements are EXECUTEs).
    for (;;) {
      const { rows } = await adminQuery("SELECT 1 FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND query LIKE '%child.write%'");
      if (rows.length > 0) break;
    }
    child.kill('SIGSTOP');
    try {
      await expired(runId);
      // The server's idle-in-transaction timeout stays at its default (30 s here, or none): what
      // ends the frozen transaction is troupe's own, a third of the TTL.
      const started = Date.now();
      const next = await b.claim(runId, { owner: 'B', heartbeatMs: 0 });
      expect(Date.now() - started).toBeLessThan(ttl * 2);
      expect(next.epoch).toBeGreaterThan(1);
      await next.release({ state: 'done' });
    } finally {
      child.kill('SIGKILL');
      await adminQuery(`DROP TRIGGER slow_write ON ${schema}.events`);
    }
  }, 30_000);
});
