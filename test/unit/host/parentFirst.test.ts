/**
 * A parent's turn goes before the turns it starts (gateway.ts `call`): on a model with an endpoint,
 * the children a parent spawns make their first call one turn of the event loop later, so the
 * parent's next request is the first to leave. The order is the order of the model's `complete`
 * calls, which is where a real model writes its request.
 */
import { expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { createCoordinator } from '../../../src/host/createCoordinator.js';
import { scriptedModel, type Script } from '../../../src/model/scriptedModel.js';
import type { Model } from '../../../src/model/types.js';
import { runOnClock, spawnStep } from '../../helpers/team.js';

const CHILDREN = 16;
const script: Script = {
  agents: {
    lead: [
      spawnStep(...Array.from({ length: CHILDREN }, (_, i): [string, string] => [`w${i}`, 'work'])),
      { tool: 'wait_for_agents', args: { reason: 'reports', until: 'all' } },
      { tool: 'finish', args: { summary: 'done' } },
    ],
    ...Object.fromEntries(Array.from({ length: CHILDREN }, (_, i) => [`w${i}`, [{ tool: 'agent_finish', args: { summary: 'ok' } }]])),
  },
};

/** Who called the model, in order, with the model declaring `endpoint` or not. */
async function callers(endpoint: string | undefined): Promise<string[]> {
  const clock = new SimulatedClock();
  const inner = scriptedModel(script, { clock });
  const asked: string[] = [];
  const model: Model = {
    name: 'scripted',
    ...(endpoint === undefined ? {} : { endpoint }),
    complete(request, options) {
      asked.push(request.agent.name);
      return inner.complete(request, options);
    },
  };
  const c = createCoordinator({ model, clock, limits: { maxChildren: CHILDREN } });
  await runOnClock(c, clock, { name: 'lead', task: 'Split.' });
  return asked;
}

it("sends a parent's next request before the first requests of the children it spawned, on a model with an endpoint", async () => {
  const asked = await callers('http://model.test#nokey');
  expect(asked.slice(0, 2)).toEqual(['lead', 'lead']);
  expect(asked.filter((name) => name !== 'lead')).toHaveLength(CHILDREN);
});

it('leaves a model without an endpoint (scripted, replayed) as it was: the children ask as they start', async () => {
  const asked = await callers(undefined);
  expect(asked[0]).toBe('lead');
  // The lead's next call comes after its batch's first ones.
  expect(asked.indexOf('lead', 1)).toBeGreaterThan(CHILDREN);
});
