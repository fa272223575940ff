/**
 * A wait for all the children (`wait_for_agents` with `until: "all"`): a parent of a fan-out is
 * woken once, by its last active child's report, and reads every report in that one turn — one
 * paid call for the whole fan-out instead of one per report. Anything that is not a report (a
 * question, a stall notice, its own work ending, the timeout) still wakes it at once; the mode is
 * persisted with the wait, so a restarted run keeps gathering.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { createCoordinator, type Coordinator } from '../../src/host/createCoordinator.js';
import type { SendOptions } from '../../src/host/mail/messaging.js';
import { resumeCoordinator } from '../../src/host/resumeCoordinator.js';
import { scriptedModel, type ScriptStep } from '../../src/model/scriptedModel.js';
import { replayRun } from '../../src/replay/replayRun.js';
import { memoryStore } from '../../src/store/memoryStore.js';
import { openStore } from '../../src/store/sqliteStore.js';
import { READ_EVENT, type NewMessage } from '../../src/store/types.js';
import { flush, spawnStep, team, TERMINAL } from '../helpers/team.js';

const waitAll: ScriptStep = { tool: 'wait_for_agents', args: { reason: 'every report', until: 'all' } };
const waitAny: ScriptStep = { tool: 'wait_for_agents', args: { reason: 'reports' } };
const finish: ScriptStep = { tool: 'finish', args: { summary: 'all done' } };
const after = (delayMs: number): ScriptStep[] => [{ tool: 'agent_finish', args: { summary: `done after ${delayMs} ms` }, delayMs }];
const arrived = (pending: number, last: boolean) => ({ outcome: 'message_arrived', pending, last: last || undefined });

/** The lead spawns a, b and c (each `scripts` one), then plays `lead`; what its waits answered and how many calls it made. */
async function leadOf(lead: ScriptStep[], a: ScriptStep[], b: ScriptStep[], c: ScriptStep[]) {
  const t = team({ agents: { lead: [spawnStep(['a', 'a'], ['b', 'b'], ['c', 'c']), ...lead], a, b, c } });
  const rootId = await t.c.start({ name: 'lead', task: 'Split.' });
  await t.advance(20_000, 50);
  expect(await t.c.waitFor(rootId, TERMINAL)).toMatchObject({ status: 'completed' });
  t.model.assertComplete();
  await t.c.shutdown();
  const waits = t
    .toolResults(rootId)
    .filter((r) => r.name === 'wait_for_agents')
    .map((r) => ({ outcome: r.result.wait_outcome, pending: r.result.pending_messages, last: r.result.no_active_agents }));
  return { waits, calls: t.model.calls.filter((call) => call.agentName === 'lead').length };
}

/** The lead spawns a (100 ms) and b (`bMs`), then plays `lead`, `send` reaching it 1 s in; its requests, as JSON. */
async function twoChildren(lead: ScriptStep[], bMs: number, send?: SendOptions): Promise<string[]> {
  const t = team({ agents: { lead: [spawnStep(['a', 'a'], ['b', 'b']), ...lead], a: after(100), b: after(bMs) } });
  const rootId = await t.c.start({ name: 'lead', task: 'Split.' });
  await t.advance(1_000, 50);
  if (send) await t.c.send(rootId, send);
  await t.advance(19_000, 50);
  expect(await t.c.waitFor(rootId, TERMINAL)).toMatchObject({ status: 'completed' });
  await t.c.shutdown();
  return t.model.calls.filter((call) => call.agentName === 'lead').map((call) => JSON.stringify(call.request.messages));
}

/** Move `clock` until `rootId` ends. */
async function untilDone(c: Coordinator, rootId: string, clock: SimulatedClock) {
  for (let i = 0; i < 40 && !(TERMINAL as readonly string[]).includes(c.get(rootId).status); i++) {
    await flush();
    clock.increment(50);
  }
  expect(c.get(rootId)).toMatchObject({ status: 'completed' });
}

/**
 * On SQLite: the lead spawns a and b and waits for all; a reports (gathered) while b's call is out;
 * the host stops (with `extra` committed then) and the run resumes, the lead playing `lead`, b ending in 10 ms.
 */
