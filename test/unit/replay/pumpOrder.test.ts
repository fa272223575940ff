/**
 * Replay (issue 37): instant calls answered in one pump react in the recording's step order, even
 * when the later one was asked first. The recording: the lead spawns a then b; each asks at once
 * (a first, as spawned) and the model answers both in the instant asked, but a's answer only after
 * b's has come back — so the steps are b's call, then a's, and b's report reaches the lead first.
 * The lead's second turn takes 10 ms, so no step of its sits between them.
 *
 * The replay asks as the code does: a's call first (held: the cursor is at b's), then b's, whose
 * ask runs the pump inside it (driver.ts `#pump(true)`), before the caller has attached to b's
 * promise. Answering a's there too queued a's reaction first (its caller attached long before):
 * a's report reached the lead first. This is realTimeInputs.test.ts's rarer divergence (2 in 2,400
 * runs, w3-then-w2 recorded, w2 replayed first); without 880dd3b (the pump's `if (inAsk)` branch)
 * this test diverges at the lead's turn 3: "recorded «[Message from b …» now «[Message from a …»".
 */
import { expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { createCoordinator } from '../../../src/host/createCoordinator.js';
import { scriptedModel, type Script } from '../../../src/model/scriptedModel.js';
import type { Model } from '../../../src/model/types.js';
import { replayRun } from '../../../src/replay/replayRun.js';
import { memoryStore } from '../../../src/store/memoryStore.js';
import { CALL_EVENT } from '../../../src/store/types.js';
import { runOnClock, spawnStep, waitStep as wait } from '../../helpers/team.js';

const script: Script = {
  agents: {
    lead: [
      spawnStep(['a', 'one'], ['b', 'two']),
      // 10 ms: the lead's next call comes after both workers' instant ones, not between them.
      { ...wait, delayMs: 10 },
      wait,
      wait,
      { tool: 'finish', args: { summary: 'done' } },
    ],
    a: [{ tool: 'agent_finish', args: { summary: 'a done' } }],
    b: [{ tool: 'agent_finish', args: { summary: 'b done' } }],
  },
};

async function record() {
  const clock = new SimulatedClock();
  const store = memoryStore();
  const inner = scriptedModel(script, { clock });
  /** Who asked the model, in order. */
  const asked: string[] = [];
  let bAnswered!: () => void;
  const bDone = new Promise<void>((resolve) => (bAnswered = resolve));
  // a's answer comes after b's, in the same instant of the clock: both calls are instant.
  const model: Model = {
    name: 'scripted',
    async complete(request, options) {
      asked.push(request.agent.name);
      const turn = await inner.complete(request, options);
      if (request.agent.name === 'a') await bDone;
      if (request.agent.name === 'b') bAnswered();
      return turn;
    },
  };
  const c = createCoordinator({ store, clock, model });
  await runOnClock(c, clock, { name: 'lead', task: 'Split.' });
  return { store, runId: c.runId, asked };
}

it('answers instant calls in step order when the later one was asked first', async () => {
  const { store, runId, asked } = await record();
  // The case happened: a asked before b, b's instant call the step before a's, b's report read first.
  expect(asked.slice(0, 3)).toEqual(['lead', 'a', 'b']);
  const calls = store
    .historyOf(runId)
    .filter((e) => e.type === CALL_EVENT)
    .map((e) => {
      const d = e.data as { name: string; t0: number };
      return `${d.name} ${d.t0 === e.at ? 'instant' : 'latent'}`;
    });
  expect(calls.slice(0, 4)).toEqual(['lead instant', 'b instant', 'a instant', 'lead latent']);
  const root = store.listAgents(runId).find((a) => a.parentId === null)!;
  const reports = store
    .loadSession(root.id)
    .flatMap((i) => (i.role === 'user' && typeof i.content === 'string' ? [/^\[Message from (\w+)/.exec(i.content)?.[1]] : []))
    .filter(Boolean);
  expect(reports).toEqual(['b', 'a']);

  const result = await replayRun(store, runId);
  expect(result.divergence).toBeNull();
  expect(result.outcome).toBe('identical');
  for (const agent of store.listAgents(runId)) expect(result.store.loadSession(agent.id)).toEqual(store.loadSession(agent.id));
});
