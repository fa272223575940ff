/**
 * `--inspect`: the relay on 127.0.0.1, the Stately wire format a real WebSocket client receives,
 * the sanitising allow-lists, the replay for late clients, and a process that exits after close().
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { connect } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { runInNewContext } from 'node:vm';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { createActor, fromCallback } from 'xstate';
import { agentMachine, type AgentContext, type AgentEvent, type CycleInput } from '../../machines/agentMachine.js';
import { coordinatorMachine, type CoordinatorContext } from '../../machines/coordinatorMachine.js';
import { sanitizeContext, sanitizeEvent, startInspector, type InspectorHandle } from '../../src/inspect/server.js';
import type { Script } from '../../src/model/scriptedModel.js';
import { team, TERMINAL } from '../helpers/team.js';

const REPO = fileURLToPath(new URL('../../', import.meta.url));

const SECRET = 'sk-secret-123';
const ROOT_TASK = `ROOT-TASK-TEXT: review the repository; the deploy key is ${SECRET}.`;
const CHILD_TASK = `CHILD-TASK-TEXT: check the licence (api token ${SECRET}).`;
const CHILD_SUMMARY = 'CHILD-SUMMARY-TEXT: the licence is MIT.';
const CHILD_FINDING = 'CHILD-FINDING-TEXT';
const ROOT_SUMMARY = 'ROOT-SUMMARY-TEXT: all checked.';
/** Text that must never leave the process. */
const PRIVATE = [SECRET, 'ROOT-TASK-TEXT', 'CHILD-TASK-TEXT', 'CHILD-SUMMARY-TEXT', CHILD_FINDING, 'ROOT-SUMMARY-TEXT'];

/** A root `lead` that spawns `worker`, which reports; the root waits, then finishes. */
const script = (): Script => ({
  agents: {
    lead: [
      { tool: 'spawn_agent', args: { name: 'worker', task: CHILD_TASK } },
      { tool: 'wait_for_agents', args: { reason: 'the worker reports' } },
      { tool: 'finish', args: { summary: ROOT_SUMMARY } },
    ],
    worker: [{ tool: 'agent_finish', args: { summary: CHILD_SUMMARY, findings: [CHILD_FINDING, 'two'], open_items: [] } }],
  },
});

/** Run the scripted team to completion with the inspector attached; the coordinator is shut down. */
async function runTeam(inspect: InspectorHandle['inspect']) {
  const t = team(script(), { inspect });
  const rootId = await t.c.start({ name: 'lead', task: ROOT_TASK });
  const root = await t.c.waitFor(rootId, [...TERMINAL]);
  await t.c.whenIdle();
  expect(root.status).toBe('completed');
  const childId = t.byName('worker').id;
  expect(t.byName('worker').status).toBe('completed');
  t.model.assertComplete();
  await t.c.shutdown();
  return { rootId, childId };
}

interface Wire {
  type: '@xstate.actor' | '@xstate.event' | '@xstate.snapshot';
  sessionId: string;
  rootId?: string;
  name?: string;
  event?: { type: string; [key: string]: unknown };
  snapshot?: { status?: string; value?: unknown; context?: Record<string, unknown> };
}