async function gatheringThenRestart(lead: ScriptStep[], extra?: (runId: string, to: string, at: number) => NewMessage) {
  const path = join(mkdtempSync(join(tmpdir(), 'troupe-all-')), 'run.db');
  const clock = new SimulatedClock();
  const script = { agents: { lead: [spawnStep(['a', 'a'], ['b', 'b']), waitAll], a: after(100), b: after(60_000) } };
  const c = createCoordinator({ model: scriptedModel(script, { clock }), store: openStore({ path }), clock });
  const rootId = await c.start({ name: 'lead', task: 'Split.' });
  for (let i = 0; i < 40 && c.list().find((x) => x.name === 'a')?.status !== 'completed'; i++) {
    await flush();
    clock.increment(50);
  }
  await flush();
  // a reported; b's call is still out: the lead gathers a's report, parked.
  expect(c.get(rootId)).toMatchObject({ status: 'waiting' });
  await c.shutdown();
  if (extra) c.store.enqueueMessage(extra(c.runId, rootId, clock.now()));
  c.store.close();

  const store = openStore({ path });
  expect(store.getAgent(rootId)!.pendingWait).toMatchObject({ tool: 'wait_for_agents', until: 'all' });
  const model = scriptedModel({ agents: { lead, b: after(10) } }, { clock });
  const again = await resumeCoordinator({ store, model, clock });
  await flush();
  return { again, model, store, rootId, clock };
}

