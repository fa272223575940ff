/**
 * The live stream (issue 38): the owner records every event its subscribers see, numbered per run
 * and written with the group commit (pieces of answers merged, never a commit per token); a reader
 * follows it from any seq to the run's end, with no gap and no repeat.
 */
import Database from 'better-sqlite3';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import type { TroupeEvent } from '../../../src/host/runtime.js';
import { createCoordinator } from '../../../src/host/createCoordinator.js';
import { resumeCoordinator } from '../../../src/host/resumeCoordinator.js';
import { scriptedModel, type Script } from '../../../src/model/scriptedModel.js';
import type { Model, ModelDelta } from '../../../src/model/types.js';
import { memoryStore } from '../../../src/store/memoryStore.js';
import { portOf, type WriteOp } from '../../../src/store/port.js';
import { openStore } from '../../../src/store/sqliteStore.js';
import type { RunRow, StreamRow } from '../../../src/store/types.js';
import { followRun, toStreamEvent } from '../../../src/stream/follow.js';
import { StreamRecorder } from '../../../src/host/views/streamRecorder.js';
import { flush, TERMINAL } from '../../helpers/team.js';

const delta = (agentId: string, d: ModelDelta, at = 1): TroupeEvent => ({ type: 'agent.delta', agentId, name: agentId, delta: d, at });
const status = (agentId: string, to: 'running' | 'completed', at = 1): TroupeEvent => ({ type: 'agent.status', agentId, name: agentId, from: null, to, at });

function recorder(lastSeq = 0, flushMs = 100, runExists = true) {
  const clock = new SimulatedClock();
  const staged: WriteOp[] = [];
  const r = new StreamRecorder({
    runId: 'r',
    clock,
    lastSeq: () => Promise.resolve(lastSeq),
    runExists,
    stage: (op) => staged.push(op),
    flushMs,
    onError: () => undefined,
  });
  const rows = () => staged.flatMap((op) => (op.op === 'appendStream' ? op.rows : []));
  return { r, clock, staged, rows };
}

describe('StreamRecorder', () => {
  it("merges an agent's pieces until another event of that agent, and numbers rows after the run's last seq", async () => {
    const { r, rows } = recorder(41);
    await flush(1);
    r.record(delta('a', { kind: 'text', text: 'Hel' }));
    r.record(delta('b', { kind: 'text', text: 'Bon' }));
    r.record(delta('a', { kind: 'text', text: 'lo' }));
    r.record(delta('a', { kind: 'toolCall', index: 0, name: 'work', text: '{"st' }));
    r.record(delta('a', { kind: 'toolCall', index: 0, text: 'ep":1}' }));
    r.record(status('a', 'completed'));
    r.record(delta('a', { kind: 'text', text: 'again' }));
    r.record(delta('b', { kind: 'text', text: 'jour' }));
    const op = r.take();
    expect(op).not.toBeNull();
    const taken = op!.op === 'appendStream' ? op!.rows : [];
    expect(taken.map((row) => [row.seq, row.agentId, row.type, row.data.delta ?? row.data.to])).toEqual([
      [42, 'a', 'agent.delta', { kind: 'text', text: 'Hello' }],
      [43, 'b', 'agent.delta', { kind: 'text', text: 'Bonjour' }],
      [44, 'a', 'agent.delta', { kind: 'toolCall', index: 0, name: 'work', text: '{"step":1}' }],
      [45, 'a', 'agent.status', 'completed'],
      [46, 'a', 'agent.delta', { kind: 'text', text: 'again' }],
    ]);
    expect(rows()).toEqual([]);
    expect(r.take()).toBeNull();
  });

  it('stages buffered rows itself once flushMs passes with no commit to ride, and what is left at close', async () => {
    const { r, clock, rows } = recorder(0, 100);
    await flush(1);
    r.record(status('a', 'running'));
    clock.increment(99);
    expect(rows()).toEqual([]);
    clock.increment(1);
    expect(rows().map((row) => row.seq)).toEqual([1]);
    r.record(status('a', 'completed'));
    await r.close();
    expect(rows().map((row) => row.seq)).toEqual([1, 2]);
    r.record(status('a', 'running'));
    clock.increment(1_000);
    expect(rows()).toHaveLength(2);
  });

  it("holds a new run's first events until its row is staged, and writes nothing for a run that never starts", async () => {
    const { r, clock, rows } = recorder(0, 100, false);
    await flush(1);
    r.record({ type: 'mcp.server', server: 'web', state: 'connected', tools: 3, error: null, at: 1 });
    clock.increment(1_000);
    expect(r.take()).toBeNull();
    expect(rows()).toEqual([]);
    r.runStarted();
    clock.increment(100);
    expect(rows().map((row) => [row.seq, row.type])).toEqual([[1, 'mcp.server']]);

    const never = recorder(0, 100, false);
    await flush(1);
    never.r.record({ type: 'mcp.server', server: 'web', state: 'failed', tools: 0, error: 'gone', at: 1 });
    await never.r.close();
    expect(never.rows()).toEqual([]);
  });

  it('waits for the last seq before numbering anything', async () => {
    let resolve!: (n: number) => void;
    const staged: WriteOp[] = [];
    const r = new StreamRecorder({
      runId: 'r',
      clock: new SimulatedClock(),
      lastSeq: () => new Promise((res) => (resolve = res)),
      runExists: true,
      stage: (op) => staged.push(op),
      flushMs: 100,
      onError: () => undefined,
    });
    r.record(status('a', 'running'));
    expect(r.take()).toBeNull();
    resolve(7);
    await flush(1);
    const op = r.take();
    expect(op?.op === 'appendStream' && op.rows.map((row) => row.seq)).toEqual([8]);
  });
});

