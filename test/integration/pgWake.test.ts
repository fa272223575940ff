/**
 * Wakes of a run that workers let go, on a real PostgreSQL:
 * - a message posted while the worker releases a run whose agents are all parked is not lost (the
 *   release is conditional on the run's wake sequence);
 * - a run released parked until a timer (its idle deadline) is claimed again once the timer is due,
 *   and not before;
 * - a connection dropped mid-commit (pg_terminate_backend) is retried on a new connection within
 *   the lease: the same coordinator goes on, nothing is applied or asked of the model twice;
 * - a connection dropped while a request is applied: the request is applied again on retry, and
 *   its message is queued once (it is keyed by the request).
 */
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Coordinator } from '../../src/host/createCoordinator.js';
import type { StorePort } from '../../src/store/port.js';
import { DB_NOW, type LeaseRow, type ReleaseState, type RunLease } from '../../src/store/postgres/lease.js';
import { openPostgresStore, type PostgresStore } from '../../src/store/postgres/store.js';
import { newAgentRow } from '../../src/store/rows.js';
import { postRequest, readRequest } from '../../src/hosting/postgresInbox.js';
import { submitRun } from '../../src/worker/submit.js';
import { startWorker, type Worker, type WorkerOptions } from '../../src/worker/worker.js';
import { freshSchema, PG_URL, pgAvailable, pgTitle } from '../helpers/pg.js';
import { teamModel, workTool } from '../helpers/pgTeam.js';

const available = await pgAvailable();
const BUDGET = { limitUsd: null, budgetStopped: false, reserveStopped: false, paused: false, resumeEpoch: 0, reserveNoticeClaimed: false };

