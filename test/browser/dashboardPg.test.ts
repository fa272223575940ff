/**
 * The dashboard in Chromium over PostgreSQL (issue 33 item 1): a run hosted by a worker asks for an
 * approval and is let go parked (nobody hosts it while its agent waits); the page, served by a
 * process with its own connection (`troupe ui --db postgres://…`), shows the pending approval with
 * its arguments, and approving it with edited arguments is recorded through the run's inbox; the
 * worker takes the run again and runs the step once, with the edited arguments, and the agent
 * goes on from its result. Skips in one line without Chromium (test/helpers/browser.ts) or
 * PostgreSQL (test/helpers/pg.ts); TROUPE_REQUIRE_BROWSER=1 and TROUPE_REQUIRE_PG=1 make those failures.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { startDashboard } from '../../src/dashboard/server.js';
import { runsSource } from '../../src/dashboard/sources.js';
import { postgresRuns } from '../../src/hosting/postgresRuns.js';
import type { Model, ModelRequest, ModelTurn } from '../../src/model/types.js';
import { openPostgresStore, type PostgresStore } from '../../src/store/postgres/store.js';
import { submitRun } from '../../src/worker/submit.js';
import { startWorker, type Worker } from '../../src/worker/worker.js';
import { dropTableTool } from '../helpers/approvals.js';
import { BROWSER, launch, shot } from '../helpers/browser.js';
import { freshSchema, PG_URL, pgAvailable, pgTitle } from '../helpers/pg.js';

// Asked only where the browser runs: one skip line says which is missing.
const available = BROWSER && (await pgAvailable());
const NAME = 'the dashboard in Chromium answers an approval of a run on PostgreSQL';
const title = BROWSER ? pgTitle(available, NAME) : `SKIPPED (no Chromium): ${NAME}`;

/**
 * The lead, as a pure function of its conversation (any host continues it): it asks to drop the
 * users table, waits while that is held for approval, and answers the user once the step ran.
 */
function leadModel(calls: ModelRequest[]): Model {
  let n = 0;
  const call = (name: string, args: object) => ({ text: null, toolCalls: [{ id: `c${n++}`, name, arguments: JSON.stringify(args) }] });
  return {
    name: 'approvals-on-pg',
    complete(request: ModelRequest): Promise<ModelTurn> {
      calls.push(request);
      const text = JSON.stringify(request.messages);
      if (text.includes('dropped ')) return Promise.resolve(call('respond_to_user', { message: 'Dropped it.' }));
      if (request.messages.some((m) => m.role === 'tool')) return Promise.resolve(call('wait_for_agents', { reason: 'the approval' }));
      return Promise.resolve(call('drop_table', { table: 'users' }));
    },
  };
}

describe.skipIf(!available)(title, () => {
  const { schema, drop } = freshSchema();
  let browser: Browser;
  let hostStore: PostgresStore;
  let uiStore: PostgresStore;
  let worker: Worker | undefined;
  beforeAll(async () => {
    browser = await launch();
    hostStore = await openPostgresStore({ url: PG_URL, schema });
    uiStore = await openPostgresStore({ url: PG_URL, schema });
  });
  afterAll(async () => {
    await worker?.stop();
    await browser?.close();
    await hostStore?.close();
    await uiStore?.close();
    await drop();
  });

  it('a parked approval: edited and approved from the page, the worker runs the step once with the edits and the agent goes on', async () => {
    const { runs, tool } = dropTableTool();
    const calls: ModelRequest[] = [];
    const model = leadModel(calls);
    worker = await startWorker({
      store: hostStore,
      ttlMs: 5_000,
      pollMs: 200,
      hostOptions: () => ({ model, tools: [tool], approvals: { ask: ['destructive'] } }),
    });
    const { runId, rootId } = await submitRun(uiStore, { root: { name: 'lead', task: 'Clean up the database.' }, interactive: true });
    // Asked, then let go parked: no process hosts the run while it waits on the approval.
    const lease = async () => (await uiStore.leases()).find((l) => l.run_id === runId);
    await expect.poll(lease, { timeout: 20_000 }).toMatchObject({ state: 'parked', owner: null });
    expect(calls).toHaveLength(2);
    expect(runs).toEqual([]);

    const handle = await startDashboard(runsSource(postgresRuns(uiStore), 100), { port: 0, batchMs: 50 });
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    try {
      await page.goto(handle.url);
      const card = page.locator('#approvals-pending .approval[data-approval="ap-1"]');
      const answered = page.locator('#approvals-answered li[data-approval="ap-1"]');
      await card.waitFor();
      expect(await page.locator('#approvals-count').textContent()).toBe('1 waiting for you');
      expect(await card.locator('.approval-head').textContent()).toMatch(/^ap-1leaddrop_tabledestructiveasked /);
      expect(JSON.parse(await card.locator('textarea').inputValue())).toEqual({ table: 'users' });

      await card.locator('textarea').fill('{ "table": "users_tmp" }');
      await card.locator('button.approve').click();
      await expect
        .poll(() => page.locator('#approval-result').textContent())
        .toMatch(/^approval ap-1 approved with edited arguments: drop_table runs for lead/);
      // The worker took the run again and ran the step, once, with the edited arguments; the page shows it ran.
      await expect.poll(() => answered.getAttribute('data-state'), { timeout: 20_000 }).toBe('ran');
      expect(await answered.textContent()).toMatch(/^ran ap-1 lead · drop_table \(destructive\): approved with \{"table":"users_tmp"\} — .*dropped users_tmp$/);
      expect(runs).toEqual([{ table: 'users_tmp' }]);
      // The agent went on from the step's result, once: it answered the user and waits on them.
      await expect
        .poll(async () => (await uiStore.reads.listAgents(runId)).find((a) => a.id === rootId), { timeout: 20_000 })
        .toMatchObject({ status: 'waiting', waitKind: 'user' });
      expect(calls).toHaveLength(3);
      expect(JSON.stringify(calls[2]!.messages)).toContain('dropped users_tmp');
      // One answer was posted to the run's inbox, and it was applied.
      const { rows } = await uiStore.pool.query<{ kind: string; payload: string; done_at: string | null }>(
        'SELECT kind, payload, done_at FROM inbox WHERE run_id = $1',
        [runId],
      );
      expect(rows.map((r) => [r.kind, JSON.parse(r.payload) as unknown, r.done_at !== null])).toEqual([
        ['approval', { approval: 'ap-1', approve: true, args: { table: 'users_tmp' } }, true],
      ]);
      await expect.poll(lease, { timeout: 20_000 }).toMatchObject({ state: 'parked', owner: null });
      expect(runs).toHaveLength(1);
      await page.screenshot({ path: shot('approvals-postgres') });
      expect(errors).toEqual([]);
    } finally {
      await page.close();
      await handle.close();
    }
  });
});