const SCRIPT: Script = {
  agents: {
    lead: [
      { tool: 'spawn_agent', args: { name: 'w', task: 'part' } },
      { tool: 'wait_for_agents', args: { reason: 'report' } },
      { tool: 'finish', args: { summary: 'done' } },
    ],
    w: [{ tool: 'agent_finish', args: { summary: 'w done' } }],
  },
};

/** The scripted model, streaming each answer's text in two pieces first. */
function streaming(script: Script, clock: SimulatedClock): Model {
  const scripted = scriptedModel(script, { clock });
  return {
    name: 'streaming',
    complete: (request, callOptions) => {
      callOptions.onDelta?.({ kind: 'text', text: `${request.agent.name} ` });
      callOptions.onDelta?.({ kind: 'text', text: 'thinks' });
      return scripted.complete(request, callOptions);
    },
  };
}

describe('the live stream of a run', () => {
  it('holds every event subscribers saw, in order, numbered 1…N, with pieces merged; stream: false writes none', async () => {
    const clock = new SimulatedClock();
    const store = memoryStore();
    // In memory the stream is recorded only when asked (no other process can read it).
    const c = createCoordinator({ model: streaming(SCRIPT, clock), store, clock, stream: {} });
    const seen: TroupeEvent[] = [];
    c.subscribe((e) => seen.push(e));
    const rootId = await c.start({ name: 'lead', task: 'split' });
    expect((await c.waitFor(rootId, TERMINAL)).status).toBe('completed');
    await c.shutdown();
    const rows = store.readStream(c.runId, 0, 10_000);
    expect(rows.map((r) => r.seq)).toEqual(rows.map((_, i) => i + 1));
    // Every event but the pieces is a row of its own, in the order subscribers saw them.
    const plain = seen.filter((e) => e.type !== 'agent.delta');
    const asSeen = (r: StreamRow) => {
      const { seq: _seq, ...event } = toStreamEvent(r);
      return event;
    };
    expect(rows.filter((r) => r.type !== 'agent.delta').map(asSeen)).toEqual(plain);
    // The pieces of each answer are one row: "<name> thinks" once per model call.
    const pieces = rows.filter((r) => r.type === 'agent.delta').map((r) => (r.data.delta as { text: string }).text);
    expect(pieces.sort()).toEqual(['lead thinks', 'lead thinks', 'lead thinks', 'w thinks']);
    expect(rows.find((r) => r.type === 'agent.status' && r.agentId === rootId && r.data.to === 'completed')).toBeDefined();

    const quiet = memoryStore();
    const off = createCoordinator({ model: streaming(SCRIPT, clock), store: quiet, clock, stream: false });
    await off.waitFor(await off.start({ name: 'lead', task: 'split' }), TERMINAL);
    await off.shutdown();
    expect(quiet.readStream(off.runId, 0, 100)).toEqual([]);
    // Not given, in memory: nothing recorded either; a file records it (the CLI tests read it).
    const unaskedStore = memoryStore();
    const unasked = createCoordinator({ model: streaming(SCRIPT, clock), store: unaskedStore, clock });
    await unasked.waitFor(await unasked.start({ name: 'lead', task: 'split' }), TERMINAL);
    await unasked.shutdown();
    expect(unaskedStore.readStream(unasked.runId, 0, 100)).toEqual([]);
  });

  it('rides the commits a run makes anyway: no commit of its own while the run is busy', async () => {
    const script: Script = {
      agents: { lead: [...Array.from({ length: 6 }, (_, i) => ({ tool: 'view_agent_graph', args: { i } })), { tool: 'finish', args: { summary: 'ok' } }] },
    };
    const commits: number[] = [];
    const written: number[] = [];
    for (const stream of [false, undefined] as const) {
      const clock = new SimulatedClock();
      const store = memoryStore();
      const port = portOf(store);
      let n = 0;
      const counted = { ...port, commit: (ops: readonly WriteOp[]) => (n++, port.commit(ops)) };
      const c = createCoordinator({
        model: scriptedModel(script, { clock }),
        store: counted,
        clock,
        // A flush timer that cannot fire within the test: only riding commits can write rows.
        stream: stream === false ? stream : { flushMs: 600_000 },
      });
      await c.waitFor(await c.start({ name: 'lead', task: 'x' }), TERMINAL);
      await flush();
      // Rows are in the store before the shutdown: they rode the run's own commits.
      written.push(store.readStream(c.runId, 0, 1_000).length);
      commits.push(n);
      await c.shutdown();
    }
    expect(written[0]).toBe(0);
    expect(written[1]).toBeGreaterThan(5);
    expect(commits[1]).toBe(commits[0]);
  });
});

