/**
 * Replay (issue 37): steps the recording applied in the commit window of a user tool's end come
 * before the step after them, even an instant call the code asked for long before. The recording:
 * worker a's tool ends (a `tool` step), worker c's answer comes in that commit window (`window`),
 * then worker b's call, answered in the instant it left the model queue (concurrency 1: it waited
 * behind c's), so b's call is instant and c's report reaches the lead before b's. The replay (no
 * queue bound) has b's call asked from the start; it must still be answered after c's.
 *
 * This is the rare divergence of realTimeInputs.test.ts (about 1 run in 375: the lead's request
 * with a worker's report where the recording had another's): the driver queued the windowed steps
 * in immediates after a tool's end and returned, and its pump answered the instant call at the
 * cursor before they ran. Without the fix (driver.ts `#windowing`) this test diverges at the
 * lead's turn 3: "recorded «[Message from c …» now «[Message from b …»".
 *
 * The second case is the same window with the instant call after it asked by the tool's end
 * itself: a's next call, whose ask comes in the microtasks of a's result, after the windowed steps
 * were queued and before their immediates ran. The drive loop's settle cannot hold that one back
 * (the loop has not resumed); the ask's own pump must wait — `#pump`'s `#windowing` guard. Without
 * the guard, the first case stays identical (the loop settles first) and this one diverges at the
 * lead's turn 3: "recorded «[Message from c …» now «[Message from a …»".
 */
import { expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { createCoordinator } from '../../../src/host/createCoordinator.js';
import { scriptedModel, type Script } from '../../../src/model/scriptedModel.js';
import type { Model } from '../../../src/model/types.js';
import { replayRun } from '../../../src/replay/replayRun.js';
import { memoryStore } from '../../../src/store/memoryStore.js';
import { CALL_EVENT, TOOL_EVENT } from '../../../src/store/types.js';
import { runOnClock, spawnStep, waitStep as wait } from '../../helpers/team.js';
import { defineTool, type Tool } from '../../../src/tools/defineTool.js';

/** The first case: b's call waits behind c's in the model queue (concurrency 1). */
const queued: Script = {
  agents: {
    lead: [spawnStep(['a', 'slow'], ['c', 'late'], ['b', 'quick']), wait, wait, wait, wait, { tool: 'finish', args: { summary: 'done' } }],
    a: [
      { tool: 'slow', args: {} },
      { tool: 'agent_finish', args: { summary: 'a done' } },
    ],
    c: [{ tool: 'agent_finish', args: { summary: 'c done' }, delayMs: 10 }],
    b: [{ tool: 'agent_finish', args: { summary: 'b done' } }],
  },
};
/** The second case: no b; the call after the window is a's next, asked as its tool ends. */
const own: Script = {
  agents: {
    lead: [spawnStep(['a', 'slow'], ['c', 'late']), wait, wait, wait, { tool: 'finish', args: { summary: 'done' } }],
    a: queued.agents.a!,
    c: queued.agents.c!,
  },
};

/** a's tool: 9 ms on the clock, so it ends in the clock step where c's answer (10 ms) comes. */
function slowTool(clock: SimulatedClock): Tool {
  return defineTool({
    name: 'slow',
    description: 'Takes 9 ms.',
    parameters: { type: 'object' },
    execute: () => new Promise((resolve) => clock.setTimeout(() => resolve('slow done'), 9)),
  }) as Tool;
}

async function record(script: Script, concurrency: { model?: number }) {
  const clock = new SimulatedClock();
  const store = memoryStore();
  const inner = scriptedModel(script, { clock });
  // c's answer comes some microtasks later than its timer: after a's tool end is staged, in its commit window.
  const model: Model = {
    name: 'scripted',
    async complete(request, options) {
      const turn = await inner.complete(request, options);
      for (let i = 0; request.agent.name === 'c' && i < 20; i++) await null;
      return turn;
    },
  };
  const c = createCoordinator({ store, clock, model, tools: [slowTool(clock)], concurrency });
  await runOnClock(c, clock, { name: 'lead', task: 'Split.' });
  return { store, runId: c.runId, clock };
}

/** The recorded steps from a's tool end on, as `who what [window]`. */
function fromToolEnd(store: ReturnType<typeof memoryStore>, runId: string, n: number): string[] {
  const names = new Map(store.listAgents(runId).map((a) => [a.id, a.name]));
  const steps = store
    .historyOf(runId)
    .filter((e) => e.type === TOOL_EVENT || e.type === CALL_EVENT)
    .map((e) => {
      const d = e.data as { t0: number; window?: true };
      const what = e.type === TOOL_EVENT ? 'tool' : d.t0 === e.at ? 'instant call' : 'latent call';
      return `${names.get(e.agentId!)} ${what}${d.window ? ' window' : ''}`;
    });
  const at = steps.indexOf('a tool');
  return steps.slice(at, at + n);
}

async function replayed(store: ReturnType<typeof memoryStore>, runId: string, clock: SimulatedClock) {
  const result = await replayRun(store, runId, { coordinator: { tools: [slowTool(clock)] } });
  expect(result.divergence).toBeNull();
  expect(result.outcome).toBe('identical');
  for (const agent of store.listAgents(runId)) expect(result.store.loadSession(agent.id)).toEqual(store.loadSession(agent.id));
}

it("answers an instant call after the steps in a tool end's commit window, as recorded", async () => {
  const { store, runId, clock } = await record(queued, { model: 1 });
  // The case happened: a's tool end, c's latent answer in its window, b's instant call after.
  expect(fromToolEnd(store, runId, 3)).toEqual(['a tool', 'c latent call window', 'b instant call window']);
  await replayed(store, runId, clock);
});

it('holds an instant call asked by the tool end itself until the steps in its window have run', async () => {
  const { store, runId, clock } = await record(own, {});
  // The case happened: a's tool end, c's latent answer in its window, then a's own next call, instant.
  expect(fromToolEnd(store, runId, 3)).toEqual(['a tool', 'c latent call window', 'a instant call']);
  await replayed(store, runId, clock);
});
