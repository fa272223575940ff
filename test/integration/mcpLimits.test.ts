/**
 * What a misbehaving MCP server can make troupe read is bounded (issue 31, item 10), against the
 * real fixture server (test/fixtures/mcp/server.ts) over stdio and streamable HTTP:
 *
 * - a listing of more than `maxTools` tools, or more than `maxListPages` pages (an endless
 *   pagination), fails that server's start with a typed error naming it; the run goes on;
 * - a result larger than the message limit is cut off while it is read — over HTTP the client
 *   hangs up before the server has written it all — and the call fails with MCP_RESULT_TOO_LARGE;
 *   over stdio the connection survives (it used to close: "Connection closed").
 */
import { afterEach, describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { createCoordinator, type Coordinator } from '../../src/host/createCoordinator.js';
import type { CoordinatorOptions } from '../../src/host/options.js';
import { mcpServer } from '../../src/mcp/config.js';
import { DEFAULT_MAX_TOOLS, MIN_MESSAGE_BYTES } from '../../src/mcp/limits.js';
import { scriptedModel, type Script } from '../../src/model/scriptedModel.js';
import { memoryStore } from '../../src/store/memoryStore.js';
import { startHttpFixture, type HttpFixture } from '../fixtures/mcp/server.js';
import { codeOf, FIXTURE, logSink, stdioServer, toolItems } from '../helpers/mcp.js';
import { TERMINAL } from '../helpers/team.js';

const open: Coordinator[] = [];
const fixtures: HttpFixture[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((c) => c.shutdown()));
  await Promise.all(fixtures.splice(0).map((f) => f.close()));
});

function run(script: Script, options: Omit<CoordinatorOptions, 'model' | 'store'>) {
  const clock = new SimulatedClock();
  const model = scriptedModel(script, { clock });
  const store = memoryStore();
  const c = createCoordinator({ model, store, clock, ...options });
  open.push(c);
  return { c, model, store, clock };
}

const FINISH = { tool: 'finish', args: { summary: 'done' } };
const failedStart = (r: { msg?: string; mcpServer?: string }, server: string) => r.msg === 'MCP server failed to start' && r.mcpServer === server;

describe('MCP listings are bounded', () => {
  it(`a server listing more than maxTools (default ${DEFAULT_MAX_TOOLS}) fails to start with MCP_TOO_MANY_TOOLS naming it; one within its maxTools offers them all`, async () => {
    const sink = logSink();
    const { c, model } = run(
      { agents: { lead: [FINISH] } },
      {
        logger: sink.logger,
        tools: [stdioServer({ args: [FIXTURE, 'many:300'] }, 'many'), stdioServer({ args: [FIXTURE, 'many:300'], maxTools: 300 }, 'roomy')],
      },
    );
    const rootId = await c.start({ name: 'lead', task: 'Go on.' });
    expect((await c.waitFor(rootId, TERMINAL)).status).toBe('completed');
    const failed = sink.records.filter((r) => r.msg === 'MCP server failed to start');
    expect(failed.map((r) => [r.mcpServer, (r.err as { code?: string }).code])).toEqual([['many', 'MCP_TOO_MANY_TOOLS']]);
    expect((failed[0]!.err as { message: string }).message).toMatch(/"many" lists more than 256 tools/);
    // Only roomy's 300 tools reached the model (under their own names: many offered none).
    const offered = model.calls[0]!.request.tools.map((t) => t.name).filter((n) => /^t\d+$/.test(n) || n.includes('__'));
    expect(offered).toHaveLength(300);
    expect(offered).toContain('t299');
  });

  it('a list_changed that goes over maxTools keeps the tools listed before, and says why in the log', async () => {
    const sink = logSink();
    // The fixture lists 15 tools; `grow` adds a 16th and announces list_changed.
    const { c, model, store, clock } = run(
      { agents: { lead: [{ tool: 'grow', args: {} }, { delayMs: 1_000, tool: 'echo', args: { text: 'after' } }, FINISH] } },
      { logger: sink.logger, tools: [stdioServer({ maxTools: 15 })] },
    );
    const rootId = await c.start({ name: 'lead', task: 'Grow.' });
    const failed = await sink.until((r) => r.msg === 'listing the tools of an MCP server failed; its tools stay as they were');
    expect(failed).toMatchObject({ mcpServer: 'fx', err: { code: 'MCP_TOO_MANY_TOOLS' } });
    // The relisting may fail before the turn after `grow` has asked the model (its delay is on the
    // simulated clock): the clock moves only once that call is waiting.
    await expect.poll(() => model.calls.length).toBe(2);
    clock.increment(1_000);
    expect((await c.waitFor(rootId, TERMINAL)).status).toBe('completed');
    expect(toolItems(store.loadSession(rootId)).map((i) => i.content)).toEqual(['grown', 'echo: after', expect.any(String)]);
    const last = model.calls.at(-1)!.request.tools.map((t) => t.name);
    expect(last).toContain('echo');
    expect(last).not.toContain('late');
  });

  it('an endless tools/list pagination stops after maxListPages pages with MCP_LIST_TOO_LONG naming the server; the run goes on', async () => {
    const sink = logSink();
    const { c, model } = run(
      { agents: { lead: [FINISH] } },
      { logger: sink.logger, tools: [stdioServer({ args: [FIXTURE, 'endless'], maxListPages: 5 }, 'endless')] },
    );
    const rootId = await c.start({ name: 'lead', task: 'Go on.' });
    expect((await c.waitFor(rootId, TERMINAL)).status).toBe('completed');
    const failed = sink.records.find((r) => failedStart(r, 'endless'))!;
    expect(failed.err).toMatchObject({ code: 'MCP_LIST_TOO_LONG', message: expect.stringMatching(/"endless" still had more tools\/list pages after 5/) });
    await sink.until((r) => r.stderr === 'LIST 4');
    expect(sink.records.filter((r) => r.stderr?.startsWith('LIST ')).map((r) => r.stderr)).toEqual(['LIST 0', 'LIST 1', 'LIST 2', 'LIST 3', 'LIST 4']);
    expect(model.calls[0]!.request.tools.map((t) => t.name).filter((n) => n.startsWith('page_'))).toEqual([]);
  });
});

