/**
 * Every caller of `shutdown()` waits for the one shutdown, its last commit included. A second
 * caller that returned early let its host release the run (or close the store) under a commit in
 * flight: the worker's stop and its hosting loop both shut a coordinator down, and the loop then
 * released the lease while the final group was still being written.
 */
import { describe, expect, it } from 'vitest';
import { createCoordinator } from '../../../src/host/createCoordinator.js';
import { parks } from '../../helpers/models.js';
import { memoryStore } from '../../../src/store/memoryStore.js';
import { portOf, type StorePort } from '../../../src/store/port.js';

describe('shutdown', () => {
  it('resolves for every caller only once the last commit is durable', async () => {
    const store = memoryStore();
    const inner = portOf(store);
    let slow = false;
    let commits = 0;
    // A port whose commits take a while once `slow` is set (a networked store's round trip).
    const port: StorePort = {
      ...inner,
      inMemory: false,
      async commit(ops) {
        if (slow) await new Promise((resolve) => setTimeout(resolve, 50));
        await inner.commit(ops);
        commits += 1;
      },
    };
    const c = createCoordinator<StorePort>({ store: port, model: parks, interactive: true });
    const root = await c.start({ name: 'lead', task: 'talk' });
    await c.waitFor(root, ['waiting']);
    slow = true;
    const before = commits;
    // Staged, not yet committed: the shutdown's last group carries it.
    void c.send(root, { content: 'last words' }).catch(() => undefined);
    void c.shutdown();
    await c.shutdown();
    expect(commits).toBeGreaterThan(before);
    expect(store.listMessages(c.runId).map((m) => m.content)).toContain('last words');
    // Its wake came during the shutdown (after the commit): no turn starts then. The message stays
    // in the mailbox for the next host and the agent stays parked — a turn started then would
    // deliver it with no `running` recorded, and the next host would park a run whose agent had
    // been told something it never answered (the failover harness's lost wake).
    expect(store.listMessages(c.runId).find((m) => m.content === 'last words')?.deliveredAt).toBeNull();
    expect(store.getAgent(root)?.status).toBe('waiting');
    expect(store.loadSession(root).some((i) => i.role === 'user' && typeof i.content === 'string' && i.content.includes('last words'))).toBe(false);
  });
});
