/**
 * The dashboard in a real browser (headless Chromium): the demo's database shows its five agents
 * with their statuses, why the failed and stopped ones ended, its graph, and the reserve trip on
 * the timeline; the actions of a finished run are disabled and say why; clicking an agent shows
 * its transcript; a live run updates without a reload (table and graph); a message sent and an
 * agent stopped from the page reach the database (and a refusal shows its typed error); a wrong
 * token is refused; a team of 50 reads as a graph; marks at the same instant share a badge with
 * their count; a run interrupted and resumed shows its two hostings; a run of 1,000 agents draws
 * only the lanes in view; a pending approval shows with its arguments, edited and approved from the
 * page it runs once with them, and one denied from the page tells the agent the reason. Screenshots of each view go to test-results/dashboard/.
 */
import { dropTableTool } from '../helpers/approvals.js';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { hostInLoop } from '../../src/worker/library.js';
import { uiServing } from '../../src/cli/ui.js';
import type { StoreReads } from '../../src/dashboard/readModel.js';
import { startDashboard, type DashboardHandle } from '../../src/dashboard/server.js';
import { coordinatorSource, databaseSource } from '../../src/dashboard/sources.js';
import { createCoordinator } from '../../src/host/createCoordinator.js';
import type { Model } from '../../src/model/types.js';
import { memoryStore } from '../../src/store/memoryStore.js';
import { portOf } from '../../src/store/port.js';
import { newAgentRow } from '../../src/store/rows.js';
import { openStore } from '../../src/store/sqliteStore.js';
import { BROWSER, launch, shot } from '../helpers/browser.js';
import { workdir } from '../helpers/cli.js';
import { captureIo, demoDb, interruptedRun } from '../helpers/dashboard.js';
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

const LONG_NAME = 'a-lead-with-a-very-long-name-indeed';

/** A run of 50 agents written as rows: a root, 7 leads and 6 workers under each, of every status; the root and some leads wait. */
function teamOf50() {
  const store = memoryStore();
  store.insertRun({
    id: RUN,
    createdAt: 1_000,
    interactive: false,
    rootId: 'root',
    budget: { limitUsd: null, budgetStopped: false, reserveStopped: false, paused: false, resumeEpoch: 0, reserveNoticeClaimed: false },
  });
  const add = (id: string, name: string, parentId: string | null, depth: number, patch: Partial<ReturnType<typeof newAgentRow>>) =>
    store.registerAgent({ ...newAgentRow({ id, runId: RUN, name, parentId, depth, task: 'part', skills: [] }, 1_000), ...patch }, [
      { role: 'user', content: 'go' },
    ]);
  add('root', 'root', null, 0, { status: 'waiting', waitKind: 'agents' });
  const workerStatuses = ['running', 'completed', 'stalled', 'budgetPaused', 'failed', 'stopped'] as const;
  for (let l = 0; l < 7; l++) {
    const waiting = l % 3 !== 2;
    add(`l${l}`, l === 1 ? LONG_NAME : `lead-${l}`, 'root', 1, waiting ? { status: 'waiting', waitKind: 'agents' } : { status: 'completed' });
    for (let w = 0; w < 6; w++) {
      const status = waiting ? workerStatuses[(w + l) % workerStatuses.length]! : 'completed';
      add(`w${l}-${w}`, `worker-${l}-${w}`, `l${l}`, 2, {
        status,
        ...(status === 'failed' ? { error: { code: 'PROVIDER_AUTH', message: 'the key was refused', retryable: false } } : {}),
        ...(status === 'stopped' ? { stopReason: 'requested' as const } : {}),
      });
    }
  }
  return store;
}

/** How many tool calls the `busy` agent makes at one instant in {@link marksRun}, and `quiet` a few pixels apart. */
const SAME_INSTANT = 7;
const NEAR = 5;

