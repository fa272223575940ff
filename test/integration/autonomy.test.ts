/**
 * Autonomy in the coordinator: async executions continue their agent with no user message in
 * between (seeds/003–004), approvals gate the tools that mutate, and a denial reaches the model.
 */
import { SimulatedClock } from 'xstate';
import { describe, expect, it } from 'vitest';
import { ApprovalGate } from '../../src/autonomy/approvalGate.js';
import { conversation } from '../../src/autonomy/conversation.js';
import { continuationNote, extractExecutionIds } from '../../src/host/async/executionText.js';
import type { ApprovalPolicy } from '../../src/host/options.js';
import { resumeCoordinator } from '../../src/host/resumeCoordinator.js';
import { scriptedModel } from '../../src/model/scriptedModel.js';
import { memoryStore } from '../../src/store/memoryStore.js';
import { defineTool } from '../../src/tools/defineTool.js';
import { flush, team } from '../helpers/team.js';

const A = '019f4b19-eafd-74ed-baa6-d24a27b3f52c';
const B = '019f4af7-7eff-7723-b38c-b540b267f407';

describe('extractExecutionIds', () => {
  it('finds the execution a tool result says is running or queued', () => {
    expect(extractExecutionIds(`"pct_create on host:strong auto-approved via assent window — execution ${A} running."`)).toEqual([A]);
    expect(extractExecutionIds(`"run on lxc:caddy requires approval (risk: config_mutation) — execution ${B} queued."`)).toEqual([B]);
    expect(extractExecutionIds(`execution ${A.toUpperCase()} is running`)).toEqual([A]);
  });
  it('links nothing for synchronous results, finished executions or bare ids', () => {
    for (const text of [
      '"run on host:strong (read_only, auto): 09:30 up 8 days"',
      '"run on lxc:caddy (config_mutation, auto via assent window): done"',
      '[{"slug":"lxc:caddy","health":"healthy"}]',
      `execution ${A} completed: ok`,
      `see ${A} running`,
    ]) {
      expect(extractExecutionIds(text)).toEqual([]);
    }
  });
  it('de-duplicates an id repeated in one result', () => {
    expect(extractExecutionIds(`execution ${A} queued ... execution ${A} running`)).toEqual([A]);
  });
});

const provision = defineTool({
  name: 'provision',
  description: 'Start provisioning a container (asynchronous).',
  parameters: { type: 'object', properties: { id: { type: 'string' } }, required: ['id'] },
  risk: 'mutation',
  execute: ({ id }: { id: string }) => `pct_create auto-approved — execution ${id} running.`,
});

const respond = (message: string) => ({ tool: 'respond_to_user', args: { message } });

function asyncTeam(store = memoryStore(), approvals?: ApprovalPolicy) {
  return team(
    {
      agents: {
        lead: [
          {
            tools: [
              { name: 'provision', args: { id: A } },
              { name: 'provision', args: { id: B } },
              { name: 'respond_to_user', args: { message: 'Both started.' } },
            ],
          },
          respond('A is done; moving on.'),
          respond('B failed; diagnosing.'),
        ],
      },
    },
    { tools: [provision], interactive: true, store, ...(approvals ? { approvals } : {}) },
  );
}

const userTurns = (t: ReturnType<typeof team>, id: string) => t.session(id).filter((i) => i.role === 'user').length;

