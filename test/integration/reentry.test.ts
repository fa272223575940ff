/**
 * The re-entry budget (issue 34 item 7, seed 001): an agent woken by its own work is counted,
 * spaced and bounded, across restarts; a spent budget stops the agent with reason `reentry`.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { createCoordinator, type Coordinator } from '../../src/host/createCoordinator.js';
import { resumeCoordinator } from '../../src/host/resumeCoordinator.js';
import { scriptedModel, type ScriptStep } from '../../src/model/scriptedModel.js';
import { openStore } from '../../src/store/sqliteStore.js';
import { defineTool } from '../../src/tools/defineTool.js';
import { PROACTIVE_MESSAGE_TYPE } from '../../src/autonomy/proactiveIds.js';
import { flush, team, TERMINAL } from '../helpers/team.js';

/** An execution id per job: a storm of jobs that each finish at once and start the next. */
const job = (i: number) => `019f4b19-eafd-74ed-baa6-${String(i).padStart(12, '0')}`;

const provision = defineTool({
  name: 'provision',
  description: 'Start provisioning (asynchronous).',
  parameters: { type: 'object', properties: { id: { type: 'string' } }, required: ['id'] },
  execute: ({ id }: { id: string }) => ({ status: `execution ${id} running` }),
});

/** Start job i and wait on it, in one turn. */
const storm = (i: number): ScriptStep => ({
  tools: [
    { name: 'provision', args: { id: job(i) } },
    { name: 'wait_for_agents', args: { reason: 'my job' } },
  ],
});
const steps = (n: number) => Array.from({ length: n }, (_, i) => storm(i));
const reentry = { maxWakes: 6, spacingMs: 1_000 };

/** Finish job i, then let what is due run; returns the model calls made by then. */
async function finishJob(c: Coordinator, i: number, calls: () => number): Promise<number> {
  expect(await c.executions.finish(job(i), { status: 'completed', result: `job ${i} done` })).toBe(true);
  await flush();
  return calls();
}

