/**
 * Replay (issue 37): a recorded run re-run offline through the code as it is now, the recorded
 * answers and tool results in place of the model and the tools, reports `identical` or the first
 * divergence with its agent, turn and kind.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { SimulatedClock } from 'xstate';
import { createCoordinator } from '../../../src/host/createCoordinator.js';
import { resumeCoordinator } from '../../../src/host/resumeCoordinator.js';
import { TERMINAL_STATUSES } from '../../../machines/types.js';
import { scriptedModel, type Script } from '../../../src/model/scriptedModel.js';
import { memoryStore } from '../../../src/store/memoryStore.js';
import { openStore } from '../../../src/store/sqliteStore.js';
import type { Store } from '../../../src/store/types.js';
import type { Tool } from '../../../src/tools/defineTool.js';
import { replayRun } from '../../../src/replay/replayRun.js';
import { demoScript } from '../../../src/cli/demoModel.js';
import { searchTool } from '../../helpers/tools.js';

const script: Script = {
  agents: {
    lead: [
      { tool: 'spawn_agent', args: { name: 'scout', task: 'Find the parser.' } },
      { tool: 'wait_for_agents', args: { reason: 'the scout' } },
      { tool: 'search', args: { q: 'lead' } },
      { tool: 'finish', args: { summary: 'done' } },
    ],
    scout: [
      { tool: 'search', args: { q: 'parser' }, delayMs: 50 },
      { error: { code: 'PROVIDER_RATE_LIMITED', status: 429, retryAfterMs: 1_000 } },
      { tool: 'agent_finish', args: { summary: 'parser.ts' } },
    ],
  },
};

async function record(s: Script, tools: Tool[], store: Store = memoryStore()) {
  const clock = new SimulatedClock();
  const c = createCoordinator({ store, clock, model: scriptedModel(s, { clock }), tools });
  const root = await c.start({ name: 'lead', task: 'Review the parser.' });
  const done = c.waitFor(root, [...TERMINAL_STATUSES]);
  // Let the scripted delays pass on the simulated clock.
  for (let i = 0; i < 200 && c.get(root).status !== 'completed'; i++) {
    await new Promise((r) => setImmediate(r));
    clock.increment(100);
  }
  await done;
  await c.shutdown();
  return { store, runId: c.runId };
}

describe('replayRun', () => {
  it('reports a session that ends otherwise after its last call (an effect no later request showed)', async () => {
    const { store, runId } = await record(script, [searchTool()]);
    const lead = store.listAgents(runId).find((a) => a.name === 'lead')!;
    // The recording's lead heard one more notice after its last call than the code now gives it.
    store.appendSession(lead.id, [{ role: 'user', content: '[Message from system] one more' }]);
    const result = await replayRun(store, runId, { coordinator: { tools: [searchTool()] } });
    expect(result.outcome).toBe('diverged');
    expect(result.divergence).toMatchObject({ agent: 'lead', agentId: lead.id, kind: 'notice' });
    expect(result.divergence!.diff).toMatch(/^session item \d+ of \d+ \(user\): /);
  });

  it('replays a recorded run identically, twice with byte-identical rows', async () => {
    const { store, runId } = await record(script, [searchTool()]);
    const first = await replayRun(store, runId, { coordinator: { tools: [searchTool()] } });
    expect(first.divergence).toBeNull();
    expect(first.outcome).toBe('identical');
    expect(first.calls).toBe(store.historyOf(runId).filter((e) => e.type === 'replay.call').length);
    const second = await replayRun(store, runId, { coordinator: { tools: [searchTool()] } });
    const rows = (r: typeof first) =>
      JSON.stringify([
        r.store.listAgents(runId),
        r.store.listMessages(runId),
        r.store.listAgents(runId).map((a) => r.store.loadSession(a.id)),
        r.store.listUsage(runId),
      ]);
    expect(rows(second)).toBe(rows(first));
    // The replay's sessions are the recording's.
    for (const agent of store.listAgents(runId)) expect(first.store.loadSession(agent.id)).toEqual(store.loadSession(agent.id));
  });

  it('arms no wall-clock timer: a replay of a durable recording (whose run streamed) keeps no live stream of its own', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'troupe-replay-'));
    const { store, runId } = await record(script, [searchTool()], openStore({ path: join(dir, 'run.db') }));
    // The recording streamed on a real 100 ms flush timer; every timer of the replay's is the recording's clock.
    expect(store.historyOf(runId).some((e) => e.type === 'replay.call')).toBe(true);
    const timers = vi.spyOn(globalThis, 'setTimeout');
    try {
      expect((await replayRun(store, runId, { coordinator: { tools: [searchTool()] } })).outcome).toBe('identical');
      expect(timers).not.toHaveBeenCalled();
    } finally {
      timers.mockRestore();
      store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('reports the first request a changed tool description changes, with its agent and turn', async () => {
    const { store, runId } = await record(script, [searchTool()]);
    const result = await replayRun(store, runId, { coordinator: { tools: [searchTool({ description: 'Search the code base, fast.' })] } });
    expect(result.outcome).toBe('diverged');
    expect(result.divergence).toMatchObject({ agent: 'lead', turn: 1, kind: 'request' });
    expect(result.divergence!.diff).toContain('tool search description');
  });

  it('goes live from a chosen turn: the recording is checked up to it, the live model answers from it', async () => {
    const { store, runId } = await record(script, [searchTool()]);
    const live = scriptedModel({ agents: { lead: [{ tool: 'finish', args: { summary: 'live ending' } }] } });
    const result = await replayRun(store, runId, { coordinator: { tools: [searchTool()] }, liveFrom: { agent: 'lead', turn: 3, model: live } });
    expect(result.outcome).toBe('live');
    expect(result.divergence).toBeNull();
    expect(live.calls.map((c) => [c.agentName, c.turn])).toEqual([['lead', 3]]);
    const lead = result.store.listAgents(runId).find((a) => a.name === 'lead')!;
    expect(result.statuses[lead.id]).toBe('completed');
    expect(JSON.stringify(result.store.loadSession(lead.id))).toContain('live ending');
  });

  it('replays the demo scenario identically', async () => {
    const { store, runId } = await record(demoScript(), []);
    const result = await replayRun(store, runId);
    expect(result.divergence).toBeNull();
  });

  const slow: Script = {
    agents: {
      lead: script.agents.lead!,
      scout: [
        { tool: 'search', args: { q: 'parser' }, delayMs: 500 },
        { tool: 'search', args: { q: 'lexer' }, delayMs: 500 },
        { tool: 'agent_finish', args: { summary: 'parser.ts' } },
      ],
    },
  };
  // Shut down at 700 ms: inside the slow scout's second call (asked at 500 ms, due at 1,000 ms),
  // and inside the scout's retry backoff (a 429 at 50 ms asking for 1 s): the resume waits out the rest.
  it.each([
    ['a call in flight', slow],
    ["a retry's backoff", script],
  ])('replays a run shut down inside %s and resumed: one recording across both processes', async (_, recorded) => {
    const clock = new SimulatedClock();
    const store = memoryStore();
    const model = scriptedModel(recorded, { clock });
    const tools = [searchTool()];
    const first = createCoordinator({ store, clock, model, tools });
    const root = await first.start({ name: 'lead', task: 'Review the parser.' });
    for (let i = 0; i < 7; i++) {
      await new Promise((r) => setImmediate(r));
      clock.increment(100);
    }
    expect(first.list().map((a) => a.status)).toEqual(['waiting', 'running']);
    await first.shutdown();
    const second = await resumeCoordinator({ store, clock, model, tools });
    for (let i = 0; i < 200 && second.get(root).status !== 'completed'; i++) {
      await new Promise((r) => setImmediate(r));
      clock.increment(100);
    }
    expect(second.get(root).status).toBe('completed');
    await second.shutdown();
    const result = await replayRun(store, first.runId, { coordinator: { tools } });
    expect(result.divergence).toBeNull();
    expect(result.outcome).toBe('identical');
  });
});