describe('auto-continuation of async executions', () => {
  it('an agent that started two executions is re-invoked once per execution, with no user message in between', async () => {
    const t = asyncTeam();
    const rootId = await t.c.start({ name: 'lead', task: 'Provision two containers.' });
    await t.c.waitFor(rootId, ['waiting']);
    expect(t.c.executions.get(A)).toMatchObject({ agentId: rootId, status: 'running' });
    const usersBefore = userTurns(t, rootId);

    expect(await t.c.executions.finish(A, { status: 'completed', result: 'container 101 up' })).toBe(true);
    await t.advance(10, 10);
    expect(t.model.calls).toHaveLength(2);
    expect(t.model.calls[1]!.request.messages.at(-1)!.content).toContain(continuationNote(A, 'completed', 'container 101 up'));

    expect(await t.c.executions.finish(B, { status: 'failed', result: 'apt: 404' })).toBe(true);
    await t.advance(10, 10);
    expect(t.model.calls).toHaveLength(3);
    const last = JSON.stringify(t.model.calls[2]!.request.messages);
    expect(last).toContain(`execution ${B} failed: apt: 404`);
    expect(last).not.toContain(`execution ${A} completed`);

    // The notes were never persisted as user turns; nothing continues twice.
    expect(userTurns(t, rootId)).toBe(usersBefore);
    expect(await t.c.executions.finish(A, { status: 'completed', result: 'again' })).toBe(false);
    await t.advance(10, 10);
    expect(t.model.calls).toHaveLength(3);
    expect(t.c.executions.get(A)!.continuedAt).not.toBeNull();
    t.model.assertComplete();
    await t.c.shutdown();
  });

  it('an execution that finished while the process was down continues its agent once after the restart', async () => {
    const store = memoryStore();
    const t = asyncTeam(store);
    const rootId = await t.c.start({ name: 'lead', task: 'Provision two containers.' });
    await t.c.waitFor(rootId, ['waiting']);
    await t.c.shutdown();
    // The host records the result while troupe is down.
    store.finishExecution(A, { status: 'completed', result: 'container 101 up', at: 5 });

    const model = scriptedModel({ agents: { lead: [respond('A is done.')] } }, { clock: t.clock });
    const again = await resumeCoordinator({ store, model, clock: t.clock, tools: [provision], interactive: true });
    await again.waitFor(rootId, ['waiting']);
    await flush();
    expect(model.calls).toHaveLength(1);
    expect(JSON.stringify(model.calls[0]!.request.messages.at(-1))).toContain(`execution ${A} completed: container 101 up`);
    await again.shutdown();

    const third = scriptedModel({ agents: { lead: [] } }, { clock: t.clock });
    const once = await resumeCoordinator({ store, model: third, clock: t.clock, tools: [provision], interactive: true });
    await flush();
    expect(third.calls).toHaveLength(0);
    await once.shutdown();
  });

  it('with approvals on, a finished execution waits for the agent’s approval window', async () => {
    let open = false;
    const approvals: ApprovalPolicy = { request: () => Promise.resolve({ approved: true, reason: 'approved' }), windowOpen: () => open };
    const t = asyncTeam(memoryStore(), approvals);
    const rootId = await t.c.start({ name: 'lead', task: 'Provision two containers.' });
    await t.c.waitFor(rootId, ['waiting']);
    await t.c.executions.finish(A, { status: 'completed', result: 'up' });
    await t.advance(10, 10);
    expect(t.model.calls).toHaveLength(1);
    expect(t.c.executions.get(A)!.continuedAt).toBeNull();
    open = true;
    await t.c.executions.finish(B, { status: 'completed', result: 'up too' });
    await t.advance(10, 10);
    expect(t.model.calls).toHaveLength(2);
    await t.c.shutdown();
  });
});

