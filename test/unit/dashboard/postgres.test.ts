/**
 * The dashboard on PostgreSQL: the read model answers the same over the PostgreSQL store's reads
 * as over an embedded store holding the same rows, and `troupe ui --db postgres://…` serves it
 * (actions on a run a worker hosts reach it through the inbox; a run nobody hosts is read only). Skipped with one line without a server (TROUPE_REQUIRE_PG=1 fails).
 */
import { describe, expect, it } from 'vitest';
import { ui } from '../../../src/cli/ui.js';
import { startWorker } from '../../../src/worker/worker.js';
import { submitRun } from '../../../src/worker/submit.js';
import { parks } from '../../helpers/models.js';
import { readAgent, readTeam, readTimeline } from '../../../src/dashboard/readModel.js';
import { memoryStore } from '../../../src/store/memoryStore.js';
import { portOf, type WriteOp } from '../../../src/store/port.js';
import { openPostgresStore } from '../../../src/store/postgres/store.js';
import { newAgentRow } from '../../../src/store/rows.js';
import { call, captureIo } from '../../helpers/dashboard.js';
import { freshSchema, PG_URL, pgAvailable, pgTitle } from '../../helpers/pg.js';

const RUN = 'run_pg';
const budget = { limitUsd: 1, budgetStopped: false, reserveStopped: true, paused: false, resumeEpoch: 0, reserveNoticeClaimed: true };
const lead = newAgentRow({ id: 'a_lead', runId: RUN, name: 'lead', parentId: null, depth: 0, task: 'Lead.', skills: [] }, 1_000);
const scout = newAgentRow({ id: 'a_scout', runId: RUN, name: 'scout', parentId: 'a_lead', depth: 1, task: 'Look.', skills: [] }, 1_100);
const event = (agentId: string | null, type: string, data: Record<string, unknown>, at: number): WriteOp => ({
  op: 'appendEvent',
  row: { runId: RUN, agentId, type, data, at },
});
const usage = (agentId: string, costUsd: number, at: number): WriteOp => ({
  op: 'recordUsage',
  row: { runId: RUN, agentId, purpose: 'main', model: 'm', inputTokens: 10, outputTokens: 5, cachedInputTokens: 0, costUsd, at },
});

/** One run: a lead waiting on a scout that calls a tool, is warned, trips the reserve and is stopped. */
const OPS: WriteOp[] = [
  { op: 'insertRun', run: { id: RUN, createdAt: 1_000, interactive: false, rootId: 'a_lead', budget } },
  { op: 'registerAgent', agent: lead, firstInput: [{ role: 'user', content: 'Lead.' }] },
  { op: 'registerAgent', agent: scout, firstInput: [{ role: 'user', content: 'Look.' }] },
  usage('a_lead', 0.1, 1_050),
  event('a_lead', 'tool.call', { tool: 'spawn_agent' }, 1_060),
  { op: 'updateAgent', id: 'a_lead', patch: { status: 'waiting', waitKind: 'agents', turns: 1, lastTool: 'wait_for_agents', updatedAt: 1_200 } },
  event('a_lead', 'agent.status', { from: 'running', to: 'waiting', waitKind: 'agents', error: null }, 1_200),
  usage('a_scout', 0.8, 1_300),
  event('a_scout', 'tool.call', { tool: 'search' }, 1_310),
  event('a_scout', 'budget.warning', { level: 'NOTICE', pct: 90, spentUsd: 0.9, limitUsd: 1 }, 1_320),
  event(null, 'budget.reserveTrip', { spentUsd: 0.95, limitUsd: 1, agentId: 'a_scout' }, 1_400),
  { op: 'updateAgent', id: 'a_scout', patch: { status: 'stopped', stopReason: 'reserve', turns: 1, updatedAt: 1_400 } },
  event('a_scout', 'agent.status', { from: 'running', to: 'stopped', waitKind: null, error: null }, 1_400),
  { op: 'appendSession', agentId: 'a_scout', items: [{ role: 'assistant', content: 'Found it.' }] },
  {
    op: 'enqueueMessage',
    message: {
      id: 'm1',
      runId: RUN,
      to: 'a_lead',
      from: 'a_scout',
      fromName: 'scout',
      type: 'notice',
      priority: 'normal',
      content: 'scout stopped',
      interrupt: false,
      createdAt: 1_400,
      noticeKey: 'notice:a_scout:0',
    },
  },
];

const available = await pgAvailable();

