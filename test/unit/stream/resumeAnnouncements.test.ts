/**
 * A resumed run's live stream re-announces (`agent.status` from null) only the agents whose status
 * it does not already show: one whose change a crash committed without the row that told it, or a
 * run streamed with none. Re-announcing every agent wrote a row per agent per resume (100,000 rows,
 * 9 MB, at 100,000 parked agents) that every later open checked again.
 */
import Database from 'better-sqlite3';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { createCoordinator } from '../../../src/host/createCoordinator.js';
import { resumeCoordinator } from '../../../src/host/resumeCoordinator.js';
import type { TroupeEvent } from '../../../src/host/runtime.js';
import { StreamRecorder } from '../../../src/host/views/streamRecorder.js';
import { scriptedModel, type Script } from '../../../src/model/scriptedModel.js';
import type { WriteOp } from '../../../src/store/port.js';
import { newAgentRow } from '../../../src/store/rows.js';
import { openStore } from '../../../src/store/sqliteStore.js';
import { flush } from '../../helpers/team.js';

const announce = (agentId: string, to: 'running' | 'waiting' | 'completed'): TroupeEvent => ({
  type: 'agent.status',
  agentId,
  name: agentId,
  from: null,
  to,
  at: 1,
});

/** A recorder resuming a run whose restored agents are a, b, c, e and f, with their rows' statuses (d is spawned after the resume). */
function resumedRecorder(unshown: () => Promise<Map<string, string | null> | null>) {
  const staged: WriteOp[] = [];
  const agents = new Map([
    ['a', 'waiting'],
    ['b', 'completed'],
    ['c', 'running'],
    ['e', 'completed'],
    ['f', 'running'],
  ]);
  const r = new StreamRecorder({
    runId: 'r',
    clock: new SimulatedClock(),
    lastSeq: () => Promise.resolve(10),
    restored: { agents, unshown },
    runExists: true,
    stage: (op) => staged.push(op),
    flushMs: 100,
    onError: () => undefined,
  });
  const taken = () => {
    const op = r.take();
    return op?.op === 'appendStream' ? op.rows.map((row) => [row.seq, row.agentId, row.data.from ?? null, row.data.to]) : [];
  };
  return { r, taken, agents };
}

/**
 * Against the rows (a waiting, b completed, c running, e completed), the agents whose status the
 * stream does not show as their last: b (it shows running), c (it shows none), e (it shows waiting;
 * e's row moved on after the resume read it, and its re-announcement carries what the stream shows).
 */
const unshown = () =>
  new Map<string, string | null>([
    ['b', 'running'],
    ['c', null],
    ['e', 'waiting'],
  ]);

describe("a resumed run's stream recorder", () => {
  it('drops a re-announcement the stream already shows, whether it came before or after the statuses were read; keeps the rest', async () => {
    const expected = [
      // b's status moved on since its last row; c never had one; d was never restored (spawned
      // since, so never shown); a's later change is a change.
      [11, 'b', null, 'completed'],
      [12, 'c', null, 'running'],
      [13, 'd', null, 'running'],
      [14, 'a', 'waiting', 'running'],
    ];
    // Before: the announcements wait in the buffer until the statuses are read.
    let resolve!: (s: Map<string, string | null>) => void;
    const early = resumedRecorder(() => new Promise((res) => (resolve = res)));
    early.r.record(announce('a', 'waiting'));
    early.r.record(announce('b', 'completed'));
    early.r.record(announce('c', 'running'));
    early.r.record(announce('d', 'running'));
    early.r.record(announce('e', 'waiting'));
    early.r.record({ type: 'agent.status', agentId: 'a', name: 'a', from: 'waiting', to: 'running', at: 2 });
    expect(early.taken()).toEqual([]);
    resolve(unshown());
    await flush(1);
    expect(early.taken()).toEqual(expected);
    // After.
    const late = resumedRecorder(() => Promise.resolve(unshown()));
    await flush(1);
    late.r.record(announce('a', 'waiting'));
    late.r.record(announce('b', 'completed'));
    late.r.record(announce('c', 'running'));
    late.r.record(announce('d', 'running'));
    late.r.record(announce('e', 'waiting'));
    late.r.record({ type: 'agent.status', agentId: 'a', name: 'a', from: 'waiting', to: 'running', at: 2 });
    expect(late.taken()).toEqual(expected);
    // An agent is re-announced once: a second announcement of it is not a repeat to drop.
    late.r.record(announce('a', 'waiting'));
    expect(late.taken()).toEqual([[15, 'a', null, 'waiting']]);
    // f's stream shows its row's status (running), but the restore announces it waiting: news.
    late.r.record(announce('f', 'waiting'));
    expect(late.taken()).toEqual([[16, 'f', null, 'waiting']]);
  });

  it.each([
    ['cannot be read', () => Promise.reject(new Error('damaged'))],
    ['show none (null: the stream has no status row)', () => Promise.resolve(null)],
  ] as const)('re-announces every agent when the statuses %s', async (_label, unshown) => {
    const { r, taken, agents } = resumedRecorder(unshown);
    r.record(announce('a', 'waiting'));
    await flush(1);
    // The restored ids are consumed: a map the wiring still holds keeps no id (100,000 at scale).
    expect(agents.size).toBe(0);
    r.record(announce('b', 'running'));
    expect(taken()).toEqual([
      [11, 'a', null, 'waiting'],
      [12, 'b', null, 'running'],
    ]);
  });
});

