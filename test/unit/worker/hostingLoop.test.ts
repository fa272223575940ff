/**
 * The hosting loop's idle watch (worker/runHosting.ts): a watch begun before a round applied
 * requests is replaced, because it may have judged the run idle before their work began. Trusted,
 * it lets the host shut the run down under the turn the request started, and host it again.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createCoordinator } from '../../../src/host/createCoordinator.js';
import { sqliteHosting } from '../../../src/hosting/sqliteHosting.js';
import type { HostingStore } from '../../../src/hosting/hostingStore.js';
import { openStore } from '../../../src/store/sqliteStore.js';
import { startWorker } from '../../../src/worker/worker.js';
import { until } from '../../helpers/cli.js';
import { parks } from '../../helpers/models.js';
import type { Model, ModelRequest } from '../../../src/model/types.js';

const textOf = (request: ModelRequest) => request.messages.map((m) => (typeof m.content === 'string' ? m.content : '')).join('\n');

describe('the hosting loop', () => {
  it('a watch that judged the run idle while a round read its requests is not trusted: the run is let go once, after the turn they started', async () => {
    const store = openStore({ path: join(mkdtempSync(join(tmpdir(), 'troupe-hosting-')), 'run.db') });
    // The run exists, its lead parked waiting on its user.
    const first = createCoordinator({ model: parks, store, interactive: true });
    const lead = await first.start({ name: 'lead', task: 'Stand by.' });
    await first.waitFor(lead, ['waiting']);
    await first.shutdown();
    const runId = first.runId;

    // The calls after the boot's: the first two wait for the test (an aborted one gives up).
    const seen: string[] = [];
    const gates: (() => void)[] = [];
    const model: Model = {
      ...parks,
      complete: async (request, options) => {
        seen.push(textOf(request));
        if (seen.length <= 2)
          await new Promise<void>((resolve, reject) => {
            gates.push(resolve);
            options.signal.addEventListener('abort', () => reject(options.signal.reason as Error), { once: true });
          });
        return parks.complete(request, options);
      },
    };

    const hosting = sqliteHosting(store);
    let lists = 0;
    let hostings = 0;
    // Set by the test: run once by the round that reads the next open request, before it applies it.
    let beforeApply: (() => Promise<void>) | null = null;
    let reads = 0;
    const watched: HostingStore = {
      ...hosting,
      openRequests: async (id) => {
        reads += 1;
        const open = await hosting.openRequests(id);
        if (open.length > 0 && beforeApply) {
          const hold = beforeApply;
          beforeApply = null;
          await hold();
        }
        return open;
      },
    };
    const worker = await startWorker({
      store: watched,
      concurrency: 1,
      pollMs: 20,
      hostOptions: () => ({ model, interactive: true }),
      onHost: (c) => {
        hostings += 1;
        const list = c.list;
        // The idle watch's last step lists the agents: counted, the test knows it judged.
        c.list = () => ((lists += 1), list());
      },
    });
    try {
      const post = (content: string) => hosting.post({ runId, kind: 'send', payload: { agent: 'lead', content }, at: Date.now() });
      await post('first');
      await until(
        'the lead working on "first"',
        async () => gates.length,
        (n) => n === 1,
      );
      // The lead's turn is out: the rounds' idle watch waits. "second" is read while the turn
      // answers, and applied only after the watch judged the run idle.
      beforeApply = async () => {
        const judged = lists;
        gates[0]!();
        await until(
          'the watch judging the run idle',
          async () => lists,
          (n) => n > judged,
        );
      };
      await post('second');
      await until(
        'the lead working on "second"',
        async () => seen.length,
        (n) => n >= 2,
      );
      // Trusted, the stale watch lets the run go at once, under this turn; replaced, the new one
      // waits for it through the rounds that follow.
      const from = reads;
      await until(
        'three more rounds',
        async () => reads,
        (n) => n >= from + 3,
      );
      gates[1]!();
      await until(
        'the run let go',
        async () => worker.hosted().length + store.openInbox(runId).length,
        (n) => n === 0,
      );
      // Hosted once, "second" answered by the one turn it started (trusted, the stale watch shuts
      // the run down under it: the turn is cut and the run hosted again to answer it anew).
      expect(hostings).toBe(1);
      expect(seen.filter((s) => s.includes('second'))).toHaveLength(1);
      expect(store.getAgent(lead)?.status).toBe('waiting');
    } finally {
      await worker.stop();
      store.close();
    }
  });
});
