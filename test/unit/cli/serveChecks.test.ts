/**
 * The health checks of `troupe serve`: the store, the model endpoint and the queues — each alone,
 * and through a Watchdog so the failures reach `watchdog.health_check` events.
 */
import { mkdtempSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { EventBus, type AuditEvent } from '../../../src/autonomy/eventBus.js';
import { Watchdog } from '../../../src/autonomy/watchdog.js';
import { dropFilter } from '../../../src/cli/serveLines.js';
import { modelCheck, OPENAI_DEFAULT_BASE_URL, queueCheck, storeCheck } from '../../../src/cli/serveChecks.js';
import { createCoordinator } from '../../../src/host/createCoordinator.js';
import type { CoordinatorHealth } from '../../../src/host/runtime.js';
import { scriptedModel } from '../../../src/model/scriptedModel.js';
import { openStore } from '../../../src/store/sqliteStore.js';
import { createFakeOpenAIServer } from '../../../src/testing/fakeOpenAIServer.js';

/** A check's outcome: true, or the reason it threw. */
async function outcome(check: () => boolean | Promise<boolean>): Promise<true | string> {
  try {
    return (await check()) === true ? true : 'returned false';
  } catch (err) {
    return (err as Error).message;
  }
}

async function listen(handler: Parameters<typeof createServer>[1]): Promise<{ server: Server; url: string }> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1` };
}

const close = (server: Server) =>
  new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });

describe('storeCheck', () => {
  it('is healthy while the SQLite store is open and fails once it is closed', async () => {
    const store = openStore({ path: join(mkdtempSync(join(tmpdir(), 'troupe-checks-')), 'c.db') });
    const check = storeCheck(store);
    expect(await outcome(check)).toBe(true);
    store.close();
    expect(await outcome(check)).toMatch(/not open/i);
  });
});

describe('modelCheck', () => {
  it('is healthy against a live OpenAI-compatible server (any answer below 500), unhealthy once it is closed', async () => {
    const server = await createFakeOpenAIServer([]);
    const check = modelCheck({ baseURL: `${server.url}/`, apiKey: 'sk-check' });
    expect(await outcome(check)).toBe(true);
    // It asked GET <baseURL>/models with the key (the fake answers 404: still a server answering).
    expect(server.requests.at(-1)).toMatchObject({ method: 'GET', path: '/v1/models', headers: { authorization: 'Bearer sk-check' } });
    await server.close();
    const failed = await outcome(check);
    expect(failed).not.toBe(true);
    expect(failed).toContain(`${server.url}/models`);
  });

  it('a 5xx answer is unhealthy, a 401 is healthy', async () => {
    let status = 503;
    const { server, url } = await listen((_req, res) => {
      res.statusCode = status;
      res.end('{}');
    });
    try {
      const check = modelCheck({ baseURL: url });
      expect(await outcome(check)).toMatch(/answered 503/);
      status = 401;
      expect(await outcome(check)).toBe(true);
    } finally {
      await close(server);
    }
  });

  it('an endpoint that never answers fails after timeoutMs on the injected clock', async () => {
    let arrived!: () => void;
    const requested = new Promise<void>((resolve) => (arrived = resolve));
    const { server, url } = await listen(() => arrived()); // never answers
    try {
      const clock = new SimulatedClock();
      const check = modelCheck({ baseURL: url, timeoutMs: 2_000, clock });
      let settled = false;
      const result = outcome(check).finally(() => (settled = true));
      await requested;
      clock.increment(1_999);
      await new Promise<void>((resolve) => setImmediate(resolve));
      expect(settled).toBe(false);
      clock.increment(1);
      expect(await result).toMatch(/no answer within 2000 ms/);
    } finally {
      await close(server);
    }
  });

  it('without a base URL it asks the OpenAI API', async () => {
    const urls: string[] = [];
    const fakeFetch = ((input: string | URL) => {
      urls.push(String(input));
      return Promise.resolve(new Response('{}', { status: 401 }));
    }) as typeof fetch;
    expect(await outcome(modelCheck({ fetch: fakeFetch }))).toBe(true);
    expect(urls).toEqual([`${OPENAI_DEFAULT_BASE_URL}/models`]);
  });

  it('through a Watchdog: unhealthy after the server goes away, with the reason in the event', async () => {
    const server = await createFakeOpenAIServer([]);
    const bus = new EventBus();
    const events: AuditEvent[] = [];
    bus.on((e) => events.push(e));
    const watchdog = new Watchdog({ bus, intervalMs: 60_000, clock: new SimulatedClock() });
    watchdog.register('model', modelCheck({ baseURL: server.url }));
    expect((await watchdog.checkNow()).model).toMatchObject({ healthy: true });
    await server.close();
    expect((await watchdog.checkNow()).model).toMatchObject({ healthy: false, consecutiveFailures: 1 });
    expect(events.map((e) => e.healthy)).toEqual([true, false]);
    expect(String(events[1]!.error)).toContain('/models');
  });
});

describe('queueCheck', () => {
  const queue = (waiting: number, running: number) => ({ waiting, running, concurrency: 8 });
  const fake = (runId: string) => {
    const state: { health: CoordinatorHealth } = { health: { ok: true, error: null, modelQueue: queue(0, 0), toolQueue: queue(0, 0) } };
    return { runId, health: () => state.health, state };
  };

  it('a queue with calls waiting and none running is unhealthy on the second check in a row, and recovers', async () => {
    const a = fake('run_a');
    const check = queueCheck(() => [a]);
    expect(await outcome(check)).toBe(true);
    a.state.health = { ...a.state.health, modelQueue: queue(3, 0) };
    expect(await outcome(check)).toBe(true); // once may be a moment between two calls
    expect(await outcome(check)).toMatch(/run_a: the model queue has 3 call\(s\) waiting and none running \(2 checks in a row\)/);
    a.state.health = { ...a.state.health, modelQueue: queue(3, 2) };
    expect(await outcome(check)).toBe(true);
    a.state.health = { ...a.state.health, toolQueue: queue(1, 0) };
    expect(await outcome(check)).toBe(true); // the streak starts over
    expect(await outcome(check)).toMatch(/the tool queue/);
  });

  it('waiting calls that are being served (running > 0) are healthy however long', async () => {
    const a = fake('run_a');
    a.state.health = { ...a.state.health, modelQueue: queue(50, 8) };
    const check = queueCheck(() => [a]);
    for (let i = 0; i < 5; i++) expect(await outcome(check)).toBe(true);
  });

  it('checks every coordinator it is given at each check (a run that appears later too)', async () => {
    const a = fake('run_a');
    const b = fake('proactive-x');
    const hosted = [a];
    const check = queueCheck(() => hosted);
    expect(await outcome(check)).toBe(true);
    b.state.health = { ...b.state.health, error: { code: 'STORE_IO', message: 'disk full' }, ok: false };
    hosted.push(b);
    expect(await outcome(check)).toMatch(/run proactive-x accepts no work \(STORE_IO: disk full\)/);
  });

  it('a real coordinator is healthy while it runs and unhealthy after shutdown', async () => {
    const c = createCoordinator({ model: scriptedModel({ agents: {} }), clock: new SimulatedClock() });
    const check = queueCheck(() => [c]);
    expect(await outcome(check)).toBe(true);
    await c.shutdown();
    expect(await outcome(check)).toMatch(/COORDINATOR_SHUT_DOWN/);
  });
});

describe('dropFilter (the terminal view of cooldown drops)', () => {
  it('shows the first drop of a trigger after each fire, hides the rest, and keeps other events', () => {
    const shown = dropFilter();
    const ev = (type: string, trigger: string) => ({ type, at: 0, trigger });
    expect(shown(ev('proactive.trigger_dropped', 'a'))).toContain('later drops are not shown');
    expect(shown(ev('proactive.trigger_dropped', 'a'))).toBeNull();
    expect(shown(ev('proactive.trigger_dropped', 'b'))).toContain('later drops are not shown');
    expect(shown(ev('proactive.trigger_denied', 'a'))).toBe('');
    expect(shown(ev('proactive.trigger_fired', 'a'))).toBe('');
    expect(shown(ev('proactive.trigger_dropped', 'a'))).toContain('later drops are not shown');
    expect(shown(ev('proactive.trigger_dropped', 'b'))).toBeNull();
  });
});
