/**
 * Replay of a run whose compactions went to an auxiliary model (issue 37): their recorded answers
 * stand in for it as the main model's do — it is never called — and they are priced as that model
 * was (its name and price), so the replay's usage rows are the recording's.
 */
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { TERMINAL_STATUSES } from '../../../machines/types.js';
import { createCoordinator } from '../../../src/host/createCoordinator.js';
import { scriptedModel } from '../../../src/model/scriptedModel.js';
import type { Model } from '../../../src/model/types.js';
import { replayRun } from '../../../src/replay/replayRun.js';
import { memoryStore } from '../../../src/store/memoryStore.js';
import { defineTool, type Tool } from '../../../src/tools/defineTool.js';

/** Each result adds ~700 characters to the session: a small window is passed within a few turns. */
const lookup = defineTool({
  name: 'lookup',
  description: 'Look a key up.',
  parameters: { type: 'object', properties: { key: { type: 'string' } }, required: ['key'], additionalProperties: false },
  execute: ({ key }: { key: string }) => ({ key, value: `${key}:`.padEnd(700, 'x') }),
}) as Tool;

const WINDOW = 4_000;
const prices = { scripted: { inputPer1M: 1, outputPer1M: 2 }, cheap: { inputPer1M: 0.1, outputPer1M: 0.2 } };
/** Usage in tokens: each call is priced by its model's name (`prices`), the same way recorded and replayed. */
const usage = { inputTokens: 1_000, outputTokens: 100 };
const lookups = Array.from({ length: 12 }, (_, i) => ({ tool: 'lookup', args: { key: `k${i}` }, usage }));

describe('replay with an auxiliary model', () => {
  it('answers its recorded calls from the recording, never calling it, priced as it was', async () => {
    const clock = new SimulatedClock();
    const store = memoryStore();
    const auxiliary: Model = { ...scriptedModel({ agents: { lead: Array.from({ length: 8 }, (_, i) => ({ text: `summary ${i}`, usage })) } }), name: 'cheap' };
    const c = createCoordinator({
      store,
      clock,
      model: { ...scriptedModel({ agents: { lead: [...lookups, { tool: 'finish', args: { summary: 'done' }, usage }] } }, { clock }), contextWindow: WINDOW },
      auxiliaryModel: auxiliary,
      tools: [lookup],
      budget: { prices },
    });
    const root = await c.start({ name: 'lead', task: 'Look up k0..k11.' });
    await c.waitFor(root, [...TERMINAL_STATUSES]);
    await c.shutdown();
    const rowsOf = (rows: { purpose: string; model: string; costUsd: number }[]) => rows.map(({ purpose, model, costUsd }) => ({ purpose, model, costUsd }));
    const recorded = rowsOf(store.listUsage(c.runId));
    expect(recorded.filter((u) => u.purpose === 'compaction').length).toBeGreaterThan(0);
    expect(new Set(recorded.filter((u) => u.purpose === 'compaction').map((u) => u.model))).toEqual(new Set(['cheap']));
    expect(recorded.every((u) => u.costUsd > 0)).toBe(true);

    const called: string[] = [];
    const unreachable: Model = {
      name: 'cheap',
      complete: (request) => {
        called.push(request.purpose ?? 'main');
        return Promise.reject(new Error('the auxiliary model was called'));
      },
    };
    const result = await replayRun(store, c.runId, {
      model: { name: 'scripted', contextWindow: WINDOW },
      coordinator: { tools: [lookup], auxiliaryModel: unreachable, budget: { prices } },
    });
    expect(result.divergence).toBeNull();
    expect(called).toEqual([]);
    expect(rowsOf(await result.store.listUsage(c.runId))).toEqual(recorded);

    // Declared to the replay (as troupe replay does from the config's name): the same.
    const declared = await replayRun(store, c.runId, {
      model: { name: 'scripted', contextWindow: WINDOW },
      auxiliaryModel: { name: 'cheap' },
      coordinator: { tools: [lookup], budget: { prices } },
    });
    expect(declared.outcome).toBe('identical');
    expect(rowsOf(await declared.store.listUsage(c.runId))).toEqual(recorded);
  });

  it('answers the agents of a profile with its own model from the recording, never calling that model, priced as it was', async () => {
    const clock = new SimulatedClock();
    const store = memoryStore();
    const small: Model = { ...scriptedModel({ agents: { scout: [{ tool: 'agent_finish', args: { summary: 'found' }, usage }] } }), name: 'cheap' };
    const lead = [
      { tool: 'spawn_agent', args: { name: 'scout', task: 'Find it.', profile: 'scout' }, usage },
      { tool: 'wait_for_agents', args: { reason: 'the scout' }, usage },
      { tool: 'finish', args: { summary: 'done' }, usage },
    ];
    const c = createCoordinator({
      store,
      clock,
      model: scriptedModel({ agents: { lead } }, { clock }),
      profiles: { scout: { description: 'Finds things.', model: small } },
      budget: { prices },
    });
    const root = await c.start({ name: 'lead', task: 'Find it.' });
    expect((await c.waitFor(root, [...TERMINAL_STATUSES])).status).toBe('completed');
    await c.shutdown();
    const rowsOf = (rows: { purpose: string; model: string; costUsd: number }[]) => rows.map(({ model, costUsd }) => ({ model, costUsd }));
    const recorded = rowsOf(store.listUsage(c.runId));
    expect(recorded.map((u) => u.model).sort()).toEqual(['cheap', 'scripted', 'scripted', 'scripted']);

    const called: string[] = [];
    const unreachable: Model = {
      name: 'cheap',
      complete: (request) => (called.push(request.agent.name), Promise.reject(new Error('the profile model was called'))),
    };
    const result = await replayRun(store, c.runId, {
      model: { name: 'scripted' },
      coordinator: { profiles: { scout: { description: 'Finds things.', model: unreachable } }, budget: { prices } },
    });
    expect(result.divergence).toBeNull();
    expect(called).toEqual([]);
    expect(rowsOf(await result.store.listUsage(c.runId))).toEqual(recorded);
  });
});
