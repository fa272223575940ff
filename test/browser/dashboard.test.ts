/**
 * The dashboard in a real browser (headless Chromium): the demo's database shows its five agents
 * with their statuses and the reserve trip on the timeline; clicking an agent shows its transcript;
 * a live run updates without a reload; a message sent and an agent stopped from the page reach
 * the database (and a refusal shows its typed error); a wrong token is refused; a run of 1,000
 * agents draws only the lanes in view. Screenshots of each view go to test-results/dashboard/.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { applyFileInbox } from '../../src/hosting/library.js';
import { uiServing } from '../../src/cli/ui.js';
import { startDashboard, type DashboardHandle } from '../../src/dashboard/server.js';
import { coordinatorSource, databaseSource } from '../../src/dashboard/sources.js';
import { memoryStore } from '../../src/store/memoryStore.js';
import { portOf } from '../../src/store/port.js';
import { newAgentRow } from '../../src/store/rows.js';
import { openStore } from '../../src/store/sqliteStore.js';
import { BROWSER, launch, shot } from '../helpers/browser.js';
import { workdir } from '../helpers/cli.js';
import { captureIo, demoDb } from '../helpers/dashboard.js';
import { team } from '../helpers/team.js';
import { join } from 'node:path';

const RUN = 'run_big';

/** Agent `i` of the run {@link bigRun} makes: under a0; every third one completed. */
function addAgent(store: ReturnType<typeof memoryStore>, i: number): void {
  const id = `a${i}`;
  const agent = newAgentRow(
    { id, runId: RUN, name: `agent-${i}`, parentId: i === 0 ? null : 'a0', depth: i === 0 ? 0 : 1, task: 'part', skills: [] },
    1_000 + i,
  );
  store.registerAgent({ ...agent, status: i % 3 === 0 ? 'completed' : 'running' }, [{ role: 'user', content: 'go' }]);
  if (i % 3 === 0) store.appendEvent({ runId: RUN, agentId: id, type: 'agent.status', data: { from: 'running', to: 'completed' }, at: 5_000 + i });
}

/** A memory store holding one run of `n` agents (written directly, as rows). */
function bigRun(n: number) {
  const store = memoryStore();
  store.insertRun({
    id: RUN,
    createdAt: 1_000,
    interactive: false,
    rootId: 'a0',
    budget: { limitUsd: null, budgetStopped: false, reserveStopped: false, paused: false, resumeEpoch: 0, reserveNoticeClaimed: false },
  });
  for (let i = 0; i < n; i++) addAgent(store, i);
  return store;
}

const row = (page: Page, name: string) => page.locator(`#agents tr[data-agent="${name}"]`);
const statusOf = (page: Page, name: string) => row(page, name).locator('[data-status]');

