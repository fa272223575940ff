/**
 * The public `createCoordinator` and `resumeCoordinator` (hosting/library.ts) keep the API: with no
 * store (the default memory store) or a memory store they work as before, with no inbox to apply.
 */
import { describe, expect, it } from 'vitest';
import { createCoordinator, resumeCoordinator } from '../../../src/index.js';
import { memoryStore } from '../../../src/store/memoryStore.js';
import { parks } from '../../helpers/models.js';

describe('the library coordinator', () => {
  it('without a store, and on a memory store, runs and resumes as before', async () => {
    const bare = createCoordinator({ model: parks, interactive: true });
    const lead = await bare.start({ name: 'lead', task: 'talk' });
    expect((await bare.waitFor(lead, ['waiting'])).status).toBe('waiting');
    await bare.shutdown();

    const store = memoryStore();
    const c = createCoordinator({ model: parks, store, interactive: true });
    const root = await c.start({ name: 'lead', task: 'talk' });
    await c.waitFor(root, ['waiting']);
    await c.shutdown();
    const again = await resumeCoordinator({ model: parks, store });
    expect(again.get(root).status).toBe('waiting');
    await again.shutdown();
  });
});
