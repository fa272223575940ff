import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { startDashboard } from '../../src/dashboard/server.js';
import { runsSource } from '../../src/dashboard/sources.js';
import { forkRun, forksOf, originOf } from '../../src/fork/fork.js';
import { sqliteRuns } from '../../src/hosting/sqliteRuns.js';
import { createCoordinator } from '../../src/host/createCoordinator.js';
import { resumeCoordinator } from '../../src/host/resumeCoordinator.js';
import { scriptedModel, type Script } from '../../src/model/scriptedModel.js';
import { portOf, type StorePort, type WriteOp } from '../../src/store/port.js';
import type { SessionItem } from '../../src/model/types.js';
import { withJournal, type CommitEntry } from '../../src/fork/journal.js';
import { SUMMARY_HEADER } from '../../src/turn/compaction.js';
import { readRecording } from '../../src/replay/recording.js';
import { openStore } from '../../src/store/sqliteStore.js';
import { CALL_EVENT, COMMIT_EVENT, type EventRow } from '../../src/store/types.js';
import { defineTool } from '../../src/tools/defineTool.js';
import { openPostgresStore, type PostgresStore } from '../../src/store/postgres/store.js';
import { adminQuery, freshSchema, PG_URL, pgAvailable, pgTitle } from '../helpers/pg.js';
import { troupe } from '../helpers/cli.js';
import { call } from '../helpers/dashboard.js';
import { TERMINAL } from '../helpers/team.js';

const dbPath = () => join(mkdtempSync(join(tmpdir(), 'troupe-fork-')), 'run.db');
const look = defineTool({
  name: 'look',
  description: 'Look around.',
  parameters: { type: 'object' },
  risk: 'read_only',
  execute: () => ({ seen: 'a quiet room' }),
});

/** The lead spawns a worker and waits; the worker looks once, then its second call fails. */
const original: Script = {
  agents: {
    lead: [
      { tool: 'spawn_agent', args: { name: 'worker', task: 'look, then report' } },
      { tool: 'wait_for_agents', args: { reason: 'the worker' } },
      { tool: 'finish', args: { summary: 'the worker failed' } },
    ],
    worker: [{ tool: 'look', args: {} }, { error: { code: 'PROVIDER_BAD_REQUEST', message: 'the request was refused' } }],
  },
};

/** What the fork answers from the worker's turn 1 on: the worker reports, the lead finishes. */
const retold: Script = {
  agents: {
    worker: [{ tool: 'agent_finish', args: { summary: 'a quiet room' } }],
    lead: [{ tool: 'finish', args: { summary: 'the worker saw a quiet room' } }],
  },
};

/** Tables a run's rows can be in, by the column that names the run or one of its agents; others hold no run's rows. */
const UNRELATED = new Set(['boots', 'proactive_fires', 'provider_breaker', 'provider_quota', 'sqlite_sequence', 'troupe_schema']);
const KEYS = ['run_id', 'agent_id', 'session_id'];

/**
 * Every row of every table that belongs to run `runId` (by run id, or by one of its agents' ids),
 * as sorted JSON lines. `tables` lists each table with its columns; `select` reads rows by key.
 */
async function dumpRows(
  runId: string,
  tables: Map<string, string[]>,
  select: (table: string, key: string, ids: string[]) => Promise<unknown[]>,
): Promise<Record<string, string[]>> {
  const agents = ((await select('agents', 'run_id', [runId])) as { id: string }[]).map((a) => a.id);
  const dump: Record<string, string[]> = {};
  for (const [table, columns] of tables) {
    const key = table === 'runs' ? 'id' : KEYS.find((c) => columns.includes(c));
    if (key === undefined) {
      expect(UNRELATED.has(table), `table ${table} has no column naming a run or agent`).toBe(true);
      continue;
    }
    const rows = await select(table, key, key === 'agent_id' || key === 'session_id' ? agents : [runId]);
    dump[table] = rows.map((r) => JSON.stringify(r)).sort();
  }
  return dump;
}

