/**
 * Autonomy without polling (issue 14): an agent parks on its own async work (executions,
 * delegations) and makes no model call until it ends; finish waits for that work; a team whose
 * waits nothing can answer is told at once (a dead wait), never after 3 × 300 idle seconds.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import type { TroupeEvent } from '../../src/host/runtime.js';
import { createCoordinator } from '../../src/host/createCoordinator.js';
import { resumeCoordinator } from '../../src/host/resumeCoordinator.js';
import { scriptedModel, type ScriptStep } from '../../src/model/scriptedModel.js';
import { openStore } from '../../src/store/sqliteStore.js';
import { defineTool } from '../../src/tools/defineTool.js';
import { flush, spawnStep, team, TERMINAL } from '../helpers/team.js';

const A = '019f4b19-eafd-74ed-baa6-d24a27b3f52c';
const B = '019f4af7-7eff-7723-b38c-b540b267f407';

const provision = defineTool({
  name: 'provision',
  description: 'Start provisioning a container (asynchronous).',
  parameters: { type: 'object', properties: { id: { type: 'string' } }, required: ['id'] },
  risk: 'mutation',
  execute: ({ id }: { id: string }) => ({ status: `pct_create auto-approved — execution ${id} running.` }),
});

const wait: ScriptStep = { tool: 'wait_for_agents', args: { reason: 'my jobs' } };
const finish = (summary = 'done'): ScriptStep => ({ tool: 'finish', args: { summary } });
const startBoth: ScriptStep = {
  tools: [
    { name: 'provision', args: { id: A } },
    { name: 'provision', args: { id: B } },
  ],
};
const userMessages = (t: ReturnType<typeof team>) => t.store.listMessages(t.c.runId).filter((m) => m.from === 'user');

describe('waiting on your own work', () => {
  it('autonomous: two executions, one wait each, continued once per execution, then finish — 4 model calls, 0 user messages', async () => {
    const t = team({ agents: { lead: [startBoth, wait, wait, finish('A up, B failed')] } }, { tools: [provision] });
    const rootId = await t.c.start({ name: 'lead', task: 'Provision two containers.' });
    expect(await t.c.waitFor(rootId, ['waiting'])).toMatchObject({ waitKind: 'agents' });
    // Parked on its executions: no model call while they run, however long they take.
    await t.advance(250_000, 50_000);
    expect(t.model.calls).toHaveLength(2);

    expect(await t.c.executions.finish(A, { status: 'completed', result: 'container 101 up' })).toBe(true);
    await t.advance(10, 10);
    expect(t.model.calls).toHaveLength(3);
    expect(JSON.stringify(t.model.calls[2]!.request.messages)).toContain(`execution ${A} completed: container 101 up`);
    await t.c.waitFor(rootId, ['waiting']);

    expect(await t.c.executions.finish(B, { status: 'failed', result: 'apt: 404' })).toBe(true);
    const root = await t.c.waitFor(rootId, TERMINAL);
    expect(root).toMatchObject({ status: 'completed', report: { summary: 'A up, B failed' } });
    expect(t.model.calls.length).toBeLessThanOrEqual(6);
    expect(t.model.calls).toHaveLength(4);
    expect(userMessages(t)).toHaveLength(0);
    const waits = t
      .toolResults(rootId)
      .filter((r) => r.name === 'wait_for_agents')
      .map((r) => r.result.wait_outcome);
    expect(waits).toEqual(['execution_finished', 'execution_finished']);
    t.model.assertComplete();
    await t.c.shutdown();
  });

  it('finish is refused while the agent’s own executions run, and allowed once they ended', async () => {
    const t = team({ agents: { lead: [{ tool: 'provision', args: { id: A } }, finish('too early'), wait, finish()] } }, { tools: [provision] });
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.c.waitFor(rootId, ['waiting']);
    const refused = t.toolResults(rootId)[1]!;
    expect(refused.result.error).toMatchObject({ code: 'FINISH_REFUSED' });
    expect(refused.result.error!.message).toContain(A);
    await t.c.executions.finish(A, { status: 'completed', result: 'ok' });
    expect(await t.c.waitFor(rootId, TERMINAL)).toMatchObject({ status: 'completed' });
    await t.c.shutdown();
  });

  it('a delegation the agent dispatched is waited on; its end wakes the agent', async () => {
    const t = team({ agents: { lead: [wait, finish()] } });
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    // Dispatched before the wait (the host's tool would do this in the same turn).
    const id = t.c.delegations.dispatch(rootId, 'index the repo');
    await t.c.waitFor(rootId, ['waiting']);
    await t.advance(100_000, 50_000);
    expect(t.model.calls).toHaveLength(1);
    await t.c.delegations.complete(rootId, id, '42 files');
    expect(await t.c.waitFor(rootId, TERMINAL)).toMatchObject({ status: 'completed' });
    expect(t.toolResults(rootId)[0]!.result.wait_outcome).toBe('message_arrived');
    await t.c.shutdown();
  });

  it('the idle rules apply: 300 s × 3 then stalled; a finished execution wakes the stalled agent', async () => {
    const t = team({ agents: { lead: [{ tool: 'provision', args: { id: A } }, wait, wait, wait, finish()] } }, { tools: [provision] });
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.c.waitFor(rootId, ['waiting']);
    await t.advance(900_000, 60_000);
    expect(t.c.get(rootId).status).toBe('stalled');
    expect(t.model.calls).toHaveLength(4);
    await t.c.executions.finish(A, { status: 'completed', result: 'finally' });
    expect(await t.c.waitFor(rootId, TERMINAL)).toMatchObject({ status: 'completed' });
    expect(JSON.stringify(t.model.calls[4]!.request.messages)).toContain(`execution ${A} completed: finally`);
    await t.c.shutdown();
  });

  it('executions.finish for an id no agent of this run linked is a typed error, and writes nothing', async () => {
    const t = team({ agents: { lead: [{ tool: 'provision', args: { id: A } }, wait, finish()] } }, { tools: [provision] });
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.c.waitFor(rootId, ['waiting']);
    await expect(t.c.executions.finish(B, { status: 'completed', result: 'x' })).rejects.toMatchObject(
      expect.objectContaining({ code: 'EXECUTION_NOT_FOUND' }),
    );
    expect(t.c.executions.get(B)).toBeUndefined();
    expect(await t.c.executions.finish(A, { status: 'completed', result: 'x' })).toBe(true);
    // Already finished: false, not an error (hosts may report twice).
    expect(await t.c.executions.finish(A, { status: 'failed', result: 'late' })).toBe(false);
    await t.c.waitFor(rootId, TERMINAL);
    await t.c.shutdown();
  });

  it('after a restart an agent parked on its executions stays parked until executions.finish wakes it', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'troupe-')), 'run.db');
    const clock = new SimulatedClock();
    const c = createCoordinator({
      model: scriptedModel({ agents: { lead: [startBoth, wait] } }, { clock }),
      store: openStore({ path }),
      clock,
      tools: [provision],
    });
    const rootId = await c.start({ name: 'lead', task: 'x' });
    await c.waitFor(rootId, ['waiting']);
    await c.shutdown();
    c.store.close();

    const store = openStore({ path });
    const model = scriptedModel({ agents: { lead: [wait, finish()] } }, { clock });
    const again = await resumeCoordinator({ store, model, clock, tools: [provision] });
    await flush();
    expect(again.get(rootId).status).toBe('waiting');
    expect(model.calls).toHaveLength(0);
    await again.executions.finish(A, { status: 'completed', result: 'up' });
    await flush();
    await again.waitFor(rootId, ['waiting']);
    expect(model.calls).toHaveLength(1);
    await again.executions.finish(B, { status: 'completed', result: 'up too' });
    expect(await again.waitFor(rootId, TERMINAL)).toMatchObject({ status: 'completed' });
    await again.shutdown();
    store.close();
  });
});

describe('dead waits (the wait-for graph)', () => {
  const orders: ScriptStep = { tool: 'wait_for_agents', args: { reason: 'orders' } };
  const spawnWorker: ScriptStep = { tool: 'spawn_agent', args: { name: 'worker', task: 'Wait for my orders.' } };

  it('root ↔ child waiting on each other is reported at once, not after 900 simulated seconds', async () => {
    const t = team({
      agents: {
        lead: [spawnWorker, wait, { tool: 'send_message', args: { to: 'worker', content: 'go' } }, wait, finish()],
        worker: [orders, { tool: 'agent_finish', args: { summary: 'went' } }],
      },
    });
    const events: TroupeEvent[] = [];
    t.c.subscribe((e) => e.type === 'run.deadlock' && events.push(e));
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    const root = await t.c.waitFor(rootId, TERMINAL);
    expect(root.status).toBe('completed');
    // No simulated time passed: the dead wait was reported in the tick it became dead.
    expect(t.clock.now()).toBe(0);
    expect(events).toHaveLength(1);
    const worker = t.byName('worker');
    const report = events[0] as Extract<TroupeEvent, { type: 'run.deadlock' }>;
    expect(report.waits.map((w) => w.name).sort()).toEqual(['lead', 'worker']);
    expect(report.waits.find((w) => w.name === 'lead')!.waits_on).toEqual([{ agent_id: worker.id, name: 'worker', status: 'waiting', wait: 'agents' }]);
    const leadWait = t.toolResults(rootId).find((r) => r.name === 'wait_for_agents')!.result;
    expect(leadWait).toMatchObject({ wait_outcome: 'deadlock' });
    expect(t.store.listEvents(t.c.runId).filter((e) => e.type === 'run.deadlock')).toHaveLength(1);
    await t.c.shutdown();
  });

  it('a team that keeps waiting on each other stalls after the idle limit, with a bounded number of calls', async () => {
    const t = team({ agents: { lead: [spawnWorker, wait, wait, wait, wait, wait, wait], worker: [orders, orders, orders] } });
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await flush();
    await t.c.whenIdle();
    await flush();
    const worker = t.byName('worker');
    // Three dead-wait reports each (the idle limit), then both stall; the worker's stall notice
    // wakes the lead, whose next wait is dead again three times, and it stalls for good.
    expect(worker.status).toBe('stalled');
    expect(t.c.get(rootId).status).toBe('stalled');
    expect(t.clock.now()).toBe(0);
    expect(t.model.calls.filter((c) => c.agentName === 'worker')).toHaveLength(3);
    expect(t.model.calls.filter((c) => c.agentName === 'lead')).toHaveLength(7);
    t.model.assertComplete();
    await t.c.shutdown();
  });

  it('interactive: a child waiting on its parent, which waits on the user, is not dead', async () => {
    const t = team(
      { agents: { lead: [spawnWorker, { tool: 'respond_to_user', args: { message: 'Worker is ready; what should it do?' } }], worker: [orders] } },
      { interactive: true },
    );
    const deadlocks: TroupeEvent[] = [];
    t.c.subscribe((e) => e.type === 'run.deadlock' && deadlocks.push(e));
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.c.waitFor(rootId, ['waiting']);
    await flush();
    await t.c.waitFor(t.byName('worker').id, ['waiting']);
    await flush();
    expect(deadlocks).toHaveLength(0);
    expect(t.byName('worker').status).toBe('waiting');
    await t.c.shutdown();
  });

  it('a running execution keeps a wait alive: nothing is reported while it runs', async () => {
    const t = team(
      {
        agents: {
          lead: [{ tool: 'provision', args: { id: A } }, spawnWorker, wait, wait, { tool: 'stop_agent', args: { id: 'worker' } }, wait, finish()],
          worker: [orders, orders],
        },
      },
      { tools: [provision] },
    );
    const deadlocks: TroupeEvent[] = [];
    t.c.subscribe((e) => e.type === 'run.deadlock' && deadlocks.push(e));
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.c.waitFor(rootId, ['waiting']);
    await flush();
    expect(deadlocks).toHaveLength(0);
    // The execution ends: the lead runs, parks again on the worker; now the wait is dead.
    await t.c.executions.finish(A, { status: 'completed', result: 'ok' });
    await t.c.waitFor(rootId, TERMINAL);
    expect(deadlocks).toHaveLength(1);
    await t.c.shutdown();
  });
});

describe('the last reports', () => {
  const quick: ScriptStep[] = [{ tool: 'agent_finish', args: { summary: 'done' }, delayMs: 50 }];
  const slow: ScriptStep[] = [{ tool: 'agent_finish', args: { summary: 'done' }, delayMs: 3_000 }];
  const arrived = (pending: number, last: boolean) => ({ outcome: 'message_arrived', pending, last: last || undefined });

  /** The lead spawns a and b, then plays `waits`; what each of its waits answered. */
  async function waitsOf(waits: ScriptStep[], a: ScriptStep[], b: ScriptStep[]) {
    const t = team({ agents: { lead: [spawnStep(['a', 'a'], ['b', 'b']), ...waits, finish()], a, b } });
    const rootId = await t.c.start({ name: 'lead', task: 'Split.' });
    await t.advance(10_000, 50);
    expect(await t.c.waitFor(rootId, TERMINAL)).toMatchObject({ status: 'completed' });
    t.model.assertComplete();
    await t.c.shutdown();
    return t
      .toolResults(rootId)
      .filter((r) => r.name === 'wait_for_agents')
      .map((r) => ({ outcome: r.result.wait_outcome, pending: r.result.pending_messages, last: r.result.no_active_agents }));
  }

  it('a woken wait says when its messages are the last: the lead finishes on them, without a wait to be told nobody is left', async () => {
    // a's report came while b worked: not the last. b's report was.
    expect(await waitsOf([wait, wait], quick, slow)).toEqual([arrived(1, false), arrived(1, true)]);
  });

  it('so does a wait that finds the last reports already waiting', async () => {
    // The lead's second call takes 5 s: both reports wait when its wait runs.
    expect(await waitsOf([{ ...wait, delayMs: 5_000 }], quick, quick)).toEqual([arrived(2, true)]);
  });

  it('a wait that finds reports while another child works is not told they are the last', async () => {
    expect(await waitsOf([{ ...wait, delayMs: 1_000 }, wait], quick, slow)).toEqual([arrived(1, false), arrived(1, true)]);
  });
});