describe('the re-entry budget', () => {
  it('a storm of its own executions: 3 wakes at once, then spaced 1 s, 2 s, 4 s, and the seventh is refused: stopped with reason reentry', async () => {
    const t = team({ agents: { lead: steps(8) } }, { tools: [provision], reentry });
    const rootId = await t.c.start({ name: 'lead', task: 'Provision until done.' });
    const calls = () => t.model.calls.length;
    for (const [i, spacing] of [0, 0, 0, 1_000, 2_000, 4_000].entries()) {
      await t.c.waitFor(rootId, ['waiting']);
      expect(await finishJob(t.c, i, calls)).toBe(spacing === 0 ? i + 2 : i + 1);
      if (spacing === 0) continue;
      // Not a moment before its spacing has passed on the run's clock.
      await t.advance(spacing - 1, spacing - 1);
      expect(calls()).toBe(i + 1);
      await t.advance(1, 1);
      expect(calls()).toBe(i + 2);
    }
    await t.c.waitFor(rootId, ['waiting']);
    await t.c.executions.finish(job(6), { status: 'completed', result: 'job 6 done' });
    expect(await t.c.waitFor(rootId, TERMINAL)).toMatchObject({ status: 'stopped' });
    await t.advance(120_000, 10_000);
    expect(calls()).toBe(7);
    expect(t.store.getAgent(rootId)?.stopReason).toBe('reentry');
    const spent = t.store.listEvents(t.c.runId).filter((e) => e.type === 'reentry.spent');
    expect(spent.map((e) => e.data)).toEqual([{ source: 'execution', wakes: 6, maxWakes: 6 }]);
    await t.c.shutdown();
  });

  it('self-wakes 10 minutes apart are not a storm: the count starts again', async () => {
    const t = team({ agents: { lead: steps(9) } }, { tools: [provision], reentry: { maxWakes: 2, spacingMs: 1_000 }, idleResumeMs: 86_400_000 });
    const rootId = await t.c.start({ name: 'lead', task: 'Provision slowly.' });
    for (let i = 0; i < 8; i++) {
      await t.c.waitFor(rootId, ['waiting']);
      await t.advance(600_000, 300_000);
      await finishJob(t.c, i, () => 0);
    }
    await t.c.waitFor(rootId, ['waiting']);
    expect(t.model.calls).toHaveLength(9);
    await t.c.shutdown();
  });

  it('the count survives a restart in the middle of the storm: the same calls in all, then the stop', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'troupe-')), 'run.db');
    const clock = new SimulatedClock();
    const first = scriptedModel({ agents: { lead: steps(5) } }, { clock });
    const store = openStore({ path });
    const c = createCoordinator({ model: first, store, clock, tools: [provision], reentry });
    const rootId = await c.start({ name: 'lead', task: 'Provision until done.' });
    for (let i = 0; i < 4; i++) {
      await c.waitFor(rootId, ['waiting']);
      await finishJob(c, i, () => 0);
    }
    clock.increment(1_000);
    await flush();
    await c.waitFor(rootId, ['waiting']);
    expect(first.calls).toHaveLength(5);
    await c.shutdown();
    store.close();

    // Four self-wakes are on record: only two more are allowed, however the restart went.
    const second = scriptedModel({ agents: { lead: [storm(5), storm(6), storm(7)] } }, { clock });
    const reopened = openStore({ path });
    const again = await resumeCoordinator({ store: reopened, model: second, clock, tools: [provision], reentry });
    await flush();
    await finishJob(again, 4, () => 0);
    clock.increment(2_000);
    await flush();
    await again.waitFor(rootId, ['waiting']);
    await finishJob(again, 5, () => 0);
    clock.increment(4_000);
    await flush();
    await again.waitFor(rootId, ['waiting']);
    await again.executions.finish(job(6), { status: 'completed', result: 'done' });
    expect(await again.waitFor(rootId, TERMINAL)).toMatchObject({ status: 'stopped' });
    expect(second.calls).toHaveLength(2);
    expect(reopened.getAgent(rootId)?.stopReason).toBe('reentry');
    await again.shutdown();
    reopened.close();
  });

  it('a message from the user starts the count again; a child stopped by its budget is reported to its parent', async () => {
    const t = team(
      {
        agents: {
          lead: [
            { tool: 'spawn_agent', args: { name: 'worker', task: 'Provision.' } },
            { tool: 'wait_for_agents', args: { reason: 'worker' } },
            { tool: 'finish', args: { summary: 'worker stopped' } },
          ],
          worker: [storm(0), storm(1), storm(2), storm(3)],
        },
      },
      { tools: [provision], reentry: { maxWakes: 1, spacingMs: 0 }, interactive: false },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'Delegate.' });
    await flush();
    const worker = t.byName('worker');
    await t.c.waitFor(worker.id, ['waiting']);
    await t.c.executions.finish(job(0), { status: 'completed', result: 'ok' });
    await t.c.waitFor(worker.id, ['waiting']);
    // One wake spent; a user message resets the count, so the next self-wake is allowed.
    await t.c.send(worker.id, { content: 'Keep going.' });
    await flush();
    await t.c.waitFor(worker.id, ['waiting']);
    const before = t.model.calls.length;
    await t.c.executions.finish(job(1), { status: 'completed', result: 'ok' });
    await t.c.waitFor(worker.id, ['waiting']);
    expect(t.model.calls.length).toBe(before + 1);
    // Spent again: stopped, and the parent is told why.
    await t.c.executions.finish(job(2), { status: 'completed', result: 'ok' });
    expect(await t.c.waitFor(worker.id, TERMINAL)).toMatchObject({ status: 'stopped' });
    expect(await t.c.waitFor(rootId, TERMINAL)).toMatchObject({ status: 'completed' });
    const notice = t.messagesTo(rootId).find((m) => m.type === 'stopped');
    expect(notice?.content).toContain('self-wake budget');
    await t.c.shutdown();
  });

  it('a delegation result is a self-wake too: the second one past the budget stops the agent, its result still recorded', async () => {
    const wait: ScriptStep = { tool: 'wait_for_agents', args: { reason: 'my delegation' } };
    const t = team({ agents: { lead: [wait, wait, wait] } }, { reentry: { maxWakes: 1, spacingMs: 0 } });
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    const first = t.c.delegations.dispatch(rootId, 'index the repo');
    await t.c.waitFor(rootId, ['waiting']);
    const second = t.c.delegations.dispatch(rootId, 'index the docs');
    await t.c.delegations.complete(rootId, first, 'indexed');
    await flush();
    await t.c.waitFor(rootId, ['waiting']);
    expect(t.model.calls).toHaveLength(2);
    await t.c.delegations.complete(rootId, second, 'indexed too');
    expect(await t.c.waitFor(rootId, TERMINAL)).toMatchObject({ status: 'stopped' });
    expect(t.model.calls).toHaveLength(2);
    expect(t.c.delegations.list(rootId).map((d) => d.status)).toEqual(['completed', 'completed']);
    await flush();
    expect(t.store.listEvents(t.c.runId).find((e) => e.type === 'reentry.spent')?.data).toMatchObject({ source: 'delegation' });
    await t.c.shutdown();
  });

  it("a proactive trigger's message is a self-wake: it never resets the count, and the one past the budget is refused and stops the agent", async () => {
    const reply: ScriptStep = { tool: 'respond_to_user', args: { message: 'Checked.' } };
    const t = team({ agents: { lead: [reply, reply, reply, reply] } }, { reentry: { maxWakes: 2, spacingMs: 60_000 }, interactive: true });
    const rootId = await t.c.start({ name: 'lead', task: 'Watch the logs.' });
    const fire = () => t.c.send(rootId, { content: 'The schedule fired: check the logs.', type: PROACTIVE_MESSAGE_TYPE });
    for (let i = 0; i < 2; i++) {
      await t.c.waitFor(rootId, ['waiting']);
      await fire();
      await flush();
    }
    // Two wakes at once (a proactive message is never put off), each answered.
    await t.c.waitFor(rootId, ['waiting']);
    expect(t.model.calls).toHaveLength(3);
    await expect(fire()).rejects.toMatchObject({ code: 'REENTRY_SPENT' });
    expect(await t.c.waitFor(rootId, TERMINAL)).toMatchObject({ status: 'stopped' });
    await flush();
    expect(t.model.calls).toHaveLength(3);
    expect(t.store.getAgent(rootId)?.stopReason).toBe('reentry');
    expect(t.store.listEvents(t.c.runId).find((e) => e.type === 'reentry.spent')?.data).toEqual({ source: 'proactive', wakes: 2, maxWakes: 2 });
    // The user speaking starts the count again: their message revives it.
    await t.c.send(rootId, { content: 'Go on.' });
    await flush();
    await t.c.waitFor(rootId, ['waiting']);
    expect(t.model.calls).toHaveLength(4);
    await t.c.shutdown();
  });

  it('a put-off continuation whose agent finished meanwhile holds off no dead-wait report: it is reported in the tick the waits die', async () => {
    const wait: ScriptStep = { tool: 'wait_for_agents', args: { reason: 'the others', timeout_seconds: 300 } };
    const t = team(
      {
        agents: {
          lead: [{ tools: ['worker', 'idler'].map((name) => ({ name: 'spawn_agent', args: { name, task: 'Work.' } })) }, wait, wait],
          // Four jobs, each end a self-wake: the fourth continuation is put off 1 s.
          worker: [
            { tools: [0, 1, 2, 3].map((i) => ({ name: 'provision', args: { id: job(i) } })) },
            wait,
            wait,
            wait,
            wait,
            { tool: 'agent_finish', args: { summary: 'Done.' } },
          ],
          idler: [wait],
        },
      },
      { tools: [provision], reentry: { maxWakes: 20, spacingMs: 1_000 } },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'Delegate and wait.' });
    await flush();
    const worker = t.byName('worker').id;
    for (let i = 0; i < 4; i++) {
      await t.c.waitFor(worker, ['waiting']);
      await finishJob(t.c, i, () => 0);
    }
    expect(
      t.store
        .executionsOf([worker])
        .filter((e) => e.continuedAt === null)
        .map((e) => e.id),
    ).toEqual([job(3)]);
    // The user wakes the worker before its continuation is due; it finishes, which no finished
    // execution revives outside interactive mode: the lead and the idler now wait on nothing that can move.
    await t.c.send(worker, { content: 'Wrap up.' });
    await flush();
    expect(t.c.list().find((a) => a.id === worker)?.status).toBe('completed');
    const reports = () => t.store.listEvents(t.c.runId).filter((e) => e.type === 'run.deadlock');
    expect(reports().map((e) => e.at)).toEqual([0]);
    expect(t.clock.now()).toBe(0);
    expect(t.store.listEvents(t.c.runId).find((e) => e.type === 'run.deadlock')?.data).toMatchObject({
      waits: [{ agent_id: rootId }, { agent_id: t.byName('idler').id }],
    });
    await t.c.shutdown();
  });

  // Read: the user's message wakes the worker first, it reads the fourth result and waits again.
  // Stopped: the worker is stopped with the result unread, and a notice revives no stopped agent.
  // Either way the put-off wake has nothing left to deliver; once the lead's job ends, every wait is dead.
  it.each(['read', 'stopped'] as const)(
    'a put-off delegation result (%s meanwhile) holds off no dead-wait report: it is reported in the tick the waits die',
    async (meanwhile) => {
      const wait: ScriptStep = { tool: 'wait_for_agents', args: { reason: 'the others', timeout_seconds: 300 } };
      const spawn = ['worker', 'idler'].map((name) => ({ name: 'spawn_agent', args: { name, task: 'Work.' } }));
      const t = team(
        {
          agents: {
            // The lead's own job keeps the run live until the end: no report before the worker's results.
            lead: [{ tools: [...spawn, { name: 'provision', args: { id: job(9) } }] }, wait, wait, wait],
            worker: [wait, wait, wait, wait, wait],
            idler: [wait],
          },
        },
        { tools: [provision], reentry: { maxWakes: 20, spacingMs: 1_000 } },
      );
      const rootId = await t.c.start({ name: 'lead', task: 'Delegate and wait.' });
      await flush();
      const worker = t.byName('worker').id;
      const workerCalls = () => t.model.calls.filter((c) => c.agentId === worker).length;
      const ids = [0, 1, 2, 3].map((i) => t.c.delegations.dispatch(worker, `index part ${i}`));
      // Each result a self-wake: the fourth is put off 1 s.
      for (const id of ids) {
        await t.c.waitFor(worker, ['waiting']);
        await t.c.delegations.complete(worker, id, 'indexed');
        await flush();
      }
      expect(workerCalls()).toBe(4);
      if (meanwhile === 'read') await t.c.send(worker, { content: 'Anything new?' });
      else await t.c.stop(worker);
      await flush();
      expect(workerCalls()).toBe(meanwhile === 'read' ? 5 : 4);
      await finishJob(t.c, 9, () => 0);
      const reports = t.store.listEvents(t.c.runId).filter((e) => e.type === 'run.deadlock');
      expect(reports.map((e) => e.at)).toEqual([0]);
      expect(t.clock.now()).toBe(0);
      const dead = meanwhile === 'read' ? [rootId, worker, t.byName('idler').id] : [rootId, t.byName('idler').id];
      expect(reports[0]?.data).toMatchObject({ waits: dead.map((id) => ({ agent_id: id })) });
      await t.c.shutdown();
    },
  );

  it('an idle timer waking a wait on agents is a self-wake: the one past the budget stops the agent', async () => {
    const wait: ScriptStep = { tool: 'wait_for_agents', args: { reason: 'the watcher' } };
    const t = team(
      {
        agents: {
          lead: [{ tool: 'spawn_agent', args: { name: 'watcher', task: 'Wait for the user.' } }, wait, wait, wait, wait],
          // Parked on the user: never woken by a timer, never ending.
          watcher: [{ tool: 'respond_to_user', args: { message: 'Waiting for you.' } }],
        },
      },
      { reentry: { maxWakes: 1, spacingMs: 0 }, idleResumeMs: 60_000, interactive: true },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'Delegate and wait.' });
    await flush();
    await t.c.waitFor(t.byName('watcher').id, ['waiting']);
    await t.c.waitFor(rootId, ['waiting']);
    const leadCalls = () => t.model.calls.filter((r) => r.agentId === rootId).length;
    expect(leadCalls()).toBe(2);
    // The first timer wake is within the budget: the lead asks the model again and waits again.
    await t.advance(60_000, 10_000);
    await t.c.waitFor(rootId, ['waiting']);
    expect(leadCalls()).toBe(3);
    // The second is past it: stopped with reason reentry, the wake's source on record.
    await t.advance(60_000, 10_000);
    await flush();
    expect(t.c.list().find((a) => a.id === rootId)?.status).toBe('stopped');
    expect(t.store.getAgent(rootId)?.stopReason).toBe('reentry');
    expect(t.store.listEvents(t.c.runId).find((e) => e.type === 'reentry.spent')?.data).toEqual({ source: 'timer', wakes: 1, maxWakes: 1 });
    await t.c.shutdown();
  });
});
