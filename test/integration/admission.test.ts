/**
 * Adaptive admission of model calls (`concurrency.adaptive`, host/calls/admission.ts) in a run:
 * the event-loop delay is injected (`adaptive.lag`) and time is the simulated clock's, so the
 * test decides when the loop "lags" and nothing depends on this machine's speed.
 */
import { describe, expect, it } from 'vitest';
import type { ScriptStep } from '../../src/model/scriptedModel.js';
import { defineTool } from '../../src/tools/defineTool.js';
import { team } from '../helpers/team.js';

const CAP = 32;
const CHILDREN = Array.from({ length: 48 }, (_, i) => `c${i}`);
const work = defineTool({ name: 'work', description: 'A step.', parameters: { type: 'object', properties: {} }, execute: () => 'ok' });
const step: ScriptStep = { delayMs: 300, tool: 'work', args: {} };

function busyTeam(concurrency: NonNullable<Parameters<typeof team>[1]>['concurrency']) {
  const agents: Record<string, ScriptStep[]> = {
    lead: [
      { tool: 'spawn_agents', args: { agents: CHILDREN.map((name) => ({ name, task: 'x' })) } },
      { tool: 'wait_for_agents', args: { reason: 'the team' } },
      ...CHILDREN.map(() => ({ tool: 'wait_for_agents', args: { reason: 'the team' } })),
      { tool: 'finish', args: { summary: 'done' } },
    ],
  };
  for (const name of CHILDREN) agents[name] = [...Array.from({ length: 40 }, () => step), { tool: 'agent_finish', args: { summary: 'ok' } }];
  return team({ agents }, { tools: [work], limits: { maxChildren: 64, maxAgents: 64 }, concurrency });
}

describe('adaptive admission of model calls', () => {
  it('a lagging loop lowers the model calls in flight to min(cap, 8); a quiet one raises them back to the cap, never above', async () => {
    let lagMs = 0;
    const t = busyTeam({ model: CAP, adaptive: { lag: () => lagMs } });
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    const seen: { running: number; concurrency: number }[] = [];
    const run = async (ms: number) => {
      for (let at = 0; at < ms; at += 100) {
        await t.advance(100, 100);
        const { running, concurrency } = t.c.health().modelQueue;
        seen.push({ running, concurrency });
      }
    };
    await run(1_000);
    expect(seen.at(-1)).toEqual({ running: CAP, concurrency: CAP });
    // The loop "blocks": every window's p99 is 200 ms.
    lagMs = 200;
    await run(4_000);
    expect(seen.at(-1)!.concurrency).toBe(8);
    // The calls admitted before the limit fell have ended: no more than 8 in flight.
    expect(seen.at(-1)!.running).toBe(8);
    lagMs = 0;
    await run(8_000);
    expect(seen.at(-1)).toEqual({ running: CAP, concurrency: CAP });
    expect(Math.max(...seen.map((s) => s.concurrency))).toBe(CAP);
    expect(Math.max(...seen.map((s) => s.running))).toBe(CAP);
    await t.advance(120_000, 500);
    expect((await t.c.waitFor(rootId, ['completed'])).status).toBe('completed');
    await t.c.shutdown();
  });

  it('off (the default), the same lag changes nothing', async () => {
    const t = busyTeam({ model: CAP });
    await t.c.start({ name: 'lead', task: 'x' });
    await t.advance(5_000, 100);
    expect(t.c.health().modelQueue).toMatchObject({ running: CAP, concurrency: CAP });
    await t.c.shutdown();
  });
});