interface Backend {
  /** A port to host `runId` with (SQLite: the file opened; PostgreSQL: the run claimed), and how to let it go. */
  host(runId: string): Promise<{ port: StorePort; release(): Promise<void> }>;
  dump(runId: string): Promise<Record<string, string[]>>;
}

function sqliteBackend(): Backend {
  const path = dbPath();
  return {
    host: () => {
      const store = openStore({ path });
      return Promise.resolve({ port: portOf(store), release: () => Promise.resolve(store.close()) });
    },
    dump: (runId) => {
      const db = new Database(path, { readonly: true });
      const names = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all() as { name: string }[]).map((t) => t.name);
      const tables = new Map(names.map((t) => [t, (db.prepare(`PRAGMA table_info(${t})`).all() as { name: string }[]).map((c) => c.name)]));
      const select = (table: string, key: string, ids: string[]) =>
        Promise.resolve(db.prepare(`SELECT * FROM ${table} WHERE ${key} IN (${ids.map(() => '?').join(',') || 'NULL'})`).all(...ids));
      return dumpRows(runId, tables, select).finally(() => db.close());
    },
  };
}

/**
 * A lead spawns a worker that fails at its turn 2; the run is forked at the worker's turn 1 and
 * continued with another answer: the fork ends otherwise, and the original's rows never change.
 */
async function forkBeforeTheFailure(backend: Backend) {
  const clock = new SimulatedClock();
  const runId = `run_original_${Math.random().toString(36).slice(2, 8)}`;
  const first = await backend.host(runId);
  const c = createCoordinator<StorePort>({ model: scriptedModel(original, { clock }), store: first.port, runId, clock, tools: [look], interactive: false });
  const rootId = await c.start({ name: 'lead', task: 'find out what the worker sees' });
  await c.waitFor(rootId, [...TERMINAL]);
  const originalIds = c.list().map((a) => a.id);
  expect(c.list().map((a) => [a.name, a.status])).toEqual([
    ['lead', 'completed'],
    ['worker', 'failed'],
  ]);
  await c.shutdown();
  await first.release();

  const before = await backend.dump(runId);
  const forkId = `${runId}_fork`;
  const second = await backend.host(forkId);
  const forked = await forkRun(second.port, runId, { at: { agent: 'worker', turn: 1 }, runId: forkId, now: clock.now() });
  if (!forked.ok) throw forked.error;
  expect(forked.origin).toMatchObject({ run: runId, agent: 'worker', agentId: originalIds[1], turn: 1 });

  // Right after the worker's turn 1: it has looked and is running; the lead waits; nothing failed yet.
  const at = await second.port.listAgents(forkId);
  expect(at.map((a) => [a.name, a.status, a.turns])).toEqual([
    ['lead', 'waiting', 2],
    ['worker', 'running', 1],
  ]);
  expect(at.filter((a) => originalIds.includes(a.id))).toEqual([]);
  // Its events are the original's up to the fork point (renamed), in order: the journal names each
  // commit's events by where they stand, so they are copied, not lost.
  const history = await second.port.historyOf(runId);
  const point = history.filter((e) => e.type === COMMIT_EVENT)[forked.origin.commits - 1]!;
  const upTo = history.slice(0, history.indexOf(point) + 1);
  const copied = (await second.port.historyOf(forkId)).filter((e) => e.type !== 'fork.origin');
  const shape = (e: EventRow) => [e.type, e.at, e.agentId === null ? null : e.agentId.startsWith(runId) ? 'run' : 'agent'];
  expect(copied.map(shape)).toEqual(upTo.map(shape));
  expect(copied.filter((e) => e.type === CALL_EVENT).length).toBeGreaterThan(0);
  const worker = at.find((a) => a.name === 'worker')!;
  expect((await second.port.loadSession(worker.id)).filter((i) => i.role === 'tool')).toHaveLength(1);

  const resumed = await resumeCoordinator<StorePort>({ store: second.port, runId: forkId, model: scriptedModel(retold, { clock }), clock, tools: [look] });
  // Waits on each agent's own status, not on a count of event-loop turns: over PostgreSQL under CI
  // load, 400 turns were not always enough for the lead's last turn (CI, stop 62).
  for (const a of resumed.list()) await resumed.waitFor(a.id, [...TERMINAL]);
  expect(resumed.list().map((a) => [a.name, a.status])).toEqual([
    ['lead', 'completed'],
    ['worker', 'completed'],
  ]);
  // The lead's notice names its own worker (the fork's id), not the original's.
  const notices = (await second.port.listMessages(forkId)).filter((m) => m.noticeKey !== null);
  expect(notices.map((m) => m.noticeKey)).toEqual([`notice:${worker.id}:0`]);
  await resumed.shutdown();

  expect(await originOf(second.port, forkId)).toMatchObject({ run: runId, turn: 1 });
  expect(await originOf(second.port, runId)).toBeNull();
  expect((await forksOf(second.port, runId)).map((f) => f.runId)).toEqual([forkId]);
  expect(await forksOf(second.port, forkId)).toEqual([]);
  await second.release();
  expect(await backend.dump(runId)).toEqual(before);
}

