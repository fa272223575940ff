import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { ProviderError } from '../../../src/errors.js';
import { scriptedModel } from '../../../src/model/scriptedModel.js';
import type { ModelRequest } from '../../../src/model/types.js';

const request = (name: string, turn = 1): ModelRequest => ({
  agent: { id: `${name}-id`, name, parentId: null, depth: 0 },
  system: 's',
  messages: [],
  tools: [],
  turn,
});
const signal = new AbortController().signal;

describe('scriptedModel', () => {
  it('replays each agent’s steps in order, records calls and reports what is left', async () => {
    const model = scriptedModel({
      agents: {
        lead: [{ tool: 'spawn_agent', args: { name: 'a', task: 't' } }, { text: 'hello' }],
        a: [
          {
            tools: [
              { name: 'x', args: { n: 1 } },
              { name: 'y', args: '{broken' },
            ],
          },
        ],
      },
    });
    const first = await model.complete(request('lead'), { signal });
    expect(first.toolCalls).toEqual([{ id: 'call_lead_1', name: 'spawn_agent', arguments: '{"name":"a","task":"t"}' }]);
    const a = await model.complete(request('a'), { signal });
    expect(a.toolCalls.map((c) => c.arguments)).toEqual(['{"n":1}', '{broken']);
    expect(model.unconsumed()).toEqual({ lead: [{ text: 'hello' }] });
    expect(() => model.assertComplete()).toThrow(expect.objectContaining({ code: 'SCRIPT_UNCONSUMED' }));
    expect((await model.complete(request('lead', 2), { signal })).text).toBe('hello');
    model.assertComplete();
    await expect(model.complete(request('lead', 3), { signal })).rejects.toMatchObject({ code: 'SCRIPT_EXHAUSTED' });
    expect(model.calls.map((c) => `${c.agentName}#${c.turn}`)).toEqual(['lead#1', 'a#1', 'lead#2', 'lead#3']);
  });

  it('injects typed provider errors, refusals and usage', async () => {
    const model = scriptedModel({
      agents: {
        lead: [{ error: { code: 'PROVIDER_RATE_LIMITED', status: 429, retryAfterMs: 250 } }, { refusal: 'no', usage: { inputTokens: 3, costUsd: 0.01 } }],
      },
    });
    const err = await model.complete(request('lead'), { signal }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProviderError);
    expect(err).toMatchObject({ code: 'PROVIDER_RATE_LIMITED', retryable: true, status: 429, retryAfterMs: 250 });
    expect(await model.complete(request('lead'), { signal })).toMatchObject({ refusal: 'no', usage: { inputTokens: 3, costUsd: 0.01 } });
  });

  it('waits for delays on the injected clock, and an abort cancels the wait', async () => {
    const clock = new SimulatedClock();
    const model = scriptedModel(
      {
        agents: {
          lead: [
            { delayMs: 1_000, text: 'late' },
            { delayMs: 1_000, text: 'never' },
          ],
        },
      },
      { clock },
    );
    let done = false;
    const pending = model.complete(request('lead'), { signal }).then((t) => {
      done = true;
      return t;
    });
    clock.increment(999);
    await Promise.resolve();
    expect(done).toBe(false);
    clock.increment(1);
    expect((await pending).text).toBe('late');
    const ctl = new AbortController();
    const aborted = model.complete(request('lead'), { signal: ctl.signal });
    ctl.abort(new Error('stopped'));
    await expect(aborted).rejects.toThrow('stopped');
  });

  it.each([
    [{ agents: { lead: [{}] } }, 'exactly one of'],
    [{ agents: { lead: [{ text: 'a', tool: 'b' }] } }, 'exactly one of'],
    [{ agents: { lead: [{ error: { code: 'TOOL_FAILED' } }] } }, 'PROVIDER_* code'],
    [{ agents: { lead: 'nope' } }, 'to be an array'],
    [{ steps: [] }, 'keyed by agent name'],
  ])('rejects a malformed script %#', (script, message) => {
    expect(() => scriptedModel(script as never)).toThrow(message);
  });
});
