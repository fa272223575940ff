/**
 * Workers on a real PostgreSQL: a submitted run is claimed, hosted to the end and released `done`;
 * an interactive run is released `parked` while its root waits on the user, and a request posted
 * from elsewhere (the inbox, NOTIFY) brings it back on a worker; a dead worker's run is taken over.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LeaseRow } from '../../src/store/postgres/lease.js';
import { openPostgresStore, type PostgresStore } from '../../src/store/postgres/store.js';
import { postRequest, readRequest } from '../../src/hosting/postgresInbox.js';
import { submitRun } from '../../src/worker/submit.js';
import { startWorker, type Worker } from '../../src/worker/worker.js';
import { freshSchema, PG_URL, pgAvailable, pgTitle } from '../helpers/pg.js';
import { teamModel, workTool } from '../helpers/pgTeam.js';

const available = await pgAvailable();

describe.skipIf(!available)(pgTitle(available, 'workers on PostgreSQL'), () => {
  const { schema, drop } = freshSchema();
  let store: PostgresStore;
  const workers: Worker[] = [];
  const stores: PostgresStore[] = [];
  beforeAll(async () => {
    store = await openPostgresStore({ url: PG_URL, schema });
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop()));
    await Promise.all(stores.map((s) => s.close()));
    await store?.close();
    await drop();
  });

  async function worker(extra: { ttlMs?: number; pollMs?: number } = {}): Promise<Worker> {
    const own = await openPostgresStore({ url: PG_URL, schema });
    stores.push(own);
    const w = await startWorker({
      store: own,
      concurrency: 4,
      // No poll within a test's time: every wake here comes through LISTEN/NOTIFY.
      pollMs: extra.pollMs ?? 60_000,
      ttlMs: extra.ttlMs ?? 3_000,
      hostOptions: () => ({ model: teamModel({ workers: 2, turns: 2 }), tools: [workTool] }),
    });
    workers.push(w);
    return w;
  }

  /** Resolve once the run's lease row satisfies `ok` (the workers' progress is observed in the database). */
  async function leaseWhere(runId: string, ok: (row: LeaseRow) => boolean, timeoutMs = 20_000): Promise<LeaseRow> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const row = (await store.leases()).find((l) => l.run_id === runId);
      if (row && ok(row)) return row;
      if (Date.now() > deadline) throw new Error(`lease of ${runId} never matched; last ${JSON.stringify(row)}`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }

  it('hosts a submitted run to the end on one of two workers and releases it done', async () => {
    await worker();
    await worker();
    const { runId, rootId } = await submitRun(store, { root: { name: 'lead', task: 'split the job' } });
    const row = await leaseWhere(runId, (l) => l.state === 'done');
    expect(row.owner).toBeNull();
    const agents = await store.reads.listAgents(runId);
    expect(agents.find((a) => a.id === rootId)).toMatchObject({ status: 'completed' });
    expect(agents.filter((a) => a.parentId === rootId).map((a) => a.status)).toEqual(['completed', 'completed']);
    // Each child's completion was told to the root exactly once.
    const notices = (await store.reads.listMessages(runId)).filter((m) => m.noticeKey !== null);
    expect(new Set(notices.map((m) => m.noticeKey)).size).toBe(notices.length);
    expect(notices).toHaveLength(2);
  });

  it('parks an interactive run waiting on its user, and a posted message brings it back on a worker', async () => {
    const { runId, rootId } = await submitRun(store, { root: { name: 'lead', task: 'talk to me' }, interactive: true });
    await leaseWhere(runId, (l) => l.state === 'parked' && l.owner === null);
    expect((await store.reads.listAgents(runId)).find((a) => a.id === rootId)).toMatchObject({ status: 'waiting', waitKind: 'user' });
    const id = await postRequest(store, { runId, kind: 'send', payload: { agent: 'lead', content: 'go ahead' }, at: Date.now() });
    const answered = await (async () => {
      for (;;) {
        const request = await readRequest(store, id);
        if (request?.result) return request.result;
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
    })();
    expect(answered).toMatchObject({ ok: true });
    // The root got the message, spawned its team, and everyone finished; the run parks again (interactive).
    await leaseWhere(runId, (l) => l.state !== 'runnable' && l.owner === null);
    await expect.poll(async () => (await store.reads.listAgents(runId)).find((a) => a.id === rootId)?.status, { timeout: 20_000 }).toBe('completed');
    const delivered = (await store.reads.listMessages(runId)).filter((m) => m.content === 'go ahead');
    expect(delivered).toHaveLength(1);
    expect(delivered[0]!.deliveredAt).not.toBeNull();
  });

  it('a submit whose root is refused leaves no run and no live lease: the id is taken again at once', async () => {
    const runId = `run_refused_${Date.now()}`;
    await expect(submitRun(store, { runId, root: { name: 'lead', task: '   ' } })).rejects.toMatchObject({ code: 'CONFIG_INVALID' });
    const refused = (await store.leases()).find((l) => l.run_id === runId);
    // Released, not held for the lease's minute; `done`, since no worker could ever host it.
    expect(refused).toMatchObject({ owner: null, state: 'done' });
    expect(await store.reads.getRun(runId)).toBeUndefined();
    const again = await submitRun(store, { runId, root: { name: 'lead', task: 'quick' } });
    expect(again.runId).toBe(runId);
    await leaseWhere(runId, (l) => l.state === 'done' && l.owner === null && l.epoch > refused!.epoch);
  });

  it("a submit under the id of a finished run is refused and leaves that run's lease as it was", async () => {
    const { runId } = await submitRun(store, { root: { name: 'lead', task: 'quick' } });
    const done = await leaseWhere(runId, (l) => l.state === 'done');
    await expect(submitRun(store, { runId, root: { name: 'lead', task: 'again' } })).rejects.toMatchObject({ code: 'CONFIG_INVALID' });
    expect((await store.leases()).find((l) => l.run_id === runId)).toEqual(done);
  });

  it('finds a run whose notification was lost through the slow poll', async () => {
    const { runId } = await submitRun(store, { root: { name: 'lead', task: 'quick' } });
    const done = await leaseWhere(runId, (l) => l.state === 'done');
    // Made runnable without NOTIFY (as when the listening connection was down): only a poll finds it.
    await store.pool.query("UPDATE run_leases SET state = 'runnable' WHERE run_id = $1", [runId]);
    await worker({ pollMs: 100 });
    const again = await leaseWhere(runId, (l) => l.state === 'done' && l.epoch > done.epoch);
    expect(again.owner).toBeNull();
  });
});