describe('wait_for_agents until all', () => {
  it('wakes once, on the last report, with all three: spawn, wait, finish — three calls of the lead', async () => {
    const all = await leadOf([waitAll, finish], after(100), after(3_000), after(1_000));
    expect(all.waits).toEqual([arrived(3, true)]);
    expect(all.calls).toBe(3);
    // The same team waiting for the first message: woken by each report, one call each.
    const any = await leadOf([waitAny, waitAny, waitAny, finish], after(100), after(3_000), after(1_000));
    expect(any.waits).toEqual([arrived(1, false), arrived(1, false), arrived(1, true)]);
    expect(any.calls).toBe(5);
  });

  it('parks on reports already waiting while a child still works, and answers at once when none does', async () => {
    // The lead's wait comes 2 s after its spawn: a's and c's reports wait then, b works on.
    const late: ScriptStep = { ...waitAll, delayMs: 2_000 };
    expect((await leadOf([late, finish], after(100), after(3_000), after(1_000))).waits).toEqual([arrived(3, true)]);
    // 5 s: every report waits; nobody is left, so the wait answers with them.
    const later: ScriptStep = { ...waitAll, delayMs: 5_000 };
    expect((await leadOf([later, finish], after(100), after(3_000), after(1_000))).waits).toEqual([arrived(3, true)]);
  });

  it('a message that is not a report wakes it at once; its next wait gathers the rest', async () => {
    const asks: ScriptStep[] = [{ tool: 'send_message', args: { to: 'lead', content: 'halfway: keep the old schema?' }, delayMs: 100 }, ...after(2_000)];
    const { waits } = await leadOf([waitAll, waitAll, finish], asks, after(3_000), after(1_000));
    // The question wakes it alone (c's report, 1 s in, is gathered by the second wait); then a, b and c.
    expect(waits).toEqual([arrived(1, false), arrived(3, true)]);
  });

  it('a keyed message typed like a report is still not one: it wakes the wait at once', async () => {
    const send = { content: 'job 7 completed', from: 'system', type: 'completion', key: 'job-7' } as const;
    const lead = await twoChildren([waitAll, waitAll, finish], 3_000, send);
    expect(lead).toHaveLength(4);
    expect(lead[2]).toContain('job 7 completed');
    expect(lead[2]).not.toContain('done after 3000 ms');
  });

  it('a timeout wakes it with what has gathered', async () => {
    const short: ScriptStep = { tool: 'wait_for_agents', args: { reason: 'reports', until: 'all', timeout_seconds: 2 } };
    const lead = await twoChildren([short, waitAll, finish], 5_000);
    // The call after the timeout reads a's report; the one after b's report reads b's.
    expect(lead).toHaveLength(4);
    expect(lead[2]).toContain('done after 100 ms');
    expect(lead[2]).not.toContain('done after 5000 ms');
    expect(lead[3]).toContain('done after 5000 ms');
  });

  it('survives a restart: the wait keeps gathering, and the last report wakes it once with both', async () => {
    const { again, model, store, rootId, clock } = await gatheringThenRestart([finish]);
    // Restored with a's report waiting and b's turn to run again: still gathering, no call of the lead.
    expect(again.get(rootId).status).toBe('waiting');
    expect(model.calls.filter((call) => call.agentName === 'lead')).toHaveLength(0);
    await untilDone(again, rootId, clock);
    expect(model.calls.filter((call) => call.agentName === 'lead')).toHaveLength(1);
    const waitResult = store.loadSession(rootId).findLast((i) => i.role === 'tool' && i.name === 'wait_for_agents');
    expect(JSON.parse((waitResult as { content: string }).content)).toMatchObject({
      wait_outcome: 'message_arrived',
      pending_messages: 2,
      no_active_agents: true,
    });
    await again.shutdown();
    store.close();
  });

  it('after a restart, a message waiting beside the gathered reports wakes it at once (its wake was lost with the host)', async () => {
    // The user's message was committed as the host went down, before its wake was delivered.
    const question = (runId: string, to: string, at: number): NewMessage => ({
      id: 'msg_question',
      runId,
      to,
      from: 'user',
      fromName: 'user',
      type: 'message',
      priority: 'normal',
      content: 'how is it going?',
      interrupt: false,
      createdAt: at,
    });
    const { again, model, store, rootId, clock } = await gatheringThenRestart([waitAll, finish], question);
    const lead = () => model.calls.filter((call) => call.agentName === 'lead');
    // Woken by the question before b's turn (10 ms on the clock) ends: a's report and the question, not b's.
    expect(lead()).toHaveLength(1);
    expect(JSON.stringify(lead()[0]!.request.messages)).toContain('how is it going?');
    expect(JSON.stringify(lead()[0]!.request.messages)).not.toContain('done after 10 ms');
    await untilDone(again, rootId, clock);
    expect(lead()).toHaveLength(2);
    await again.shutdown();
    store.close();
  });

  it('replays identically: the gathered wake reads what the recording read', async () => {
    const store = memoryStore();
    const t = team(
      { agents: { lead: [spawnStep(['a', 'a'], ['b', 'b'], ['c', 'c']), waitAll, finish], a: after(100), b: after(3_000), c: after(1_000) } },
      { store },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'Split.' });
    await t.advance(20_000, 50);
    expect(await t.c.waitFor(rootId, TERMINAL)).toMatchObject({ status: 'completed' });
    await t.c.shutdown();
    const reads = store.historyOf(t.c.runId).filter((e) => e.type === READ_EVENT && e.agentId === rootId);
    expect(reads.map((e) => e.data)).toEqual([{ turn: 3, count: 3, last: true }]);
    const result = await replayRun(store, t.c.runId);
    expect(result.divergence).toBeNull();
    expect(result.outcome).toBe('identical');
  });

  it('answers at once when a message that is not a report waits with the reports: no park', async () => {
    const asks: ScriptStep[] = [{ tool: 'send_message', args: { to: 'lead', content: 'keep the old schema?' }, delayMs: 100 }, ...after(2_000)];
    const t = team({
      agents: {
        lead: [spawnStep(['a', 'a'], ['b', 'b'], ['c', 'c']), { ...waitAll, delayMs: 1_500 }, waitAll, finish],
        a: asks,
        b: after(3_000),
        c: after(1_000),
      },
    });
    const rootId = await t.c.start({ name: 'lead', task: 'Split.' });
    await t.advance(20_000, 50);
    expect(await t.c.waitFor(rootId, TERMINAL)).toMatchObject({ status: 'completed' });
    const waits = t.toolResults(rootId).filter((r) => r.name === 'wait_for_agents');
    expect(waits.map((r) => r.result.pending_messages)).toEqual([2, 2]);
    // The first wait never parked: the lead waited once, for a's and b's reports.
    const parks = t.store.historyOf(t.c.runId).filter((e) => e.agentId === rootId && e.type === 'agent.status' && (e.data as { to: string }).to === 'waiting');
    expect(parks).toHaveLength(1);
    await t.c.shutdown();
  });
});