/** A real `ws` client that records every message, with bounded waits on what it has received. */
/** A client of `handle`'s socket, with its token (or `token`: a wrong one, or none with null). */
function client(handle: Pick<InspectorHandle, 'port' | 'token'>, options?: WebSocket.ClientOptions, token: string | null = handle.token) {
  const ws = new WebSocket(`ws://127.0.0.1:${handle.port}/${token === null ? '' : `?token=${encodeURIComponent(token)}`}`, options);
  const raw: string[] = [];
  const checks = new Set<() => void>();
  ws.on('message', (data: WebSocket.RawData) => {
    raw.push(data.toString());
    for (const check of checks) check();
  });
  const opened = new Promise<void>((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  const closed = new Promise<void>((resolve) => ws.once('close', () => resolve()));
  const parsed = () => raw.map((m) => JSON.parse(m) as Wire);
  /** Resolves once `done(messages)` holds; rejects if the socket closes first or after `ms` (a bound on a hang). */
  const until = (done: (messages: Wire[]) => boolean, label: string, ms = 10_000) =>
    new Promise<void>((resolve, reject) => {
      const check = () => {
        if (!done(parsed())) return;
        cleanup();
        resolve();
      };
      const fail = (why: string) => () => {
        cleanup();
        reject(new Error(`${label}: ${why} after ${raw.length} messages`));
      };
      const onClose = fail('socket closed');
      const timer = setTimeout(fail(`not seen within ${ms} ms`), ms);
      const cleanup = () => {
        clearTimeout(timer);
        checks.delete(check);
        ws.off('close', onClose);
      };
      checks.add(check);
      ws.once('close', onClose);
      check();
    });
  return { ws, raw, parsed, opened, closed, until };
}

/** sessionId of each actor by its name (`coordinator`, `agent:<id>`, `cycle`). */
function sessions(messages: Wire[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const m of messages) if (m.type === '@xstate.actor' && m.name) out.set(m.name, [...(out.get(m.name) ?? []), m.sessionId]);
  return out;
}

/** Every actor registered so far has reported a stopped snapshot. */
const allStopped = (messages: Wire[]) => {
  const stopped = new Set(messages.filter((m) => m.type === '@xstate.snapshot' && m.snapshot?.status === 'stopped').map((m) => m.sessionId));
  return messages.filter((m) => m.type === '@xstate.actor').every((m) => stopped.has(m.sessionId));
};

const AGENT_KEYS = [
  'id',
  'name',
  'parentId',
  'turns',
  'stintTurns',
  'recoveries',
  'idleResumes',
  'waitKind',
  'waitingSince',
  'stopReason',
  'lastTool',
  'budgetEpoch',
  'error',
  'report',
];
const COORDINATOR_KEYS = ['runId', 'rootId', 'agentCount', 'activeNonRoot', 'running', 'budget', 'limits', 'agents'];

const handles: InspectorHandle[] = [];
async function start(): Promise<InspectorHandle> {
  const handle = await startInspector({ port: 0 });
  handles.push(handle);
  return handle;
}
afterEach(async () => {
  await Promise.all(handles.splice(0).map((h) => h.close()));
});

describe('startInspector: what a connected client receives', () => {
  it('actors, snapshots and events of the coordinator and both agents, in the Stately format, sanitised', async () => {
    const handle = await start();
    expect(handle.url).toBe(`http://127.0.0.1:${handle.port}/?token=${handle.token}`);
    expect(handle.port).toBeGreaterThan(0);
    const c = client(handle);
    await c.opened;

    const { rootId, childId } = await runTeam(handle.inspect);
    // close() relays every event seen before it, then closes the socket: the client has them all.
    await handle.close();
    await c.closed;
    const messages = c.parsed();

    // Only the three Stately message types, each with the library's envelope.
    expect(new Set(messages.map((m) => m.type))).toEqual(new Set(['@xstate.actor', '@xstate.event', '@xstate.snapshot']));
    for (const m of messages) expect(m).toMatchObject({ sessionId: expect.any(String), _version: '0.7.2', createdAt: expect.any(String) });

    const byName = sessions(messages);
    expect(byName.get('coordinator')).toHaveLength(1);
    expect(byName.get(`agent:${rootId}`)).toHaveLength(1);
    expect(byName.get(`agent:${childId}`)).toHaveLength(1);
    const actor = messages.find((m) => m.type === '@xstate.actor' && m.name === `agent:${rootId}`) as Wire & { definition?: string };
    expect(JSON.parse(actor.definition ?? '{}')).toMatchObject({ id: expect.any(String), states: expect.objectContaining({ running: expect.anything() }) });

    const rootSession = byName.get(`agent:${rootId}`)![0]!;
    const childSession = byName.get(`agent:${childId}`)![0]!;
    const coordinatorSession = byName.get('coordinator')![0]!;
    const values = (session: string) =>
      messages.filter((m) => m.type === '@xstate.snapshot' && m.sessionId === session).map((m) => JSON.stringify(m.snapshot?.value));
    expect(values(rootSession)).toEqual(expect.arrayContaining(['"running"', '"completed"']));
    expect(values(rootSession).some((v) => v.includes('waiting'))).toBe(true);
    expect(values(childSession)).toEqual(expect.arrayContaining(['"running"', '"completed"']));

    // Events: turn.done carries only the outcome's kind; agent.changed only id and status.
    const events = (session: string) => messages.filter((m) => m.type === '@xstate.event' && m.sessionId === session).map((m) => m.event);
    expect(events(childSession)).toContainEqual({ type: 'turn.done', outcome: { kind: 'finish' } });
    expect(events(rootSession)).toContainEqual({ type: 'turn.done', outcome: { kind: 'wait' } });
    expect(events(rootSession)).toContainEqual({ type: 'turn.done', outcome: { kind: 'finish' } });
    const changed = events(coordinatorSession).filter((e) => e?.type === 'agent.changed');
    expect(changed).toContainEqual({ type: 'agent.changed', id: childId, status: 'completed' });
    for (const e of changed) expect(Object.keys(e!).sort()).toEqual(['id', 'status', 'type']);

    // Contexts: the allow-lists, and the final values.
    const lastContext = (session: string) => messages.filter((m) => m.type === '@xstate.snapshot' && m.sessionId === session).at(-1)?.snapshot?.context;
    expect(lastContext(childSession)).toMatchObject({
      id: childId,
      name: 'worker',
      parentId: rootId,
      turns: 1,
      lastTool: 'agent_finish',
      error: null,
      report: { success: true, findings: 2 },
    });
    expect(lastContext(coordinatorSession)).toMatchObject({
      rootId,
      agentCount: 2,
      agents: [
        { id: rootId, name: 'lead', parentId: null, depth: 0, status: 'completed' },
        { id: childId, name: 'worker', parentId: rootId, depth: 1, status: 'completed' },
      ],
    });
    for (const m of messages) {
      const context = m.snapshot?.context;
      if (context === undefined) continue;
      const allowed = m.sessionId === coordinatorSession ? COORDINATOR_KEYS : AGENT_KEYS;
      for (const key of Object.keys(context)) expect(allowed).toContain(key);
    }

    // Nothing private, anywhere: task texts, report texts, findings, the planted secret.
    for (const text of PRIVATE) expect(c.raw.filter((m) => m.includes(text))).toEqual([]);
  });

  it('a client that connects after the run gets the last 200 messages replayed', async () => {
    const handle = await start();
    const early = client(handle);
    await early.opened;
    // Several runs through one inspector: more than the 200 messages kept for replay.
    const RUNS = 6;
    for (let i = 0; i < RUNS; i++) await runTeam(handle.inspect);
    // Every actor of every run has reported its stop: nothing more is coming.
    await early.until((ms) => (sessions(ms).get('coordinator')?.length ?? 0) === RUNS && allStopped(ms), 'all runs relayed');
    expect(early.raw.length).toBeGreaterThan(200);

    const late = client(handle);
    await late.opened;
    await late.until((ms) => ms.length >= 200, 'replay of 200 messages');
    await handle.close();
    await Promise.all([early.closed, late.closed]);

    expect(late.raw).toHaveLength(200);
    expect(late.raw).toEqual(early.raw.slice(-200));
    // The replay ends with the final state: the last coordinator stopped.
    expect(late.parsed().at(-1)).toMatchObject({ type: '@xstate.snapshot', snapshot: { status: 'stopped' } });
    for (const text of PRIVATE) expect(late.raw.some((m) => m.includes(text))).toBe(false);
  });
});

describe('startInspector: the HTTP side', () => {
  const get = (port: number, path: string, headers: Record<string, string> = {}) =>
    new Promise<{ status: number; type: string | undefined; body: string }>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, path, headers }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, type: res.headers['content-type'], body }));
      });
      req.on('error', reject);
      req.end();
    });

  it('GET / serves the bridge page: the Stately iframe and a WebSocket back to this server', async () => {
    const handle = await start();
    const res = await fetch(handle.url);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/html');
    const html = await res.text();
    expect(html).toContain('<iframe id="inspector" src="https://stately.ai/inspect">');
    expect(html).toContain(`new WebSocket('ws://' + location.host + '/?token=' + encodeURIComponent("${handle.token}"))`);
    expect(html).toContain('postMessage');
    expect((await get(handle.port, '/elsewhere')).status).toBe(404);
  });

  it("the bridge page posts events to the inspector's origin only (never '*'), and hears only that origin connect", async () => {
    const handle = await start();
    const html = await (await fetch(handle.url)).text();
    expect(html).not.toContain("'*'");
    // Run the page's script against stand-ins for the DOM, the iframe and the WebSocket.
    const script = /<script>([\s\S]*)<\/script>/.exec(html)![1]!;
    const posted: { data: unknown; origin: string }[] = [];
    const frame = { postMessage: (data: unknown, origin: string) => posted.push({ data, origin }) };
    let onWindowMessage: (e: { source: unknown; origin: string; data: unknown }) => void = () => {};
    const sockets: { url: string; onmessage?: (e: { data: string }) => void }[] = [];
    const sandbox = {
      document: { getElementById: () => ({ contentWindow: frame }) },
      window: { addEventListener: (_type: string, fn: typeof onWindowMessage) => (onWindowMessage = fn) },
      location: { host: `127.0.0.1:${handle.port}` },
      encodeURIComponent,
      JSON,
      WebSocket: class {
        onmessage?: (e: { data: string }) => void;
        constructor(readonly url: string) {
          sockets.push(this);
        }
      },
    };
    runInNewContext(script, sandbox);
    const relay = (n: number) => sockets[0]!.onmessage!({ data: JSON.stringify({ type: '@xstate.event', n }) });
    relay(1);
    // Another origin (the frame navigated away, or another window) saying "connected" is ignored.
    onWindowMessage({ source: frame, origin: 'https://evil.example', data: { type: '@statelyai.connected' } });
    onWindowMessage({ source: {}, origin: 'https://stately.ai', data: { type: '@statelyai.connected' } });
    expect(posted).toEqual([]);
    onWindowMessage({ source: frame, origin: 'https://stately.ai', data: { type: '@statelyai.connected' } });
    relay(2);
    expect(posted).toEqual([
      { data: { type: '@xstate.event', n: 1 }, origin: 'https://stately.ai' },
      { data: { type: '@xstate.event', n: 2 }, origin: 'https://stately.ai' },
    ]);
  });

  it('the page and the socket require the token of the printed URL: missing or wrong is refused', async () => {
    const handle = await start();
    const other = await start();
    expect(handle.token).toMatch(/^[\w-]{32}$/);
    expect(other.token).not.toBe(handle.token);
    const wrong = `${handle.token.slice(0, -1)}${handle.token.endsWith('A') ? 'B' : 'A'}`;
    // The page: refused without the token, with another's, with a near miss; served with its own.
    for (const path of ['/', '/index.html', '/?token=', `/?token=${other.token}`, `/?token=${wrong}`, `/?tok=${handle.token}`]) {
      const res = await get(handle.port, path);
      expect(res.status, path).toBe(403);
      expect(res.body).not.toContain(handle.token);
    }
    const page = await get(handle.port, `/index.html?token=${handle.token}`);
    expect(page.status).toBe(200);
    // The token must not leave with the iframe's request.
    expect(page.body).toContain('<meta name="referrer" content="no-referrer">');
    const res = await fetch(handle.url);
    expect(res.headers.get('referrer-policy')).toBe('no-referrer');

    // The socket: the same rule.
    for (const token of [null, '', other.token, wrong]) {
      const c = client(handle, undefined, token);
      await expect(c.opened, String(token)).rejects.toThrow(/403/);
    }
    const ok = client(handle);
    await ok.opened;
    ok.ws.close();
    await ok.closed;
  });

  it('refuses a foreign Host (DNS rebinding) and a WebSocket from a page of another origin', async () => {
    const handle = await start();
    const page1 = `/?token=${handle.token}`;
    expect((await get(handle.port, page1, { host: 'localhost:9999' })).status).toBe(200);
    expect((await get(handle.port, page1, { host: 'evil.example' })).status).toBe(403);

    const foreign = client(handle, { origin: 'http://evil.example' });
    await expect(foreign.opened).rejects.toThrow(/403/);
    const rebound = client(handle, { headers: { host: 'evil.example' } });
    await expect(rebound.opened).rejects.toThrow(/403/);
    // The bridge page itself (same origin as the server) may connect.
    const page = client(handle, { origin: new URL(handle.url).origin });
    await page.opened;
    page.ws.close();
    await page.closed;
  });

  it('listens on 127.0.0.1 only: the machine’s other addresses refuse the connection', async () => {
    const handle = await start();
    const attempt = (host: string) =>
      new Promise<string>((resolve) => {
        const socket = connect({ host, port: handle.port });
        socket.once('connect', () => {
          socket.destroy();
          resolve('connected');
        });
        socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
      });
    expect(await attempt('127.0.0.1')).toBe('connected');
    const external = Object.values(networkInterfaces())
      .flat()
      .find((a) => a !== undefined && a.family === 'IPv4' && !a.internal);
    // A machine with no non-loopback IPv4 address has nothing else to check.
    if (external) expect(await attempt(external.address)).toBe('ECONNREFUSED');
  });

  it('close() is idempotent and stops accepting connections', async () => {
    const handle = await start();
    await Promise.all([handle.close(), handle.close()]);
    await handle.close();
    await expect(fetch(handle.url)).rejects.toThrow();
  });

  it('rejects an invalid port, and a port already in use', async () => {
    await expect(startInspector({ port: -1 })).rejects.toMatchObject({ code: 'CONFIG_INVALID' });
    await expect(startInspector({ port: 1.5 })).rejects.toMatchObject({ code: 'CONFIG_INVALID' });
    const handle = await start();
    await expect(startInspector({ port: handle.port })).rejects.toMatchObject({
      code: 'CONFIG_INVALID',
      message: expect.stringContaining('the port is in use'),
    });
  });

  it('the hint says where to open the page, that it loads stately.ai, and how to tunnel', async () => {
    const handle = await start();
    expect(handle.hint).toContain(handle.url);
    expect(handle.hint).toContain('https://stately.ai/inspect');
    expect(handle.hint).toContain('internet');
    expect(handle.hint).toContain(`ssh -L ${handle.port}:127.0.0.1:${handle.port}`);
    expect(handle.hint).not.toContain('\n');
  });
});