describe.skipIf(!BROWSER)('the dashboard in Chromium', () => {
  let browser: Browser;
  beforeAll(async () => {
    browser = await launch();
  });
  afterAll(async () => {
    await browser?.close();
  });

  describe('the demo’s finished run', () => {
    let db: string;
    let handle: DashboardHandle;
    let close: () => void;
    beforeAll(async () => {
      db = await demoDb();
      const store = openStore({ path: db, readonly: true });
      handle = await startDashboard(databaseSource(store, db), { port: 0 });
      close = () => store.close();
    });
    afterAll(async () => {
      await handle?.close();
      close?.();
    });

    it('shows five agents with their statuses, the budget, and the reserve trip on the timeline', async () => {
      const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
      const errors: string[] = [];
      page.on('pageerror', (e) => errors.push(e.message));
      // Console errors too: a file refused by the page's Content-Security-Policy shows there.
      page.on('console', (m) => void (m.type() === 'error' && errors.push(m.text())));
      await page.goto(handle.url);
      await expect.poll(() => page.locator('#agents tr[data-agent]').count()).toBe(5);
      const statuses: Record<string, string> = {};
      for (const name of ['lead', 'scout', 'flaky', 'talker', 'prober']) statuses[name] = (await statusOf(page, name).textContent()) ?? '';
      expect(statuses).toEqual({ lead: 'completed', scout: 'completed', flaky: 'completed', talker: 'stopped', prober: 'failed' });
      expect(await page.locator('#budget-text').textContent()).toMatch(/of \$0\.5000 \(reserve line \$0\.4500\) — reserve tripped/);
      expect(await page.locator('#conn').textContent()).toBe('not live (read only)');
      await page.screenshot({ path: shot('team') });

      await page.click('.tab[data-view="timeline"]');
      const trip = page.locator('#run-marks li[data-kind="trip"]');
      await trip.waitFor();
      expect(await trip.allTextContents()).toEqual([expect.stringMatching(/reserve tripped at \$0\.4\d+$/)]);
      // Tool calls, budget warnings and the trip are drawn as marks on the agents' lanes.
      const marks = () =>
        page.evaluate(() => (globalThis as unknown as { troupeTimeline: { drawnMarks(): Record<string, number> } }).troupeTimeline.drawnMarks());
      await expect.poll(async () => (await marks()).tool ?? 0).toBeGreaterThanOrEqual(5);
      expect(await marks()).toMatchObject({ trip: 1, warning: expect.any(Number), model: expect.any(Number) });
      await page.screenshot({ path: shot('timeline') });

      // Zoom: + halves the window shown, fit shows the whole run again.
      const range = () => page.evaluate(() => (globalThis as unknown as { troupeTimeline: { range(): [number, number] } }).troupeTimeline.range());
      const [t0, t1] = await range();
      await page.click('#zoom-in');
      const [z0, z1] = await range();
      expect(z1 - z0).toBeCloseTo((t1 - t0) / 2, 6);
      await page.click('#zoom-reset');
      expect(await range()).toEqual([t0, t1]);
      // A click on a lane opens its agent.
      const box = (await page.locator('#tl-canvas').boundingBox())!;
      await page.mouse.click(box.x + 60, box.y + 22 + 4 * 22 + 11); // the fifth lane: prober
      await expect.poll(() => page.locator('#agent-name').textContent()).toBe('prober failed');
      expect(errors).toEqual([]);
      await page.close();
    });

    it('clicking an agent shows its transcript, its state on the lifecycle diagram, its spend; actions say the run is not live', async () => {
      const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
      await page.goto(handle.url);
      await row(page, 'talker').click();
      await page.locator('#transcript .item').first().waitFor();
      expect(await page.locator('#agent-name').textContent()).toBe('talker stopped');
      expect(await page.locator('#transcript').textContent()).toContain('The README looks fine to me.');
      expect(await page.locator('#lifecycle g.current').getAttribute('data-status')).toBe('stopped');
      expect(await page.locator('#agent-meta').textContent()).toContain('stop reason reserve');
      expect(await page.locator('#spend').textContent()).toMatch(/main\$0\.0\d+/);
      await page.screenshot({ path: shot('agent'), fullPage: true });

      await row(page, 'lead').click();
      await expect.poll(() => page.locator('#agent-name').textContent()).toBe('lead completed');
      expect(await page.locator('#children li').allTextContents()).toEqual(['scout completed', 'flaky completed', 'talker stopped', 'prober failed']);
      await page.fill('#message', 'anything?');
      await page.click('#send');
      await expect.poll(() => page.locator('#action-result').textContent()).toMatch(/^RUN_NOT_LIVE: /);
      await page.close();
    });

    it('a wrong token is refused: the page and the API', async () => {
      const page = await browser.newPage();
      const wrong = handle.url.replace(/token=.*/, 'token=not-the-token');
      const response = await page.goto(wrong);
      expect(response?.status()).toBe(403);
      expect(await page.textContent('body')).toMatch(/^Forbidden/);
      const api = await page.evaluate(async () => (await fetch('/api/team?token=not-the-token')).status);
      expect(api).toBe(403);
      await page.close();
    });
  });

  it('a live run: updates without a reload; send and stop from the page reach the database; a refusal shows its code', async () => {
    const db = join(workdir(), 'live.db');
    const store = openStore({ path: db });
    const t = team(
      {
        agents: {
          lead: [
            { tool: 'spawn_agent', args: { name: 'helper', task: 'Work on the first part.' } },
            { tool: 'respond_to_user', args: { message: 'helper is on it.' } },
            { tool: 'spawn_agent', args: { name: 'second', task: 'Work on the second part.' } },
            { tool: 'respond_to_user', args: { message: 'second is on it too.' } },
            { tool: 'respond_to_user', args: { message: 'Got your message.' } },
            { tool: 'respond_to_user', args: { message: 'helper has stopped.' } },
          ],
          // They stay in a model call (the simulated clock never reaches it) until stopped.
          helper: [
            { tool: 'spawn_agent', args: { name: 'grandchild', task: 'A detail.' } },
            { text: 'never', delayMs: 3_600_000 },
          ],
          grandchild: [{ text: 'never', delayMs: 3_600_000 }],
          second: [{ text: 'never', delayMs: 3_600_000 }],
        },
      },
      { store, interactive: true, limits: { maxMessageBytes: 200 } },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'Split the work and keep me posted.' });
    await t.c.waitFor(rootId, ['waiting']);
    const stopInbox = applyFileInbox(t.c, store, 50);
    const handle = await startDashboard(
      coordinatorSource(t.c, store, db, () => true),
      { port: 0, batchMs: 50 },
    );
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    try {
      await page.goto(handle.url);
      await expect.poll(() => page.locator('#conn').textContent()).toBe('live');
      await expect.poll(() => statusOf(page, 'lead').textContent()).toBe('waiting');
      expect(await row(page, 'lead').locator('.waits').textContent()).toBe('the user');
      await expect.poll(() => statusOf(page, 'grandchild').textContent()).toBe('running');
      expect(await statusOf(page, 'helper').textContent()).toBe('running');
      expect(await row(page, 'second').count()).toBe(0);

      // Something else moves the run: the page follows without a reload.
      let loads = 0;
      page.on('load', () => loads++);
      await t.c.send(rootId, { content: 'Start a second helper.' });
      await expect.poll(() => statusOf(page, 'second').textContent()).toBe('running');
      expect(loads).toBe(0);

      // A message from the page goes through the inbox to the live run and into the database.
      await row(page, 'lead').click();
      await page.fill('#message', 'Hello from the page.');
      await page.click('#send');
      await expect.poll(() => page.locator('#action-result').textContent()).toMatch(/^queued for lead \(\w+\)$/);
      expect(
        store
          .listMessages(t.c.runId)
          .filter((m) => m.to === rootId && m.from === 'user')
          .map((m) => m.content),
      ).toContain('Hello from the page.');

      // A refusal comes back with its code, and nothing is queued.
      const before = store.listMessages(t.c.runId).length;
      await page.fill('#message', 'x'.repeat(300));
      await page.click('#send');
      await expect.poll(() => page.locator('#action-result').textContent()).toMatch(/^MESSAGE_TOO_LARGE: /);
      expect(await page.locator('#action-result').getAttribute('class')).toContain('error');
      expect(store.listMessages(t.c.runId)).toHaveLength(before);

      // Stop helper alone (not its subtree) from the page: the database shows it stopped, its child runs on.
      await row(page, 'helper').click();
      await expect.poll(() => page.locator('#agent-name').textContent()).toBe('helper running');
      await page.uncheck('#cascade');
      await page.click('#stop');
      await expect.poll(() => page.locator('#action-result').textContent()).toBe('stopped helper');
      const statusIn = (name: string) => store.listAgents(t.c.runId).find((a) => a.name === name)?.status;
      expect([statusIn('helper'), statusIn('grandchild'), statusIn('second')]).toEqual(['stopped', 'running', 'running']);
      await expect.poll(() => statusOf(page, 'helper').textContent()).toBe('stopped');
      expect(await statusOf(page, 'grandchild').textContent()).toBe('running');
      await t.c.waitFor(rootId, ['waiting']);
      expect(statusIn('lead')).toBe('waiting');

      // Pause and resume the budget from the page.
      await page.click('#pause');
      await expect.poll(() => page.locator('#budget-text').textContent()).toMatch(/paused/);
      expect(store.getRun(t.c.runId)?.budget.paused).toBe(true);
      await page.click('#resume');
      await expect.poll(() => page.locator('#action-result').textContent()).toMatch(/^budget resumed/);
      expect(store.getRun(t.c.runId)?.budget.paused).toBe(false);
      await expect.poll(() => page.locator('#budget-text').textContent()).toBe('budget: spent $0.0000');
      await page.screenshot({ path: shot('live') });
    } finally {
      await page.close();
      await handle.close();
      stopInbox();
      await t.c.shutdown();
      store.close();
    }
  });

  it('under serve --ui: the main run shows live while serve hosts it, not live once it has finished', async () => {
    const db = join(workdir(), 'served.db');
    const store = openStore({ path: db });
    const t = team({ agents: { lead: [{ tool: 'respond_to_user', args: { message: 'Ready.' } }] } }, { store, interactive: true });
    const rootId = await t.c.start({ name: 'lead', task: 'Stand by.' });
    await t.c.waitFor(rootId, ['waiting']);
    const io = captureIo();
    const close = await uiServing({ ui: '0' }, io, portOf(store), db, (runId) => runId === t.c.runId && t.c.health().ok, t.c);
    const url = /(http:\/\/127\.0\.0\.1:\d+\/\?token=[\w-]+)/.exec(io.text().err)![1]!;
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    try {
      await page.goto(url);
      await expect.poll(() => page.locator('#conn').textContent()).toBe('live');
      // The run finishes (its root stops) while serve still hosts it: the page follows, no reload.
      await t.c.stop(rootId);
      await expect.poll(() => page.locator('#conn').textContent()).toBe('not live (read only)');
      await expect.poll(() => statusOf(page, 'lead').textContent()).toBe('stopped');
      await page.screenshot({ path: shot('serve-finished') });
    } finally {
      await page.close();
      await close();
      await t.c.shutdown();
      store.close();
    }
  });

  it('reconnects after the server restarts (same port and token) and catches up from the database', async () => {
    const store = bigRun(3);
    const source = { port: portOf(store), db: ':memory:', live: () => false, watch: () => () => {} };
    let handle = await startDashboard(source, { port: 0 });
    const page = await browser.newPage();
    try {
      await page.goto(handle.url);
      await expect.poll(() => page.locator('#agents tr[data-agent]').count()).toBe(3);
      await handle.close();
      await expect.poll(() => page.locator('#conn').textContent()).toMatch(/^disconnected/);
      // Meanwhile the run moved on, as a resumed process finds it.
      addAgent(store, 3);
      handle = await startDashboard(source, { port: handle.port, token: handle.token });
      await expect.poll(() => page.locator('#agents tr[data-agent]').count()).toBe(4);
      expect(await page.locator('#conn').textContent()).toBe('not live (read only)');

      // Restarted with another token: the page says why it cannot reconnect.
      const port = handle.port;
      await handle.close();
      handle = await startDashboard(source, { port });
      await expect.poll(() => page.locator('#problem').textContent()).toMatch(/^DISCONNECTED: the server refused this page’s token/);
    } finally {
      await page.close();
      await handle.close();
    }
  });

  it('a run of 1,000 agents: the table and the timeline draw only the rows and lanes in view', async () => {
    const handle = await startDashboard({ port: portOf(bigRun(1_000)), db: ':memory:', live: () => false, watch: () => () => {} }, { port: 0 });
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    try {
      await page.goto(handle.url);
      // The table: all 1,000 counted, only a screenful of rows in the page; scrolling brings the last ones.
      await expect.poll(() => page.locator('#counts').textContent()).toMatch(/^1000 agents:/);
      await expect.poll(() => page.locator('#agents tr[data-agent]').count()).toBeGreaterThan(10);
      expect(await page.locator('#agents tr[data-agent]').count()).toBeLessThan(100);
      expect(await row(page, 'agent-999').count()).toBe(0);
      await page.locator('#team-scroll').evaluate((el) => (el.scrollTop = el.scrollHeight));
      await row(page, 'agent-999').waitFor();
      expect(await page.locator('#agents tr[data-agent]').count()).toBeLessThan(100);
      expect(await row(page, 'agent-0').count()).toBe(0);
      await page.screenshot({ path: shot('team-1000') });
      // A click on a row opens that agent.
      await row(page, 'agent-999').click();
      await expect.poll(() => page.locator('#agent-name').textContent()).toBe('agent-999 completed');
      await page.click('.tab[data-view="timeline"]');
      await page.locator('#run-marks li').first().waitFor();
      const drawn = () => page.evaluate(() => (globalThis as unknown as { troupeTimeline: { drawnLanes(): number } }).troupeTimeline.drawnLanes());
      await expect.poll(drawn).toBeGreaterThan(0);
      expect(await drawn()).toBeLessThan(40);
      // Scrolled to the end, the last lanes are drawn, still only a screenful.
      await page.locator('#tl-scroll').evaluate((el) => (el.scrollTop = el.scrollHeight));
      await expect.poll(() => page.locator('#tl-scroll').evaluate((el) => el.scrollTop)).toBeGreaterThan(20_000);
      expect(await drawn()).toBeLessThan(40);
      await page.screenshot({ path: shot('timeline-1000') });
    } finally {
      await page.close();
      await handle.close();
    }
  });
});
