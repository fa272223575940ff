/**
 * A host that runs no turns (`holdTurns`, what a CLI command hosting a run only to apply a request
 * uses): no model call, mail stays queued, a finished execution is left for the next host to
 * continue; a stop still stops. The next host that runs turns picks everything up.
 */
import { describe, expect, it } from 'vitest';
import { createCoordinator } from '../../../src/host/createCoordinator.js';
import { resumeCoordinator } from '../../../src/host/resumeCoordinator.js';
import { recording } from '../../helpers/models.js';
import { memoryStore } from '../../../src/store/memoryStore.js';

const EXECUTION = '7f1c3a52-9d4e-4b8a-a1f0-2c6d8e9b0a13';

describe('holdTurns', () => {
  it('makes no call and leaves mail queued; the next host reads it', async () => {
    const store = memoryStore();
    const first = recording();
    const c = createCoordinator({ store, model: first.model, interactive: true });
    const root = await c.start({ name: 'lead', task: 'talk' });
    await c.waitFor(root, ['waiting']);
    await c.shutdown();

    const held = recording();
    const h = await resumeCoordinator({ store, model: held.model, holdTurns: true });
    await h.send(root, { content: 'from outside' });
    await h.shutdown();
    expect(held.seen).toEqual([]);
    expect(store.pendingMessagesOf(c.runId).map((m) => m.content)).toEqual(['from outside']);
    expect(store.getAgent(root)?.status).toBe('running');

    const next = recording();
    const r = await resumeCoordinator({ store, model: next.model });
    await r.waitFor(root, ['waiting']);
    await r.shutdown();
    expect(next.seen.some((s) => s.includes('from outside'))).toBe(true);
  });

  it('stops an agent on request without running its turn', async () => {
    const store = memoryStore();
    const held = recording();
    // A submitter's host: the root is registered and running, and no call is made.
    const h = createCoordinator({ store, model: held.model, interactive: true, holdTurns: true });
    const root = await h.start({ name: 'lead', task: 'talk' });
    expect(await h.stop(root)).toEqual([root]);
    await h.shutdown();
    expect(held.seen).toEqual([]);
    expect(store.getAgent(root)?.status).toBe('stopped');
  });

  it('records an execution’s end and leaves its continuation to the next host', async () => {
    const store = memoryStore();
    const c = createCoordinator({ store, model: recording().model, interactive: true });
    const root = await c.start({ name: 'lead', task: 'talk' });
    await c.waitFor(root, ['waiting']);
    await store.transaction(() => store.linkExecution({ id: EXECUTION, agentId: root, linkedAt: 1 }));
    await c.shutdown();

    const h = await resumeCoordinator({ store, model: recording().model, holdTurns: true });
    expect(await h.executions.finish(EXECUTION, { status: 'completed', result: 'provisioned' })).toBe(true);
    await h.shutdown();
    expect(store.getExecution(EXECUTION)).toMatchObject({ status: 'completed', continuedAt: null });

    const next = recording();
    const r = await resumeCoordinator({ store, model: next.model });
    await r.waitFor(root, ['waiting']);
    await r.whenIdle();
    await r.shutdown();
    expect(next.seen.some((s) => s.includes(`execution ${EXECUTION} completed: provisioned`))).toBe(true);
  });
});
