/**
 * `submitRun` with an idempotency key: a second submit with the same key creates nothing and
 * resolves with the first's run — on a SQLite file (the hosting port of a file this process owns)
 * and on PostgreSQL, from another connection, as a retried request from another machine would.
 */
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { sqliteHosting } from '../../src/hosting/sqliteHosting.js';
import { openPostgresStore } from '../../src/store/postgres/store.js';
import { openStore } from '../../src/store/sqliteStore.js';
import { runIdOfKey, submitRun } from '../../src/worker/submit.js';
import { workdir } from '../helpers/cli.js';
import { freshSchema, PG_URL, pgAvailable, pgTitle } from '../helpers/pg.js';

const root = { name: 'lead', task: 'Review the repository.' };
const event = { type: 'cli.run', data: { model: 'm' } };

describe('a submit with a key', () => {
  it('on SQLite: the same key is the same run, one root and one first event; a bad key or a key with a runId is refused', async () => {
    const store = openStore({ path: join(workdir(), 'runs.db') });
    try {
      const hosting = sqliteHosting(store);
      const first = await submitRun(hosting, { root, event, key: 'ticket-4711' });
      expect(first.runId).toBe(runIdOfKey('ticket-4711'));
      expect(first.existing).toBeUndefined();
      const again = await submitRun(hosting, { root: { name: 'lead', task: 'something else' }, event, key: 'ticket-4711' });
      expect(again).toEqual({ runId: first.runId, rootId: first.rootId, existing: true });
      const other = await submitRun(hosting, { root, key: 'ticket-4712' });
      expect(other.runId).not.toBe(first.runId);
      expect(store.listAgents(first.runId).map((a) => a.task)).toEqual([root.task]);
      expect(store.listEvents(first.runId).filter((e) => e.type === 'cli.run')).toHaveLength(1);
      await expect(submitRun(hosting, { root, key: '' })).rejects.toMatchObject({ code: 'CONFIG_INVALID' });
      await expect(submitRun(hosting, { root, key: 'x'.repeat(201) })).rejects.toMatchObject({ code: 'CONFIG_INVALID' });
      await expect(submitRun(hosting, { root, key: 'k', runId: 'run_k' })).rejects.toMatchObject({ code: 'CONFIG_INVALID' });
      expect(store.listRuns()).toHaveLength(2);
    } finally {
      store.close();
    }
  });
});

const available = await pgAvailable();

describe.skipIf(!available)(pgTitle(available, 'a submit with a key, on PostgreSQL'), () => {
  const { schema, drop } = freshSchema();
  afterAll(async () => {
    await drop();
  });

  it('a retry from another connection, and two racing, get the first run', async () => {
    const a = await openPostgresStore({ url: PG_URL, schema });
    const b = await openPostgresStore({ url: PG_URL, schema });
    try {
      const first = await submitRun(a, { root, event, key: 'deploy-2026-12-03' });
      expect(await submitRun(b, { root, event, key: 'deploy-2026-12-03' })).toEqual({ runId: first.runId, rootId: first.rootId, existing: true });
      // Two at once: one creates, the other gets that run (or, while the first holds the claim
      // before its run is in, RUN_LOCKED: retryable, and nothing created twice).
      const raced = await Promise.allSettled([submitRun(a, { root, key: 'race' }), submitRun(b, { root, key: 'race' })]);
      const runs = raced.flatMap((r) => (r.status === 'fulfilled' ? [r.value.runId] : []));
      expect(new Set(runs)).toEqual(new Set([runIdOfKey('race')]));
      for (const r of raced) if (r.status === 'rejected') expect(r.reason).toMatchObject({ code: 'RUN_LOCKED' });
      expect((await a.reads.listAgents(runIdOfKey('race'))).filter((x) => x.parentId === null)).toHaveLength(1);
    } finally {
      await a.close();
      await b.close();
    }
  });
});
