/**
 * Issue 34's must-show for the silent-stream guard, end to end: the real openai client streams from
 * the fake server, which sends 3 chunks of an answer and then nothing, keeping the socket open. On
 * troupe's (simulated) clock the attempt ends between 0.9 × and 1.1 × `idleTimeoutMs` after the
 * third chunk, as PROVIDER_TIMEOUT, and is retried: the retry's answer finishes the agent.
 */
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { createCoordinator } from '../../src/host/createCoordinator.js';
import type { TroupeEvent } from '../../src/host/runtime.js';
import { openaiModel } from '../../src/model/openaiModel.js';
import { memoryStore } from '../../src/store/memoryStore.js';
import { createFakeOpenAIServer } from '../../src/testing/fakeOpenAIServer.js';
import { until } from '../helpers/cli.js';
import { flush } from '../helpers/team.js';

const IDLE_MS = 10_000;

describe('a stream that stalls after 3 chunks', () => {
  it('ends within idleTimeoutMs plus 10 % as PROVIDER_TIMEOUT, and is retried', async () => {
    await using server = await createFakeOpenAIServer([
      // The role chunk, then "one ", "two ", "three ": 3 chunks of the answer, then silence.
      { message: { content: 'one two three four five' }, stallAfterChunks: 4 },
      { message: { toolCalls: [{ name: 'finish', arguments: { summary: 'done after the retry' } }] } },
    ]);
    const clock = new SimulatedClock();
    const model = openaiModel({ model: 'm', baseURL: server.url, apiKey: 'k', stream: true, idleTimeoutMs: IDLE_MS, timeoutMs: 600_000, clock });
    const c = createCoordinator({ model, store: memoryStore(), clock });
    const events: TroupeEvent[] = [];
    c.subscribe((e) => events.push(e));
    const text = () =>
      events
        .filter((e): e is Extract<TroupeEvent, { type: 'agent.delta' }> => e.type === 'agent.delta')
        .map((e) => e.delta.text ?? '')
        .join('');
    const retries = () => events.filter((e) => e.type === 'agent.activity' && e.activity.kind === 'retry');

    const rootId = await c.start({ name: 'lead', task: 'Count.' });
    // The 3 chunks arrive over the real socket; no simulated time has passed.
    await until(
      'the third chunk',
      () => Promise.resolve(text()),
      (t) => t === 'one two three ',
      10_000,
    );
    await flush();

    clock.increment(IDLE_MS * 0.9);
    await flush();
    expect(retries()).toEqual([]);
    expect(server.requests).toHaveLength(1);

    clock.increment(IDLE_MS * 0.2);
    const [retry] = await until(
      'the retry',
      () => Promise.resolve(retries()),
      (r) => r.length === 1,
      10_000,
    );
    expect(retry).toMatchObject({ activity: { kind: 'retry', code: 'PROVIDER_TIMEOUT', retry: 1, message: expect.stringContaining('idleTimeoutMs') } });

    // The retry goes after its backoff (2 s) and its answer finishes the agent.
    clock.increment(2_000);
    await until(
      'the second request',
      () => Promise.resolve(server.requests.length),
      (n) => n === 2,
      10_000,
    );
    expect(await c.waitFor(rootId, ['completed', 'failed', 'crashed', 'stopped'])).toMatchObject({ status: 'completed' });
    expect(c.get(rootId).report?.summary).toBe('done after the retry');
    server.assertComplete();
    await c.shutdown();
  });
});
