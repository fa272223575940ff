/**
 * `troupe serve` as a subprocess of the built CLI, against the fake OpenAI-compatible server: a
 * file_change trigger starts run `proactive-<name>`, SIGTERM stops it with exit 0 and the database
 * stays usable; a main run gets named-agent fires and `troupe send`; a bad section exits 2.
 */
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { sqliteHosting } from '../../src/hosting/sqliteHosting.js';
import { openStore } from '../../src/store/sqliteStore.js';
import { submitRun } from '../../src/worker/submit.js';
import { createFakeOpenAIServer, type FakeRequest } from '../../src/testing/fakeOpenAIServer.js';
import { spawnTroupe, troupe, type Spawned } from '../helpers/cli.js';
import { freshSchema, PG_URL, pgAvailable, pgTitle } from '../helpers/pg.js';

const children: ChildProcess[] = [];
afterEach(() => {
  // A test that failed half-way must not leave a server running.
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

/** `troupe serve` with `args`, killed after the test if it is still running. */
function serve(args: string[], cwd: string): Spawned {
  const served = spawnTroupe(['serve', ...args], cwd);
  children.push(served.child);
  return served;
}

/** The fake model: every agent answers the user with what it last read, so each turn is visible. */
function respondToAll(request: FakeRequest) {
  const body = request.body as { messages?: { role: string; content?: unknown }[] };
  const last = body.messages?.filter((m) => m.role === 'user').at(-1);
  const text = typeof last?.content === 'string' ? last.content : JSON.stringify(last?.content ?? '');
  const gist = /changed|disk|hello from another shell|Stand by/.exec(text)?.[0] ?? 'something';
  return { message: { toolCalls: [{ name: 'respond_to_user', arguments: { message: `Noted: ${gist}.` } }] } };
}

/** --inspect: one inspector shows the actors of the main run and of every proactive run, whichever store serve hosts them on. */
async function inspectsEveryRun(dbArgs: string[]): Promise<void> {
  await using server = await createFakeOpenAIServer(respondToAll);
  const cwd = mkdtempSync(join(tmpdir(), 'troupe-serve-'));
  writeFileSync(
    join(cwd, 'troupe.config.json'),
    JSON.stringify({
      model: 'm',
      baseURL: server.url,
      proactive: { triggers: [{ name: 'tick', type: 'schedule', intervalMs: 300, cooldownMs: 600_000, promptTemplate: 'Scheduled tick: nothing changed.' }] },
    }),
  );
  const free = await new Promise<number>((resolve) => {
    const probe = createNetServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });
  const s = serve(['Stand by for alerts', `--inspect=${free}`, ...dbArgs], cwd);
  await s.line(/^\[proactive-tick\] tick +says: Noted: changed\./);
  // The printed URL carries the token the socket requires.
  const url = new RegExp(`open (http://127\\.0\\.0\\.1:${free}/\\?token=[\\w-]+) `).exec(s.stderr())?.[1];
  expect(url).toBeDefined();

  // A client that connects late gets the recent messages replayed; wait for both runs' roots.
  const names = new Set<string>();
  const ws = new WebSocket(url!.replace(/^http/, 'ws'));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`saw only ${[...names].join(', ')}`)), 15_000);
    ws.on('error', reject);
    ws.on('message', (data: WebSocket.RawData) => {
      const name = (JSON.parse(data.toString()) as { snapshot?: { context?: { name?: unknown } } }).snapshot?.context?.name;
      if (typeof name === 'string') names.add(name);
      if (names.has('lead') && names.has('tick')) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
  ws.close();
  s.child.kill('SIGTERM');
  expect(await s.exited).toEqual({ code: 0, signal: null });
}

describe('troupe serve', () => {
  it('a file_change trigger starts run proactive-<name>; SIGTERM exits 0 and the database stays readable', async () => {
    await using server = await createFakeOpenAIServer(respondToAll);
    const cwd = mkdtempSync(join(tmpdir(), 'troupe-serve-'));
    const watched = join(cwd, 'watched');
    mkdirSync(watched);
    writeFileSync(
      join(cwd, 'troupe.config.json'),
      JSON.stringify({
        proactive: {
          triggers: [
            {
              name: 'docs-watch',
              trigger_type: 'file_change',
              watch_path: watched,
              watch_patterns: ['*.md'],
              prompt_template: 'The file ${path} changed; review it.',
              cooldown_seconds: 600,
            },
          ],
        },
        watchdog: { intervalMs: 60_000 },
      }),
    );
    const s = serve(['--model', 'm', '--base-url', server.url, '--api-key', 'sk-serve-secret'], cwd);
    const ready = await s.line(/^ready\b/);
    expect(ready).toContain('no main run');
    expect(ready).toContain('docs-watch');

    writeFileSync(join(watched, 'ignored.txt'), 'not a match');
    writeFileSync(join(watched, 'notes.md'), '# Notes\n');
    await s.line(/^proactive {2}docs-watch → started run proactive-docs-watch/);
    await s.line(/^\[proactive-docs-watch\] docs-watch +says: Noted: changed\./);
    // The first watchdog round (right after ready) found everything healthy.
    await s.line(/^watchdog +model healthy/);

    s.child.kill('SIGTERM');
    const exit = await s.exited;
    expect(exit, s.stderr()).toEqual({ code: 0, signal: null });
    expect(s.lines.at(-1)).toMatch(/^stopped\b/);
    expect(s.lines.filter((l) => /→ started run/.test(l))).toHaveLength(1);

    // The run is in the database, its root parked on the user with its answer, resumable.
    const store = openStore({ path: join(cwd, '.troupe/troupe.db') });
    try {
      const run = store.getRun('proactive-docs-watch');
      expect(run).toMatchObject({ interactive: true });
      const root = store.getAgent(run!.rootId!)!;
      expect(root).toMatchObject({ name: 'docs-watch', status: 'waiting' });
      expect(root.task).toBe(`The file ${join(watched, 'notes.md')} changed; review it.`);
      expect(store.loadSession(root.id).some((i) => i.role === 'assistant')).toBe(true);
      expect(store.integrityCheck()).toBe('ok');
    } finally {
      store.close();
    }
    expect(server.requests.find((r) => r.path === '/v1/chat/completions')!.headers.authorization).toBe('Bearer sk-serve-secret');
    const status = await troupe(['status', '--json'], cwd);
    expect(status.code, status.stderr).toBe(0);
    expect(JSON.parse(status.stdout)).toMatchObject({ runId: 'proactive-docs-watch', root: { name: 'docs-watch', status: 'waiting' } });
  });

  it('with a task: a main run lead gets named-agent fires, and troupe send reaches it although a proactive run is newer', async () => {
    await using server = await createFakeOpenAIServer(respondToAll);
    const cwd = mkdtempSync(join(tmpdir(), 'troupe-serve-'));
    const config = join(cwd, 'serve.json');
    writeFileSync(
      config,
      JSON.stringify({
        model: 'm',
        baseURL: server.url,
        apiKey: 'k',
        proactive: {
          triggers: [
            {
              name: 'disk',
              type: 'schedule',
              intervalMs: 300,
              cooldownMs: 600_000,
              promptTemplate: 'The disk is full (${trigger_name}).',
              target: { agent: 'lead' },
            },
            { name: 'tick', type: 'schedule', intervalMs: 300, cooldownMs: 600_000, promptTemplate: 'Scheduled tick: nothing changed.' },
          ],
        },
      }),
    );
    const s = serve(['Stand by for alerts', '--config', config], cwd);
    await s.line(/^ready .*main run run_\S+ \(root \S+\)/);
    // Ticks fall on multiples of the interval, so the first may come before the lead's first turn
    // has read its task: that turn then answers the fire (the task is read with it).
    await s.line(/^\[main\] lead +says: Noted: (Stand by|disk)\./);
    await s.line(/^proactive {2}disk → message to \S+ in run run_/);
    await s.line(/^\[main\] lead +says: Noted: disk\./);
    await s.line(/^proactive {2}tick → started run proactive-tick/);
    await s.line(/^\[proactive-tick\] tick +says: Noted: changed\./);

    const sent = await troupe(['send', 'lead', 'hello from another shell'], cwd);
    expect(sent.code, sent.stderr).toBe(0);
    expect(sent.stdout).toMatch(/^delivered to lead/);
    await s.line(/^\[main\] lead +says: Noted: hello from another shell\./);

    // --run addresses a proactive run while a main run exists; an unknown run is RUN_NOT_FOUND (4).
    const toTick = await troupe(['send', 'tick', 'hello from another shell', '--run', 'proactive-tick'], cwd);
    expect(toTick.code, toTick.stderr).toBe(0);
    await s.line(/^\[proactive-tick\] tick +says: Noted: hello from another shell\./);
    const tickStatus = await troupe(['status', '--json', '--run', 'proactive-tick'], cwd);
    expect(JSON.parse(tickStatus.stdout)).toMatchObject({ runId: 'proactive-tick', root: { name: 'tick' } });
    const unknown = await troupe(['status', '--run', 'run_nope'], cwd);
    expect(unknown.code).toBe(4);
    expect(unknown.stderr).toContain('no run run_nope');

    s.child.kill('SIGINT');
    expect(await s.exited).toEqual({ code: 0, signal: null });
    const store = openStore({ path: join(cwd, '.troupe/troupe.db') });
    try {
      const main = store.listRuns().find((r) => r.id.startsWith('run_'))!;
      expect(
        store
          .listMessages(main.id)
          .filter((m) => m.type === 'proactive')
          .map((m) => m.content),
      ).toEqual(['The disk is full (disk).']);
    } finally {
      store.close();
    }
  });

  it('a proactive run that was mid-work when serve stopped is resumed when serve starts again', async () => {
    let workerAnswers = false;
    const systemOf = (request: FakeRequest) => String((request.body as { messages: { content: unknown }[] }).messages[0]!.content);
    const assistantTurns = (request: FakeRequest) => (request.body as { messages: { role: string }[] }).messages.filter((m) => m.role === 'assistant').length;
    await using server = await createFakeOpenAIServer((request) => {
      if (request.path !== '/v1/chat/completions') return { status: 404, body: {} };
      if (systemOf(request).includes('You are worker')) {
        return workerAnswers ? { message: { toolCalls: [{ name: 'agent_finish', arguments: { summary: 'compiled' } }] } } : { hang: true };
      }
      switch (assistantTurns(request)) {
        case 0:
          return { message: { toolCalls: [{ name: 'spawn_agent', arguments: { name: 'worker', task: 'compile' } }] } };
        case 1:
          return { message: { toolCalls: [{ name: 'wait_for_agents', arguments: { reason: 'worker' } }] } };
        default:
          return { message: { toolCalls: [{ name: 'respond_to_user', arguments: { message: 'Build finished.' } }] } };
      }
    });
    const cwd = mkdtempSync(join(tmpdir(), 'troupe-serve-'));
    const config = (intervalMs: number) =>
      writeFileSync(
        join(cwd, 'troupe.config.json'),
        JSON.stringify({
          model: 'm',
          baseURL: server.url,
          proactive: { triggers: [{ name: 'build', type: 'schedule', intervalMs, cooldownMs: 86_400_000, promptTemplate: 'Build it.' }] },
        }),
      );
    config(300);
    const first = serve([], cwd);
    await first.line(/^\[proactive-build\] worker +new → running/);
    await first.line(/^\[proactive-build\] build +running → waiting/);
    // The 300 ms schedule ticks inside its day-long cooldown: the first drop is shown (dropFilter hides the rest).
    await first.line(/^proactive {2}build dropped \(cooldown, .* later drops are not shown until it fires again$/);
    first.child.kill('SIGTERM');
    expect(await first.exited).toEqual({ code: 0, signal: null });

    // The trigger will not fire again for a day: only the restart can finish the build.
    config(86_400_000);
    workerAnswers = true;
    const second = serve([], cwd);
    await second.line(/^proactive {2}resumed run proactive-build/);
    await second.line(/^ready\b/);
    await second.line(/^\[proactive-build\] build +says: Build finished\./);
    second.child.kill('SIGTERM');
    expect(await second.exited).toEqual({ code: 0, signal: null });
  });

  it('a run of the file that serve did not start is hosted when a request reaches it: troupe send to it is delivered and answered', async () => {
    await using server = await createFakeOpenAIServer(respondToAll);
    const cwd = mkdtempSync(join(tmpdir(), 'troupe-serve-'));
    writeFileSync(join(cwd, 'troupe.config.json'), JSON.stringify({ model: 'm', baseURL: server.url, apiKey: 'k' }));
    // A run submitted earlier (by a library call, say), never hosted: nobody wants it until a request arrives.
    mkdirSync(join(cwd, '.troupe'));
    const store = openStore({ path: join(cwd, '.troupe/troupe.db') });
    const { runId } = await submitRun(sqliteHosting(store), { root: { name: 'lead', task: 'Wait for the user.' }, interactive: true });
    store.close();

    const s = serve([], cwd);
    await s.line(/^ready +serving .*: no main run/);
    expect(s.lines.some((l) => l.startsWith(`[${runId}]`))).toBe(false);
    const sent = await troupe(['send', 'lead', 'hello from another shell', '--run', runId], cwd);
    expect(sent.code, sent.stderr).toBe(0);
    expect(sent.stdout).toMatch(/^delivered to lead/);
    await s.line(new RegExp(`^\\[${runId}\\] lead +says: Noted: hello from another shell\\.`));
    s.child.kill('SIGTERM');
    expect(await s.exited).toEqual({ code: 0, signal: null });
  });

  it('a bad proactive section is a configuration error: exit 2, the field named, no database created', async () => {
    const cwd = mkdtempSync(join(tmpdir(), 'troupe-serve-'));
    writeFileSync(
      join(cwd, 'troupe.config.json'),
      JSON.stringify({ model: 'm', proactive: { triggers: [{ name: 'docs', trigger_type: 'file_change', prompt_template: 'x' }] } }),
    );
    const r = await troupe(['serve', '--base-url', 'http://127.0.0.1:9/v1'], cwd);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('proactive.triggers[0].watch_path is required for a file_change trigger');
    expect(existsSync(join(cwd, '.troupe/troupe.db'))).toBe(false);
  });

  it('without a model: exits 2 with the same hint as troupe run', async () => {
    const r = await troupe(['serve'], mkdtempSync(join(tmpdir(), 'troupe-serve-')));
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--model');
    expect(r.stderr).toContain('troupe demo');
  });
});

const pg = await pgAvailable();

describe('--inspect on every store', () => {
  it('a SQLite file: one inspector shows the actors of the main run and of every proactive run', () => inspectsEveryRun([]));
  describe.skipIf(!pg)(pgTitle(pg, 'PostgreSQL'), () => {
    const { schema, drop } = freshSchema();
    afterAll(drop);
    it('PostgreSQL: one inspector shows the actors of the main run and of every proactive run', () => inspectsEveryRun(['--db', `${PG_URL}?schema=${schema}`]));
  });
});
