/**
 * The inspector's bridge page in a real browser (headless Chromium), where the hosted inspector
 * cannot load: pointed at a closed port, the page says so in place of the blank frame and points
 * to the dashboard's Timeline; pointed at a stand-in inspector that never says it started, it says
 * that, and takes it back (showing the frame, which receives the run's events) once the stand-in
 * says it is connected. Screenshots go to test-results/dashboard/.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Frame, Page } from 'playwright-core';
import { startInspector, type InspectorHandle, type InspectorOptions } from '../../src/inspect/server.js';
import { BROWSER, launch, shot } from '../helpers/browser.js';
import { closedPort } from '../helpers/ports.js';
import { team, TERMINAL } from '../helpers/team.js';

const DASHBOARD = 'run `troupe ui --db .troupe/demo.db` on the machine that runs troupe (or start the team with --ui)';

/**
 * A stand-in for the hosted inspector on its own origin (another port): a page that keeps every
 * message posted to it, and says `@statelyai.connected` to its parent only when told to (never by itself).
 */
async function standIn(): Promise<{ url: string; close: () => Promise<void> }> {
  const page = `<!DOCTYPE html><html><body><h1>stand-in inspector</h1><script>
    window.received = [];
    window.addEventListener('message', (e) => window.received.push(e.data));
    window.sayConnected = () => parent.postMessage({ type: '@statelyai.connected' }, '*');
  </script></body></html>`;
  const server: Server = createServer((_req, res) => void res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' }).end(page));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** Never the network: the server's own check of the URL is the other test file's business. */
const reachable: InspectorOptions['probe'] = () => Promise.resolve();

const offline = (page: Page) => page.locator('#offline');

describe.skipIf(!BROWSER)('the inspector page in Chromium when the hosted inspector cannot load', () => {
  let browser: Browser;
  const closing: (() => Promise<void>)[] = [];
  beforeAll(async () => {
    browser = await launch();
  });
  afterEach(async () => {
    await Promise.all(closing.splice(0).map((close) => close()));
  });
  afterAll(async () => {
    await browser?.close();
  });

  async function open(options: InspectorOptions): Promise<{ handle: InspectorHandle; page: Page; errors: string[] }> {
    const handle = await startInspector({ port: 0, probe: reachable, dashboard: DASHBOARD, ...options });
    const page = await browser.newPage({ viewport: { width: 1200, height: 700 } });
    closing.push(
      () => page.close(),
      () => handle.close(),
    );
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(handle.url);
    return { handle, page, errors };
  }

  it('an unreachable inspector (a closed port): the page says it could not reach it, in place of the frame, and names the dashboard', async () => {
    const url = `http://127.0.0.1:${await closedPort()}/`;
    // The default wait (15 s) is far longer than the test: the text comes from the failed fetch, not a timer.
    const { page, errors } = await open({ inspectorUrl: url });
    await offline(page).waitFor({ state: 'visible' });
    expect(await page.locator('#inspector').isHidden()).toBe(true);
    expect(await page.locator('#offline h1').textContent()).toBe('The Stately inspector did not load');
    expect(await page.locator('#offline-why').textContent()).toBe(
      `This browser could not reach ${url}: no internet connection, or a proxy or firewall in the way.`,
    );
    const text = (await offline(page).innerText()).replace(/\s+/g, ' ');
    expect(text).toContain(`hosted Stately inspector, ${url}, so the browser needs the internet`);
    expect(text).toContain('The run’s events keep arriving here');
    expect(text).toContain(
      'Offline, troupe’s dashboard shows the same run: run troupe ui --db .troupe/demo.db on the machine that runs troupe (or start the team with --ui), ' +
        'then open its Timeline tab: every agent’s lifecycle states over time.',
    );
    expect(await page.locator('#offline-dashboard code').textContent()).toBe('troupe ui --db .troupe/demo.db');
    expect(await page.title()).toBe('troupe — Stately Inspector (not loaded)');
    // Readable: the notice has a size on the screen, not only text in the DOM.
    const box = (await offline(page).boundingBox())!;
    expect(box.width).toBeGreaterThan(300);
    expect(box.height).toBeGreaterThan(100);
    await page.screenshot({ path: shot('inspector-offline') });
    expect(errors).toEqual([]);
  });

  it('an inspector that loads but never says it started: the page says so after pageTimeoutMs, and shows the frame, with the run’s events, once it does', async () => {
    const fake = await standIn();
    closing.push(fake.close);
    const { handle, page, errors } = await open({ inspectorUrl: fake.url, pageTimeoutMs: 500 });
    await offline(page).waitFor({ state: 'visible' });
    expect(await page.locator('#offline-why').textContent()).toBe(
      `The inspector in this page did not start within 500 ms: ${fake.url} may be unreachable from this browser, or blocked.`,
    );
    await page.screenshot({ path: shot('inspector-not-started') });

    // A run while the page waits: its events are kept for the inspector.
    const t = team({ agents: { lead: [{ tool: 'finish', args: { summary: 'done' } }] } }, { inspect: handle.inspect });
    const rootId = await t.c.start({ name: 'lead', task: 'A tiny run.' });
    await t.c.waitFor(rootId, [...TERMINAL]);
    await t.c.shutdown();

    // The stand-in starts after all: the notice goes, the frame comes back and gets the events.
    const frame: Frame = page.frames().find((f) => f.url() === fake.url)!;
    expect(frame).toBeDefined();
    expect(await frame.evaluate(() => (globalThis as unknown as { received: unknown[] }).received.length)).toBe(0);
    await frame.evaluate(() => (globalThis as unknown as { sayConnected: () => void }).sayConnected());
    await offline(page).waitFor({ state: 'hidden' });
    expect(await page.locator('#inspector').isVisible()).toBe(true);
    expect(await page.title()).toBe('troupe — Stately Inspector');
    const types = () => frame.evaluate(() => (globalThis as unknown as { received: { type?: string }[] }).received.map((m) => m.type));
    await expect.poll(async () => new Set(await types())).toEqual(new Set(['@xstate.actor', '@xstate.event', '@xstate.snapshot']));
    expect(await frame.locator('h1').isVisible()).toBe(true);
    await page.screenshot({ path: shot('inspector-started') });
    expect(errors).toEqual([]);
  });
});