describe("which agents a file's stream does not show (Store.unshownStatuses)", () => {
  it("an owner's read, before and after a write, and an unchecked owner's, on a file reopened", () => {
    const path = join(mkdtempSync(join(tmpdir(), 'troupe-unshown-')), 't.db');
    const seed = openStore({ path });
    const budget = { limitUsd: null, budgetStopped: false, reserveStopped: false, paused: false, resumeEpoch: 0, reserveNoticeClaimed: false };
    for (const runId of ['r', 'quiet']) seed.insertRun({ id: runId, createdAt: 0, interactive: true, rootId: null, budget });
    const agent = (id: string, runId: string, status: 'running' | 'waiting' | 'completed') =>
      seed.registerAgent({ ...newAgentRow({ id, runId, name: id, parentId: null, depth: 0, task: 't', skills: [] }, 0), status }, [
        { role: 'user', content: 'go' },
      ]);
    agent('a', 'r', 'waiting');
    agent('b', 'r', 'completed');
    agent('c', 'r', 'running');
    agent('q', 'quiet', 'running');
    const status = (seq: number, agentId: string, to: string) => ({
      runId: 'r',
      seq,
      agentId,
      type: 'agent.status',
      data: { name: agentId, from: null, to },
      at: seq,
    });
    // a shown; b's completion never streamed; c never streamed at all; 'quiet' streamed nothing.
    seed.appendStream([status(1, 'a', 'waiting'), status(2, 'b', 'running')]);
    seed.close();
    const expected = new Map<string, string | null>([
      ['b', 'running'],
      ['c', null],
    ]);
    const owner = openStore({ path });
    expect(owner.unshownStatuses('r')).toEqual(expected);
    expect(owner.unshownStatuses('quiet')).toBeNull();
    owner.appendEvent({ runId: 'r', agentId: null, type: 'cli.run', data: {}, at: 1 });
    expect(owner.unshownStatuses('r')).toEqual(expected); // read after a write
    expect(owner.unshownStatuses('quiet')).toBeNull();
    owner.close();
    const unchecked = openStore({ path, verify: false });
    expect(unchecked.unshownStatuses('r')).toEqual(expected);
    unchecked.close();
  });
});

describe('resuming a run on a file', () => {
  const SCRIPT: Script = {
    agents: {
      lead: [
        { tool: 'spawn_agent', args: { name: 'w', task: 'part' } },
        { tool: 'wait_for_agents', args: { reason: 'report' } },
        { tool: 'respond_to_user', args: { message: 'ready' } },
      ],
      w: [{ tool: 'agent_finish', args: { summary: 'w done' } }],
    },
  };

  it('announces no agent after a clean stop, the one whose status row a crash lost, and every one when the stream is damaged', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'troupe-announce-')), 't.db');
    const clock = new SimulatedClock();
    const model = scriptedModel(SCRIPT, { clock });
    const store = openStore({ path });
    const first = createCoordinator({ model, store, clock, interactive: true });
    // Statuses as subscribers (and the stream) hear of them: once their commit is durable.
    const heard: string[] = [];
    first.subscribe((e) => void (e.type === 'agent.status' && heard.push(`${e.name} ${e.to}`)));
    const rootId = await first.start({ name: 'lead', task: 'split' });
    // The lead waits for w, wakes on its report and answers the user: the run is quiet.
    for (let i = 0; i < 100 && heard.length < 6; i++) await flush(1);
    expect(heard).toHaveLength(6);
    expect(heard.slice(-2)).toEqual(['lead running', 'lead waiting']);
    const childId = first.tree()[0]!.children[0]!.id;
    await first.shutdown();
    store.close();

    /** Resume and stop; the statuses announced (from null) in the rows the resume wrote. */
    const resumeOnce = async (options: { verify?: boolean } = {}) => {
      const again = openStore({ path, ...options });
      const last = again.lastStreamSeq(first.runId);
      const c = await resumeCoordinator({ model, store: again, clock, interactive: true });
      await c.shutdown();
      const rows = again.readStream(first.runId, last, 1_000).filter((r) => r.type === 'agent.status' && r.data.from === null);
      again.close();
      return rows.map((r) => [r.agentId, r.data.to]);
    };
    expect(await resumeOnce()).toEqual([]);
    // A crash after w's completion was committed, before the row that told it rode a commit: the
    // stream, and each agent's last streamed status that its append keeps, as they were before it.
    const raw = new Database(path);
    raw.prepare('DELETE FROM stream WHERE agent_id = ? AND type = \'agent.status\' AND data LIKE \'%"to":"completed"%\'').run(childId);
    expect(
      raw
        .prepare(
          `UPDATE stream_status SET (status, seq) = (SELECT json_extract(data, '$.to'), seq FROM stream
           WHERE agent_id = stream_status.agent_id AND type = 'agent.status' ORDER BY seq DESC LIMIT 1) WHERE agent_id = ?`,
        )
        .run(childId).changes,
    ).toBe(1);
    raw.close();
    expect(await resumeOnce()).toEqual([[childId, 'completed']]);
    expect(await resumeOnce()).toEqual([]);
    // A damaged status row, met by an owner that skips the open's check: the statuses cannot be
    // read, every agent is announced (with the check, the open refuses the file: damagedRows.test.ts).
    const damage = new Database(path);
    damage.prepare("UPDATE stream_status SET status = x'00' WHERE agent_id = ?").run(rootId);
    damage.close();
    expect((await resumeOnce({ verify: false })).sort()).toEqual(
      [
        [childId, 'completed'],
        [rootId, 'waiting'],
      ].sort(),
    );
  });
});
