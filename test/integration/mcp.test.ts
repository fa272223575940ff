/**
 * Tools from MCP servers (issue 21), against a real MCP server written with the SDK's server side
 * (test/fixtures/mcp/server.ts): over stdio as a child process, and over streamable HTTP on
 * 127.0.0.1. Never a mock of the protocol.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { createCoordinator, type Coordinator } from '../../src/host/createCoordinator.js';
import type { ApprovalPolicy, CoordinatorOptions } from '../../src/host/options.js';
import type { Model } from '../../src/model/types.js';
import { mcpServer } from '../../src/mcp/config.js';
import { scriptedModel, type Script, type ScriptedModel } from '../../src/model/scriptedModel.js';
import { memoryStore } from '../../src/store/memoryStore.js';
import { startHttpFixture, type HttpFixture } from '../fixtures/mcp/server.js';
import { codeOf, logSink, stdioServer, toolItems } from '../helpers/mcp.js';
import { TERMINAL } from '../helpers/team.js';

const open: Coordinator[] = [];
const fixtures: HttpFixture[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((c) => c.shutdown()));
  await Promise.all(fixtures.splice(0).map((f) => f.close()));
});

function run(script: Script, options: Omit<CoordinatorOptions, 'model' | 'store'> & { clock?: SimulatedClock }) {
  const model: ScriptedModel = scriptedModel(script, options.clock ? { clock: options.clock } : {});
  const store = memoryStore();
  // `callStarted(n)` resolves once the n-th model call has begun (its scripted delay is armed).
  const waiting = new Map<number, () => void>();
  const begun = new Map<number, Promise<void>>();
  const callStarted = (n: number) => {
    if (!begun.has(n)) begun.set(n, new Promise<void>((resolve) => waiting.set(n, resolve)));
    return begun.get(n)!;
  };
  const watched: Model = {
    ...model,
    complete: (request, opts) => {
      const answer = model.complete(request, opts);
      void callStarted(model.calls.length);
      waiting.get(model.calls.length)?.();
      return answer;
    },
  };
  const c = createCoordinator({ model: watched, store, ...options });
  open.push(c);
  return { c, model, store, callStarted };
}

describe('MCP servers as tools', () => {
  it('a scripted team calls the tools of a stdio server and reads text, structured content, images and errors', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'troupe-mcp-'));
    const fixtureLog = join(dir, 'fixture.log');
    const previous = process.env.OPENAI_API_KEY;
    process.env.OPENAI_API_KEY = 'sk-troupe-test-never-inherited';
    try {
      const sink = logSink();
      const { c, model, store } = run(
        {
          agents: {
            lead: [
              {
                tools: [
                  { name: 'echo', args: { text: 'hi' } },
                  { name: 'add', args: { a: 2, b: 3 } },
                  { name: 'picture', args: {} },
                  { name: 'fail', args: {} },
                  { name: 'env', args: {} },
                  { name: 'huge', args: { size: 5_000 } },
                  { name: 'bad_schema', args: {} },
                  { name: 'echo', args: { text: 42 } },
                ],
              },
              { tool: 'finish', args: { summary: 'done' } },
            ],
          },
        },
        { logger: sink.logger, tools: [stdioServer({ env: { FIXTURE_LOG: fixtureLog }, maxResultChars: 1_000 })] },
      );
      const rootId = await c.start({ name: 'lead', task: 'Use the tools.' });
      expect((await c.waitFor(rootId, TERMINAL)).status).toBe('completed');
      const items = toolItems(store.loadSession(rootId));
      expect(items.map((i) => [i.name, codeOf(i)])).toEqual([
        ['echo', null],
        ['add', null],
        ['picture', null],
        ['fail', 'TOOL_FAILED'],
        ['env', null],
        ['huge', 'MCP_RESULT_TOO_LARGE'],
        ['bad_schema', 'TOOL_NOT_FOUND'],
        ['echo', 'TOOL_INPUT_INVALID'],
        ['finish', null],
      ]);
      expect(items[0]!.content).toBe('echo: hi');
      expect(JSON.parse(items[1]!.content)).toEqual({ content: '{"sum":5}', structuredContent: { sum: 5 } });
      expect(items[2]!.content).toMatch(/^\[image image\/png, \d+ bytes: shown to you after the tool results\]\na red square$/);
      // The pixels follow every tool result of the turn, as one user message the next call sends.
      const session = store.loadSession(rootId);
      const pictureCall = (session[1] as { toolCalls: { id: string; name: string }[] }).toolCalls.find((t) => t.name === 'picture')!;
      const afterResults = session.findIndex((i, n) => n > 1 && i.role !== 'tool');
      expect(session.slice(2, afterResults).every((i) => i.role === 'tool')).toBe(true);
      expect(session[afterResults]).toEqual({
        role: 'user',
        content: [
          { type: 'text', text: `[The image returned by picture (tool call ${pictureCall.id})]` },
          { type: 'image', url: `data:image/png;base64,${Buffer.from('not really a png').toString('base64')}` },
        ],
      });
      expect(model.calls[1]!.request.messages).toContainEqual(session[afterResults]);
      expect(items[3]!.content).toContain('the disk is on fire');
      // Only the environment the config names (plus the SDK's PATH, HOME, ...): no API key.
      const env = JSON.parse(items[4]!.content) as string[];
      expect(env).toContain('FIXTURE_LOG');
      expect(env).toContain('PATH');
      expect(env).not.toContain('OPENAI_API_KEY');
      // The schemas reach the model unchanged; the tool whose schema is invalid is left out.
      const offered = model.calls[0]!.request.tools;
      expect(offered.find((t) => t.name === 'echo')?.parameters).toEqual({ type: 'object', properties: { text: { type: 'string' } }, required: ['text'] });
      expect(offered.map((t) => t.name)).not.toContain('bad_schema');
      expect(offered.map((t) => t.name)).toEqual(expect.arrayContaining(['echo', 'add', 'write_note', 'wipe', 'finish']));
      // The server's stderr went to the log, tagged with the server.
      expect(sink.records.some((r) => r.mcpServer === 'fx' && typeof r.stderr === 'string' && r.stderr.startsWith('FIXTURE UP'))).toBe(true);
      expect(sink.records.some((r) => r.tool === 'bad_schema' && r.msg?.includes('left out'))).toBe(true);
      expect(readFileSync(fixtureLog, 'utf8')).toContain('FIXTURE UP');
    } finally {
      if (previous === undefined) delete process.env.OPENAI_API_KEY;
      else process.env.OPENAI_API_KEY = previous;
    }
  });

  it('names collide across a stdio and an HTTP server: both are offered as <server>__<tool>; secret headers are sent, never logged', async () => {
    const web = await startHttpFixture();
    fixtures.push(web);
    const secret = 'Bearer mcp-secret-token-123456';
    const sink = logSink();
    const { c, model, store } = run(
      {
        agents: {
          lead: [
            {
              tools: [
                { name: 'fx__echo', args: { text: 'from stdio' } },
                { name: 'web__echo', args: { text: 'from http' } },
                { name: 'echo', args: { text: 'x' } },
              ],
            },
            { tool: 'finish', args: { summary: 'done' } },
          ],
        },
      },
      { logger: sink.logger, tools: [stdioServer(), mcpServer({ name: 'web', url: web.url, headers: { authorization: secret } })] },
    );
    const rootId = await c.start({ name: 'lead', task: 'Use both.' });
    expect((await c.waitFor(rootId, TERMINAL)).status).toBe('completed');
    const items = toolItems(store.loadSession(rootId));
    expect(items.map((i) => (i.content.startsWith('{') ? codeOf(i) : i.content))).toEqual(['echo: from stdio', 'echo: from http', 'TOOL_NOT_FOUND', null]);
    const names = model.calls[0]!.request.tools.map((t) => t.name);
    expect(names).toEqual(expect.arrayContaining(['fx__echo', 'web__echo', 'fx__wipe', 'web__wipe']));
    expect(names).not.toContain('echo');
    expect(web.headers.every((h) => h.authorization === secret)).toBe(true);
    expect(sink.raw.join('')).not.toContain('mcp-secret-token');
  });

  it('a server that cannot start (no such command, or no answer to initialize) is logged and retried; the run goes on without its tools', async () => {
    const clock = new SimulatedClock();
    const sink = logSink();
    const { c, model } = run(
      {
        agents: {
          lead: [
            { tool: 'mute__echo', args: {} },
            { tool: 'finish', args: { summary: 'done' } },
          ],
        },
      },
      {
        clock,
        logger: sink.logger,
        tools: [
          mcpServer({ name: 'missing', command: '/nonexistent/mcp-server' }),
          mcpServer({ name: 'mute', command: process.execPath, args: ['-e', 'setInterval(() => {}, 1000)'], connectTimeoutMs: 200 }),
        ],
      },
    );
    const events: unknown[] = [];
    c.subscribe((e) => e.type === 'mcp.server' && events.push(e));
    const rootId = await c.start({ name: 'lead', task: 'Go on.' });
    // Said to views and scripts, not only logged: each server once, with why.
    expect(events).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ type: 'mcp.server', server: 'missing', state: 'failed', tools: 0, error: expect.stringContaining('ENOENT') }),
        expect.objectContaining({ type: 'mcp.server', server: 'mute', state: 'failed', error: expect.any(String) }),
      ]),
    );
    expect(events).toHaveLength(2);
    expect(c.mcpServers().map((s) => [s.server, s.state])).toEqual([
      ['missing', 'failed'],
      ['mute', 'failed'],
    ]);
    expect((await c.waitFor(rootId, TERMINAL)).status).toBe('completed');
    expect(model.calls[0]!.request.tools.map((t) => t.name).filter((n) => n.includes('__') || n === 'echo')).toEqual([]);
    const failed = sink.records.filter((r) => r.msg === 'MCP server failed to start').map((r) => r.mcpServer);
    expect(failed.sort()).toEqual(['missing', 'mute']);
    // Each is retried after the backoff, on the injected clock.
    clock.increment(250);
    await sink.until(
      (r) =>
        r.msg === 'MCP server failed to start' &&
        r.mcpServer === 'missing' &&
        sink.records.filter((x) => x.mcpServer === 'missing' && x.msg === r.msg).length === 2,
    );
  });

  it('strictMcp: a server that fails its first start fails start() with MCP_SERVER_UNAVAILABLE, naming it, and no run is created', async () => {
    const { c, store } = run(
      { agents: { lead: [{ tool: 'finish', args: { summary: 'never' } }] } },
      {
        strictMcp: true,
        tools: [mcpServer({ name: 'missing', command: '/nonexistent/mcp-server' })],
      },
    );
    await expect(c.start({ name: 'lead', task: 'Go on.' })).rejects.toMatchObject({
      code: 'MCP_SERVER_UNAVAILABLE',
      message: expect.stringMatching(
        /^MCP server "missing" failed to start \(.*ENOENT.*\); with strictMcp \(--strict-mcp\) the run does not go on without its tools$/,
      ),
    });
    expect(store.listRuns()).toEqual([]);
    await c.shutdown();
  });

  it('shutdown while a server is still connecting ends it at once, not after its connect timeout', async () => {
    const sink = logSink();
    const mute = mcpServer({
      name: 'mute',
      command: process.execPath,
      args: ['-e', "process.stderr.write('MUTE UP\\n'); setInterval(() => {}, 1000)"],
      connectTimeoutMs: 600_000,
    });
    const { c } = run({ agents: { lead: [] } }, { logger: sink.logger, tools: [mute] });
    const started = c.start({ name: 'lead', task: 'Never starts.' });
    await sink.until((r) => r.stderr === 'MUTE UP');
    await c.shutdown();
    await expect(started).rejects.toMatchObject({ code: 'COORDINATOR_SHUT_DOWN' });
  });

  it('risk comes from the annotations: a destructive tool asks for approval and the denial reaches the model', async () => {
    const asked: { action: string; risk: string }[] = [];
    const approvals: ApprovalPolicy = {
      request: (req) => {
        asked.push({ action: req.action, risk: req.risk });
        return Promise.resolve(req.risk === 'destructive' ? { approved: false, reason: 'no wiping today' } : { approved: true, reason: 'ok' });
      },
      windowOpen: () => true,
    };
    const { c, store } = run(
      {
        agents: {
          lead: [
            {
              tools: [
                { name: 'echo', args: { text: 'a' } },
                { name: 'write_note', args: { note: 'n1' } },
                { name: 'wipe', args: {} },
              ],
            },
            { tool: 'finish', args: { summary: 'done' } },
          ],
        },
      },
      { approvals, tools: [stdioServer()] },
    );
    const rootId = await c.start({ name: 'lead', task: 'Try.' });
    await c.waitFor(rootId, TERMINAL);
    expect(asked).toEqual([
      { action: 'write_note', risk: 'mutation' },
      { action: 'wipe', risk: 'destructive' },
    ]);
    const items = toolItems(store.loadSession(rootId));
    expect(items[1]!.content).toBe('noted (1)');
    expect(codeOf(items[2]!)).toBe('APPROVAL_DENIED');
    expect(items[2]!.content).toContain('no wiping today');
  });

  it('a per-tool override replaces the annotation: a read-only override needs no approval', async () => {
    const asked: string[] = [];
    const approvals: ApprovalPolicy = {
      request: (req) => (asked.push(req.action), Promise.resolve({ approved: false, reason: 'no' })),
      windowOpen: () => true,
    };
    const { c, store } = run(
      {
        agents: {
          lead: [
            {
              tools: [
                { name: 'write_note', args: { note: 'n' } },
                { name: 'echo', args: { text: 'e' } },
              ],
            },
            { tool: 'finish', args: { summary: 'done' } },
          ],
        },
      },
      { approvals, tools: [stdioServer({ tools: { write_note: { risk: 'read_only' }, echo: { risk: 'destructive' } } })] },
    );
    const rootId = await c.start({ name: 'lead', task: 'Try.' });
    await c.waitFor(rootId, TERMINAL);
    expect(asked).toEqual(['echo']);
    expect(toolItems(store.loadSession(rootId)).map(codeOf)).toEqual([null, 'APPROVAL_DENIED', null]);
  });

  it('a server killed mid-call gives the call a typed tool error; the server is restarted and the next call works', async () => {
    const sink = logSink();
    const { c, store } = run(
      {
        agents: {
          lead: [
            { tool: 'die', args: {} },
            { tool: 'echo', args: { text: 'again' } },
            { tool: 'finish', args: { summary: 'done' } },
          ],
        },
      },
      { logger: sink.logger, tools: [stdioServer()] },
    );
    const rootId = await c.start({ name: 'lead', task: 'Survive.' });
    expect((await c.waitFor(rootId, TERMINAL)).status).toBe('completed');
    const items = toolItems(store.loadSession(rootId));
    expect(items.map(codeOf)).toEqual(['MCP_SERVER_UNAVAILABLE', null, null]);
    expect(items[1]!.content).toBe('echo: again');
    expect(sink.records.filter((r) => r.stderr?.startsWith('FIXTURE UP')).length).toBe(2);
    expect(sink.records.some((r) => r.msg === 'MCP server lost; restarting')).toBe(true);
  });

  it('an HTTP server that goes away mid-call gives a typed tool error; a call while it is down fails when the restart fails; it is reconnected once back', async () => {
    const clock = new SimulatedClock();
    const sink = logSink();
    const first = await startHttpFixture();
    const port = Number(new URL(first.url).port);
    const { c, store } = run(
      {
        agents: {
          lead: [
            {
              tools: [
                { name: 'die', args: {} },
                { name: 'echo', args: { text: 'down' } },
              ],
            },
            { tool: 'echo', args: { text: 'back' } },
            { tool: 'finish', args: { summary: 'done' } },
          ],
        },
      },
      { clock, logger: sink.logger, tools: [mcpServer({ name: 'web', url: first.url })] },
    );
    const failedStarts = () => sink.records.filter((r) => r.msg === 'MCP server failed to start').length;
    const rootId = await c.start({ name: 'lead', task: 'Survive.' });
    await sink.until((r) => r.msg === 'MCP server lost; restarting');
    // The first restart finds nothing listening: the call waiting on it fails, typed.
    clock.increment(250);
    await sink.until(() => failedStarts() === 1);
    const second = await startHttpFixture(port);
    fixtures.push(second);
    clock.increment(500);
    expect((await c.waitFor(rootId, TERMINAL)).status).toBe('completed');
    const items = toolItems(store.loadSession(rootId));
    expect(items.slice(0, 3).map(codeOf)).toEqual(['MCP_SERVER_UNAVAILABLE', 'MCP_SERVER_UNAVAILABLE', null]);
    expect(items[1]!.content).toContain('failed to start');
    expect(items[2]!.content).toBe('echo: back');
  });

  it('a call that never answers times out with TOOL_TIMEOUT on the tool timeout, and the server is told (MCP cancellation)', async () => {
    const clock = new SimulatedClock();
    const sink = logSink();
    const { c, store } = run(
      {
        agents: {
          lead: [
            { tool: 'slow', args: {} },
            { tool: 'finish', args: { summary: 'done' } },
          ],
        },
      },
      { clock, logger: sink.logger, tools: [stdioServer({ tools: { slow: { timeoutMs: 5_000 } } })] },
    );
    const rootId = await c.start({ name: 'lead', task: 'Wait.' });
    await sink.until((r) => r.stderr?.startsWith('SLOW') === true);
    clock.increment(4_999);
    clock.increment(1);
    await sink.until((r) => r.stderr?.startsWith('CANCELLED') === true);
    expect((await c.waitFor(rootId, TERMINAL)).status).toBe('completed');
    expect(codeOf(toolItems(store.loadSession(rootId))[0]!)).toBe('TOOL_TIMEOUT');
  });

  it('shutdown cancels an in-flight call (the server receives notifications/cancelled) and stops the server', async () => {
    const sink = logSink();
    const { c } = run({ agents: { lead: [{ tool: 'slow', args: {} }] } }, { logger: sink.logger, tools: [stdioServer()] });
    await c.start({ name: 'lead', task: 'Wait.' });
    const slow = await sink.until((r) => r.stderr?.startsWith('SLOW') === true);
    await c.shutdown();
    const id = slow.stderr!.split(' ')[1];
    expect(sink.records.some((r) => r.stderr === `CANCELLED ${id}`)).toBe(true);
  });

  it('tools/list_changed: a tool the server adds is offered from the next model call on', async () => {
    const clock = new SimulatedClock();
    const sink = logSink();
    const { c, model, store, callStarted } = run(
      {
        agents: {
          lead: [
            { tool: 'grow', args: {} },
            { delayMs: 1_000, tool: 'late', args: {} },
            { tool: 'finish', args: { summary: 'done' } },
          ],
        },
      },
      { clock, logger: sink.logger, tools: [stdioServer()] },
    );
    const rootId = await c.start({ name: 'lead', task: 'Grow.' });
    await sink.until((r) => r.msg === 'MCP tool list changed');
    await callStarted(2);
    expect(model.calls[0]!.request.tools.map((t) => t.name)).not.toContain('late');
    clock.increment(1_000);
    expect((await c.waitFor(rootId, TERMINAL)).status).toBe('completed');
    expect(toolItems(store.loadSession(rootId)).map((i) => i.content)).toEqual(['grown', 'late tool ran', expect.any(String)]);
    expect(model.calls[2]!.request.tools.map((t) => t.name)).toContain('late');
  });

  it('per-agent tool sets: a child spawned with the skill tools:<server> gets only that server, and nothing its parent lacks', async () => {
    const web = await startHttpFixture();
    fixtures.push(web);
    const { c, model, store } = run(
      {
        agents: {
          lead: [
            { tool: 'spawn_agent', args: { name: 'research', task: 'look', skills: ['tools:web'] } },
            { tool: 'wait_for_agents', args: { reason: 'research' } },
            { tool: 'finish', args: { summary: 'done' } },
          ],
          research: [
            {
              tools: [
                { name: 'web__echo', args: { text: 'ok' } },
                { name: 'fx__wipe', args: {} },
              ],
            },
            { tool: 'spawn_agent', args: { name: 'deep', task: 'deeper', skills: ['tools:fx'] } },
            { tool: 'wait_for_agents', args: { reason: 'deep' } },
            { tool: 'agent_finish', args: { summary: 'found' } },
          ],
          deep: [
            { tool: 'fx__echo', args: { text: 'no' } },
            { tool: 'agent_finish', args: { summary: 'nothing' } },
          ],
        },
      },
      { tools: [stdioServer(), mcpServer({ name: 'web', url: web.url })] },
    );
    const rootId = await c.start({ name: 'lead', task: 'Delegate.' });
    expect((await c.waitFor(rootId, TERMINAL)).status).toBe('completed');
    const offered = (name: string) => model.calls.find((call) => call.agentName === name)!.request.tools.map((t) => t.name);
    expect(offered('lead')).toEqual(expect.arrayContaining(['fx__echo', 'web__echo']));
    expect(
      offered('research')
        .filter((n) => n.includes('__'))
        .every((n) => n.startsWith('web__')),
    ).toBe(true);
    expect(offered('research')).toContain('spawn_agent');
    // A grandchild's set is cut by its parent's: fx is not in research's set, so deep gets no MCP tool.
    expect(offered('deep').filter((n) => n.includes('__'))).toEqual([]);
    const research = c.list().find((a) => a.name === 'research')!;
    const deep = c.list().find((a) => a.name === 'deep')!;
    expect(toolItems(store.loadSession(research.id)).slice(0, 2).map(codeOf)).toEqual([null, 'TOOL_NOT_FOUND']);
    expect(codeOf(toolItems(store.loadSession(deep.id))[0]!)).toBe('TOOL_NOT_FOUND');
  });
});
