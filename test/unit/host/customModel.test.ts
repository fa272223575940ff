/**
 * A custom model is a boundary: the gateway reads whatever it answers once. A plain object (no
 * promise) is read like a promise of it; no turn at all fails the agent with
 * PROVIDER_INVALID_RESPONSE; a ProviderError thrown at once is classified like a rejected one.
 */
import { describe, expect, it } from 'vitest';
import { ProviderError } from '../../../src/errors.js';
import { createCoordinator } from '../../../src/host/createCoordinator.js';
import type { Model, ModelTurn } from '../../../src/model/types.js';

const TERMINAL = ['completed', 'failed', 'crashed', 'stopped'] as const;
const finish: ModelTurn = { text: null, toolCalls: [{ id: 'f', name: 'finish', arguments: '{"summary":"ok"}' }] };

async function runWith(complete: Model['complete']) {
  const c = createCoordinator({ model: { complete }, retry: { maxRetries: 0 } });
  const id = await c.start({ name: 'lead', task: 'work' });
  const info = await c.waitFor(id, TERMINAL);
  await c.shutdown();
  return info;
}

describe('a custom model at the gateway', () => {
  it('answering with a plain object, not a promise, is read as its answer', async () => {
    const info = await runWith((() => finish) as unknown as Model['complete']);
    expect(info.status).toBe('completed');
  });

  it('answering with no turn fails the agent with PROVIDER_INVALID_RESPONSE', async () => {
    const info = await runWith(() => Promise.resolve(undefined as unknown as ModelTurn));
    expect([info.status, info.error?.code]).toEqual(['failed', 'PROVIDER_INVALID_RESPONSE']);
  });

  it('a ProviderError thrown at once fails the agent with its code, like a rejected one', async () => {
    const refuse = () => {
      throw new ProviderError('PROVIDER_AUTH', 'the key was refused');
    };
    const info = await runWith(refuse);
    expect([info.status, info.error?.code]).toEqual(['failed', 'PROVIDER_AUTH']);
  });
});