/** A run whose marks pile up: seven tool calls at one instant, three marks of three kinds at another, two run-wide marks at a third. */
function marksRun() {
  const store = memoryStore();
  store.insertRun({
    id: RUN,
    createdAt: 1_000,
    interactive: false,
    rootId: 'busy',
    budget: { limitUsd: null, budgetStopped: false, reserveStopped: false, paused: false, resumeEpoch: 0, reserveNoticeClaimed: false },
  });
  for (const [id, parentId] of [
    ['busy', null],
    ['mixed', 'busy'],
    ['quiet', 'busy'],
  ] as const) {
    store.registerAgent(newAgentRow({ id, runId: RUN, name: id, parentId, depth: parentId ? 1 : 0, task: 'part', skills: [] }, 1_000), [
      { role: 'user', content: 'go' },
    ]);
  }
  const event = (agentId: string | null, type: string, data: Record<string, unknown>, at: number) => store.appendEvent({ runId: RUN, agentId, type, data, at });
  for (let i = 0; i < SAME_INSTANT; i++) event('busy', 'tool.call', { tool: `step-${i}` }, 4_000);
  event('busy', 'tool.call', { tool: 'later' }, 9_000);
  // Five a few pixels apart (40 ms each, at about 8 ms a pixel): never drawn over each other either.
  for (let i = 0; i < NEAR; i++) event('quiet', 'tool.call', { tool: `near-${i}` }, 5_000 + 40 * i);
  event('mixed', 'tool.call', { tool: 'probe' }, 6_000);
  event('mixed', 'agent.said', { text: 'trying once more' }, 6_000);
  event('mixed', 'agent.status', { from: 'running', to: 'failed', error: { code: 'PROVIDER_AUTH', message: 'refused' } }, 6_000);
  event(null, 'budget.reserveTrip', { spentUsd: 0.45 }, 7_000);
  event(null, 'budget.pause', {}, 7_000);
  event('busy', 'agent.status', { from: 'running', to: 'completed' }, 10_000);
  store.updateAgent('busy', { status: 'completed', updatedAt: 10_000 });
  store.updateAgent('mixed', { status: 'failed', updatedAt: 6_000 });
  return store;
}

const row = (page: Page, name: string) => page.locator(`#agents tr[data-agent="${name}"]`);
const statusOf = (page: Page, name: string) => row(page, name).locator('[data-status]');
const node = (page: Page, name: string) => page.locator(`#graph g.node[data-agent="${name}"]`);

/** What the page's timeline drew last (timeline.js's test hooks). */
interface Drawn {
  drawnMarks(): Record<string, number>;
  drawnBoxes(): { lane: string | null; x: number; y: number; w: number; h: number; count: number; kinds: string[] }[];
  drawnHostings(): { kind: 'hosting' | 'gap'; index: number; x0: number; x1: number }[];
  laneTop(i: number): number;
  laneHeight: number;
  range(): [number, number];
  drawnLanes(): number;
}
const drawn = <T>(page: Page, pick: (t: Drawn) => T): Promise<T> => page.evaluate(`(${pick.toString()})(globalThis.troupeTimeline)`) as Promise<T>;

/** The colour of one pixel of the timeline's canvas (CSS pixels; the tests run at device pixel ratio 1). */
const pixel = (page: Page, x: number, y: number) =>
  page.evaluate(
    `(() => {
      const [r, g, b] = document.getElementById('tl-canvas').getContext('2d').getImageData(${Math.round(x)}, ${Math.round(y)}, 1, 1).data;
      return '#' + [r, g, b].map((v) => v.toString(16).padStart(2, '0')).join('');
    })()`,
  ) as Promise<string>;

/** Whether two boxes overlap (touching edges do not). */
const intersects = (a: { x: number; y: number; w: number; h: number }, b: { x: number; y: number; w: number; h: number }) =>
  a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;