describe('an approval window opening', () => {
  it('continues the executions that finished while the window was closed, once, with no user message for them', async () => {
    const C = '019f4b20-0000-7000-8000-00000000000c';
    const clock = new SimulatedClock();
    const gate = new ApprovalGate({ approver: () => true, windowMs: 1_000, clock });
    const t = team(
      {
        agents: {
          lead: [
            {
              tools: [
                { name: 'provision', args: { id: A } },
                { name: 'respond_to_user', args: { message: 'A started.' } },
              ],
            },
            {
              tools: [
                { name: 'provision', args: { id: C } },
                { name: 'respond_to_user', args: { message: 'C started.' } },
              ],
            },
            respond('A is done.'),
          ],
        },
      },
      { tools: [provision], interactive: true, approvals: gate, clock },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'Provision a container.' });
    await t.c.waitFor(rootId, ['waiting']);
    await t.advance(2_000);
    expect(gate.windowOpen(rootId)).toBe(false);

    // A finishes outside the window: it waits.
    await t.c.executions.finish(A, { status: 'completed', result: 'container 101 up' });
    await t.advance(10, 10);
    expect(t.model.calls).toHaveLength(1);
    expect(t.c.executions.get(A)!.continuedAt).toBeNull();

    // The user asks for more; approving that step opens the window, and A continues the agent
    // right after the turn, with its note in that call only.
    await t.c.send(rootId, { content: 'Now provision C.' });
    await t.advance(10, 10);
    await t.c.waitFor(rootId, ['waiting']);
    expect(t.model.calls).toHaveLength(3);
    expect(JSON.stringify(t.model.calls[1]!.request.messages)).not.toContain(`execution ${A} completed`);
    expect(t.model.calls[2]!.request.messages.at(-1)!.content).toContain(continuationNote(A, 'completed', 'container 101 up'));
    expect(t.c.executions.get(A)!.continuedAt).not.toBeNull();
    expect(userTurns(t, rootId)).toBe(2);
    t.model.assertComplete();
    await t.c.shutdown();
  });
});

describe('coordinator.health()', () => {
  it('reports the queues while work runs, and not ok once shut down', async () => {
    const t = team({ agents: { lead: [{ tool: 'finish', args: { summary: 'done' } }] } }, { concurrency: { model: 2, tools: 3 } });
    expect(t.c.health()).toEqual({
      ok: true,
      error: null,
      modelQueue: { waiting: 0, running: 0, concurrency: 2 },
      toolQueue: { waiting: 0, running: 0, concurrency: 3 },
    });
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.c.waitFor(rootId, ['completed']);
    await t.c.shutdown();
    expect(t.c.health()).toMatchObject({ ok: false, error: { code: 'COORDINATOR_SHUT_DOWN' } });
  });
});

