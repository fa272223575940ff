/**
 * The shared model queue's order (host/calls/gateway.ts): a parent's calls go before its
 * children's, first come first served within a depth.
 */
import { describe, expect, it } from 'vitest';
import { defineTool } from '../../src/tools/defineTool.js';
import { flush, team } from '../helpers/team.js';

const finish = { tool: 'finish', args: { summary: 'done' } };
const childFinish = { tool: 'agent_finish', args: { summary: 'ok' } };

describe('the shared model queue', () => {
  it("a parent's call queued after its children's starts before theirs (concurrency 1)", async () => {
    // The lead's first turn spawns three children, then holds in a user tool until the children's
    // calls have queued: its next call joins the queue last, behind two waiting children.
    let release!: () => void;
    const hold = defineTool({
      name: 'hold',
      description: 'Waits for the test.',
      parameters: { type: 'object', properties: {} },
      execute: () => new Promise<string>((resolve) => (release = () => resolve('ok'))),
    });
    const spawn = (name: string) => ({ name: 'spawn_agent', args: { name, task: 'x' } });
    const child = [{ delayMs: 1_000, ...childFinish }];
    const t = team(
      {
        agents: {
          lead: [
            { tools: [spawn('a'), spawn('b'), spawn('c'), { name: 'hold', args: {} }] },
            { tool: 'wait_for_agents', args: { reason: 'a, b, c' } },
            { tool: 'wait_for_agents', args: { reason: 'a, b, c' } },
            { tool: 'wait_for_agents', args: { reason: 'a, b, c' } },
            finish,
          ],
          a: child,
          b: child,
          c: child,
        },
      },
      { tools: [hold], concurrency: { model: 1 } },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    // One child's call runs (1 s on the simulated clock), the other two wait; then the lead's call queues.
    await flush();
    expect(t.c.health().modelQueue).toEqual({ waiting: 2, running: 1, concurrency: 1 });
    release();
    await flush();
    expect(t.c.health().modelQueue).toEqual({ waiting: 3, running: 1, concurrency: 1 });
    await t.advance(10_000, 250);
    expect((await t.c.waitFor(rootId, ['completed'])).status).toBe('completed');
    const order = t.model.calls.map((c) => c.agentName);
    expect(order.slice(0, 2)).toEqual(['lead', order[1]]);
    expect(['a', 'b', 'c']).toContain(order[1]);
    // The lead's second call started next, ahead of the two children queued before it.
    expect(order[2]).toBe('lead');
    await t.c.shutdown();
  });
});
