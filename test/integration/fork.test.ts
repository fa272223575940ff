import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { forkRun, forksOf, originOf } from '../../src/fork/fork.js';
import { createCoordinator } from '../../src/host/createCoordinator.js';
import { resumeCoordinator } from '../../src/host/resumeCoordinator.js';
import { scriptedModel, type Script } from '../../src/model/scriptedModel.js';
import { openStore } from '../../src/store/sqliteStore.js';
import { defineTool } from '../../src/tools/defineTool.js';
import { flush, TERMINAL } from '../helpers/team.js';

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
const UNRELATED = new Set(['boots', 'proactive_fires', 'sqlite_sequence']);

/** Every row of every table that belongs to run `runId` (by run id, or by one of its agents' ids), as text. */
function dumpRun(path: string, runId: string): Record<string, string[]> {
  const db = new Database(path, { readonly: true });
  try {
    const agents = (db.prepare('SELECT id FROM agents WHERE run_id = ?').all(runId) as { id: string }[]).map((a) => a.id);
    const tables = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all() as { name: string }[]).map((t) => t.name);
    const dump: Record<string, string[]> = {};
    for (const table of tables) {
      const columns = (db.prepare(`PRAGMA table_info(${table})`).all() as { name: string }[]).map((c) => c.name);
      const key = table === 'runs' ? 'id' : ['run_id', 'agent_id', 'session_id'].find((c) => columns.includes(c));
      if (key === undefined) {
        expect(UNRELATED.has(table), `table ${table} has no column naming a run or agent`).toBe(true);
        continue;
      }
      const ids = key === 'agent_id' || key === 'session_id' ? agents : [runId];
      const placeholders = ids.map(() => '?').join(',') || 'NULL';
      dump[table] = (db.prepare(`SELECT * FROM ${table} WHERE ${key} IN (${placeholders})`).all(...ids) as unknown[]).map((r) => JSON.stringify(r)).sort();
    }
    return dump;
  } finally {
    db.close();
  }
}

async function settle(c: { list(): { status: string; name: string }[] }, done: (agents: { status: string; name: string }[]) => boolean) {
  for (let i = 0; i < 200 && !done(c.list()); i++) await flush();
}

describe('forkRun (SQLite)', () => {
  it("forks before a child's failure, continues with another answer and ends otherwise; the original's rows stay byte-identical", async () => {
    const path = dbPath();
    const clock = new SimulatedClock();
    const store = openStore({ path });
    const c = createCoordinator({ model: scriptedModel(original, { clock }), store, clock, tools: [look], interactive: false });
    const rootId = await c.start({ name: 'lead', task: 'find out what the worker sees' });
    await c.waitFor(rootId, [...TERMINAL]);
    const runId = c.runId;
    expect(c.list().map((a) => [a.name, a.status])).toEqual([
      ['lead', 'completed'],
      ['worker', 'failed'],
    ]);
    await c.shutdown();
    store.close();

    const before = dumpRun(path, runId);
    const second = openStore({ path });
    const forked = await forkRun(second, runId, { at: { agent: 'worker', turn: 1 }, now: clock.now() });
    if (!forked.ok) throw forked.error;
    expect(forked.origin).toMatchObject({ run: runId, agent: 'worker', turn: 1 });

    // Right after the worker's turn 1: it has looked and is running; the lead waits; nothing failed yet.
    const at = second.listAgents(forked.runId);
    expect(at.map((a) => [a.name, a.status, a.turns])).toEqual([
      ['lead', 'waiting', 2],
      ['worker', 'running', 1],
    ]);
    expect(at.every((a) => !c.list().some((o) => o.id === a.id))).toBe(true);
    const worker = at.find((a) => a.name === 'worker')!;
    expect(second.loadSession(worker.id).filter((i) => i.role === 'tool')).toHaveLength(1);

    const resumed = await resumeCoordinator({ store: second, runId: forked.runId, model: scriptedModel(retold, { clock }), clock, tools: [look] });
    await settle(resumed, (agents) => agents.every((a) => (TERMINAL as readonly string[]).includes(a.status)));
    expect(resumed.list().map((a) => [a.name, a.status])).toEqual([
      ['lead', 'completed'],
      ['worker', 'completed'],
    ]);
    // The lead's notice names its own worker (the fork's id), not the original's.
    const notice = second.listMessages(forked.runId).find((m) => m.noticeKey !== null)!;
    expect(notice.noticeKey).toContain(worker.id);
    await resumed.shutdown();
    second.close();

    expect(dumpRun(path, runId)).toEqual(before);
    const third = openStore({ path });
    expect(await originOf(third, forked.runId)).toMatchObject({ run: runId, agentId: c.list()[1]!.id, turn: 1 });
    expect((await forksOf(third, runId)).map((f) => f.runId)).toEqual([forked.runId]);
    expect(await forksOf(third, forked.runId)).toEqual([]);
    third.close();
  });

  it('refuses an unknown run, agent or turn with typed errors, writing nothing', async () => {
    const path = dbPath();
    const clock = new SimulatedClock();
    const store = openStore({ path });
    const c = createCoordinator({ model: scriptedModel(original, { clock }), store, clock, tools: [look], interactive: false });
    await c.waitFor(await c.start({ name: 'lead', task: 't' }), [...TERMINAL]);
    await c.shutdown();
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