describe.skipIf(!available)(pgTitle(available, 'wakes of released runs on PostgreSQL'), () => {
  const { schema, drop } = freshSchema();
  let store: PostgresStore;
  const workers: Worker[] = [];
  const stores: PostgresStore[] = [];
  beforeAll(async () => {
    store = await openPostgresStore({ url: PG_URL, schema });
  });
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.stop()));
  });
  afterAll(async () => {
    await Promise.all(stores.map((s) => s.close()));
    await store?.close();
    await drop();
  });

  /** A worker on its own store; `wrap` may stand between it and the store (to act at a precise point). */
  async function worker(extra: Partial<WorkerOptions> & { wrap?: (s: PostgresStore) => PostgresStore } = {}): Promise<Worker> {
    const own = await openPostgresStore({ url: PG_URL, schema });
    stores.push(own);
    const { wrap, ...rest } = extra;
    const w = await startWorker({
      concurrency: 2,
      // No poll within a test's time unless a test asks: wakes come through LISTEN/NOTIFY.
      pollMs: 60_000,
      ttlMs: 3_000,
      hostOptions: () => ({ model: teamModel({ workers: 2, turns: 2 }), tools: [workTool] }),
      ...rest,
      store: wrap ? wrap(own) : own,
    });
    workers.push(w);
    return w;
  }

  async function leaseWhere(runId: string, ok: (row: LeaseRow) => boolean, timeoutMs = 20_000): Promise<LeaseRow> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const row = (await store.leases()).find((l) => l.run_id === runId);
      if (row && ok(row)) return row;
      if (Date.now() > deadline) throw new Error(`lease of ${runId} never matched; last ${JSON.stringify(row)}`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }

  async function answerOf(id: number, timeoutMs = 20_000) {
    for (const deadline = Date.now() + timeoutMs; ;) {
      const request = await readRequest(store, id);
      if (request?.result) return request.result;
      if (Date.now() > deadline) throw new Error(`request ${id} was never answered (a lost wake)`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }

  it('a message posted while the worker releases a parked run is handled, not lost', async () => {
    const { runId, rootId } = await submitRun(store, { root: { name: 'lead', task: 'talk to me' }, interactive: true });
    let posted: number | null = null;
    const releases: { state: ReleaseState['state']; ifWakeSeq: number | undefined; released: boolean }[] = [];
    // The worker's lease, with a message posted (committed, NOTIFY sent) between the worker's read
    // of the wake sequence and its release: the race the conditional release closes.
    const withRace = (lease: RunLease): RunLease =>
      new Proxy(lease, {
        get(target, key, receiver) {
          if (key !== 'release') return Reflect.get(target, key, receiver) as unknown;
          return async (state: ReleaseState, ifWakeSeq?: number) => {
            if (posted === null && state.state === 'parked')
              posted = await postRequest(store, { runId, kind: 'send', payload: { agent: 'lead', content: 'go ahead' }, at: Date.now() });
            const released = await target.release(state, ifWakeSeq);
            releases.push({ state: state.state, ifWakeSeq, released });
            return released;
          };
        },
      });
    await worker({
      wrap: (own) => ({
        ...own,
        claimNext: async (options) => {
          const lease = await own.claimNext(options);
          return lease && withRace(lease);
        },
      }),
    });
    await expect.poll(() => posted, { timeout: 20_000 }).not.toBeNull();
    expect(await answerOf(posted!)).toMatchObject({ ok: true });
    // The release raced by the message was refused; the run was hosted on and the message handled.
    expect(releases[0]).toMatchObject({ state: 'parked', released: false });
    await expect.poll(async () => (await store.reads.listAgents(runId)).find((a) => a.id === rootId)?.status, { timeout: 20_000 }).toBe('completed');
    const delivered = (await store.reads.listMessages(runId)).filter((m) => m.content === 'go ahead');
    expect(delivered).toHaveLength(1);
    expect(delivered[0]!.deliveredAt).not.toBeNull();
    await leaseWhere(runId, (l) => l.owner === null && l.state !== 'runnable');
  });

  it('a run released parked until its idle deadline is claimed again once that timer is due, not before', async () => {
    const runId = 'timer';
    // A run whose root waits on its agents with a deadline (already run out in the root's own
    // clock: it resumes as soon as it is hosted), released parked until the deadline.
    const seed = await store.claim(runId, { owner: 'seed', heartbeatMs: 0 });
    const root = newAgentRow({ id: 'root', runId, name: 'lead', parentId: null, depth: 0, task: 'lead', skills: [] }, 0);
    await seed.port.commit([
      { op: 'insertRun', run: { id: runId, createdAt: 0, interactive: false, rootId: 'root', budget: BUDGET } },
      {
        op: 'registerAgent',
        agent: { ...root, status: 'waiting', waitKind: 'agents', waitingSince: Date.now() - 60_000, waitTimeoutMs: 1_000 },
        firstInput: [{ role: 'user', content: 'lead' }],
      },
    ]);
    const { rows } = await store.pool.query<{ now: number }>('SELECT (extract(epoch from clock_timestamp()) * 1000)::bigint + 3600000 AS now');
    expect(await seed.release({ state: 'parked', wakeAt: Number(rows[0]!.now) })).toBe(true);
    // Not due: nobody may claim it.
    expect(await store.claimNext({ owner: 'early', heartbeatMs: 0 })).toBeNull();
    const hosts: string[] = [];
    await worker({
      pollMs: 50,
      hostOptions: () => ({ model: teamModel({ workers: 0, turns: 0 }), tools: [workTool] }),
      onHost: (_c, lease) => hosts.push(`${lease.epoch}`),
    });
    // The timer comes due (the lease times are the database's clock: the test moves the deadline).
    await store.pool.query('UPDATE run_leases SET wake_at = 0 WHERE run_id = $1', [runId]);
    const done = await leaseWhere(runId, (l) => l.state === 'done' && l.owner === null);
    expect(done.epoch).toBe(2);
    expect(hosts).toEqual(['2']);
    const agents = await store.reads.listAgents(runId);
    expect(agents[0]).toMatchObject({ status: 'completed' });
  });

  it('a run released parked until an agent sleep_until deadline is claimed within a second of it, long before the next poll', async () => {
    const runId = 'sleeper';
    const dbNow = async () => Number((await store.pool.query<{ now: string }>(`SELECT ${DB_NOW} AS now`)).rows[0]!.now);
    const seed = await store.claim(runId, { owner: 'seed', heartbeatMs: 0 });
    const root = newAgentRow({ id: 'sleeper-root', runId, name: 'lead', parentId: null, depth: 0, task: 'lead', skills: [] }, 0);
    const wakeAt = (await dbNow()) + 1_500;
    await seed.port.commit([
      { op: 'insertRun', run: { id: runId, createdAt: 0, interactive: false, rootId: 'sleeper-root', budget: BUDGET } },
      {
        op: 'registerAgent',
        agent: { ...root, status: 'waiting', waitKind: 'timer', waitingSince: wakeAt - 1_500, waitTimeoutMs: 1_500 },
        firstInput: [{ role: 'user', content: 'lead' }],
      },
    ]);
    expect(await seed.release({ state: 'parked', wakeAt })).toBe(true);
    const hostedAt: number[] = [];
    let calls = 0;
    // The poll is a minute away: only the worker's timer for the parked deadline can claim it in time.
    await worker({
      pollMs: 60_000,
      hostOptions: () => ({ model: teamModel({ workers: 0, turns: 0, onCall: () => void (calls += 1) }), tools: [workTool] }),
      onHost: () => void dbNow().then((at) => hostedAt.push(at)),
    });
    await leaseWhere(runId, (l) => l.state === 'done' && l.owner === null);
    // One wake: one model call. (Under load the worker may host the run twice within its claim — the
    // first coordinator found idle before its overdue timer fired, issue 33 notes — but never wakes it twice.)
    expect(calls).toBe(1);
    expect(hostedAt.length).toBeGreaterThanOrEqual(1);
    expect(hostedAt[0]! - wakeAt).toBeGreaterThanOrEqual(0);
    expect(hostedAt[0]! - wakeAt).toBeLessThan(1_000);
    expect((await store.reads.listAgents(runId))[0]).toMatchObject({ status: 'completed' });
  });

  /** Model requests as (agent, conversation length): a turn asked of the model twice shows up twice. */
  function countedModel() {
    const asked: string[] = [];
    const model = teamModel({ workers: 2, turns: 2, onCall: (r) => asked.push(`${r.agent.id}:${r.messages.length}`) });
    return { model, repeats: () => asked.filter((k, i) => asked.indexOf(k) !== i), asked };
  }

  it('a connection dropped mid-commit: the commit is retried on a new connection, the same coordinator goes on, and no turn is asked of the model twice', async () => {
    const { runId, rootId } = await submitRun(store, { root: { name: 'lead', task: 'split the job' } });
    const committed = await store.reads.loadSession(rootId);
    // Hold the session table so the worker's first commit blocks inside its transaction.
    const blocker = new pg.Client({ connectionString: PG_URL });
    blocker.on('error', () => undefined);
    await blocker.connect();
    await blocker.query('BEGIN');
    await blocker.query(`LOCK TABLE ${schema}.session_items IN SHARE MODE`);
    const blockerPid = (await blocker.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    const hosted: Coordinator<StorePort>[] = [];
    const counted = countedModel();
    await worker({ onHost: (c) => hosted.push(c), hostOptions: () => ({ model: counted.model, tools: [workTool] }) });
    let victim: number | undefined;
    for (const deadline = Date.now() + 20_000; victim === undefined && Date.now() < deadline;) {
      // Not on the blocker's connection: pg_stat_activity is a snapshot for the length of a transaction.
      const { rows } = await store.pool.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))', [blockerPid]);
      victim = rows[0]?.pid;
      if (victim === undefined) await new Promise((resolve) => setTimeout(resolve, 25));
    }
    expect(victim, 'the worker never committed').toBeDefined();
    const before = await store.leases();
    // The connection drops while the worker's commit is open: it did not apply (the transaction
    // had not committed), and the worker retries it on a new connection.
    await blocker.query('SELECT pg_terminate_backend($1)', [victim]);
    await blocker.query('ROLLBACK');
    await blocker.end();
    const done = await leaseWhere(runId, (l) => l.state === 'done' && l.owner === null, 30_000);
    // One hosting, one coordinator, one epoch: a transient error is not a failover.
    expect(hosted).toHaveLength(1);
    expect(done.epoch).toBe(before.find((l) => l.run_id === runId)!.epoch);
    expect(counted.repeats()).toEqual([]);
    const agents = await store.reads.listAgents(runId);
    expect(agents.map((a) => a.status)).toEqual(['completed', 'completed', 'completed']);
    // What had committed is still there, once; each child's completion was told exactly once.
    expect((await store.reads.loadSession(rootId)).slice(0, committed.length)).toEqual(committed);
    const notices = (await store.reads.listMessages(runId)).filter((m) => m.noticeKey !== null);
    expect(notices).toHaveLength(2);
    expect(new Set(notices.map((m) => m.noticeKey)).size).toBe(2);
    for (const a of agents) {
      const items = await store.reads.loadSession(a.id);
      const calls = items.flatMap((i) => (i.role === 'assistant' ? (i.toolCalls ?? []).map((t) => t.id) : []));
      expect(new Set(calls).size, `${a.name}: a tool call appears twice in its session`).toBe(calls.length);
    }
  });

  it('a connection dropped while the worker answers a send: one coordinator at a time, the message queued once, the sender answered', async () => {
    const { runId, rootId } = await submitRun(store, { root: { name: 'lead', task: 'talk to me' }, interactive: true });
    // The answer's UPDATE of the inbox sleeps on the server, so its connection can be killed in it.
    await store.pool.query(`CREATE FUNCTION ${schema}.slow_answer() RETURNS trigger AS $$ BEGIN
        IF NEW.done_at IS NOT NULL AND OLD.done_at IS NULL THEN PERFORM pg_sleep(0.3); END IF; RETURN NEW; END $$ LANGUAGE plpgsql`);
    await store.pool.query(`CREATE TRIGGER slow_answer BEFORE UPDATE ON ${schema}.inbox FOR EACH ROW EXECUTE FUNCTION ${schema}.slow_answer()`);
    const hosted: Coordinator<StorePort>[] = [];
    /** Coordinators alive when a new one is hosted (each must have been shut down first). */
    const overlaps: number[] = [];
    const counted = countedModel();
    await worker({
      onHost: (c) => {
        overlaps.push(hosted.filter((h) => h.health().ok).length);
        hosted.push(c);
      },
      hostOptions: () => ({ model: counted.model, tools: [workTool] }),
    });
    // Parked on its user (interactive): the run waits for the request.
    await expect.poll(async () => (await store.reads.listAgents(runId)).find((a) => a.id === rootId)?.status, { timeout: 20_000 }).toBe('waiting');
    const id = await postRequest(store, { runId, kind: 'send', payload: { agent: 'lead', content: 'go ahead' }, at: Date.now() });
    let killed = 0;
    for (const deadline = Date.now() + 20_000; killed === 0 && Date.now() < deadline;) {
      const { rows } = await store.pool.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND query LIKE '%UPDATE inbox%'");
      for (const r of rows) await store.pool.query('SELECT pg_terminate_backend($1)', [r.pid]);
      killed = rows.length;
    }
    expect(killed, 'the answer was never written').toBeGreaterThan(0);
    expect(await answerOf(id)).toMatchObject({ ok: true });
    await store.pool.query(`DROP TRIGGER slow_answer ON ${schema}.inbox`);
    await expect.poll(async () => (await store.reads.listAgents(runId)).find((a) => a.id === rootId)?.status, { timeout: 20_000 }).toBe('completed');
    const sent = (await store.reads.listMessages(runId)).filter((m) => m.content === 'go ahead');
    expect(sent).toHaveLength(1);
    expect((await readRequest(store, id))?.result?.messageId).toBe(sent[0]!.id);
    expect((await store.reads.loadSession(rootId)).filter((i) => i.role === 'user' && i.content === 'go ahead')).toHaveLength(1);
    expect(overlaps.every((n) => n === 0)).toBe(true);
    expect(counted.repeats()).toEqual([]);
  });
});