describe('approvals in the tool pipeline', () => {
  it('a denied mutation comes back to the model as the tool result; read-only tools never ask', async () => {
    const asked: string[] = [];
    const approvals: ApprovalPolicy = {
      request: (req) => {
        asked.push(`${req.action}:${req.risk}`);
        return Promise.resolve({ approved: false, reason: 'denied: not during business hours' });
      },
      windowOpen: () => false,
    };
    let ran = 0;
    const look = defineTool({ name: 'look', description: 'Read.', parameters: { type: 'object' }, risk: 'read_only', execute: () => ({ seen: true }) });
    const wipe = defineTool({ name: 'wipe', description: 'Delete.', parameters: { type: 'object' }, risk: 'destructive', execute: () => ++ran });
    const t = team(
      {
        agents: {
          lead: [
            {
              tools: [
                { name: 'look', args: {} },
                { name: 'wipe', args: {} },
              ],
            },
            { tool: 'finish', args: { summary: 'done' } },
          ],
        },
      },
      { tools: [look, wipe], approvals },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.c.waitFor(rootId, ['completed']);
    expect(asked).toEqual(['wipe:destructive']);
    expect(ran).toBe(0);
    const results = t.toolResults(rootId);
    expect(results[0]!.name).toBe('look');
    expect(results[1]).toMatchObject({ name: 'wipe', result: { success: false, error: { code: 'APPROVAL_DENIED' } } });
    expect(results[1]!.result.error?.message).toContain('not during business hours');
    await t.c.shutdown();
  });
});

describe('Conversation', () => {
  const flaky = defineTool({
    name: 'flaky',
    description: 'Fails.',
    parameters: { type: 'object' },
    risk: 'read_only',
    execute: () => {
      throw new Error('nope');
    },
  });
  const fail = { tool: 'flaky', args: {} };

  it('respond() runs one user turn: the reply, the steps, and tool-failure streaks reset first', async () => {
    const t = team({ agents: { lead: [fail, fail, respond('Hello, what next?'), fail, respond('Tried once more.')] } }, { tools: [flaky], interactive: true });
    const rootId = await t.c.start({ name: 'lead', task: 'Chat.' });
    await t.c.waitFor(rootId, ['waiting']);
    const reply = await conversation(t.c, 'lead').respond('Try again, please.');
    expect(reply).toEqual({ text: 'Tried once more.', status: 'waiting', steps: 2, stepLimitReached: false });
    // Two failures before the reply and one after: without the reset, the third in a row would inject the strategy prompt.
    expect(JSON.stringify(t.session(rootId))).not.toContain('has failed 3 times consecutively');
    await t.c.shutdown();
  });

  it('an agent that takes more than maxSteps turns for one message is stopped', async () => {
    const graph = { tool: 'view_agent_graph', args: {} };
    const t = team({ agents: { lead: [respond('Ready.'), graph, graph, graph, graph, graph] } }, { interactive: true });
    const rootId = await t.c.start({ name: 'lead', task: 'Chat.' });
    await t.c.waitFor(rootId, ['waiting']);
    const reply = await conversation(t.c, rootId).respond('Go.', { maxSteps: 3 });
    expect(reply).toMatchObject({ status: 'stopped', stepLimitReached: true });
    expect(reply.steps).toBeGreaterThanOrEqual(3);
    await expect(conversation(t.c, rootId).respond('x', { maxSteps: 0 })).rejects.toMatchObject({ code: 'CONFIG_INVALID' });
    await t.c.shutdown();
  });
});

describe('ApprovalGate in a team', () => {
  it('an approved mutation opens the window: the next mutation runs without asking, a destructive step still asks', async () => {
    const asked: string[] = [];
    const gate = new ApprovalGate({
      approver: (req) => {
        asked.push(`${req.action}:${req.risk}`);
        return true;
      },
    });
    const edit = defineTool({ name: 'edit', description: 'Edit.', parameters: { type: 'object' }, risk: 'mutation', execute: () => ({ ok: true }) });
    const wipe = defineTool({ name: 'wipe', description: 'Delete.', parameters: { type: 'object' }, risk: 'destructive', execute: () => ({ ok: true }) });
    const t = team(
      {
        agents: {
          lead: [
            { tool: 'edit', args: {} },
            { tool: 'edit', args: {} },
            { tool: 'wipe', args: {} },
            { tool: 'finish', args: { summary: 'done' } },
          ],
        },
      },
      { tools: [edit, wipe], approvals: gate },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.c.waitFor(rootId, ['completed']);
    expect(asked).toEqual(['edit:mutation', 'wipe:destructive']);
    expect(gate.windowOpen(rootId)).toBe(true);
    expect(
      t
        .toolResults(rootId)
        .slice(0, 3)
        .map((r) => r.result),
    ).toEqual([{ ok: true }, { ok: true }, { ok: true }]);
    await t.c.shutdown();
  });

  it('without an approver every mutation is denied, and the model is told', async () => {
    const edit = defineTool({ name: 'edit', description: 'Edit.', parameters: { type: 'object' }, risk: 'mutation', execute: () => ({ ok: true }) });
    const t = team(
      {
        agents: {
          lead: [
            { tool: 'edit', args: {} },
            { tool: 'finish', args: { summary: 'done' } },
          ],
        },
      },
      { tools: [edit], approvals: new ApprovalGate() },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.c.waitFor(rootId, ['completed']);
    expect(t.toolResults(rootId)[0]).toMatchObject({ name: 'edit', result: { success: false, error: { code: 'APPROVAL_DENIED' } } });
    expect(t.toolResults(rootId)[0]!.result.error?.message).toContain('no approver');
    await t.c.shutdown();
  });
});
