/**
 * A send with a key is queued at most once per run, across a restart: the repeat queues nothing and
 * resolves with the first message's id. The inbox keys each request's message by the request, so a
 * request applied twice (its host died before answering it) delivers one message.
 */
import { describe, expect, it } from 'vitest';
import { createCoordinator } from '../../../src/host/createCoordinator.js';
import { resumeCoordinator } from '../../../src/host/resumeCoordinator.js';
import { parks } from '../../helpers/models.js';
import { memoryStore } from '../../../src/store/memoryStore.js';

describe('a keyed send', () => {
  it('is queued once per key and run, across a restart; the repeat resolves with the first id', async () => {
    const store = memoryStore();
    const c = createCoordinator({ store, model: parks, interactive: true });
    const root = await c.start({ name: 'lead', task: 'talk' });
    await c.waitFor(root, ['waiting']);
    const first = await c.send(root, { content: 'hello', key: 'k1' });
    const again = await c.send(root, { content: 'hello', key: 'k1' });
    expect(again.id).toBe(first.id);
    const other = await c.send(root, { content: 'hello', key: 'k2' });
    expect(other.id).not.toBe(first.id);
    await c.whenIdle();
    await c.shutdown();
    const resumed = await resumeCoordinator({ store, model: parks });
    expect((await resumed.send(root, { content: 'hello', key: 'k1' })).id).toBe(first.id);
    await resumed.whenIdle();
    await resumed.shutdown();
    const hellos = store.listMessages(c.runId).filter((m) => m.content === 'hello');
    expect(hellos.map((m) => m.id).sort()).toEqual([first.id, other.id].sort());
    expect(store.loadSession(root).filter((i) => i.role === 'user' && i.content === 'hello')).toHaveLength(2);
  });

  it('keys an inbox request by its id: applying it twice answers the same message id and queues one', async () => {
    const store = memoryStore();
    const c = createCoordinator({ store, model: parks, interactive: true });
    const root = await c.start({ name: 'lead', task: 'talk' });
    await c.waitFor(root, ['waiting']);
    const request = { id: 7, kind: 'send' as const, payload: { agent: 'lead', content: 'from outside' } };
    const once = await c.applyRequest(request);
    const twice = await c.applyRequest(request);
    expect(once).toMatchObject({ ok: true });
    expect(twice.messageId).toBe(once.messageId);
    await c.whenIdle();
    await c.shutdown();
    expect(store.listMessages(c.runId).filter((m) => m.content === 'from outside')).toHaveLength(1);
  });

  it('refuses a key that is not a string of 1 to 200 characters, queuing nothing', async () => {
    const c = createCoordinator({ model: parks, interactive: true });
    const root = await c.start({ name: 'lead', task: 'talk' });
    await expect(c.send(root, { content: 'x', key: '' })).rejects.toMatchObject({ code: 'CONFIG_INVALID' });
    await expect(c.send(root, { content: 'x', key: 'k'.repeat(201) })).rejects.toMatchObject({ code: 'CONFIG_INVALID' });
    await c.shutdown();
  });
});
