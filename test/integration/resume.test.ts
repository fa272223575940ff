import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createActor, SimulatedClock, type AnyActorRef } from 'xstate';
import { coordinatorMachine, getAgentRecord, type CoordinatorContext, type CoordinatorEmitted } from '../../machines/coordinatorMachine.js';
import { createCoordinator, type Coordinator } from '../../src/host/createCoordinator.js';
import { recoverRun, resumeCoordinator } from '../../src/host/resumeCoordinator.js';
import { scriptedModel, type Script } from '../../src/model/scriptedModel.js';
import { openStore, type SqliteStore } from '../../src/store/sqliteStore.js';
import type { Store } from '../../src/store/types.js';
import { flush, TERMINAL } from '../helpers/team.js';

const dbPath = () => join(mkdtempSync(join(tmpdir(), 'troupe-')), 'run.db');
const finish = { tool: 'finish', args: { summary: 'done' } };

async function advance(clock: SimulatedClock, ms: number, step = 1_000) {
  for (let t = 0; t < ms; t += step) {
    await flush();
    clock.increment(Math.min(step, ms - t));
    await flush();
  }
}

/** Start a run, let it reach a point, and "crash": actors stop, the file keeps what was committed. */
async function crashAfter(
  store: SqliteStore,
  script: Script,
  until: (c: Coordinator) => Promise<unknown>,
  opts: { interactive?: boolean; clock?: SimulatedClock } = {},
) {
  const clock = opts.clock ?? new SimulatedClock();
  const c = createCoordinator({ model: scriptedModel(script, { clock }), store, clock, interactive: opts.interactive ?? false });
  const rootId = await c.start({ name: 'lead', task: 'the task' });
  await until(c);
  await c.shutdown();
  store.close();
  return { rootId, runId: c.runId, clock };
}

const kinds = (store: Store, runId: string, to: string) =>
  store
    .listMessages(runId)
    .filter((m) => m.to === to)
    .map((m) => `${m.fromName}:${m.type}`);