describe('the live stream across hostings', () => {
  it("a resumed run numbers its rows after the last host's, with no gap and no repeat", async () => {
    const clock = new SimulatedClock();
    const store = memoryStore();
    const script: Script = {
      agents: {
        lead: [
          { tool: 'respond_to_user', args: { message: 'ready' } },
          { tool: 'finish', args: { summary: 'done' } },
        ],
      },
    };
    const model = scriptedModel(script, { clock });
    const first = createCoordinator({ model, store, clock, interactive: true, stream: {} });
    const rootId = await first.start({ name: 'lead', task: 'talk' });
    await first.waitFor(rootId, ['waiting']);
    await first.shutdown();
    const before = store.readStream(first.runId, 0, 1_000).length;
    expect(before).toBeGreaterThan(0);
    const second = await resumeCoordinator({ model, store, clock, interactive: true, stream: {} });
    await second.send(rootId, { content: 'go on' });
    await second.waitFor(rootId, TERMINAL);
    await second.shutdown();
    const rows = store.readStream(first.runId, 0, 1_000);
    expect(rows.length).toBeGreaterThan(before);
    expect(rows.map((r) => r.seq)).toEqual(rows.map((_, i) => i + 1));
  });
});

const RUN: RunRow = {
  id: 'r',
  createdAt: 0,
  interactive: false,
  rootId: null,
  budget: { limitUsd: null, budgetStopped: false, reserveStopped: false, paused: false, resumeEpoch: 0, reserveNoticeClaimed: false },
};