/** A source over a store's reads that nothing watches: pushes come from `handle.changed()`. */
const quietSource = (port: StoreReads) => ({ port, db: ':memory:', live: () => false, watch: () => () => {} });

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
      // Why the failed and the stopped agent ended, in the table: short, the whole of it on hover.
      const why = (name: string) => row(page, name).locator('td.why');
      expect(await why('talker').textContent()).toBe('reserve: the budget reached its reserve line');
      expect(await why('prober').textContent()).toMatch(/^PROVIDER_AUTH: \S/);
      expect(await why('prober').getAttribute('title')).toMatch(/^PROVIDER_AUTH: /);
      for (const name of ['lead', 'scout', 'flaky']) expect(await why(name).textContent()).toBe('');
      // The graph beside the table: a node per agent in its status's colour, lead's four children under it.
      await expect.poll(() => page.locator('#graph g.node[data-id]').count()).toBe(5);
      expect(await node(page, 'prober').getAttribute('data-status')).toBe('failed');
      expect(await node(page, 'prober').locator('rect').getAttribute('fill')).toBe('#c62828');
      const leadId = await node(page, 'lead').getAttribute('data-id');
      expect(await page.locator(`#graph path.edge[data-from="${leadId}"]`).count()).toBe(4);
      expect(await page.locator('#graph path.wait').count()).toBe(0);
      const tableBox = (await page.locator('#team-scroll').boundingBox())!;
      const graphBox = (await page.locator('#graph').boundingBox())!;
      expect(graphBox.x).toBeGreaterThanOrEqual(tableBox.x + tableBox.width);
      // A 1280 px window (a common laptop's) shows every column, the graph still beside the table.
      await page.setViewportSize({ width: 1280, height: 800 });
      const team = page.locator('#team-scroll');
      expect(await team.evaluate((el) => el.scrollWidth - el.clientWidth)).toBe(0);
      const narrow = (await team.boundingBox())!;
      expect((await page.locator('#graph').boundingBox())!.x).toBeGreaterThanOrEqual(narrow.x + narrow.width);
      await page.setViewportSize({ width: 1400, height: 900 });
      // The run has finished: its actions are disabled, and say why.
      for (const id of ['pause', 'resume']) {
        expect(await page.locator(`#${id}`).isDisabled()).toBe(true);
        expect(await page.locator(`#${id}`).getAttribute('title')).toMatch(/^The run has finished \(its root is completed\)/);
      }
      expect(await page.locator('#budget-actions').getAttribute('title')).toMatch(/^The run has finished/);
      await page.screenshot({ path: shot('team') });

      await page.click('.tab[data-view="timeline"]');
      const trip = page.locator('#run-marks li[data-kind="trip"]');
      await trip.waitFor();
      expect(await trip.allTextContents()).toEqual([expect.stringMatching(/reserve tripped at \$0\.4\d+$/)]);
      // Tool calls, budget warnings and the trip are drawn as marks on the agents' lanes.
      const marks = () => drawn(page, (t) => t.drawnMarks());
      await expect.poll(async () => (await marks()).tool ?? 0).toBeGreaterThanOrEqual(5);
      expect(await marks()).toMatchObject({ trip: 1, warning: expect.any(Number), model: expect.any(Number) });
      await page.screenshot({ path: shot('timeline') });

      // Zoom: + halves the window shown, fit shows the whole run again.
      const range = () => drawn(page, (t) => t.range());
      const [t0, t1] = await range();
      await page.click('#zoom-in');
      const [z0, z1] = await range();
      expect(z1 - z0).toBeCloseTo((t1 - t0) / 2, 6);
      await page.click('#zoom-reset');
      expect(await range()).toEqual([t0, t1]);
      // A click on a lane opens its agent.
      const box = (await page.locator('#tl-canvas').boundingBox())!;
      const fifth = await drawn(page, (t) => t.laneTop(4) + t.laneHeight / 2);
      await page.mouse.click(box.x + 60, box.y + fifth); // the fifth lane: prober
      await expect.poll(() => page.locator('#agent-name').textContent()).toBe('prober failed');
      expect(errors).toEqual([]);
      await page.close();
    });

    it('clicking an agent shows its transcript, its state on the lifecycle diagram, its spend; its actions are disabled', async () => {
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
      // The graph marks the agent open.
      expect(await page.locator('#graph g.node.selected').getAttribute('data-agent')).toBe('lead');
      // Nothing hosts the run: send and stop are disabled too, and say so (the API refuses them: RUN_NOT_LIVE).
      for (const id of ['send', 'stop']) {
        expect(await page.locator(`#${id}`).isDisabled()).toBe(true);
        expect(await page.locator(`#${id}`).getAttribute('title')).toMatch(/^The run has finished/);
      }
      // A click on a node opens its agent.
      await node(page, 'prober').click();
      await expect.poll(() => page.locator('#agent-name').textContent()).toBe('prober failed');
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
    const stopInbox = hostInLoop(t.c, store, 50);
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
      // Live: the actions are enabled. In the graph, lead waits on the user (a node of its own).
      expect(await page.locator('#pause').isEnabled()).toBe(true);
      expect(await page.locator('#pause').getAttribute('title')).toMatch(/^Pause the budget/);
      await page.locator(`#graph path.wait[data-from="${rootId}"][data-to="user"]`).waitFor({ state: 'attached' });
      expect(await page.locator('#graph g.node.user').count()).toBe(1);
      await expect.poll(() => statusOf(page, 'grandchild').textContent()).toBe('running');
      expect(await statusOf(page, 'helper').textContent()).toBe('running');
      expect(await row(page, 'second').count()).toBe(0);

      // Something else moves the run: the page follows without a reload.
      let loads = 0;
      page.on('load', () => loads++);
      await t.c.send(rootId, { content: 'Start a second helper.' });
      await expect.poll(() => statusOf(page, 'second').textContent()).toBe('running');
      await expect.poll(() => node(page, 'second').getAttribute('data-status')).toBe('running');
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
      // The graph follows: helper stopped (its colour too), and the table says why.
      await expect.poll(() => node(page, 'helper').getAttribute('data-status')).toBe('stopped');
      expect(await node(page, 'helper').locator('rect').getAttribute('fill')).toBe('#6d4c41');
      expect(await row(page, 'helper').locator('td.why').textContent()).toBe('requested: stopped on request (the user or its parent)');
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
      await stopInbox();
      await t.c.shutdown();
      store.close();
    }
  });

  it('approvals: edited and approved from the page, the step runs once with the edits; denied from the page, the agent is told why', async () => {
    const { runs, tool: dropTable } = dropTableTool();
    const db = join(workdir(), 'approvals.db');
    const store = openStore({ path: db });
    const wait = { tools: [{ name: 'wait_for_agents', args: { reason: 'the approval' } }] };
    const t = team(
      {
        agents: {
          lead: [
            { tools: [{ name: 'drop_table', args: { table: 'users' } }] },
            wait,
            { tools: [{ name: 'drop_table', args: { table: 'orders' } }] },
            wait,
            { tools: [{ name: 'respond_to_user', args: { message: 'done' } }] },
          ],
        },
      },
      { store, tools: [dropTable], interactive: true, approvals: { ask: ['destructive'] } },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'Clean up.' });
    await t.c.waitFor(rootId, ['waiting']);
    const stopInbox = hostInLoop(t.c, store, 50);
    const handle = await startDashboard(
      coordinatorSource(t.c, store, db, () => true),
      { port: 0, batchMs: 50 },
    );
    /** What was posted to the run's inbox. */
    const posted = () => {
      const raw = new Database(db, { readonly: true });
      try {
        return (raw.prepare('SELECT kind, payload FROM inbox ORDER BY id').all() as { kind: string; payload: string }[]).map((r) => ({
          kind: r.kind,
          payload: JSON.parse(r.payload) as unknown,
        }));
      } finally {
        raw.close();
      }
    };
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    try {
      await page.goto(handle.url);
      const card = (id: string) => page.locator(`#approvals-pending .approval[data-approval="${id}"]`);
      const answered = (id: string) => page.locator(`#approvals-answered li[data-approval="${id}"]`);
      await card('ap-1').waitFor();
      expect(await page.locator('#approvals-count').textContent()).toBe('1 waiting for you');
      expect(await card('ap-1').locator('.approval-head').textContent()).toMatch(/^ap-1leaddrop_tabledestructiveasked /);
      expect(JSON.parse(await card('ap-1').locator('textarea').inputValue())).toEqual({ table: 'users' });
      expect(await card('ap-1').locator('button.approve').isEnabled()).toBe(true);
      await expect.poll(() => row(page, 'lead').locator('.waits').textContent()).toBe('approval ap-1');
      // In the open agent's panel too.
      await row(page, 'lead').click();
      await expect
        .poll(() => page.locator('#agent-approvals-list li').allTextContents())
        .toEqual(['pending ap-1 drop_table — answer it under Approvals above']);

      // Arguments that are not a JSON object are refused in the page: nothing is posted.
      await card('ap-1').locator('textarea').fill('{"table": "users_tmp"');
      await card('ap-1').locator('button.approve').click();
      expect(await card('ap-1').locator('.action-result').textContent()).toMatch(/^The arguments are not JSON \(.+\): nothing was sent$/);
      await card('ap-1').locator('textarea').fill('["users_tmp"]');
      await card('ap-1').locator('button.approve').click();
      expect(await card('ap-1').locator('.action-result').textContent()).toBe('The arguments must be a JSON object: nothing was sent');
      expect(posted()).toEqual([]);

      // Edited and approved: the tool runs once, with the edited arguments; the page shows it ran.
      await card('ap-1').locator('textarea').fill('{ "table": "users_tmp" }');
      await page.screenshot({ path: shot('approvals-pending') });
      await card('ap-1').locator('button.approve').click();
      await expect
        .poll(() => page.locator('#approval-result').textContent())
        .toMatch(/^approval ap-1 approved with edited arguments: drop_table runs for lead/);
      expect(posted()).toEqual([{ kind: 'approval', payload: { approval: 'ap-1', approve: true, args: { table: 'users_tmp' } } }]);
      await expect.poll(() => answered('ap-1').getAttribute('data-state')).toBe('ran');
      expect(await answered('ap-1').textContent()).toMatch(
        /^ran ap-1 lead · drop_table \(destructive\): approved with \{"table":"users_tmp"\} — drop_table was approved .*dropped users_tmp$/,
      );
      expect(runs).toEqual([{ table: 'users_tmp' }]);

      // The agent asks again; a denial needs a reason (the page says so, nothing is posted), then the agent is told it.
      await card('ap-2').waitFor();
      expect(await card('ap-1').count()).toBe(0);
      await card('ap-2').locator('button.deny').click();
      expect(await card('ap-2').locator('.action-result').textContent()).toBe('Say why it is denied (the agent is told): nothing was sent');
      expect(posted()).toHaveLength(1);
      await card('ap-2').locator('input.approval-reason').fill('orders is the live table');
      await card('ap-2').locator('button.deny').click();
      await expect.poll(() => answered('ap-2').getAttribute('data-state')).toBe('denied');
      expect(await answered('ap-2').textContent()).toBe('denied ap-2 lead · drop_table (destructive): denied: orders is the live table');
      expect(posted()[1]).toEqual({ kind: 'approval', payload: { approval: 'ap-2', approve: false, reason: 'orders is the live table' } });
      expect(await page.locator('#approvals-count').textContent()).toBe('none waiting');
      // The newest answer first; the model saw the reason; nothing else ran.
      expect(await page.locator('#approvals-answered li').evaluateAll((items) => items.map((li) => li.getAttribute('data-approval')))).toEqual([
        'ap-2',
        'ap-1',
      ]);
      await expect.poll(() => t.model.calls.length).toBe(5);
      expect(JSON.stringify(t.model.calls[4]!.request.messages.at(-1))).toContain('drop_table was not approved: orders is the live table');
      expect(runs).toHaveLength(1);
      await page.screenshot({ path: shot('approvals-answered') });
      expect(errors).toEqual([]);
    } finally {
      await page.close();
      await handle.close();
      await stopInbox();
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
      // Its budget buttons are disabled now, and say why.
      expect(await page.locator('#pause').isDisabled()).toBe(true);
      expect(await page.locator('#resume').getAttribute('title')).toMatch(/^The run has finished \(its root is stopped\)/);
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
      const lanes = () => drawn(page, (t) => t.drawnLanes());
      await expect.poll(lanes).toBeGreaterThan(0);
      expect(await lanes()).toBeLessThan(40);
      // The graph does not try to draw a thousand nodes: it says so, the table has them all.
      expect(await page.locator('#graph').textContent()).toMatch(/^1000 agents: too many to draw here/);
      // Scrolled to the end, the last lanes are drawn, still only a screenful.
      await page.locator('#tl-scroll').evaluate((el) => (el.scrollTop = el.scrollHeight));
      await expect.poll(() => page.locator('#tl-scroll').evaluate((el) => el.scrollTop)).toBeGreaterThan(20_000);
      expect(await lanes()).toBeLessThan(40);
      await page.screenshot({ path: shot('timeline-1000') });
    } finally {
      await page.close();
      await handle.close();
    }
  });

  it('a team of 50: the graph beside the table reads as a tree (no node over another, long names cut short), who waits on whom, and it follows a change', async () => {
    const store = teamOf50();
    const handle = await startDashboard(quietSource(portOf(store)), { port: 0, batchMs: 20 });
    const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
    try {
      await page.goto(handle.url);
      await expect.poll(() => page.locator('#graph g.node[data-id]').count()).toBe(50);
      // Its root still waits, but no process hosts the run: its actions are disabled, and say so.
      expect(await page.locator('#pause').isDisabled()).toBe(true);
      expect(await page.locator('#pause').getAttribute('title')).toMatch(/^No process hosts this run now: resume it/);
      const agents = store.listAgents(RUN);
      // A node per agent, in its status's colour; a line from each parent to each child.
      for (const a of agents) {
        expect(await page.locator(`#graph g.node[data-id="${a.id}"]`).getAttribute('data-status')).toBe(a.status);
      }
      expect(await node(page, 'worker-0-4').locator('rect').getAttribute('fill')).toBe('#c62828'); // failed
      const edges = await page
        .locator('#graph path.edge')
        .evaluateAll((paths) => paths.map((p) => `${p.getAttribute('data-from')}>${p.getAttribute('data-to')}`));
      expect(edges.sort()).toEqual(
        agents
          .filter((a) => a.parentId !== null)
          .map((a) => `${a.parentId}>${a.id}`)
          .sort(),
      );
      // Who waits on whom: the root on its active leads; each waiting lead on its active workers.
      const waits = await page
        .locator('#graph path.wait')
        .evaluateAll((paths) => paths.map((p) => `${p.getAttribute('data-from')}>${p.getAttribute('data-to')}`));
      const active = new Set(['running', 'waiting', 'stalled', 'budgetPaused']);
      const expected = agents
        .filter((a) => a.status === 'waiting')
        .flatMap((w) => agents.filter((c) => c.parentId === w.id && active.has(c.status)).map((c) => `${w.id}>${c.id}`));
      expect(expected.length).toBeGreaterThan(10);
      expect(waits.sort()).toEqual(expected.sort());
      // Readable: no two nodes overlap; every label fits in its node; a long name is cut, whole in its tooltip.
      const boxes = await page.locator('#graph g.node[data-id]').evaluateAll((gs) =>
        gs.map((g) => {
          const r = g.querySelector('rect')!.getBBox();
          const t = g.querySelector('text')!.getBBox();
          return {
            x: r.x,
            y: r.y,
            w: r.width,
            h: r.height,
            textW: t.width,
            name: g.getAttribute('data-agent'),
            label: g.querySelector('text')!.textContent,
            title: g.querySelector('title')!.textContent,
          };
        }),
      );
      for (let i = 0; i < boxes.length; i++) {
        expect(boxes[i]!.textW, boxes[i]!.name!).toBeLessThan(boxes[i]!.w);
        for (let j = i + 1; j < boxes.length; j++) expect(intersects(boxes[i]!, boxes[j]!), `${boxes[i]!.name} / ${boxes[j]!.name}`).toBe(false);
      }
      const long = boxes.find((b) => b.name === LONG_NAME)!;
      expect(long.label).toMatch(/^a-lead-with-a-.*…$/);
      expect(long.label!.length).toBeLessThan(LONG_NAME.length);
      expect(long.title).toMatch(new RegExp(`^${LONG_NAME} \\(waiting\\) — waits on `));
      await page.screenshot({ path: shot('graph-50'), fullPage: true });

      // The run moves on: the page reads again and the graph follows.
      store.updateAgent('w3-0', { status: 'completed', updatedAt: 9_000 });
      handle.changed();
      await expect.poll(() => node(page, 'worker-3-0').getAttribute('data-status')).toBe('completed');
      expect(await page.locator('#graph path.wait[data-to="w3-0"]').count()).toBe(0);
    } finally {
      await page.close();
      await handle.close();
    }
  });

  it('marks at the same instant do not hide each other: one badge with their count, hovered for each; badges never overlap', async () => {
    const store = marksRun();
    const handle = await startDashboard(quietSource(portOf(store)), { port: 0 });
    const page = await browser.newPage({ viewport: { width: 1400, height: 700 } });
    try {
      await page.goto(handle.url);
      await page.click('.tab[data-view="timeline"]');
      await page.locator('#run-marks li[data-kind="trip"]').first().waitFor();
      await expect.poll(() => drawn(page, (t) => t.drawnBoxes().length)).toBeGreaterThan(0);
      const boxes = await drawn(page, (t) => t.drawnBoxes());
      // Seven tool calls at one instant: one badge counting seven; the later call on its own.
      const busy = boxes.filter((b) => b.lane === 'busy');
      expect(busy.map((b) => b.count)).toEqual([SAME_INSTANT, 1]);
      // Three marks of three kinds at one instant: one badge, in the colour of the error.
      const mixed = boxes.filter((b) => b.lane === 'mixed');
      expect(mixed.map((b) => [b.count, [...b.kinds].sort()])).toEqual([[3, ['error', 'said', 'tool']]]);
      // Two run-wide marks at one instant: one flag counting two.
      expect(boxes.filter((b) => b.lane === null).map((b) => b.count)).toEqual([2]);
      // Marks a few pixels apart share badges too.
      const near = boxes.filter((b) => b.lane === 'quiet');
      expect(near.reduce((n, b) => n + b.count, 0)).toBe(NEAR);
      expect(near.length).toBeLessThan(NEAR);
      // Every mark is in some box, and no box overlaps another.
      expect(boxes.reduce((n, b) => n + b.count, 0)).toBe(SAME_INSTANT + 1 + 3 + 2 + NEAR);
      for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) expect(intersects(boxes[i]!, boxes[j]!)).toBe(false);
      // The badges are on the canvas in their marks' colours.
      const badge = busy[0]!;
      expect(await pixel(page, badge.x + 2, badge.y + badge.h / 2)).toBe('#3f51b5'); // tool
      expect(await pixel(page, mixed[0]!.x + 2, mixed[0]!.y + mixed[0]!.h / 2)).toBe('#ff1744'); // error
      // Hovered, a badge lists each of its marks.
      const canvas = (await page.locator('#tl-canvas').boundingBox())!;
      await page.mouse.move(canvas.x + badge.x + badge.w / 2, canvas.y + badge.y + badge.h / 2);
      await expect.poll(() => page.locator('#tl-tip').textContent()).toMatch(/^busy: 7 marks:/);
      expect((await page.locator('#tl-tip').textContent())!.split('\n').filter((l) => l.startsWith('• tool call: step-'))).toHaveLength(SAME_INSTANT);
      await page.screenshot({ path: shot('timeline-marks') });
      // Zoomed far in on them (Ctrl + wheel), marks at one instant still share their badge: never drawn over each other.
      const [from, to] = await drawn(page, (t) => t.range());
      await page.keyboard.down('Control');
      for (let i = 0; i < 12; i++) await page.mouse.wheel(0, -100);
      await page.keyboard.up('Control');
      await expect
        .poll(async () => {
          const [a, b] = await drawn(page, (t) => t.range());
          return (b - a) / (to - from);
        })
        .toBeLessThan(0.1);
      const zoomed = await drawn(page, (t) => t.drawnBoxes().filter((b) => b.lane === 'busy'));
      expect(zoomed.map((b) => b.count)).toContain(SAME_INSTANT);
    } finally {
      await page.close();
      await handle.close();
    }
  });

  it('a run interrupted and resumed: its two hostings on the timeline, the time between them hatched, listed below', async () => {
    const { db, runId } = await interruptedRun(4_000);
    const store = openStore({ path: db, readonly: true });
    const handle = await startDashboard(quietSource(portOf(store)), { port: 0 });
    const page = await browser.newPage({ viewport: { width: 1400, height: 700 } });
    try {
      await page.goto(`${handle.url}`);
      await expect.poll(() => page.locator('#agents tr[data-agent]').count()).toBe(2);
      expect(await page.locator('#run').inputValue()).toBe(runId);
      await page.click('.tab[data-view="timeline"]');
      await page.locator('#hostings li').first().waitFor();
      expect(await page.locator('#hostings-box').isVisible()).toBe(true);
      expect(await page.locator('#hostings li').allTextContents()).toEqual([
        expect.stringMatching(/^hosting 1 \(boot 1\): started .*, last event /),
        expect.stringMatching(/^not hosted for 4\.\d\d s: its process was stopped or killed$/),
        expect.stringMatching(/^hosting 2 \(boot 2\): resumed .*, the latest$/),
      ]);
      const bands = await drawn(page, (t) => t.drawnHostings());
      expect(bands.map((b) => `${b.kind} ${b.index}`)).toEqual(['hosting 0', 'hosting 1', 'gap 0']);
      const [first, second, gap] = bands as [(typeof bands)[0], (typeof bands)[0], (typeof bands)[0]];
      expect(first.x1).toBe(gap.x0);
      expect(second.x0).toBe(gap.x1);
      expect(gap.x1 - gap.x0).toBeGreaterThan(50);
      // Across helper's lane (running through the gap), the gap is hatched: not the span's plain colour.
      const top = await drawn(page, (t) => t.laneTop(1) + t.laneHeight / 2);
      expect(await pixel(page, (first.x0 + first.x1) / 2, top)).toBe('#2e7d32');
      const inGap = new Set<string>();
      for (let px = gap.x0 + 3; px < gap.x1 - 3; px += 2) inGap.add(await pixel(page, px, top));
      expect(inGap.has('#2e7d32')).toBe(false);
      expect(inGap.size).toBeGreaterThan(1);
      // Hovered, the gap says what it is.
      const canvas = (await page.locator('#tl-canvas').boundingBox())!;
      await page.mouse.move(canvas.x + (gap.x0 + gap.x1) / 2, canvas.y + top);
      await expect.poll(() => page.locator('#tl-tip').textContent()).toMatch(/^not hosted from \+\d+\.\d\d s to \+\d+\.\d\d s \(4\.\d\d s\): hosting 1 ended/);
      await page.screenshot({ path: shot('timeline-resumed') });
    } finally {
      await page.close();
      await handle.close();
      store.close();
    }
  });

  it("what an agent is writing shows live in its panel, from the run's stream, and goes once its answer is in", async () => {
    const store = memoryStore();
    let go!: () => void;
    let done!: () => void;
    const started = new Promise<void>((resolve) => (go = resolve));
    const answered = new Promise<void>((resolve) => (done = resolve));
    const model: Model = {
      name: 'writer',
      async complete(request, { onDelta }) {
        await started;
        onDelta?.({ kind: 'text', text: 'Drafting ' });
        onDelta?.({ kind: 'text', text: 'the plan…' });
        await answered;
        const call = { id: `c${request.messages.length}`, name: 'finish', arguments: JSON.stringify({ summary: 'planned' }) };
        return { text: 'Drafting the plan…', toolCalls: [call] };
      },
    };
    const c = createCoordinator({ model, store, stream: {} });
    const rootId = await c.start({ name: 'lead', task: 'Plan.' });
    const handle = await startDashboard(
      coordinatorSource(c, store, 'memory', () => true),
      { port: 0, batchMs: 50, streamPollMs: 50 },
    );
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    try {
      await page.goto(handle.url);
      await expect.poll(() => statusOf(page, 'lead').textContent()).toBe('running');
      await row(page, 'lead').click();
      await expect.poll(() => page.locator('#agent-name').textContent()).toBe('lead running');
      expect(await page.locator('#live').isHidden()).toBe(true);
      // The model starts writing: its pieces reach the page through the committed stream.
      go();
      await expect.poll(() => page.locator('#live-text').textContent()).toBe('Drafting the plan…');
      expect(await page.locator('#live').isVisible()).toBe(true);
      await page.screenshot({ path: shot('writing-now') });
      done();
      expect((await c.waitFor(rootId, ['completed'])).status).toBe('completed');
      await expect.poll(() => page.locator('#live').isHidden()).toBe(true);
    } finally {
      await page.close();
      await handle.close();
      await c.shutdown();
    }
  });
});