describe('startInspector: the process exits after close()', () => {
  it('a node process with a run, a connected client and a page fetch exits on its own, code 0', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'troupe-inspector-'));
    try {
      const url = (path: string) => JSON.stringify(pathToFileURL(join(REPO, path)).href);
      const file = join(dir, 'run.mjs');
      await writeFile(
        file,
        `import { startInspector } from ${url('dist/src/inspect/server.js')};
import { createCoordinator, scriptedModel } from ${url('dist/src/index.js')};
import WebSocket from ${url('node_modules/ws/wrapper.mjs')};

const inspector = await startInspector({ port: 0 });
const ws = new WebSocket('ws://127.0.0.1:' + inspector.port + '/?token=' + inspector.token);
await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); });
let received = 0;
ws.on('message', () => received++);
const closed = new Promise((resolve) => ws.once('close', resolve));
const page = await fetch(inspector.url);
await page.text();

const model = scriptedModel(${JSON.stringify(script())});
const coordinator = createCoordinator({ model, inspect: inspector.inspect });
const rootId = await coordinator.start({ name: 'lead', task: 'tiny run' });
await coordinator.waitFor(rootId, ['completed', 'failed', 'crashed', 'stopped']);
await coordinator.shutdown();
await inspector.close();
await closed;
process.stdout.write('closed after ' + received + ' messages\\n');
// No process.exit(): the process must end by itself.
`,
      );
      const result = await new Promise<{ code: number | null; signal: string | null; stdout: string; stderr: string }>((resolve) => {
        const child = execFile(process.execPath, [file], { timeout: 10_000, killSignal: 'SIGKILL' }, (_err, stdout, stderr) =>
          resolve({ code: child.exitCode, signal: child.signalCode, stdout, stderr }),
        );
      });
      expect(result.stderr).toBe('');
      expect(result.signal).toBeNull();
      expect(result.code).toBe(0);
      expect(result.stdout).toMatch(/^closed after [1-9]\d* messages\n$/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('sanitizeContext / sanitizeEvent on real shapes', () => {
  const noCycle = fromCallback<AgentEvent, CycleInput>(() => () => {});

  it('an agent context keeps ids, name, counters, wait, stop reason, last tool, error code and report shape', () => {
    const actor = createActor(agentMachine.provide({ actors: { runCycle: noCycle } }), {
      input: {
        id: 'a1',
        name: 'worker',
        parentId: 'root',
        policy: { maxTurns: 7 },
        status: 'failed',
        state: {
          turns: 4,
          stintTurns: 2,
          recoveries: 1,
          idleResumes: 0,
          waitKind: null,
          waitingSince: 1_000,
          stopReason: 'requested',
          lastTool: 'read_file',
          budgetEpoch: 3,
          pendingWait: { callId: 'call_1', tool: 'wait_for_agents' },
          error: { code: 'PROVIDER_AUTH', message: `invalid api key ${SECRET}`, retryable: false },
          report: { summary: CHILD_SUMMARY, findings: [CHILD_FINDING, 'b', 'c'], openItems: ['later'], success: false },
        },
      },
    }).start();
    const context: AgentContext = actor.getSnapshot().context;
    actor.stop();
    expect(sanitizeContext(context)).toEqual({
      id: 'a1',
      name: 'worker',
      parentId: 'root',
      turns: 4,
      stintTurns: 2,
      recoveries: 1,
      idleResumes: 0,
      waitKind: null,
      waitingSince: 1_000,
      stopReason: 'requested',
      lastTool: 'read_file',
      budgetEpoch: 3,
      error: { code: 'PROVIDER_AUTH' },
      report: { success: false, findings: 3 },
    });
    // Allow-list: a field added to the context later is not shown until it is named.
    expect(sanitizeContext({ ...context, transcript: [`user: ${SECRET}`], apiKey: SECRET })).toEqual(sanitizeContext(context));
  });

  it('the coordinator context keeps run ids, counts, budget flags, limits and the agent list without tasks', () => {
    const actor = createActor(coordinatorMachine, {
      input: { runId: 'run_1', limits: { maxDepth: 2, maxChildren: 3, maxAgents: 10 }, budget: { limitUsd: 5 } },
    }).start();
    actor.send({ type: 'agent.register', id: 'root', name: 'lead', parentId: null });
    actor.send({ type: 'agent.register', id: 'a1', name: 'worker', parentId: 'root' });
    actor.send({
      type: 'agent.changed',
      id: 'a1',
      status: 'completed',
      waitKind: null,
      error: null,
      stopReason: null,
      report: { summary: CHILD_SUMMARY, findings: [], openItems: [], success: true },
      task: CHILD_TASK,
      at: 5,
    });
    const context: CoordinatorContext = actor.getSnapshot().context;
    actor.stop();
    expect(sanitizeContext(context)).toEqual({
      runId: 'run_1',
      rootId: 'root',
      agentCount: 2,
      activeNonRoot: 0,
      running: 1,
      budget: { limitUsd: 5, budgetStopped: false, reserveStopped: false, paused: false, resumeEpoch: 0, reserveNoticeClaimed: false },
      limits: { maxDepth: 2, maxChildren: 3, maxAgents: 10 },
      agents: [
        { id: 'root', name: 'lead', parentId: null, depth: 0, status: 'running' },
        { id: 'a1', name: 'worker', parentId: 'root', depth: 1, status: 'completed' },
      ],
    });
  });

  it('anything else is dropped', () => {
    expect(sanitizeContext(undefined)).toBeUndefined();
    expect(sanitizeContext({ transcript: [SECRET], apiKey: SECRET })).toBeUndefined();
    expect(sanitizeContext('text')).toBeUndefined();
  });

  it('turn.done keeps the outcome kind, agent.changed id and status, xstate.init its input through the allow-lists', () => {
    expect(
      sanitizeEvent({
        type: 'turn.done',
        outcome: { kind: 'finish', report: { summary: CHILD_SUMMARY, findings: [CHILD_FINDING], openItems: [], success: true } },
      }),
    ).toEqual({ type: 'turn.done', outcome: { kind: 'finish' } });
    expect(sanitizeEvent({ type: 'turn.done', outcome: { kind: 'failed', error: { code: 'X', message: SECRET, retryable: false } } })).toEqual({
      type: 'turn.done',
      outcome: { kind: 'failed' },
    });
    expect(
      sanitizeEvent({
        type: 'agent.changed',
        id: 'a1',
        status: 'failed',
        waitKind: null,
        recoveries: 0,
        idleResumes: 0,
        error: { code: 'PROVIDER_AUTH', message: SECRET, retryable: false },
        stopReason: null,
        report: null,
        task: CHILD_TASK,
        at: 1,
      }),
    ).toEqual({ type: 'agent.changed', id: 'a1', status: 'failed' });
    expect(
      sanitizeEvent({
        type: 'xstate.init',
        input: {
          id: 'a1',
          name: 'worker',
          parentId: 'root',
          status: 'completed',
          policy: { maxTurns: 3 },
          state: { turns: 2, report: { summary: CHILD_SUMMARY, findings: [CHILD_FINDING], openItems: [], success: true } },
        },
      }),
    ).toEqual({
      type: 'xstate.init',
      input: { id: 'a1', name: 'worker', parentId: 'root', status: 'completed', turns: 2, report: { success: true, findings: 1 } },
    });
  });

  it('other events lose long strings and credential or conversation keys, at any depth', () => {
    const long = 'x'.repeat(201);
    const event = {
      type: 'agent.message',
      from: 'a1',
      user: true,
      note: long,
      short: 'y'.repeat(200),
      apiKey: SECRET,
      nested: { Authorization: `Bearer ${SECRET}`, content: 'hello', list: [long, 'ok', { password: SECRET, depth: 2 }] },
      error: Object.assign(new Error(SECRET), { code: 'TOOL_FAILED' }),
      ref: createActor(coordinatorMachine, { input: { runId: 'r', limits: { maxDepth: 1, maxChildren: 1, maxAgents: 1 } } }),
      fn: () => SECRET,
    };
    expect(sanitizeEvent(event)).toEqual({
      type: 'agent.message',
      from: 'a1',
      user: true,
      short: 'y'.repeat(200),
      nested: { list: ['ok', { depth: 2 }] },
      error: { name: 'Error', code: 'TOOL_FAILED' },
    });
    expect(JSON.stringify(sanitizeEvent({ type: 'budget.resume', epoch: 2 }))).toBe('{"type":"budget.resume","epoch":2}');
    for (const key of ['tokenCount', 'secretName', 'messageId', 'taskRef', 'summaryText', 'x_content']) {
      expect(sanitizeEvent({ type: 'e', [key]: 1 })).toEqual({ type: 'e' });
    }
  });
});
