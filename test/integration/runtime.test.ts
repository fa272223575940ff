import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { InspectionEvent } from 'xstate';
import type { AgentView } from '../../src/host/views/registry.js';
import { defineTool } from '../../src/tools/defineTool.js';
import { createCoordinator } from '../../src/host/createCoordinator.js';
import { createLogger } from '../../src/logging/createLogger.js';
import { nudgeText } from '../../src/turn/texts.js';
import type { ModelTurn } from '../../src/model/types.js';
import { flush, team, TERMINAL } from '../helpers/team.js';

const finish = { tool: 'finish', args: { summary: 'done' } };

/**
 * A user tool that blocks until the test releases it, to land an event while a tool runs. It
 * records an abort of its signal but does not heed it (it still waits for the gate).
 */
function gatedTool() {
  let release!: () => void;
  let entered!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const started = new Promise<void>((resolve) => (entered = resolve));
  const aborted: unknown[] = [];
  const tool = defineTool({
    name: 'slow',
    description: 'Takes a while.',
    parameters: { type: 'object', properties: {} },
    execute: async (_args, { signal }) => {
      signal.addEventListener('abort', () => aborted.push(signal.reason), { once: true });
      entered();
      await gate;
      return { ok: true };
    },
  });
  return { tool, release, entered: started, aborted };
}

