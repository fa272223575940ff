/**
 * Issue 21, against the real MCP fixture server (test/fixtures/mcp/server.ts), never a protocol
 * mock: a stop cancels an MCP call in flight (the server receives notifications/cancelled), and an
 * image a tool returns reaches the model as pixels (an `image_url` part on the wire).
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { createCoordinator, type Coordinator } from '../../src/host/createCoordinator.js';
import type { CoordinatorOptions } from '../../src/host/options.js';
import { scriptedModel, type Script } from '../../src/model/scriptedModel.js';
import { memoryStore } from '../../src/store/memoryStore.js';
import { codeOf, logSink, stdioServer, toolItems } from '../helpers/mcp.js';
import { call, openaiTeam } from '../helpers/provider.js';
import { TERMINAL } from '../helpers/team.js';

const open: Coordinator[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((c) => c.shutdown()));
});

function run(script: Script, options: Omit<CoordinatorOptions, 'model' | 'store'> & { clock: SimulatedClock }) {
  const model = scriptedModel(script, { clock: options.clock });
  const store = memoryStore();
  const c = createCoordinator({ model, store, ...options });
  open.push(c);
  return { c, model, store };
}

const cancelledLines = (log: string) => log.split('\n').filter((l) => l.startsWith('CANCELLED '));

describe('a stop cancels an MCP call in flight', () => {
  it('coordinator.stop: the server gets notifications/cancelled, the call is TOOL_CANCELLED, the rest not run, the ledger row closed, the agent stopped', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'troupe-mcp-'));
    const fixtureLog = join(dir, 'fixture.log');
    // The clock never moves: a result within the tool timeout can only come from the stop.
    const clock = new SimulatedClock();
    const sink = logSink();
    const { c, store } = run(
      {
        agents: {
          lead: [
            {
              tools: [
                { name: 'slow', args: {} },
                { name: 'write_note', args: { note: 'after the stop' } },
                { name: 'echo', args: { text: 'later' } },
              ],
            },
          ],
        },
      },
      { clock, logger: sink.logger, tools: [stdioServer({ env: { FIXTURE_LOG: fixtureLog }, tools: { slow: { timeoutMs: 5_000 } } })] },
    );
    const rootId = await c.start({ name: 'lead', task: 'Wait.' });
    const slow = await sink.until((r) => r.stderr?.startsWith('SLOW') === true);
    const requestId = slow.stderr!.split(' ')[1];
    // The ledger marked the mutation started before it ran.
    expect((await c.store.startedToolCalls(rootId)).map((r) => r.tool)).toEqual(['slow']);

    expect(await c.stop(rootId)).toEqual([rootId]);
    expect(c.get(rootId)).toMatchObject({ status: 'stopped', stopReason: 'requested' });
    // The server saw the cancellation of exactly that request (notifications/cancelled).
    await sink.until((r) => r.stderr === `CANCELLED ${requestId}`);
    expect(cancelledLines(readFileSync(fixtureLog, 'utf8'))).toEqual([`CANCELLED ${requestId}`]);
    expect(clock.now()).toBe(0);
    // A typed result for every call of the turn; the mutation after the stop never reached the server.
    const items = toolItems(store.loadSession(rootId));
    expect(items.map((i) => [i.name, codeOf(i)])).toEqual([
      ['slow', 'TOOL_CANCELLED'],
      ['write_note', 'TOOL_NOT_RUN'],
      ['echo', 'TOOL_NOT_RUN'],
    ]);
    expect(readFileSync(fixtureLog, 'utf8')).not.toContain('NOTE');
    // The in-doubt ledger's row is closed by the turn that recorded the cancellation.
    expect(await c.store.startedToolCalls(rootId)).toEqual([]);
    // Nothing is written for the agent after it stopped: its stopped status is its last event.
    const events = store.listEvents(c.runId).filter((e) => e.agentId === rootId);
    expect(events.at(-1)).toMatchObject({ type: 'agent.status', data: { to: 'stopped' } });
    const sessionLength = store.loadSession(rootId).length;
    await c.shutdown();
    expect(store.loadSession(rootId)).toHaveLength(sessionLength);
    expect(store.listEvents(c.runId).filter((e) => e.agentId === rootId)).toEqual(events);
  });

  it("stop_agent from the parent: the child's call is cancelled on the server and the parent is told the child stopped", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'troupe-mcp-'));
    const fixtureLog = join(dir, 'fixture.log');
    const clock = new SimulatedClock();
    const sink = logSink();
    const { c, store } = run(
      {
        agents: {
          lead: [
            { tool: 'spawn_agent', args: { name: 'worker', task: 'wait' } },
            { delayMs: 1_000, tool: 'stop_agent', args: { id: 'worker' } },
            { tool: 'wait_for_agents', args: { reason: 'worker' } },
            { tool: 'finish', args: { summary: 'stopped it' } },
          ],
          worker: [{ tool: 'slow', args: {} }],
        },
      },
      // The tool timeout is far beyond the parent's delay: only the stop can end the call.
      { clock, logger: sink.logger, tools: [stdioServer({ env: { FIXTURE_LOG: fixtureLog }, tools: { slow: { timeoutMs: 600_000 } } })] },
    );
    const rootId = await c.start({ name: 'lead', task: 'Stop the worker.' });
    const slow = await sink.until((r) => r.stderr?.startsWith('SLOW') === true);
    clock.increment(1_000);
    expect((await c.waitFor(rootId, TERMINAL)).status).toBe('completed');
    const worker = c.list().find((a) => a.name === 'worker')!;
    expect(worker).toMatchObject({ status: 'stopped', stopReason: 'requested' });
    await sink.until((r) => r.stderr === `CANCELLED ${slow.stderr!.split(' ')[1]}`);
    expect(cancelledLines(readFileSync(fixtureLog, 'utf8'))).toHaveLength(1);
    expect(toolItems(store.loadSession(worker.id)).map(codeOf)).toEqual(['TOOL_CANCELLED']);
    expect(await c.store.startedToolCalls(worker.id)).toEqual([]);
    expect(clock.now()).toBe(1_000);
  });
});

describe('MCP images reach the model as pixels', () => {
  it('on the wire: the tool message says what came back, and a user message after the tool results carries the image_url data URL', async () => {
    const t = await openaiTeam(
      {
        lead: [
          {
            message: {
              content: null,
              toolCalls: [
                { name: 'picture', arguments: {} },
                { name: 'echo', arguments: { text: 'hi' } },
              ],
            },
          },
          call('finish', { summary: 'seen' }),
        ],
      },
      { coordinator: { tools: [stdioServer()] } },
    );
    await using _ = t;
    const rootId = await t.c.start({ name: 'lead', task: 'Look at the picture.' });
    expect((await t.c.waitFor(rootId, TERMINAL)).status).toBe('completed');
    const messages = (t.server.requests[1]!.body as { messages: { role: string; content: unknown; tool_call_id?: string }[] }).messages;
    const roles = messages.map((m) => m.role);
    // system, user (task), assistant (the calls), both tool results, then the image.
    expect(roles).toEqual(['system', 'user', 'assistant', 'tool', 'tool', 'user']);
    const pictureId = messages[3]!.tool_call_id!;
    expect(messages[3]!.content).toMatch(/^\[image image\/png, \d+ bytes: shown to you after the tool results\]\na red square$/);
    expect(messages[5]!.content).toEqual([
      { type: 'text', text: `[The image returned by picture (tool call ${pictureId})]` },
      { type: 'image_url', image_url: { url: `data:image/png;base64,${Buffer.from('not really a png').toString('base64')}` } },
    ]);
  });

  it("an image over the server's maxResultChars is described as not shown and never sent; the run goes on", async () => {
    const t = await openaiTeam(
      { lead: [call('picture', { size: 40_000 }), call('picture', { size: 400 }), call('finish', { summary: 'seen' })] },
      { coordinator: { tools: [stdioServer({ maxResultChars: 10_000 })] } },
    );
    await using _ = t;
    const rootId = await t.c.start({ name: 'lead', task: 'Look at the pictures.' });
    expect((await t.c.waitFor(rootId, TERMINAL)).status).toBe('completed');
    const second = JSON.stringify(t.server.requests[1]!.body);
    expect(second).not.toContain('image_url');
    expect(second).toContain('[image image/png, 30000 bytes: not shown, the result would be over its limit of 10000 characters]');
    // The session keeps the description, never the 40 000 characters of base64.
    expect(JSON.stringify(t.session(rootId))).not.toContain('A'.repeat(1_000));
    // A small one in the next turn is sent.
    expect(JSON.stringify(t.server.requests[2]!.body)).toContain(`"url":"data:image/png;base64,${'A'.repeat(400)}"`);
  });

  it('a rejected image is replaced by the placeholder by the existing recovery, and the turn is retried', async () => {
    const t = await openaiTeam(
      {
        lead: [
          call('picture', {}),
          { status: 400, body: { error: { message: 'Invalid image.', type: 'invalid_request_error' } } },
          call('finish', { summary: 'done' }),
        ],
      },
      { coordinator: { tools: [stdioServer()] } },
    );
    await using _ = t;
    const rootId = await t.c.start({ name: 'lead', task: 'Look.' });
    expect((await t.c.waitFor(rootId, TERMINAL)).status).toBe('completed');
    expect(JSON.stringify(t.server.requests[1]!.body)).toContain('image_url');
    expect(JSON.stringify(t.server.requests[2]!.body)).not.toContain('image_url');
    expect(JSON.stringify(t.session(rootId))).not.toContain('data:image');
  });
});