describe.skipIf(!available)(pgTitle(available, 'the dashboard on PostgreSQL'), () => {
  it('the team, the timeline and an agent read the same on PostgreSQL as on an embedded store with the same rows', async () => {
    const { schema, drop } = freshSchema();
    const store = await openPostgresStore({ url: PG_URL, schema });
    try {
      const lease = await store.claim(RUN, { owner: 'test', heartbeatMs: 0 });
      await lease.port.commit(OPS);
      const memory = portOf(memoryStore());
      await memory.commit(OPS);
      const team = await readTeam(store.reads);
      expect(team).toEqual(await readTeam(memory));
      expect(team.agents.map((a) => [a.name, a.status, a.waitingOn, a.spentUsd])).toEqual([
        ['lead', 'waiting', 'its agents', 0.1],
        ['scout', 'stopped', null, 0.8],
      ]);
      const timeline = await readTimeline(store.reads, RUN);
      // PostgreSQL says which lease epoch wrote the events (one hosting, epoch 1); memory does not.
      expect(timeline.hostings.map((h) => h.boot)).toEqual([lease.epoch]);
      expect({ ...timeline, hostings: timeline.hostings.map((h) => ({ ...h, boot: null })) }).toEqual(await readTimeline(memory, RUN));
      expect(timeline.lanes[1]!.marks.map((m) => m.kind)).toEqual(['model', 'tool', 'warning', 'trip', 'notice']);
      expect(await readAgent(store.reads, RUN, 'scout')).toEqual(await readAgent(memory, RUN, 'scout'));
      await lease.release({ state: 'done' });
    } finally {
      await store.close();
      await drop();
    }
  });

  it('troupe ui --db postgres://… serves the run read only until interrupted; a run id that does not exist is refused', async () => {
    const { schema, drop } = freshSchema();
    const db = `${PG_URL}?schema=${schema}`;
    const store = await openPostgresStore({ url: PG_URL, schema });
    try {
      const lease = await store.claim(RUN, { owner: 'test', heartbeatMs: 0 });
      await lease.port.commit(OPS);
      await lease.release({ state: 'done' });
      await expect(ui([], { db, port: '0', run: 'run_missing' }, captureIo())).rejects.toMatchObject({ code: 'RUN_NOT_FOUND' });

      const io = captureIo();
      const stop = new AbortController();
      const exited = ui([], { db, port: '0' }, io, stop.signal);
      await expect.poll(() => io.text().err).toMatch(/open http:\/\/127\.0\.0\.1:\d+\/\?token=/);
      const [, port, token] = /127\.0\.0\.1:(\d+)\/\?token=([\w-]+)/.exec(io.text().err)!;
      const team = JSON.parse((await call(Number(port), `/api/team?token=${token}`)).body) as { agents: { name: string }[]; live: boolean };
      expect(team.agents.map((a) => a.name)).toEqual(['lead', 'scout']);
      expect(team.live).toBe(false);
      const body = JSON.stringify({ run: RUN, kind: 'pause' });
      const refused = await call(Number(port), `/api/action?token=${token}`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Host: `127.0.0.1:${port}` },
        body,
      });
      expect(JSON.parse(refused.body)).toMatchObject({ error: { code: 'RUN_NOT_LIVE' } });
      stop.abort();
      expect(await exited).toBe(0);
      expect(io.text().out).toMatch(/^serving run run_pg of postgres:\/\//);
    } finally {
      await store.close();
      await drop();
    }
  });

  it('troupe ui --db postgres://…: an action on a run a worker hosts reaches that worker through the inbox and is answered', async () => {
    const { schema, drop } = freshSchema();
    const store = await openPostgresStore({ url: PG_URL, schema });
    const w = await startWorker({ store, pollMs: 100, hostOptions: () => ({ model: parks }) });
    const stop = new AbortController();
    try {
      const { runId } = await submitRun(store, { root: { name: 'lead', task: 'Stand by.' }, interactive: true });
      // Kept: hosted while its root waits on the user (a worker would let an idle run go). A keep
      // that meets the run while the worker lets it go (its last commits) is retried (the next poll).
      await expect.poll(() => w.keep(runId)).toBe(true);
      const io = captureIo();
      const exited = ui([], { db: `${PG_URL}?schema=${schema}`, port: '0' }, io, stop.signal);
      await expect.poll(() => io.text().err).toMatch(/open http:\/\/127\.0\.0\.1:\d+\/\?token=/);
      const [, port, token] = /127\.0\.0\.1:(\d+)\/\?token=([\w-]+)/.exec(io.text().err)!;
      const team = JSON.parse((await call(Number(port), `/api/team?token=${token}`)).body) as { live: boolean };
      expect(team.live).toBe(true);
      const answer = await call(Number(port), `/api/action?token=${token}`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Host: `127.0.0.1:${port}` },
        body: JSON.stringify({ run: runId, kind: 'pause' }),
      });
      expect(JSON.parse(answer.body)).toMatchObject({ ok: true });
      expect((await store.reads.getRun(runId))?.budget.paused).toBe(true);
      stop.abort();
      expect(await exited).toBe(0);
    } finally {
      stop.abort();
      await w.stop();
      await store.close();
      await drop();
    }
  });
});