describe('inspection', () => {
  it('the inspect observer sees the coordinator and every agent actor, addressed agent:<id>', async () => {
    const actors: string[] = [];
    const inspect = (e: InspectionEvent) => {
      if (e.type === '@xstate.actor') actors.push((e.actorRef as unknown as { id: string }).id);
    };
    const t = team(
      {
        agents: {
          lead: [{ tool: 'spawn_agent', args: { name: 'a', task: 'x' } }, { tool: 'wait_for_agents', args: { reason: 'a' } }, finish],
          a: [{ tool: 'agent_finish', args: { summary: 'ok' } }],
        },
      },
      { inspect },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.c.waitFor(rootId, ['completed']);
    const a = t.byName('a').id;
    expect(actors).toContain('coordinator');
    expect(actors).toContain(`agent:${rootId}`);
    expect(actors).toContain(`agent:${a}`);
    await t.c.shutdown();
  });

  it('a parked agent has no actor: its actor stops in the parked state, and a new agent:<id> boots there when it wakes', async () => {
    // Per actor session: its name and the snapshots it reported (value, status).
    const sessions = new Map<string, { name: string; snaps: { value: string; status: string }[] }>();
    const inspect = (e: InspectionEvent) => {
      const ref = e.actorRef as unknown as { id: string; sessionId: string };
      if (e.type === '@xstate.actor') sessions.set(ref.sessionId, { name: ref.id, snaps: [] });
      if (e.type === '@xstate.snapshot') {
        const snap = e.snapshot as { value?: unknown; status: string };
        sessions.get(ref.sessionId)?.snaps.push({ value: JSON.stringify(snap.value), status: snap.status });
      }
    };
    const t = team(
      {
        agents: {
          lead: [{ tool: 'spawn_agent', args: { name: 'a', task: 'x' } }, { tool: 'wait_for_agents', args: { reason: 'a' } }, finish],
          // The child takes a minute of simulated time: the lead parks meanwhile.
          a: [{ delayMs: 60_000, tool: 'agent_finish', args: { summary: 'ok' } }],
        },
      },
      { inspect },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    const lead = () => [...sessions.values()].filter((s) => s.name === `agent:${rootId}`);
    await flush();
    expect(t.c.get(rootId)?.status).toBe('waiting');
    // Parked: the lead's one actor reported a stopped snapshot in its waiting state, none runs.
    expect(lead()).toHaveLength(1);
    expect(lead()[0]!.snaps.at(-1)).toEqual({ value: '{"waiting":"agents"}', status: 'stopped' });

    await t.advance(60_000);
    await t.c.waitFor(rootId, ['completed']);
    // Woken by the child's report: a second actor of the same name, booted in the parked state.
    expect(lead()).toHaveLength(2);
    expect(lead()[1]!.snaps.map((s) => s.value)).toEqual(expect.arrayContaining(['{"waiting":"agents"}', '"running"', '"completed"']));
    expect(lead()[1]!.snaps[0]).toEqual({ value: '{"waiting":"agents"}', status: 'active' });
    await t.c.shutdown();
  });
});

describe('read model', () => {
  it('views subscribe to the registry: statuses, turns and last tools arrive without polling', async () => {
    const t = team({
      agents: {
        lead: [
          { tool: 'spawn_agent', args: { name: 'a', task: 'x' } },
          { tool: 'view_agent_graph', args: {} },
          { tool: 'wait_for_agents', args: { reason: 'a' } },
          finish,
        ],
        a: [{ tool: 'agent_finish', args: { summary: 'ok' } }],
      },
    });
    const seen: AgentView[] = [];
    const sub = t.c.registry.subscribe((snap) => {
      for (const v of snap.context.agents.values()) if (!seen.includes(v)) seen.push(v);
    });
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    const rootViews = t.c.registry.select((ctx) => ctx.agents.get(rootId));
    const followed: (string | undefined)[] = [];
    const sub2 = rootViews.subscribe((v) => followed.push(v?.status));
    await t.c.waitFor(rootId, ['completed']);
    sub.unsubscribe();
    sub2.unsubscribe();
    const a = t.byName('a').id;
    expect(seen.filter((v) => v.id === a).map((v) => v.status)).toEqual(['running', 'completed']);
    expect(followed.at(-1)).toBe('completed');
    expect(t.c.registry.getSnapshot().context.agents.get(rootId)).toMatchObject({ turns: 4, lastTool: 'finish' });
    const tree = t.c.tree();
    expect(tree).toHaveLength(1);
    expect(tree[0]!.children.map((c) => c.name)).toEqual(['a']);
    const graph = t.toolResults(rootId).find((r) => r.name === 'view_agent_graph')!.result;
    expect(graph.graph_structure).toMatch(/- lead \(\w+\) \[running\] ← you\n {2}- a \(\w+\) \[/);
    await t.c.shutdown();
  });
});

describe('turns cut short by a message', () => {
  it('interactive: a message aborts the in-flight call and the cut turn does not count as plain text', async () => {
    // A peer message, because a user message resets the plain-text streak anyway.
    const t = team(
      {
        agents: {
          lead: [
            { tool: 'spawn_agent', args: { name: 'pinger', task: 'ping the lead' } },
            { text: 'thinking out loud' },
            { text: 'still thinking' },
            { delayMs: 60_000, text: 'this call is interrupted' },
            { tool: 'respond_to_user', args: { message: 'got it' } },
          ],
          // Parks after pinging, so no report of its own wakes the lead's wait on the user.
          pinger: [
            { delayMs: 1_000, tool: 'send_message', args: { to: 'lead', content: 'change of plan' } },
            { tool: 'wait_for_agents', args: { reason: 'orders' } },
          ],
        },
      },
      { interactive: true },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.advance(999);
    expect(t.model.calls.at(-1)?.step?.text).toBe('this call is interrupted');
    await t.advance(1);
    const root = await t.c.waitFor(rootId, ['waiting']);
    // Two plain-text turns, one cut short: no stall, and the mail was read.
    expect(root).toMatchObject({ status: 'waiting', waitKind: 'user' });
    const statuses = t.store
      .listEvents(t.c.runId)
      .filter((e) => e.type === 'agent.status' && e.agentId === rootId)
      .map((e) => e.data.to);
    expect(statuses).toEqual(['waiting']);
    expect(JSON.stringify(t.session(rootId))).toContain('change of plan');
    t.model.assertComplete();
    await t.c.shutdown();
  });

  it('autonomous: messages never cut a turn short by default', async () => {
    const t = team({ agents: { lead: [{ delayMs: 10_000, tool: 'view_agent_graph', args: {} }, finish] } });
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.advance(1_000);
    await t.c.send(rootId, { content: 'hello' });
    await t.advance(9_000);
    await t.c.waitFor(rootId, ['completed']);
    expect(t.toolResults(rootId)[0]!.name).toBe('view_agent_graph');
    await t.c.shutdown();
  });
});

describe('tools', () => {
  it('a tool failing 3 times in a row injects the strategy-rotation prompt before the next call', async () => {
    const flaky = defineTool({
      name: 'shell_exec',
      description: 'run a command',
      parameters: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'] },
      execute: () => {
        throw new Error('permission denied');
      },
    });
    const call = { tool: 'shell_exec', args: { cmd: 'ls' } };
    const t = team({ agents: { lead: [call, call, call, finish] } }, { tools: [flaky] });
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.c.waitFor(rootId, ['completed']);
    expect(
      t
        .toolResults(rootId)
        .slice(0, 3)
        .map((r) => r.result.error?.code),
    ).toEqual(['TOOL_FAILED', 'TOOL_FAILED', 'TOOL_FAILED']);
    const lastRequest = t.model.calls[3]!.request.messages.at(-1)!;
    expect(lastRequest.role).toBe('user');
    expect(lastRequest.content).toContain("The tool 'shell_exec' has failed 3 times consecutively. Last error:");
    expect(lastRequest.content).toContain('permission denied');
    // The third call's request did not have it yet.
    expect(JSON.stringify(t.model.calls[2]!.request.messages)).not.toContain('failed 3 times');
    await t.c.shutdown();
  });

  it('a revived agent starts a new task: the old tool-failure streak does not carry over', async () => {
    const broken = defineTool({
      name: 'broken',
      description: 'always fails',
      parameters: { type: 'object' },
      execute: () => {
        throw new Error('nope');
      },
    });
    const call = { tool: 'broken', args: {} };
    const t = team({ agents: { lead: [call, call, { error: { code: 'PROVIDER_AUTH' } }, call, finish] } }, { tools: [broken] });
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.c.waitFor(rootId, ['failed']);
    await t.c.send(rootId, { content: 'try again' });
    await t.c.waitFor(rootId, ['completed']);
    expect(JSON.stringify(t.session(rootId))).not.toContain('failed 3 times');
    await t.c.shutdown();
  });

  it('a tool that overruns its timeout is aborted on the injected clock', async () => {
    let signalled = false;
    const slow = defineTool({
      name: 'slow',
      description: 'never finishes on its own',
      parameters: { type: 'object' },
      timeoutMs: 5_000,
      execute: (_args, { signal }) => new Promise(() => signal.addEventListener('abort', () => (signalled = true))),
    });
    const t = team({ agents: { lead: [{ tool: 'slow', args: {} }, finish] } }, { tools: [slow] });
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.advance(4_000);
    expect(t.c.get(rootId).status).toBe('running');
    await t.advance(1_000);
    await t.c.waitFor(rootId, ['completed']);
    expect(t.toolResults(rootId)[0]!.result.error?.code).toBe('TOOL_TIMEOUT');
    expect(signalled).toBe(true);
    await t.c.shutdown();
  });

  it('user tools get the agent id, run id and a signal, and their result goes back as JSON', async () => {
    const seen: string[] = [];
    const echo = defineTool<{ text: string }>({
      name: 'echo',
      description: 'echo',
      parameters: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
      execute: ({ text }, ctx) => {
        seen.push(ctx.agentId, ctx.runId, String(ctx.signal.aborted));
        return { echoed: text };
      },
    });
    const t = team({ agents: { lead: [{ tool: 'echo', args: { text: 'hi' } }, finish] } }, { tools: [echo] });
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.c.waitFor(rootId, ['completed']);
    expect(seen).toEqual([rootId, t.c.runId, 'false']);
    expect(t.toolResults(rootId)[0]!.result).toEqual({ echoed: 'hi' });
    await t.c.shutdown();
  });
});

describe('model errors', () => {
  it('transient errors are retried with backoff on the injected clock, honouring retry-after', async () => {
    const t = team({
      agents: {
        lead: [
          { error: { code: 'PROVIDER_UNAVAILABLE', status: 500 } },
          { error: { code: 'PROVIDER_UNAVAILABLE', status: 500 } },
          { error: { code: 'PROVIDER_RATE_LIMITED', status: 429, retryAfterMs: 500 } },
          finish,
        ],
      },
    });
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.advance(7_000, 100);
    expect((await t.c.waitFor(rootId, ['completed'])).status).toBe('completed');
    const at = t.model.calls.map((c) => c.at);
    // 2 s, then 4 s, then the 500 ms the server asked for.
    expect(at.slice(1).map((time, i) => time - at[i]!)).toEqual([2_000, 4_000, 500]);
    await t.c.shutdown();
  });

  it('a transient error that outlasts the retries fails the agent', async () => {
    const err = { error: { code: 'PROVIDER_UNAVAILABLE' as const, status: 503 } };
    const t = team({ agents: { lead: [err, err, err] } }, { retry: { maxRetries: 2, baseDelayMs: 10 } });
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.advance(100, 10);
    const root = await t.c.waitFor(rootId, [...TERMINAL]);
    expect(root.status).toBe('failed');
    expect(root.error?.message).toContain('after 2 retries');
    await t.c.shutdown();
  });

  it('a refusal fails the agent and its parent is told once', async () => {
    const t = team({
      agents: {
        lead: [{ tool: 'spawn_agent', args: { name: 'a', task: 'x' } }, { tool: 'wait_for_agents', args: { reason: 'a' } }, finish],
        a: [{ refusal: 'I cannot help with that.' }],
      },
    });
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.c.waitFor(rootId, ['completed']);
    expect(t.byName('a')).toMatchObject({ status: 'failed', error: { code: 'PROVIDER_REFUSAL' } });
    expect(t.messagesTo(rootId).map((m) => m.type)).toEqual(['failed']);
    await t.c.shutdown();
  });

  it('an exhausted script crashes the agent (not a provider error)', async () => {
    const t = team({ agents: { lead: [] } });
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    expect(await t.c.waitFor(rootId, [...TERMINAL])).toMatchObject({ status: 'crashed', error: { code: 'SCRIPT_EXHAUSTED' } });
    await t.c.shutdown();
  });
});

describe('listeners that read the coordinator', () => {
  it('a subscriber calling list() while an agent registers does not start a second actor for it', async () => {
    const t = team({
      agents: {
        lead: [{ tool: 'spawn_agent', args: { name: 'a', task: 'x' } }, { tool: 'wait_for_agents', args: { reason: 'a' } }, finish],
        a: [{ tool: 'agent_finish', args: { summary: 'once' } }],
      },
    });
    t.c.subscribe(() => {
      t.c.list();
    });
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    expect((await t.c.waitFor(rootId, [...TERMINAL])).status).toBe('completed');
    expect(t.model.calls.filter((c) => c.agentName === 'a')).toHaveLength(1);
    expect(t.byName('a').status).toBe('completed');
    t.model.assertComplete();
    await t.c.shutdown();
  });
});

describe('the shared model queue', () => {
  it('rateLimit: at most `requests` calls start per interval, across agents, on the injected clock', async () => {
    const graph = { tool: 'view_agent_graph', args: {} };
    const t = team(
      {
        agents: {
          lead: [
            {
              tools: [
                { name: 'spawn_agent', args: { name: 'a', task: 'x' } },
                { name: 'spawn_agent', args: { name: 'b', task: 'x' } },
              ],
            },
            { tool: 'wait_for_agents', args: { reason: 'a, b' } },
            { tool: 'wait_for_agents', args: { reason: 'a, b' } },
            finish,
          ],
          a: [graph, { tool: 'agent_finish', args: { summary: 'a' } }],
          b: [graph, { tool: 'agent_finish', args: { summary: 'b' } }],
        },
      },
      { rateLimit: { requests: 2, intervalMs: 10_000 } },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.advance(60_000, 1_000);
    expect((await t.c.waitFor(rootId, [...TERMINAL])).status).toBe('completed');
    const starts = t.model.calls.map((c) => c.at);
    expect(starts).toHaveLength(8);
    // No 10 s window holds more than 2 starts, and the limiter did delay calls.
    for (const s of starts) expect(starts.filter((x) => x >= s && x < s + 10_000).length).toBeLessThanOrEqual(2);
    expect(Math.max(...starts)).toBeGreaterThanOrEqual(30_000);
    await t.c.shutdown();
  });

  it('rejects a malformed rateLimit with CONFIG_INVALID', () => {
    expect(() => team({ agents: {} }, { rateLimit: { requests: 0, intervalMs: 1000 } })).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID' }));
    expect(() => team({ agents: {} }, { rateLimit: { requests: 5 } as never })).toThrow(/rateLimit/);
  });
});

describe('users, stops and wake-ups', () => {
  it('a failed agent ignores peers but a user message revives it, in autonomous mode too', async () => {
    const t = team({ agents: { lead: [{ error: { code: 'PROVIDER_AUTH' } }, finish] } });
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.c.waitFor(rootId, ['failed']);
    await t.c.send(rootId, { content: 'the key is fixed, go on' });
    const root = await t.c.waitFor(rootId, ['completed']);
    expect(root.error).toBeNull();
    expect(t.session(rootId).at(-3)).toEqual({ role: 'user', content: 'the key is fixed, go on' });
    await t.c.shutdown();
  });

  it('mail that arrived during the turn that parked an agent wakes it again', async () => {
    // The user writes while the root's last call is in flight; the call then fails. The user
    // message is still queued, so the failed agent is woken by it rather than sleeping on it.
    const t = team({ agents: { lead: [{ delayMs: 1_000, error: { code: 'PROVIDER_AUTH' } }, finish] } });
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.c.send(rootId, { content: 'please finish' });
    await t.advance(1_000);
    expect((await t.c.waitFor(rootId, ['completed'])).status).toBe('completed');
    expect(
      t.store
        .listEvents(t.c.runId)
        .filter((e) => e.agentId === rootId && e.type === 'agent.status')
        .map((e) => e.data.to),
    ).toEqual(['failed', 'running', 'completed']);
    await t.c.shutdown();
  });

  it('stop with cascade stops leaves first, cancels a running tool (its AbortSignal; settled even if the tool ignores it), and each parent is told', async () => {
    const slow = gatedTool();
    const t = team(
      {
        agents: {
          lead: [
            { tool: 'spawn_agent', args: { name: 'a', task: 'x' } },
            { tool: 'wait_for_agents', args: { reason: 'a' } },
            // Woken by a's stop notice; finish only once a1 has finished its turn too.
            { delayMs: 6_000, ...finish },
          ],
          a: [
            { tool: 'spawn_agent', args: { name: 'a1', task: 'x' } },
            { tool: 'wait_for_agents', args: { reason: 'a1' } },
          ],
          a1: [{ tool: 'slow', args: {} }],
        },
      },
      { tools: [slow.tool] },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await slow.entered;
    await t.advance(10, 10);
    const a = t.byName('a');
    const a1 = t.byName('a1');
    expect([a.status, a1.status]).toEqual(['waiting', 'running']);
    const order: string[] = [];
    t.c.subscribe((e) => {
      if (e.type === 'agent.status' && e.to === 'stopped') order.push(e.name);
    });
    const before = t.clock.now();
    // The gate is never opened: a1 stops because its tool's call was abandoned at the stop.
    expect(await t.c.stop(a.id)).toEqual([a1.id, a.id]);
    // a was parked, so it stopped at once; a1 once its turn recorded the cancelled call.
    expect(order).toEqual(['a', 'a1']);
    expect(t.clock.now()).toBe(before);
    expect(slow.aborted).toHaveLength(1);
    expect(
      t
        .messagesTo(a.id)
        .filter((m) => m.from === a1.id)
        .map((m) => m.type),
    ).toEqual(['stopped']);
    expect(
      t
        .messagesTo(rootId)
        .filter((m) => m.from === a.id)
        .map((m) => m.type),
    ).toEqual(['stopped']);
    expect(t.toolResults(a1.id)).toEqual([
      { name: 'slow', result: { success: false, error: { code: 'TOOL_CANCELLED', message: expect.stringContaining('stopped while it ran') } } },
    ]);
    expect(t.c.get(a1.id)).toMatchObject({ status: 'stopped', stopReason: 'requested' });
    slow.release();
    await t.advance(6_000);
    expect((await t.c.waitFor(rootId, [...TERMINAL])).status).toBe('completed');
    await t.c.shutdown();
  });

  it('a stop during a model call cancels the call at once; nothing of the turn is written', async () => {
    const t = team({ agents: { lead: [{ delayMs: 60_000, ...finish }] } });
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.advance(10, 10);
    const sessionBefore = t.session(rootId).length;
    expect(await t.c.stop(rootId)).toEqual([rootId]);
    expect(t.c.get(rootId)).toMatchObject({ status: 'stopped', stopReason: 'requested' });
    expect(t.model.calls).toHaveLength(1);
    expect(t.session(rootId)).toHaveLength(sessionBefore);
    expect(t.clock.now()).toBeLessThan(60_000);
    await t.c.shutdown();
  });
});

describe('budget flags', () => {
  it('the reserve stops every sub-agent after its turn, tells the root once, and lets it finish', async () => {
    const usage = { costUsd: 1 };
    const work = { tool: 'view_agent_graph', args: {}, usage };
    const t = team(
      {
        agents: {
          lead: [
            { tools: ['a', 'b', 'c'].map((name) => ({ name: 'spawn_agent', args: { name, task: 'work' } })), usage },
            { tool: 'wait_for_agents', args: { reason: 'work' }, usage },
            { tool: 'wait_for_agents', args: { reason: 'work' }, usage },
            { tool: 'finish', args: { summary: 'wrapped up at the reserve' }, usage },
          ],
          a: [work, work, work, work],
          b: [work, work, work, work],
          c: [work, work, work, work],
        },
      },
      { budget: { limitUsd: 10, reserveFraction: 0.5 } },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    const root = await t.c.waitFor(rootId, [...TERMINAL]);
    await t.c.whenIdle();
    expect(root.status).toBe('completed');
    expect(t.c.budget()).toMatchObject({ reserveStopped: true, budgetStopped: false });
    expect(t.messagesTo(rootId).filter((m) => m.type === 'budget_reserve_stop')).toHaveLength(1);
    for (const name of ['a', 'b', 'c']) expect(t.byName(name)).toMatchObject({ status: 'stopped', stopReason: 'reserve' });
    // No sub-agent call started after the reserve tripped (the spend that tripped it is the 5th dollar).
    expect(t.c.budget().spentUsd).toBeLessThanOrEqual(5 + 3 + 2);
    await t.c.shutdown();
  });
});

describe('logging', () => {
  it('each agent logs through a child logger bound to agentId and runId; secrets are redacted', async () => {
    const lines: Record<string, unknown>[] = [];
    const sink = new Writable({
      write(chunk, _enc, cb) {
        for (const line of String(chunk).split('\n')) if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
        cb();
      },
    });
    const logger = createLogger({ level: 'debug' }, sink);
    const t = team({ agents: { lead: [finish] } }, { logger });
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.c.waitFor(rootId, ['completed']);
    logger.info({ apiKey: 'sk-secret', headers: { authorization: 'Bearer sk-secret' } }, 'config');
    await new Promise((r) => setImmediate(r));
    const agentLines = lines.filter((l) => l.agentId === rootId);
    expect(agentLines.length).toBeGreaterThan(0);
    expect(agentLines.every((l) => l.runId === t.c.runId)).toBe(true);
    expect(JSON.stringify(lines)).not.toContain('sk-secret');
    expect(pino.version).toMatch(/^10\./);
    await t.c.shutdown();
  });
});

describe('shutdown', () => {
  it('returns even if the model ignores its signal, and the abandoned turn writes nothing', async () => {
    let release: ((turn: ModelTurn) => void) | undefined;
    const model = { complete: () => new Promise<ModelTurn>((resolve) => (release = resolve)) };
    const c = createCoordinator({ model });
    const rootId = await c.start({ name: 'lead', task: 'x' });
    while (!release) await flush();
    const before = c.store.loadSession(rootId).length;
    await c.shutdown();
    release({ text: null, toolCalls: [{ id: 'late', name: 'view_agent_graph', arguments: '{}' }] });
    await flush();
    expect(c.store.loadSession(rootId)).toHaveLength(before);
    expect(c.store.getAgent(rootId)?.status).toBe('running'); // a shutdown is not a crash: resume continues it
    await expect(c.whenIdle()).rejects.toMatchObject({ code: 'COORDINATOR_SHUT_DOWN' });
    await expect(c.send(rootId, { content: 'hi' })).rejects.toMatchObject({ code: 'COORDINATOR_SHUT_DOWN' });
  });
});

describe('lifecycle tools', () => {
  it('a wait called after a stop was requested answers stopped, and the agent stops after its turn', async () => {
    const slow = gatedTool();
    const t = team(
      {
        agents: {
          // The root finishes after the grandchild a1, which a non-cascading stop leaves running.
          lead: [
            { tool: 'spawn_agent', args: { name: 'a', task: 'x' } },
            { tool: 'wait_for_agents', args: { reason: 'a' } },
            { delayMs: 6_000, ...finish },
          ],
          // The stop lands while slow runs; the wait after it in the same turn answers "stopped".
          a: [
            {
              tools: [
                { name: 'spawn_agent', args: { name: 'a1', task: 'x' } },
                { name: 'slow', args: {} },
                { name: 'wait_for_agents', args: { reason: 'a1' } },
              ],
            },
          ],
          a1: [{ delayMs: 5_000, tool: 'agent_finish', args: { summary: 'late' } }],
        },
      },
      { tools: [slow.tool] },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await slow.entered;
    const stopping = t.c.stop(t.byName('a').id, { cascade: false });
    slow.release();
    await stopping;
    const a = t.byName('a').id;
    expect(t.toolResults(a).find((r) => r.name === 'wait_for_agents')?.result.wait_outcome).toBe('stopped');
    expect(t.c.get(a)).toMatchObject({ status: 'stopped', stopReason: 'requested' });
    await t.advance(6_000);
    expect(t.byName('a1').status).toBe('completed');
    await t.c.waitFor(rootId, ['completed']);
    await t.c.shutdown();
  });

  it('a wait in the turn that tripped the reserve answers reserve_stopped', async () => {
    const t = team(
      {
        agents: {
          lead: [{ tool: 'spawn_agent', args: { name: 'a', task: 'x' } }, { tool: 'wait_for_agents', args: { reason: 'a' } }, finish],
          // Reserved at $0.50, the call settles at $9.50: its own turn crosses the reserve line.
          a: [{ tool: 'wait_for_agents', args: { reason: 'nothing' }, usage: { costUsd: 9.5 }, reserveUsd: 0.5 }],
        },
      },
      { budget: { limitUsd: 10 } },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.c.waitFor(rootId, ['completed']);
    const a = t.byName('a');
    expect(t.toolResults(a.id)[0]!.result.wait_outcome).toBe('reserve_stopped');
    expect(a).toMatchObject({ status: 'stopped', stopReason: 'reserve' });
    await t.c.shutdown();
  });

  it('interactive respond_to_user: the agent speaks, parks on the user, and the reply wakes it', async () => {
    const t = team(
      {
        agents: {
          lead: [{ text: 'Here is my plan.' }, { tool: 'respond_to_user', args: {} }, { tool: 'respond_to_user', args: { message: 'done' } }],
        },
      },
      { interactive: true },
    );
    const said: string[] = [];
    t.c.subscribe((e) => e.type === 'agent.said' && said.push(e.text));
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    expect(await t.c.waitFor(rootId, ['waiting'])).toMatchObject({ waitKind: 'user' });
    await t.advance(10 * 300_000, 300_000);
    expect(t.c.get(rootId).status).toBe('waiting'); // never on a timer
    await t.c.send(rootId, { content: 'go ahead' });
    await t.c.waitFor(rootId, ['running']);
    await t.c.whenIdle();
    expect(said).toEqual(['Here is my plan.', 'done']);
    expect(t.toolResults(rootId)[0]!.result).toEqual({ status: 'message_arrived' });
    t.model.assertComplete();
    await t.c.shutdown();
  });

  it('interactive nudge: an answer said in plain text is delivered once by an empty respond_to_user, and the nudge names that call', async () => {
    const answer = 'The build is green: 412 tests passed.';
    const t = team({ agents: { lead: [{ text: answer }, { tool: 'respond_to_user', args: {} }] } }, { interactive: true });
    const said: string[] = [];
    t.c.subscribe((e) => e.type === 'agent.said' && said.push(e.text));
    const rootId = await t.c.start({ name: 'lead', task: 'Is the build green?' });
    expect(await t.c.waitFor(rootId, ['waiting'])).toMatchObject({ waitKind: 'user' });
    // The user reads the answer exactly once, though the agent was nudged in between.
    expect(said).toEqual([answer]);
    const saidRows = t.store.listEvents(t.c.runId).filter((e) => e.type === 'agent.said');
    expect(saidRows.map((e) => (e.data as { text: string }).text)).toEqual([answer]);
    // The nudge the model saw before its second call tells it the empty call delivers what it said.
    const second = t.model.calls[1]!.request.messages;
    const nudge = second.filter((m) => m.role === 'user' && typeof m.content === 'string' && m.content.includes('recovery attempt 1/'));
    expect(nudge).toHaveLength(1);
    expect(nudge[0]!.content).toMatch(/respond_to_user with no message/);
    t.model.assertComplete();
    await t.c.shutdown();
  });

  it('the autonomous nudge never mentions respond_to_user', () => {
    for (const root of [true, false]) expect(nudgeText(root, false, 1, 3)).not.toMatch(/respond_to_user/);
    expect(nudgeText(true, true, 1, 3)).toMatch(/respond_to_user with no message/);
  });

  it('respond_to_user outside interactive mode is refused', async () => {
    const t = team({ agents: { lead: [{ tool: 'respond_to_user', args: { message: 'hi' } }, finish] } });
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.c.waitFor(rootId, ['completed']);
    expect(t.toolResults(rootId)[0]!.result.error?.code).toBe('TOOL_NOT_ALLOWED');
    await t.c.shutdown();
  });

  it('a child starts from one user message: identity and task, with the parent’s context as background on request', async () => {
    const t = team({
      agents: {
        lead: [
          {
            tools: [
              { name: 'spawn_agent', args: { name: 'plain', task: 'Count the files.' } },
              { name: 'spawn_agent', args: { name: 'informed', task: 'Check the docs.', inherit_context: true, skills: ['docs'] } },
            ],
          },
          { tool: 'wait_for_agents', args: { reason: 'both' } },
          { tool: 'wait_for_agents', args: { reason: 'both' } },
          finish,
        ],
        plain: [{ tool: 'agent_finish', args: { summary: 'ok' } }],
        informed: [{ tool: 'agent_finish', args: { summary: 'ok' } }],
      },
    });
    const rootId = await t.c.start({ name: 'lead', task: 'Secret lead task' });
    await t.c.waitFor(rootId, ['completed']);
    const first = (name: string) => t.session(t.byName(name).id)[0]!;
    expect(first('plain').role).toBe('user');
    expect(first('plain').content).toMatch(new RegExp(`^You are agent plain \\(\\w+\\); your parent is lead \\(${rootId}\\)`));
    expect(first('plain').content).toContain('Task:\nCount the files.');
    expect(first('plain').content).not.toContain('Secret lead task');
    expect(first('informed').content).toContain('Inherited context from parent (background only)');
    expect(first('informed').content).toContain('Secret lead task');
    expect(first('informed').content).toContain('Skills: docs');
    // The model never sees a second opening message: one user item, then the assistant.
    expect(t.session(t.byName('informed').id)[1]!.role).toBe('assistant');
    await t.c.shutdown();
  });
});

describe('wait timeouts and budget outcomes', () => {
  it.each([
    [0.001, 1_000],
    [42, 42_000],
    [86_400, 300_000],
  ])('timeout_seconds %s is clamped to %i ms', async (seconds, ms) => {
    const t = team(
      {
        agents: {
          lead: [
            {
              tools: [
                { name: 'spawn_agent', args: { name: 'a', task: 'x' } },
                { name: 'spawn_agent', args: { name: 'busy', task: 'x' } },
              ],
            },
            { tool: 'wait_for_agents', args: { reason: 'a' } },
            { tool: 'stop_agent', args: { id: 'a' } },
            { tool: 'wait_for_agents', args: { reason: 'stop' } },
            finish,
          ],
          a: [{ tool: 'wait_for_agents', args: { reason: 'orders', timeout_seconds: seconds } }],
          // busy's model call keeps the run from being quiescent (a dead wait would end at once).
          busy: [{ delayMs: 10 * 300_000, tool: 'agent_finish', args: { summary: 'done' } }],
        },
        // The lead's own wait must outlast every case.
      },
      { idleResumeMs: 10 * 300_000 },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await flush();
    const a = t.byName('a').id;
    await t.c.waitFor(a, ['waiting']);
    await t.advance(ms - 1, Math.min(ms - 1, 1_000));
    expect(t.c.get(a).status).toBe('waiting');
    const crashed = t.c.waitFor(a, ['crashed']); // the script has no second step: waking crashes it
    await t.advance(1, 1);
    await crashed;
    expect(t.model.calls.filter((c) => c.agentId === a).at(-1)!.at).toBe(ms);
    await t.c.waitFor(rootId, ['completed', 'waiting']);
    await t.c.shutdown();
  });

  it('a wait in the turn that spent the budget answers budget_stopped; every agent stops', async () => {
    const t = team(
      {
        agents: {
          lead: [
            { tool: 'spawn_agent', args: { name: 'a', task: 'x' } },
            { tool: 'wait_for_agents', args: { reason: 'a' } },
          ],
          // Reserved at $1, the call settles at $10: its own turn spends the budget.
          a: [{ tool: 'wait_for_agents', args: { reason: 'nothing' }, usage: { costUsd: 10 }, reserveUsd: 1 }],
        },
      },
      { budget: { limitUsd: 10 } },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    const root = await t.c.waitFor(rootId, [...TERMINAL]);
    const a = t.byName('a');
    expect(t.toolResults(a.id)[0]!.result.wait_outcome).toBe('budget_stopped');
    expect(a).toMatchObject({ status: 'stopped', stopReason: 'budget' });
    expect(root).toMatchObject({ status: 'stopped', stopReason: 'budget' });
    expect(t.c.budget()).toMatchObject({ budgetStopped: true, spentUsd: 10 });
    await t.c.shutdown();
  });
});