/** The lead looks twice; its third call overflows the context, so its session is compacted; it looks again and finishes. */
const compacting: Script = {
  agents: {
    lead: [
      { tool: 'look', args: {} },
      { tool: 'look', args: {} },
      { error: { code: 'PROVIDER_CONTEXT_OVERFLOW', status: 400 } },
      { text: 'the lead looked twice and saw a quiet room' },
      { tool: 'look', args: {} },
      { tool: 'finish', args: { summary: 'a quiet room' } },
    ],
  },
};

/** `port`, keeping each agent's session as its rows stood right after each of its turns committed (`<agent id>:<turn>`). */
function sessionsPerTurn(port: StorePort): { port: StorePort; asOf: Map<string, SessionItem[]> } {
  const asOf = new Map<string, SessionItem[]>();
  const commit = async (ops: readonly WriteOp[]) => {
    await port.commit(ops);
    for (const w of ops) {
      const turn = w.op === 'registerAgent' ? [w.agent.id, 0] : w.op === 'updateAgent' && w.patch.turns !== undefined ? [w.id, w.patch.turns] : null;
      // Right after the commit that first set the turn (a later patch may repeat it; forkRun counts the first).
      if (turn && !asOf.has(turn.join(':'))) asOf.set(turn.join(':'), await port.loadSession(String(turn[0])));
    }
  };
  const seen = new Proxy(port, {
    get: (target, key) => {
      if (key === 'commit') return commit;
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { port: seen, asOf };
}

/** The `compacting` run, recorded on `backend` through `sessionsPerTurn` and shut down (its host not let go). */
async function recordCompacting(backend: Backend, prefix: string) {
  const clock = new SimulatedClock();
  const runId = `${prefix}_${Math.random().toString(36).slice(2, 8)}`;
  const first = await backend.host(runId);
  const { port, asOf } = sessionsPerTurn(first.port);
  const c = createCoordinator<StorePort>({ model: scriptedModel(compacting, { clock }), store: port, runId, clock, tools: [look], interactive: false });
  const leadId = await c.start({ name: 'lead', task: 'look around' });
  expect((await c.waitFor(leadId, [...TERMINAL])).status).toBe('completed');
  await c.shutdown();
  return { clock, runId, first, asOf, leadId };
}

/**
 * The lead's session is compacted between its turns 2 and 3 (the rewrite deletes the rows of its
 * turns 1 and 2): forks at turns 1 and 2 (before it), 3 and 4 (after it) and a fork of the last fork
 * at turn 2 each hold the session as it was then; the original's rows stay byte-identical.
 */
async function forkAroundCompaction(backend: Backend) {
  const { clock, runId, first, asOf, leadId } = await recordCompacting(backend, 'run_compacted');
  const session = await first.port.loadSession(leadId);
  expect(JSON.stringify(session[0])).toContain(SUMMARY_HEADER);
  expect(session.filter((i) => i.role === 'tool' && i.name === 'look')).toHaveLength(1);
  // The rewrite's entry kept what it removed: both looks and their results.
  const entries = (await first.port.eventsOf(runId, COMMIT_EVENT)).map((e) => e.data as unknown as CommitEntry);
  const rewrite = entries.flatMap((e) => e.ops).find((w) => w.op === 'replaceSession');
  expect(rewrite).toMatchObject({ count: 1, removed: { head: 0, tail: 0, items: asOf.get(`${leadId}:2`) } });
  await first.release();

  const before = await backend.dump(runId);
  const second = await backend.host(`${runId}_forks`);
  /** The fork of `from` at the lead's `turn`: its lead's session, with the original's ids. */
  const forkAt = async (from: string, lead: string, turn: number, newRunId: string) => {
    const forked = await forkRun(second.port, from, { at: { agent: lead, turn }, runId: newRunId, now: clock.now() });
    if (!forked.ok) throw forked.error;
    const [forkedLead] = await second.port.listAgents(newRunId);
    const items = JSON.stringify(await second.port.loadSession(forkedLead!.id)).replaceAll(forkedLead!.id, leadId);
    return { id: forkedLead!.id, session: JSON.parse(items) as SessionItem[] };
  };
  for (const turn of [1, 2, 3, 4])
    expect((await forkAt(runId, leadId, turn, `${runId}_at${turn}`)).session, `turn ${turn}`).toEqual(asOf.get(`${leadId}:${turn}`));
  const last = await forkAt(runId, leadId, 4, `${runId}_last`);
  expect((await forkAt(`${runId}_last`, last.id, 2, `${runId}_again`)).session).toEqual(asOf.get(`${leadId}:2`));
  await second.release();
  expect(await backend.dump(runId)).toEqual(before);
}

/**
 * Another host rewrites the lead's session, keeping its length, after the fork read the journal and
 * before it read the rows (a run hosted elsewhere): the fork reads again and holds the session as
 * it was at the turn, not the rewritten rows.
 */
async function forkAcrossARewrite(backend: Backend) {
  const { clock, runId, first, asOf, leadId } = await recordCompacting(backend, 'run_rewritten');
  const lastTurn = Math.max(...[...asOf.keys()].filter((k) => k.startsWith(`${leadId}:`)).map((k) => Number(k.split(':')[1])));
  const racing = rewritingOnFirstRead(first.port, runId, leadId, clock);
  const forked = await forkRun(racing.port, runId, { at: { agent: leadId, turn: lastTurn }, runId: `${runId}_fork`, now: clock.now() });
  if (!forked.ok) throw forked.error;
  expect(racing.rewrites()).toBe(1);
  const [forkedLead] = await first.port.listAgents(`${runId}_fork`);
  const items = JSON.stringify(await first.port.loadSession(forkedLead!.id)).replaceAll(forkedLead!.id, leadId);
  expect(JSON.parse(items)).toEqual(asOf.get(`${leadId}:${lastTurn}`));
  expect(items).not.toContain('rewritten elsewhere');
  await first.release();
}

/**
 * `port`, where the first session read first commits, as another host would, a rewrite of the
 * lead's session that keeps its length: its last tool result's content becomes 'rewritten elsewhere'.
 */
function rewritingOnFirstRead(port: StorePort, runId: string, leadId: string, clock: SimulatedClock) {
  let rewrites = 0;
  const racing = new Proxy(port, {
    get: (target, key) => {
      if (key === 'loadSession')
        return async (agentId: string) => {
          if (rewrites === 0) {
            rewrites += 1;
            const now = await target.loadSession(leadId);
            const last = now.findLastIndex((i) => i.role === 'tool');
            const items = now.map((i, n) => (n === last ? { ...i, content: 'rewritten elsewhere' } : i));
            await target.commit(withJournal(target, runId, [{ op: 'replaceSession', agentId: leadId, items, replaced: now }], clock.now()));
          }
          return target.loadSession(agentId);
        };
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { port: racing, rewrites: () => rewrites };
}

/** The original run, recorded in a fresh file and let go. */
async function recorded() {
  const path = dbPath();
  const clock = new SimulatedClock();
  const store = openStore({ path });
  const c = createCoordinator({ model: scriptedModel(original, { clock }), store, clock, tools: [look], interactive: false });
  await c.waitFor(await c.start({ name: 'lead', task: 't' }), [...TERMINAL]);
  await c.shutdown();
  store.close();
  return { path, c };
}

describe('forkRun (SQLite)', () => {
  it("forks before a child's failure, continues with another answer and ends otherwise; the original's rows stay byte-identical", async () => {
    await forkBeforeTheFailure(sqliteBackend());
  });

  it('forks before and after a compaction rewrote the session, and a fork of a fork, each with the session as it was', async () => {
    await forkAroundCompaction(sqliteBackend());
  });

  it('a session rewritten by another host while the fork reads is read again: the fork holds the session as it was', async () => {
    await forkAcrossARewrite(sqliteBackend());
  });

  it('a replay whose session reads race a rewrite by another host reads again: it reads the tool results as recorded', async () => {
    const { clock, runId, first, leadId } = await recordCompacting(sqliteBackend(), 'run_replayed');
    const plain = await readRecording(first.port, runId);
    const racing = rewritingOnFirstRead(first.port, runId, leadId, clock);
    const raced = await readRecording(racing.port, runId);
    expect(racing.rewrites()).toBe(1);
    expect(JSON.stringify([...plain.toolResults])).toContain('run_completed');
    expect(raced.toolResults).toEqual(plain.toolResults);
    await first.release();
  });

  it('troupe fork prints the new run id; a turn never committed exits 4, a bad --at 2, and neither writes', async () => {
    const { path, c } = await recorded();
    const cwd = dirname(path);
    const made = await troupe(['fork', c.runId, '--at', 'worker:1', '--db', path], cwd);
    expect(made.stderr).toContain(`forked ${c.runId} at worker:1`);
    expect(made.code).toBe(0);
    const forkId = made.stdout.trim();
    const missing = await troupe(['fork', c.runId, '--at', 'worker:7', '--db', path], cwd);
    expect([missing.code, missing.stderr]).toEqual([4, expect.stringContaining('FORK_POINT_NOT_FOUND')]);
    expect((await troupe(['fork', c.runId, '--at', 'worker', '--db', path], cwd)).code).toBe(2);
    const after = openStore({ path });
    expect(after.listRuns().map((r) => r.id)).toEqual([c.runId, forkId]);
    expect(after.listAgents(forkId).map((a) => [a.name, a.status, a.turns])).toEqual([
      ['lead', 'waiting', 2],
      ['worker', 'running', 1],
    ]);
    expect(await originOf(portOf(after), forkId)).toMatchObject({ run: c.runId, agent: 'worker', turn: 1 });
    after.close();
  });

  it('the dashboard offers a fork after each committed turn, forks from the transcript, and shows forks and origins', async () => {
    const { path, c } = await recorded();
    const runStore = sqliteRuns(path);
    const handle = await startDashboard(runsSource(runStore), { port: 0 });
    const get = async (api: string) => JSON.parse((await call(handle.port, `${api}&token=${handle.token}`)).body) as Record<string, unknown>;
    const post = async (body: unknown) =>
      JSON.parse(
        (
          await call(handle.port, `/api/action?token=${handle.token}`, {
            method: 'POST',
            headers: { 'Content-Type': 'application/json' },
            body: JSON.stringify(body),
          })
        ).body,
      ) as { ok?: true; runId?: string; error?: { code: string } };
    try {
      const workerId = c.list()[1]!.id;
      const detail = (await get(`/api/agent?run=${c.runId}&agent=${workerId}`)) as {
        transcript: { role: string; name?: string }[];
        turnPoints: { turn: number; sessionLength: number }[];
      };
      // Turn 0 right after its task; turn 1 right after its look's result (turn 2, the failure, left no item).
      expect(detail.turnPoints.map((p) => p.turn)).toEqual([0, 1, 2]);
      const one = detail.turnPoints[1]!.sessionLength;
      expect(detail.transcript[one - 1]).toMatchObject({ role: 'tool', name: 'look' });
      expect(await get(`/api/team?run=${c.runId}`)).toMatchObject({ canFork: true, origin: null, forks: [] });

      const forked = await post({ run: c.runId, kind: 'fork', agent: workerId, turn: 1 });
      expect(forked).toMatchObject({ ok: true, runId: expect.stringMatching(/^run_/) });
      expect(await get(`/api/team?run=${c.runId}`)).toMatchObject({ forks: [{ runId: forked.runId, origin: { run: c.runId, agent: 'worker', turn: 1 } }] });
      expect(await get(`/api/team?run=${forked.runId}`)).toMatchObject({ origin: { run: c.runId, agentId: workerId, turn: 1 }, forks: [] });
      expect(await post({ run: c.runId, kind: 'fork', agent: workerId, turn: 9 })).toMatchObject({ error: { code: 'FORK_POINT_NOT_FOUND' } });
      expect(await post({ run: c.runId, kind: 'fork', agent: workerId, turn: 'one' })).toMatchObject({ error: { code: 'CONFIG_INVALID' } });
      expect((await runStore.reads.listRuns()).map((r) => r.id)).toEqual([c.runId, forked.runId]);
    } finally {
      await handle.close();
      await runStore.close();
    }
  });

  it('refuses an unknown run, agent or turn with typed errors, writing nothing', async () => {
    const { path, c } = await recorded();
    const store = openStore({ path });
    const runs = store.listRuns().length;
    const codes = await Promise.all([
      forkRun(store, 'run_nope', { at: { agent: 'worker', turn: 1 } }),
      forkRun(store, c.runId, { at: { agent: 'nobody', turn: 1 } }),
      forkRun(store, c.runId, { at: { agent: 'worker', turn: 3 } }),
      forkRun(store, c.runId, { at: { agent: 'worker', turn: -1 } }),
    ]);
    expect(codes.map((r) => (r.ok ? 'ok' : r.error.code))).toEqual(['RUN_NOT_FOUND', 'AGENT_NOT_FOUND', 'FORK_POINT_NOT_FOUND', 'CONFIG_INVALID']);
    expect(store.listRuns()).toHaveLength(runs);
    store.close();
  });
});

const available = await pgAvailable();

describe.skipIf(!available)(pgTitle(available, 'forkRun (PostgreSQL)'), () => {
  const { schema, drop } = freshSchema();
  let store: PostgresStore;
  beforeAll(async () => {
    store = await openPostgresStore({ url: PG_URL, schema });
  });
  afterAll(async () => {
    await store.close();
    await drop();
  });

  const pgBackend = (): Backend => ({
    host: async (runId) => {
      const lease = await store.claim(runId, { owner: 'test', ttlMs: 600_000, heartbeatMs: 0 });
      return { port: lease.port, release: async () => void (await lease.release({ state: 'done' })) };
    },
    dump: async (runId) => {
      const { rows } = await adminQuery(
        'SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = $1 ORDER BY table_name, ordinal_position',
        [schema],
      );
      const tables = new Map<string, string[]>();
      for (const r of rows as { table_name: string; column_name: string }[]) tables.set(r.table_name, [...(tables.get(r.table_name) ?? []), r.column_name]);
      const select = async (table: string, key: string, ids: string[]) =>
        (await adminQuery(`SELECT * FROM ${schema}.${table} WHERE ${key} = ANY($1)`, [ids])).rows;
      return dumpRows(runId, tables, select);
    },
  });

  it("forks before a child's failure, continues with another answer and ends otherwise; the original's rows stay byte-identical", async () => {
    await forkBeforeTheFailure(pgBackend());
  });

  it('forks before and after a compaction rewrote the session, and a fork of a fork, each with the session as it was', async () => {
    await forkAroundCompaction(pgBackend());
  });
});
