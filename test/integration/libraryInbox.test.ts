/**
 * A run hosted by a library call on a SQLite file (the public `createCoordinator` and
 * `resumeCoordinator`) takes what other processes post to its inbox: `troupe send` and
 * `troupe stop` from another terminal reach it, applied once and answered.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createCoordinator, resumeCoordinator } from '../../src/index.js';
import { openStore } from '../../src/store/sqliteStore.js';
import { troupe, workdir } from '../helpers/cli.js';
import { recording } from '../helpers/models.js';

describe('a run a library call hosts on a SQLite file', () => {
  it('troupe send and troupe stop from another process reach it through its inbox, once', async () => {
    const cwd = workdir();
    const db = join(cwd, 'app.db');
    const { model, seen } = recording();
    const store = openStore({ path: db });
    const c = createCoordinator({ model, store, interactive: true });
    try {
      const rootId = await c.start({ name: 'lead', task: 'Stand by.' });
      await c.waitFor(rootId, ['waiting']);
      const sent = await troupe(['send', 'lead', 'hello from another terminal', '--db', db], cwd);
      expect(sent.code, sent.stderr).toBe(0);
      expect(sent.stdout).toMatch(/^delivered to lead/);
      await c.waitFor(rootId, ['waiting']);
      expect(seen.filter((s) => s.includes('hello from another terminal'))).toHaveLength(1);
      expect(store.listMessages(c.runId).filter((m) => m.content === 'hello from another terminal')).toHaveLength(1);
    } finally {
      await c.shutdown();
      store.close();
    }

    // Resumed by a library call: the same.
    const again = openStore({ path: db });
    const runId = again.listRuns()[0]!.id;
    const resumed = await resumeCoordinator({ model, store: again, runId });
    try {
      const stopped = await troupe(['stop', 'lead', '--db', db], cwd);
      expect(stopped.code, stopped.stderr).toBe(0);
      await resumed.waitFor(resumed.list()[0]!.id, ['stopped']);
    } finally {
      await resumed.shutdown();
      again.close();
    }
  });
});
