/**
 * The public `createCoordinator` and `resumeCoordinator` (worker/library.ts) keep the API: with no
 * store (the default memory store) or a memory store they work as before, with no inbox to apply;
 * on a SQLite file the run is hosted through the one hosting loop (worker.ts `adopt`), which applies
 * what other processes post and never shuts down or rebuilds the coordinator its caller holds.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { createCoordinator, resumeCoordinator } from '../../../src/index.js';
import { createCoordinator as bareCoordinator } from '../../../src/host/createCoordinator.js';
import { hostInLoop } from '../../../src/worker/library.js';
import { sqliteHosting } from '../../../src/hosting/sqliteHosting.js';
import { memoryStore } from '../../../src/store/memoryStore.js';
import { openStore } from '../../../src/store/sqliteStore.js';
import { startWorker } from '../../../src/worker/worker.js';
import { until } from '../../helpers/cli.js';
import { parks, recording } from '../../helpers/models.js';
import type { Model } from '../../../src/model/types.js';

const fileStore = () => openStore({ path: join(mkdtempSync(join(tmpdir(), 'troupe-library-')), 'run.db') });

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

  it('on a file, the loop applies each posted request once and keeps the idle run hosted, with the caller’s coordinator', async () => {
    const store = fileStore();
    const { model, seen } = recording();
    const c = createCoordinator({ model, store, interactive: true });
    const lead = await c.start({ name: 'lead', task: 'Stand by.' });
    await c.waitFor(lead, ['waiting']);
    const post = (content: string) => store.postInbox({ runId: c.runId, kind: 'send', payload: { agent: 'lead', content }, at: Date.now() });
    // Posted as another process posts (`troupe send`): applied at the loop's poll, answered, once.
    for (const content of ['first', 'second']) {
      post(content);
      await until(
        `"${content}" applied`,
        async () => store.openInbox(c.runId).length,
        (open) => open === 0,
      );
      // Answered once applied; the lead's turn comes after the commit (its wake): wait for the
      // model to have seen it before posting the next, or both could reach one request.
      await until(
        `"${content}" seen`,
        async () => seen.filter((s) => s.includes(content)).length,
        (n) => n > 0,
      );
      await c.waitFor(lead, ['waiting']);
    }
    // Idle in between (a kept run is never let go): the same coordinator took both, each once.
    expect(seen.filter((s) => s.includes('first') && !s.includes('second'))).toHaveLength(1);
    expect(seen.filter((s) => s.includes('second'))).toHaveLength(1);
    expect(c.health().ok).toBe(true);
    await c.shutdown();
    store.close();
  });

  it('keeps one idle watch while the run is busy: the rounds that found it busy leave none behind to list every agent when it falls idle', async () => {
    const store = fileStore();
    let answer!: () => void;
    const answered = new Promise<void>((resolve) => (answer = resolve));
    // The lead's first call is answered when the test says; then it parks.
    let first = true;
    const model: Model = {
      ...parks,
      complete: async (request, options) => {
        if (first) {
          first = false;
          await answered;
        }
        return parks.complete(request, options);
      },
    };
    const c = bareCoordinator({ model, store, interactive: true });
    let lists = 0;
    const counted = { ...c, list: () => (lists++, c.list()) };
    // Each round of the loop reads the run's inbox.
    const rounds = vi.spyOn(store, 'openInbox');
    const lead = await c.start({ name: 'lead', task: 'Stand by.' });
    const stop = hostInLoop(counted, store, 2);
    await until(
      '200 rounds while the lead is busy',
      async () => rounds.mock.calls.length,
      (n) => n >= 200,
    );
    expect(lists).toBe(0);
    answer();
    await c.waitFor(lead, ['waiting']);
    const idleAt = rounds.mock.calls.length;
    await until(
      'ten more reads of the inbox',
      async () => rounds.mock.calls.length,
      (n) => n >= idleAt + 10,
    );
    // One list per idle judgement (a round reads the inbox once or twice); a watch per busy round
    // listed ~200 times at once.
    expect(lists).toBeLessThanOrEqual(rounds.mock.calls.length - idleAt + 1);
    await stop();
    await c.shutdown();
    store.close();
  });

  it('the loop never shuts down an adopted coordinator, ends when its owner does, and refuses a second adoption', async () => {
    const store = fileStore();
    const errors: unknown[] = [];
    const logger = pino({ level: 'warn' }, { write: (line: string) => void errors.push(JSON.parse(line)) });
    const c = bareCoordinator({ model: parks, store, interactive: true });
    const lead = await c.start({ name: 'lead', task: 'Stand by.' });
    await c.waitFor(lead, ['waiting']);
    const worker = await startWorker({
      store: sqliteHosting(store),
      concurrency: 0,
      pollMs: 10,
      unref: true,
      logger,
      hostOptions: () => Promise.reject(new Error('never asked')),
    });
    await worker.adopt(c);
    await expect(worker.adopt(c)).rejects.toMatchObject({ code: 'RUN_LOCKED' });
    // Its owner shuts it down while the loop polls: the loop ends quietly (no request applied to a shut-down coordinator).
    store.postInbox({ runId: c.runId, kind: 'send', payload: { agent: 'lead', content: 'late' }, at: Date.now() });
    await c.shutdown();
    await until(
      'the loop let the run go',
      async () => worker.hosted(),
      (ids) => ids.length === 0,
    );
    await worker.stop();
    expect(errors).toEqual([]);
    // The late request is left open for the run's next host, not answered by a coordinator that is gone.
    expect(store.openInbox(c.runId).map((r) => r.payload.content)).toEqual(['late']);

    // Stopping the loop leaves the caller's coordinator running.
    const again = bareCoordinator({ model: parks, store, interactive: true });
    const stop = hostInLoop(again, store, 10);
    await stop();
    expect(again.health().ok).toBe(true);
    await again.shutdown();
    store.close();
  });
});