describe('followRun', () => {
  it('reads from just after a seq to the end: nothing missed, nothing twice, across a reconnection', async () => {
    const store = memoryStore();
    store.insertRun(RUN);
    const port = portOf(store);
    const row = (seq: number): StreamRow => ({ runId: 'r', seq, agentId: 'a', type: 'agent.said', data: { name: 'a', text: `n${seq}` }, at: seq });
    store.appendStream([1, 2, 3].map(row));
    let live = true;
    const clock = new SimulatedClock();
    const got: number[] = [];
    const first = followRun(port, 'r', { live: () => live, clock, pollMs: 50 });
    for await (const e of first) {
      got.push(e.seq);
      if (e.seq === 2) break; // the client goes away after 2
    }
    store.appendStream([4, 5].map(row));
    const again = followRun(port, 'r', { after: got.at(-1)!, live: () => live, clock, pollMs: 50, batch: 2 });
    let finished = false;
    const done = (async () => {
      for await (const e of again) {
        got.push(e.seq);
        // A row committed while the reader follows, then the run ends.
        if (e.seq === 5) {
          store.appendStream([6].map(row));
          live = false;
        }
      }
      finished = true;
    })();
    // Simulated time moves while the reader waits between reads.
    for (let i = 0; i < 20 && !finished; i++) {
      await flush(2);
      clock.increment(50);
    }
    await done;
    expect(got).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it('reads the rows a host commits just before it lets the run go: liveness is asked before the read that finds nothing', async () => {
    const store = memoryStore();
    store.insertRun(RUN);
    const port = portOf(store);
    let live = true;
    let ended = false;
    // The host's last commit and its release land between a read that found nothing and the next question.
    const reads = {
      ...port,
      readStream: async (runId: string, afterSeq: number, limit: number) => {
        const rows = await port.readStream(runId, afterSeq, limit);
        if (rows.length === 0 && !ended) {
          ended = true;
          store.appendStream([{ runId: 'r', seq: 1, agentId: null, type: 'run.deadlock', data: { waits: [] }, at: 1 }]);
          live = false;
        }
        return rows;
      },
    };
    const clock = new SimulatedClock();
    const got: number[] = [];
    let finished = false;
    const done = (async () => {
      for await (const e of followRun(reads, 'r', { live: () => live, clock, pollMs: 50 })) got.push(e.seq);
      finished = true;
    })();
    for (let i = 0; i < 20 && !finished; i++) {
      await flush(2);
      clock.increment(50);
    }
    await done;
    expect(got).toEqual([1]);
  });
});

describe('a damaged stream row', () => {
  it("does not stop a writer's open (the stream is read by views, never resumed from), and its reader gets STORE_CORRUPT; a row of the wrong shape is refused at open", () => {
    const path = join(mkdtempSync(join(tmpdir(), 'troupe-stream-')), 't.db');
    const store = openStore({ path });
    store.insertRun(RUN);
    store.appendStream([
      { runId: 'r', seq: 1, agentId: null, type: 'run.deadlock', data: { waits: [] }, at: 1 },
      { runId: 'r', seq: 2, agentId: null, type: 'run.deadlock', data: { waits: [] }, at: 2 },
    ]);
    store.close();
    const raw = new Database(path);
    raw.prepare("UPDATE stream SET data = '{' WHERE seq = 2").run();
    raw.close();
    const again = openStore({ path });
    expect(again.readStream('r', 0, 1).map((row) => row.seq)).toEqual([1]);
    expect(() => again.readStream('r', 0, 10)).toThrow(expect.objectContaining({ code: 'STORE_CORRUPT' }));
    again.close();
    const worse = new Database(path);
    worse.prepare("UPDATE stream SET at = 'soon' WHERE seq = 1").run();
    worse.close();
    expect(() => openStore({ path })).toThrow(expect.objectContaining({ code: 'STORE_CORRUPT' }));
  });
});
