/**
 * A model request is a snapshot of the session when the call was made: a model that keeps it and
 * reads its messages later (after more turns, after a compaction) sees what it was asked, not what
 * the session became. The gateway copies the messages only when they are first read. The lazy parts
 * (the messages, the call's AbortSignal) are own enumerable properties, so a model that wraps
 * another and spreads the request or the options passes them on, as with plain objects.
 */
import { describe, expect, it } from 'vitest';
import { createCoordinator } from '../../../src/host/createCoordinator.js';
import type { Model, ModelCallOptions, ModelRequest } from '../../../src/model/types.js';
import { defineTool } from '../../../src/tools/defineTool.js';

const work = defineTool({ name: 'work', description: 'a step', parameters: { type: 'object' }, execute: () => 'ok' });

describe('model requests', () => {
  it('keep the session as it was when the call was made, read now or later', async () => {
    const kept: ModelRequest[] = [];
    const readAtOnce: number[] = [];
    const model: Model = {
      complete: (request) => {
        kept.push(request);
        // Every other request is read at once; the rest only after the run.
        if (request.turn % 2 === 0) readAtOnce.push(request.messages.length);
        const call = request.turn < 5 ? { id: `c${request.turn}`, name: 'work', arguments: '{}' } : { id: 'f', name: 'finish', arguments: '{"summary":"ok"}' };
        return Promise.resolve({ text: null, toolCalls: [call] });
      },
    };
    const c = createCoordinator({ model, tools: [work] });
    const id = await c.start({ name: 'lead', task: 'work' });
    expect((await c.waitFor(id, ['completed'])).status).toBe('completed');
    // Turn n sees the task plus an answer and a result for each of the n - 1 turns before it.
    expect(kept.map((r) => r.messages.length)).toEqual([1, 3, 5, 7, 9]);
    expect(readAtOnce).toEqual([3, 7]);
    expect(kept.map((r) => r.messages.at(-1)?.role)).toEqual(['user', 'tool', 'tool', 'tool', 'tool']);
    await c.shutdown();
  });

  it('survive a spread: a wrapping model passes the messages and a live signal on', async () => {
    const seen: { keys: string[]; messages: number; json: string }[] = [];
    let aborted: unknown = null;
    let secondCall!: () => void;
    const hanging = new Promise<void>((resolve) => (secondCall = resolve));
    const inner = (request: ModelRequest, options: ModelCallOptions) => {
      seen.push({ keys: Object.keys(request), messages: request.messages.length, json: JSON.stringify(request) });
      if (request.turn === 1) return Promise.resolve({ text: null, toolCalls: [{ id: 'c1', name: 'work', arguments: '{}' }] });
      // The second call hangs until the stop cancels it through the spread signal.
      secondCall();
      return new Promise<never>((_, reject) =>
        options.signal.addEventListener('abort', () => {
          aborted = options.signal.reason;
          reject(new Error('cancelled'));
        }),
      );
    };
    const model: Model = {
      complete: (request, options) => inner({ ...request, system: `${request.system}!` }, { ...options }),
    };
    const c = createCoordinator({ model, tools: [work] });
    const id = await c.start({ name: 'lead', task: 'work' });
    await hanging;
    const stopping = c.stop(id);
    expect((await c.waitFor(id, ['completed', 'failed', 'crashed', 'stopped'])).status).toBe('stopped');
    await stopping;
    expect(aborted).not.toBeNull();
    expect(seen.map((s) => s.messages)).toEqual([1, 3]);
    expect(seen[0]!.keys).toEqual(expect.arrayContaining(['agent', 'system', 'messages', 'tools', 'turn']));
    expect(JSON.parse(seen[1]!.json).messages).toHaveLength(3);
    await c.shutdown();
  });
});