describe('an MCP result over the message limit is cut off while read', () => {
  it('stdio: MCP_RESULT_TOO_LARGE naming the server; the rest of the line is skipped and the same server answers the next call', async () => {
    const sink = logSink();
    const bytes = 12 << 20; // over troupe's 8 MiB and over the SDK's own 10 MiB buffer
    const { c, store } = run(
      { agents: { lead: [{ tool: 'flood', args: { bytes } }, { tool: 'echo', args: { text: 'still here' } }, FINISH] } },
      { logger: sink.logger, tools: [stdioServer()] },
    );
    const rootId = await c.start({ name: 'lead', task: 'Flood.' });
    expect((await c.waitFor(rootId, TERMINAL)).status).toBe('completed');
    const items = toolItems(store.loadSession(rootId));
    expect(items.map(codeOf)).toEqual(['MCP_RESULT_TOO_LARGE', null, null]);
    expect(items[0]!.content).toContain(`flood (MCP server \\"fx\\") answered with more than ${MIN_MESSAGE_BYTES} bytes`);
    expect(items[1]!.content).toBe('echo: still here');
    // Skipped, not closed: one server process, never lost.
    expect(sink.records.find((r) => r.msg === 'an MCP message over the limit was skipped unread')).toMatchObject({
      kind: 'response',
      bytes: expect.any(Number),
    });
    expect(sink.records.filter((r) => r.stderr?.startsWith('FIXTURE UP'))).toHaveLength(1);
    expect(sink.records.some((r) => r.msg === 'MCP server lost; restarting')).toBe(false);
  });

  it.each([
    ['a JSON response', false],
    ['an SSE event', true],
  ])('HTTP, %s: MCP_RESULT_TOO_LARGE, and the client hangs up before the server has written it all', async (_name, sse) => {
    const web = await startHttpFixture();
    fixtures.push(web);
    const bytes = 64 << 20; // never built: the fixture writes one 64 KiB piece over and over
    const { c, store } = run(
      { agents: { lead: [{ tool: 'flood', args: { bytes, sse } }, { tool: 'echo', args: { text: 'still here' } }, FINISH] } },
      { tools: [mcpServer({ name: 'web', url: web.url })] },
    );
    const rootId = await c.start({ name: 'lead', task: 'Flood.' });
    expect((await c.waitFor(rootId, TERMINAL)).status).toBe('completed');
    const items = toolItems(store.loadSession(rootId));
    expect(items.map(codeOf)).toEqual(['MCP_RESULT_TOO_LARGE', null, null]);
    expect(items[0]!.content).toContain('MCP server \\"web\\"');
    expect(items[1]!.content).toBe('echo: still here');
    const flood = await web.floods[0]!;
    expect(flood.complete).toBe(false);
    expect(flood.written).toBeLessThan(bytes / 2);
  });
});
