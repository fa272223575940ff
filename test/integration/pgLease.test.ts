/**
 * Leases with fencing on a real PostgreSQL: exactly one host per run however claims race, a
 * second claimer gets RUN_LOCKED, and a worker that lost its run (it stalled past its lease and
 * another claimed it) cannot write a single row — in process, and with a real SIGSTOP.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import { openPostgresStore, type PostgresStore } from '../../src/store/postgres/store.js';
import { adminQuery, freshSchema, PG_URL, pgAvailable, pgTitle } from '../helpers/pg.js';
import { agentRow } from '../unit/store/storeContract.js';

const available = await pgAvailable();
const CHILD = fileURLToPath(new URL('../../dist/test/integration/pg/leaseChild.js', import.meta.url));

describe.skipIf(!available)(pgTitle(available, 'run leases on PostgreSQL'), () => {
  const { schema, drop } = freshSchema();
  let a: PostgresStore;
  let b: PostgresStore;
  beforeAll(async () => {
    a = await openPostgresStore({ url: PG_URL, schema });
    b = await openPostgresStore({ url: PG_URL, schema });
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await drop();
  });

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
      { op: 'insertRun', run: { id: 'fenced', createdAt: 1, interactive: false, rootId: null, budget: { limitUsd: null, budgetStopped: false, reserveStopped: false, paused: false, resumeEpoch: 0, reserveNoticeClaimed: false } } },
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
    await expect(old.port.commit([{ op: 'appendEvent', row: { runId: 'fenced', agentId: null, type: 'old-host', data: {}, at: 4 } }])).rejects.toMatchObject({ code: 'LEASE_LOST' });
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

  it('a commit that fails at its last statement or its COMMIT leaves nothing in the host\'s write cache: the next commit of the lease numbers and merges from what committed', async () => {
    const runId = 'cache';
    const budget = { limitUsd: null, budgetStopped: false, reserveStopped: false, paused: false, resumeEpoch: 0, reserveNoticeClaimed: false };
    const held = await a.claim(runId, { owner: 'A', heartbeatMs: 0 });
    const mail = { runId, to: 'x', from: 'user', fromName: 'user', type: 'instruction', priority: 'normal' as const, content: 'hi', interrupt: false, createdAt: 1 };
    await held.port.commit([
      { op: 'insertRun', run: { id: runId, createdAt: 1, interactive: false, rootId: 'x', budget } },
      { op: 'registerAgent', agent: agentRow('x', { runId }), firstInput: [{ role: 'user', content: 'task' }] },
      { op: 'enqueueMessage', message: { ...mail, id: 'cache-m1' } },
    ]);
    // Every op is applied (and staged in the cache); the batch fails at the multi-row insert of its
    // messages (a message id that exists), after its session rows were written in the transaction.
    await expect(
      held.port.commit([
        { op: 'appendSession', agentId: 'x', items: [{ role: 'assistant', content: 'lost 1' }] },
        { op: 'updateAgent', id: 'x', patch: { turns: 7 } },
        { op: 'enqueueMessage', message: { ...mail, id: 'cache-m1' } },
      ]),
    ).rejects.toMatchObject({ code: 'AGENT_EXISTS' });
    // The connection is killed as COMMIT is sent: everything was written but nothing committed.
    const connect = a.pool.connect.bind(a.pool) as () => Promise<pg.PoolClient>;
    a.pool.connect = (async () => {
      const client = await connect();
      const query = client.query.bind(client) as (text: string) => Promise<unknown>;
      (client as unknown as { query: (text: string, params?: unknown[]) => Promise<unknown> }).query = async (text, params) => {
        if (text === 'COMMIT') await adminQuery('SELECT pg_terminate_backend($1)', [(client as unknown as { processID: number }).processID]);
        return (query as (t: string, p?: unknown[]) => Promise<unknown>)(text, params);
      };
      return client;
    }) as typeof a.pool.connect;
    try {
      await expect(
        held.port.commit([
          { op: 'appendSession', agentId: 'x', items: [{ role: 'assistant', content: 'lost 2' }, { role: 'assistant', content: 'lost 3' }] },
          { op: 'updateAgent', id: 'x', patch: { status: 'waiting', waitKind: 'agents' } },
        ]),
      ).rejects.toMatchObject({ code: 'STORE_IO' });
    } finally {
      a.pool.connect = connect as typeof a.pool.connect;
    }
    expect((await a.reads.loadSession('x')).map((i) => i.content)).toEqual(['task']);
    // No read in between: the next commit computes session seqs and the agent's row from its cache.
    await held.port.commit([
      { op: 'appendSession', agentId: 'x', items: [{ role: 'assistant', content: 'kept' }] },
      { op: 'updateAgent', id: 'x', patch: { stint: 2 } },
    ]);
    const seqs = await adminQuery(`SELECT seq FROM ${schema}.session_items WHERE agent_id = 'x' ORDER BY seq`);
    expect(seqs.rows.map((r: { seq: number }) => r.seq)).toEqual([0, 1]);
    expect((await a.reads.loadSession('x')).map((i) => i.content)).toEqual(['task', 'kept']);
    expect((await a.reads.listAgents(runId))[0]).toMatchObject({ status: 'running', waitKind: null, turns: 0, stint: 2 });
    await held.release({ state: 'done' });
  });

  it('a SIGSTOPped worker past its lease cannot write a row after waking', async () => {
    const runId = 'stopped';
    const setup = await a.claim(runId, { owner: 'setup', heartbeatMs: 0 });
    await setup.port.commit([
      { op: 'insertRun', run: { id: runId, createdAt: 1, interactive: false, rootId: null, budget: { limitUsd: null, budgetStopped: false, reserveStopped: false, paused: false, resumeEpoch: 0, reserveNoticeClaimed: false } } },
    ]);
    await setup.release({ state: 'runnable' });
    const ttl = 600;
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
    expect(['LEASE_LOST', 'STORE_IO']).toContain(code);
    expect(await exited).toBe(0);
    const events = await a.reads.listEvents(runId);
    expect(events).toHaveLength(rowsAtClaim);
    // Every row the child wrote committed before the claim; the last acknowledged one is among them.
    const acked = Math.max(...[...out.matchAll(/WROTE (\d+)\n/g)].map((m) => Number(m[1])));
    expect(events.map((e) => e.data.n)).toContain(acked);
    await next.release({ state: 'done' });
  }, 30_000);
});