describe('resumeCoordinator', () => {
  it('autonomous: the running child runs again, the waiting root keeps waiting, each report arrives once', async () => {
    const path = dbPath();
    const first = openStore({ path });
    const { rootId, runId, clock } = await crashAfter(
      first,
      {
        agents: {
          lead: [
            {
              tools: [
                { name: 'spawn_agent', args: { name: 'alice', task: 'a' } },
                { name: 'spawn_agent', args: { name: 'bob', task: 'b' } },
              ],
            },
            { tool: 'wait_for_agents', args: { reason: 'both' } }, // alice's report is already there
            { tool: 'wait_for_agents', args: { reason: 'bob' } }, // parks on bob
          ],
          alice: [{ tool: 'agent_finish', args: { summary: 'alice done' } }],
          // bob is mid-call (a long delay) when the process dies.
          bob: [{ delayMs: 60_000, tool: 'agent_finish', args: { summary: 'never sent' } }],
        },
      },
      async (c) => {
        const root = rootId0(c);
        while (!c.list().some((a) => a.name === 'alice')) await flush();
        await c.waitFor(c.list().find((a) => a.name === 'alice')!.id, ['completed']);
        while (c.store.loadSession(root).filter((i) => i.role === 'assistant').length < 3) await flush();
        await c.waitFor(root, ['waiting']);
      },
    );
    const second = openStore({ path });
    const before = second.listAgents(runId).map((a) => [a.name, a.status]);
    expect(before).toEqual([
      ['lead', 'waiting'],
      ['alice', 'completed'],
      ['bob', 'running'],
    ]);
    const model = scriptedModel(
      {
        agents: {
          bob: [{ tool: 'agent_finish', args: { summary: 'bob done after the restart' } }],
          lead: [{ tool: 'wait_for_agents', args: { reason: 'anything left?' } }, finish],
        },
      },
      { clock },
    );
    const c = await resumeCoordinator({ store: second, model, clock });
    expect(c.runId).toBe(runId);
    const root = await c.waitFor(rootId, [...TERMINAL]);
    expect(root.status).toBe('completed');
    expect(kinds(second, runId, rootId)).toEqual(['alice:completion', 'bob:completion']);
    model.assertComplete();
    await c.shutdown();
    expect(second.integrityCheck()).toBe('ok');
    expect(second.verifyChecksums()).toEqual({ messages: [], sessionItems: [] });
    second.close();
  });

  it('interactive: children come back parked unless they were running; a failed child stays down for peers', async () => {
    const path = dbPath();
    const { rootId, runId, clock } = await crashAfter(
      openStore({ path }),
      {
        agents: {
          lead: [
            {
              tools: [
                { name: 'spawn_agent', args: { name: 'carol', task: 'c' } },
                { name: 'spawn_agent', args: { name: 'dave', task: 'd' } },
              ],
            },
            { tool: 'wait_for_agents', args: { reason: 'carol' } },
            { tool: 'respond_to_user', args: { message: 'carol failed; dave is waiting for orders' } },
          ],
          carol: [{ error: { code: 'PROVIDER_AUTH' } }],
          dave: [{ tool: 'wait_for_agents', args: { reason: 'orders' } }],
        },
      },
      (c) => c.whenIdle(),
      { interactive: true },
    );
    const store = openStore({ path });
    // No model calls are expected: everyone comes back parked.
    const model = scriptedModel({ agents: {} }, { clock });
    const c = await resumeCoordinator({ store, model, clock });
    await c.whenIdle();
    expect(c.list().map((a) => [a.name, a.status, a.waitKind])).toEqual([
      ['lead', 'waiting', 'user'],
      ['carol', 'failed', null],
      ['dave', 'waiting', 'agents'],
    ]);
    expect(model.calls).toHaveLength(0);
    // carol's failure was told before the crash, and is not told again.
    expect(kinds(store, runId, rootId)).toEqual(['carol:failed']);
    await c.shutdown();
    store.close();
  });

  it('a child whose end was told keeps its notice claim across a restart: the restored coordinator holds it and would not tell it again', async () => {
    const path = dbPath();
    const { rootId, runId, clock } = await crashAfter(
      openStore({ path }),
      {
        agents: {
          lead: [
            { tool: 'spawn_agent', args: { name: 'alice', task: 'a' } },
            { tool: 'wait_for_agents', args: { reason: 'alice' } },
            { tool: 'respond_to_user', args: { message: 'alice reported' } },
          ],
          alice: [{ tool: 'agent_finish', args: { summary: 'alice done' } }],
        },
      },
      (c) => c.whenIdle(),
      { interactive: true },
    );
    const store = openStore({ path });
    const alice = store.listAgents(runId).find((a) => a.name === 'alice')!;
    expect(alice).toMatchObject({ status: 'completed', noticeClaimed: true, stint: 0 });
    let coordinator: AnyActorRef | undefined;
    const c = await resumeCoordinator({
      store,
      clock,
      model: scriptedModel({ agents: {} }, { clock }),
      inspect: (e) => {
        if (e.type === '@xstate.actor' && (e.actorRef as AnyActorRef).id === 'coordinator') coordinator = e.actorRef as AnyActorRef;
      },
    });
    await c.whenIdle();
    // The restored coordinator's record is the committed one: claimed, same stint.
    const restored = coordinator!.getSnapshot() as { context: CoordinatorContext };
    expect(getAgentRecord(restored.context, alice.id)).toMatchObject({ status: 'completed', noticeClaimed: true, stint: 0 });
    // A copy of it, driven through a change that ends the same stint again (parked, then stopped,
    // never running): the claim is taken, so nothing is owed. With the claim released at restart it
    // would tell lead a second time (its key would then meet the store's unique notice key).
    const copy = createActor(coordinatorMachine, {
      snapshot: coordinator!.getPersistedSnapshot() as never,
      input: { runId, limits: restored.context.limits }, // unused: the snapshot is the state
    });
    const told: CoordinatorEmitted[] = [];
    copy.on('notice', (n) => told.push(n));
    copy.start();
    const change = { error: null, report: null, task: 'a', at: clock.now() };
    copy.send({ type: 'agent.changed', id: alice.id, status: 'waiting', waitKind: 'agents', stopReason: null, ...change });
    copy.send({ type: 'agent.changed', id: alice.id, status: 'stopped', waitKind: null, stopReason: 'requested', ...change });
    expect(told).toEqual([]);
    expect(getAgentRecord(copy.getSnapshot().context, alice.id)).toMatchObject({ status: 'stopped', noticeClaimed: true, stint: 0 });
    copy.stop();
    expect(kinds(store, runId, rootId)).toEqual(['alice:completion']);
    await c.shutdown();
    store.close();
  });

  it('the idle timer of a waiting agent is re-armed from waitingSince', async () => {
    const path = dbPath();
    const clock = new SimulatedClock();
    const { runId } = await crashAfter(
      openStore({ path }),
      {
        agents: {
          lead: [
            {
              tools: [
                { name: 'spawn_agent', args: { name: 'w', task: 'wait' } },
                { name: 'spawn_agent', args: { name: 'busy', task: 'work' } },
              ],
            },
            { tool: 'wait_for_agents', args: { reason: 'w', timeout_seconds: 300 } },
          ],
          w: [{ tool: 'wait_for_agents', args: { reason: 'orders', timeout_seconds: 100 } }],
          // A long model call keeps the run from being quiescent (else w's dead wait ends at once).
          busy: [{ delayMs: 1_000_000, tool: 'agent_finish', args: { summary: 'done' } }],
        },
      },
      async () => {
        await advance(clock, 40_000);
      },
      { clock },
    );
    // The process comes back 30 s later: 30 s of w's 100 s wait are left.
    clock.increment(30_000);
    const store = openStore({ path });
    const model = scriptedModel(
      {
        agents: {
          w: [{ tool: 'wait_for_agents', args: { reason: 'again', timeout_seconds: 100 } }],
          busy: [{ delayMs: 1_000_000, tool: 'agent_finish', args: { summary: 'done' } }],
        },
      },
      { clock },
    );
    const c = await resumeCoordinator({ store, model, clock });
    const w = store.listAgents(runId).find((a) => a.name === 'w')!;
    await advance(clock, 29_000);
    expect(c.get(w.id).status).toBe('waiting');
    expect(model.calls.filter((x) => x.agentName === 'w')).toHaveLength(0);
    await advance(clock, 1_000);
    expect(model.calls.filter((x) => x.agentName === 'w').map((x) => x.at)).toEqual([100_000]);
    expect(c.get(w.id).status).toBe('waiting');
    await c.shutdown();
    store.close();
  });

  it('a restart in the middle of a turn’s retries continues the count and the backoff: maxRetries is per turn, not per process', async () => {
    const path = dbPath();
    const clock = new SimulatedClock();
    const retry = { maxRetries: 3, baseDelayMs: 1_000, maxDelayMs: 60_000 };
    const unavailable = { error: { code: 'PROVIDER_UNAVAILABLE', status: 503 } } as const;
    // Two failed calls (retries 1 and 2, after 1 s and 2 s), then a call that hangs until the crash.
    const firstModel = scriptedModel({ agents: { lead: [unavailable, unavailable, { delayMs: 600_000, ...finish }] } }, { clock });
    const first = openStore({ path });
    const c1 = createCoordinator({ model: firstModel, store: first, clock, retry });
    const rootId = await c1.start({ name: 'lead', task: 'the task' });
    await advance(clock, 3_000);
    expect(firstModel.calls.map((x) => x.at)).toEqual([0, 1_000, 3_000]);
    expect(first.getAgent(rootId)?.attempts).toEqual({ turn: 1, retries: 2, compactions: 0, imageStrips: 0, retryAt: 3_000 });
    await c1.shutdown();
    first.close();

    // The provider is still down after the restart: one retry is left (after 4 s, the third
    // backoff step), then the agent fails. A count reset by the restart would retry three more times.
    const second = openStore({ path });
    const model = scriptedModel({ agents: { lead: [unavailable, unavailable] } }, { clock });
    const c = await resumeCoordinator({ store: second, model, clock, retry });
    const resumedAt = clock.now();
    await advance(clock, 10_000);
    const root = await c.waitFor(rootId, [...TERMINAL]);
    expect(root.status).toBe('failed');
    expect(root.error).toMatchObject({ code: 'PROVIDER_UNAVAILABLE', message: expect.stringContaining('(after 3 retries)') });
    expect(model.calls.map((x) => x.at - resumedAt)).toEqual([0, 4_000]);
    model.assertComplete();
    await c.shutdown();
    second.close();
  });

  it('a restart inside a retry’s backoff waits for the rest of it: the provider is not asked sooner than it would have been', async () => {
    const path = dbPath();
    const clock = new SimulatedClock();
    const retry = { maxRetries: 3, baseDelayMs: 10_000, maxDelayMs: 60_000 };
    const firstModel = scriptedModel({ agents: { lead: [{ error: { code: 'PROVIDER_UNAVAILABLE', status: 503 } }] } }, { clock });
    const first = openStore({ path });
    const c1 = createCoordinator({ model: firstModel, store: first, clock, retry });
    const rootId = await c1.start({ name: 'lead', task: 'the task' });
    await advance(clock, 3_000);
    expect(first.getAgent(rootId)?.attempts).toMatchObject({ retries: 1, retryAt: 10_000 });
    await c1.shutdown();
    first.close();

    const second = openStore({ path });
    const model = scriptedModel({ agents: { lead: [finish] } }, { clock });
    const c = await resumeCoordinator({ store: second, model, clock, retry });
    await advance(clock, 10_000);
    expect(await c.waitFor(rootId, [...TERMINAL])).toMatchObject({ status: 'completed' });
    expect(model.calls.map((x) => x.at)).toEqual([10_000]);
    await c.shutdown();
    second.close();
  });

  it('a respawn that fails (a damaged session) marks the agent crashed and tells its parent', async () => {
    const path = dbPath();
    const { rootId, runId, clock } = await crashAfter(
      openStore({ path }),
      {
        agents: {
          lead: [
            { tool: 'spawn_agent', args: { name: 'eve', task: 'UNIQUE-TASK-TEXT' } },
            { tool: 'wait_for_agents', args: { reason: 'eve' } },
          ],
          eve: [{ delayMs: 60_000, text: 'never' }],
        },
      },
      async (c) => {
        await c.waitFor(rootId0(c), ['waiting']);
      },
    );
    const bytes = readFileSync(path);
    const at = bytes.indexOf('You are agent eve'); // eve's first session item, and only there
    expect(at).toBeGreaterThan(0);
    bytes[at] = bytes[at]! ^ 0x01;
    writeFileSync(path, bytes);
    // By default the damaged file is refused at open, untouched; without that check the damage
    // is found when eve's session is read, and only eve goes down.
    expect(() => openStore({ path })).toThrow(expect.objectContaining({ code: 'STORE_CORRUPT' }));
    const store = openStore({ path, verify: false });
    const model = scriptedModel({ agents: { lead: [finish] } }, { clock });
    const c = await resumeCoordinator({ store, model, clock });
    const root = await c.waitFor(rootId, [...TERMINAL]);
    expect(root.status).toBe('completed');
    const eve = c.list().find((a) => a.name === 'eve')!;
    expect(eve).toMatchObject({ status: 'crashed', error: { code: 'STORE_CORRUPT' } });
    expect(kinds(store, runId, rootId)).toEqual(['eve:crashed']);
    await c.shutdown();
    store.close();
  });

  it('the recovery transaction is idempotent and recomputes budget flags from the ledger', async () => {
    const path = dbPath();
    const store = openStore({ path });
    const clock = new SimulatedClock();
    const c = createCoordinator({
      model: scriptedModel(
        {
          agents: {
            lead: [
              { tool: 'view_agent_graph', args: {}, usage: { costUsd: 6 } },
              { delayMs: 60_000, ...finish },
            ],
          },
        },
        { clock },
      ),
      store,
      clock,
      budget: { limitUsd: 10 },
    });
    await c.start({ name: 'lead', task: 'x' });
    await flush();
    await c.shutdown();
    // A stale row claims the budget was stopped; the ledger says $6 of $10. The reserve trip is
    // kept (it can trip below the line, at admission), the budget stop follows the ledger.
    store.updateRun(c.runId, { budget: { ...store.getRun(c.runId)!.budget, budgetStopped: true, reserveStopped: true } });
    const once = await recoverRun(store, undefined, { budget: { limitUsd: 10 } });
    expect(once.budget).toMatchObject({ budgetStopped: false, reserveStopped: true });
    const dump = () => JSON.stringify([store.listRuns(), store.listAgents(c.runId), store.listMessages(c.runId)]);
    const after1 = dump();
    await recoverRun(store, undefined, { budget: { limitUsd: 10 } });
    expect(dump()).toBe(after1);
    // A new limit is a new budget: the trip is recomputed from the ledger ($6 < 0.9 × $20)…
    expect((await recoverRun(store, c.runId, { budget: { limitUsd: 20 } })).budget).toMatchObject({ reserveStopped: false, budgetStopped: false });
    // …and with a lower limit the same ledger trips the reserve ($6 ≥ 0.9 × $6.5).
    expect((await recoverRun(store, c.runId, { budget: { limitUsd: 6.5 } })).budget).toMatchObject({ reserveStopped: true, budgetStopped: false });
    store.close();
  });

  it('a reserve tripped at admission (below the line) survives a restart: no new child, no second notice', async () => {
    const path = dbPath();
    const clock = new SimulatedClock();
    const spawn = (name: string) => ({ tool: 'spawn_agent', args: { name, task: `work as ${name}` } });
    const wait = { tool: 'wait_for_agents', args: { reason: 'children' } };
    // $1 spent of $10: a's first call reserves $9, which does not fit under the $9 line with
    // nothing in flight, so the reserve trips at admission with 10 % of the budget spent.
    const first = scriptedModel(
      {
        agents: {
          lead: [{ ...spawn('a'), usage: { costUsd: 1 } }, wait, { delayMs: 60_000, tool: 'view_agent_graph', args: {} }],
          a: [{ tool: 'agent_finish', args: { summary: 'x' }, reserveUsd: 9 }],
        },
      },
      { clock },
    );
    const c = createCoordinator({ model: first, store: openStore({ path }), clock, budget: { limitUsd: 10 } });
    const rootId = await c.start({ name: 'lead', task: 'x' });
    await advance(clock, 2_000);
    expect(c.list().find((a) => a.name === 'a')).toMatchObject({ status: 'stopped', stopReason: 'reserve' });
    expect(c.budget()).toMatchObject({ reserveStopped: true, spentUsd: 1 });
    await c.shutdown();
    c.store.close();

    const store = openStore({ path });
    const again = await resumeCoordinator({ store, clock, model: scriptedModel({ agents: { lead: [spawn('b'), finish] } }, { clock }) });
    expect(again.budget()).toMatchObject({ reserveStopped: true });
    await again.waitFor(rootId, TERMINAL);
    const results = store
      .loadSession(rootId)
      .filter((i) => i.role === 'tool')
      .map((i) => JSON.parse((i as { content: string }).content) as { error?: { code: string } });
    expect(results.at(-2)?.error?.code).toBe('BUDGET_RESERVE_REACHED');
    expect(
      again
        .list()
        .map((a) => a.name)
        .sort(),
    ).toEqual(['a', 'lead']);
    expect(store.listMessages(again.runId).filter((m) => m.type === 'budget_reserve_stop')).toHaveLength(1);
    await again.shutdown();
    store.close();
  });

  it('a store with no run gives RUN_NOT_FOUND; a bad store CONFIG_INVALID', async () => {
    const store = openStore({ path: ':memory:' });
    const model = scriptedModel({ agents: {} });
    await expect(resumeCoordinator({ store, model })).rejects.toMatchObject({ code: 'RUN_NOT_FOUND' });
    await expect(resumeCoordinator({ store: {} as never, model })).rejects.toMatchObject({ code: 'CONFIG_INVALID' });
    store.close();
  });
});

/** The root of a coordinator that started exactly one root. */
function rootId0(c: Coordinator): string {
  return c.list().find((a) => a.parentId === null)!.id;
}
