/**
 * The budget (DESIGN §3, issue 5): deterministic ledgers through the scripted model — each step
 * says what its call costs — so every threshold is crossed on a known call.
 */
import { describe, expect, it } from 'vitest';
import { resumeCoordinator } from '../../src/host/resumeCoordinator.js';
import { lookupPrice, priceUsage, DEFAULT_PRICES } from '../../src/model/prices.js';
import type { ScriptStep } from '../../src/model/scriptedModel.js';
import { scriptedModel } from '../../src/model/scriptedModel.js';
import { memoryStore } from '../../src/store/memoryStore.js';
import { team, TERMINAL } from '../helpers/team.js';
import { defineTool } from '../../src/tools/defineTool.js';

const paid = (step: ScriptStep, usd: number): ScriptStep => ({ ...step, usage: { costUsd: usd } });
const graph: ScriptStep = { tool: 'view_agent_graph', args: {} };
const finish = (summary = 'done'): ScriptStep => ({ tool: 'finish', args: { summary } });
const report = (summary: string): ScriptStep => ({ tool: 'agent_finish', args: { summary } });
const spawn = (...names: string[]): ScriptStep => ({ tools: names.map((name) => ({ name: 'spawn_agent', args: { name, task: `work as ${name}` } })) });
const wait: ScriptStep = { tool: 'wait_for_agents', args: { reason: 'children' } };
/** A tool that starts the asynchronous execution `job` (its result links it to the agent). */
const provisioning = (job: string) =>
  defineTool({
    name: 'provision',
    description: 'Start provisioning (asynchronous).',
    parameters: { type: 'object' },
    execute: () => ({ status: `execution ${job} running` }),
  });
const lastMessage = (t: ReturnType<typeof team>, i: number) => {
  const content = t.model.calls[i]!.request.messages.at(-1)!.content;
  return typeof content === 'string' ? content : JSON.stringify(content);
};

describe('prices', () => {
  it('prices every usage row from the table, budget.prices overriding it; cached input at its own price', async () => {
    const usage = { inputTokens: 1_000_000, cachedInputTokens: 200_000, outputTokens: 100_000 };
    const model = Object.assign(
      scriptedModel({
        agents: {
          lead: [
            { ...graph, usage },
            { ...finish(), usage },
          ],
        },
      }),
      { name: 'gpt-4.1-mini-2025-04-14' },
    );
    const t = team({ agents: {} }, { model });
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.c.waitFor(rootId, TERMINAL);
    const expected = (800_000 * 0.4 + 200_000 * 0.1 + 100_000 * 1.6) / 1e6;
    expect(t.store.listUsage(t.c.runId).map((u) => u.costUsd)).toEqual([expected, expected]);
    expect(t.c.budget().spentUsd).toBeCloseTo(2 * expected, 12);
    expect(t.c.get(rootId).spentByPurpose).toEqual({ main: 2 * expected });

    const custom = Object.assign(scriptedModel({ agents: { lead: [{ ...finish(), usage }] } }), { name: 'gpt-4.1-mini' });
    const u = team({ agents: {} }, { model: custom, budget: { prices: { 'gpt-4.1-mini': { inputPer1M: 1, outputPer1M: 10 } } } });
    await u.c.waitFor(await u.c.start({ name: 'lead', task: 'x' }), TERMINAL);
    expect(u.store.listUsage(u.c.runId)[0]!.costUsd).toBeCloseTo(1 + 1, 12);
  });

  it('the table matches names exactly or by a dated suffix, never by a shorter unrelated prefix', () => {
    expect(lookupPrice(DEFAULT_PRICES, 'gpt-4.1')).toBe(DEFAULT_PRICES['gpt-4.1']);
    expect(lookupPrice(DEFAULT_PRICES, 'gpt-4.1-mini-2025-04-14')).toBe(DEFAULT_PRICES['gpt-4.1-mini']);
    expect(lookupPrice(DEFAULT_PRICES, 'gpt-4.1x')).toBeUndefined();
    // Cached tokens are part of the input tokens: more cached than input is clamped.
    expect(priceUsage({ inputTokens: 10, cachedInputTokens: 50 }, { inputPer1M: 1e6, cachedInputPer1M: 5e5, outputPer1M: 0 })).toBe(5);
  });

  it('rejects invalid prices and limits with CONFIG_INVALID', () => {
    expect(() => team({ agents: {} }, { budget: { prices: { m: { inputPer1M: -1, outputPer1M: 1 } } } })).toThrow(/budget.prices\["m"\].inputPer1M/);
    expect(() => team({ agents: {} }, { budget: { limitUsd: Number.POSITIVE_INFINITY } })).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID' }));
  });

  it('an auxiliary compaction call is deducted (purpose compaction) even past the reserve line', async () => {
    const t = team(
      {
        agents: {
          lead: [
            paid(graph, 1),
            paid(graph, 1),
            { error: { code: 'PROVIDER_CONTEXT_OVERFLOW', status: 400 } },
            paid({ text: 'summary of the work so far' }, 0.5),
            paid(finish(), 1),
          ],
        },
      },
      { budget: { limitUsd: 10 } },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    expect((await t.c.waitFor(rootId, TERMINAL)).status).toBe('completed');
    expect(t.c.get(rootId).spentByPurpose).toEqual({ main: 3, compaction: 0.5 });
    expect(t.model.calls[3]!.request.purpose).toBe('compaction');
  });

  it('a compaction does not start once the limit was lowered below what is spent: the turn stops for the budget', async () => {
    const t = team(
      {
        agents: {
          lead: [
            paid(graph, 0.5),
            // The call is in flight while the operator lowers the limit; it comes back too long.
            { error: { code: 'PROVIDER_CONTEXT_OVERFLOW', status: 400 }, delayMs: 1_000 },
            paid({ text: 'summary of the work so far' }, 0.2),
            paid(finish(), 0.1),
          ],
        },
      },
      { budget: { limitUsd: 5 } },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.advance(10, 10);
    expect(t.model.calls).toHaveLength(2);
    await t.c.resumeBudget(0.3);
    await t.advance(2_000);
    const root = await t.c.waitFor(rootId, TERMINAL);
    expect(root).toMatchObject({ status: 'stopped', stopReason: 'budget' });
    expect(t.model.calls.map((c) => c.request.purpose ?? 'main')).toEqual(['main', 'main']);
    expect(t.c.budget()).toMatchObject({ spentUsd: 0.5, budgetStopped: true });
  });
});

describe('stop policy', () => {
  it('warnings at 70/85/95 % go into that call’s input only, never into the session', async () => {
    const t = team(
      { agents: { lead: [paid(graph, 3.5), paid(graph, 3.5), paid(graph, 1.5), paid(graph, 1), finish()] } },
      { budget: { limitUsd: 10, reserveFraction: 1 } },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.c.waitFor(rootId, TERMINAL);
    // Spent before each call: 0, 3.5, 7 (70 %), 8.5 (85 %), 9.5 (95 %).
    expect([0, 1].map((i) => lastMessage(t, i))).not.toContainEqual(expect.stringContaining('[BUDGET'));
    expect(lastMessage(t, 2)).toContain('[BUDGET NOTICE] $7.00 of $10.00 spent (70%)');
    expect(lastMessage(t, 3)).toContain('[BUDGET URGENT]');
    expect(lastMessage(t, 4)).toContain('[BUDGET CRITICAL]');
    expect(lastMessage(t, 4)).toContain('call finish now');
    expect(JSON.stringify(t.session(rootId))).not.toContain('[BUDGET');
  });

  it('children are warned on tighter bands (75 %)', async () => {
    const t = team({ agents: { lead: [paid(spawn('a'), 7.4), wait, finish()], a: [paid(graph, 0.2), report('ok')] } }, { budget: { limitUsd: 10 } });
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.c.waitFor(rootId, TERMINAL);
    const calls = t.model.calls.filter((c) => c.agentName === 'a');
    expect(JSON.stringify(calls[0]!.request.messages)).not.toContain('[BUDGET');
    expect(JSON.stringify(calls[1]!.request.messages.at(-1))).toContain('[BUDGET NOTICE] $7.60 of $10.00 spent (76%)');
  });

  it('the reserve trips once with 12 children racing: every child stops, the root hears once and finishes', async () => {
    const names = Array.from({ length: 12 }, (_, i) => `c${i}`);
    const children = Object.fromEntries(names.map((n) => [n, [paid(graph, 1), paid(graph, 1), paid(report(n), 1)]]));
    const t = team(
      { agents: { lead: [paid(spawn(...names), 1), wait, paid(finish('reserve reached'), 0.5)], ...children } },
      { budget: { limitUsd: 10 }, limits: { maxChildren: 12 } },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    const root = await t.c.waitFor(rootId, TERMINAL);
    expect(root).toMatchObject({ status: 'completed', report: { summary: 'reserve reached' } });
    const reserveNotices = t.messagesTo(rootId).filter((m) => m.type === 'budget_reserve_stop');
    expect(reserveNotices).toHaveLength(1);
    expect(t.c.budget()).toMatchObject({ reserveStopped: true, budgetStopped: false, reservedUsd: 0 });
    // Children together never passed the reserve line; the root kept its share.
    const childSpend = t.store
      .listUsage(t.c.runId)
      .filter((u) => u.agentId !== rootId)
      .reduce((s, u) => s + u.costUsd, 0);
    expect(1 + childSpend).toBeLessThanOrEqual(9);
    expect(t.c.budget().spentUsd).toBeLessThanOrEqual(10);
    for (const name of names) expect(t.byName(name).status).toMatch(/stopped|completed/);
    expect(names.filter((n) => t.byName(n).stopReason === 'reserve').length).toBeGreaterThan(0);
  });

  it('the budget stop releases every waiter: parked agents stop, and coordinator.waitFor resolves', async () => {
    const t = team(
      {
        agents: {
          lead: [paid(spawn('a', 'b'), 1), wait],
          a: [paid(spawn('a1'), 1), wait],
          b: [{ tool: 'wait_for_agents', args: { reason: 'nothing', timeout_seconds: 300 } }],
          // Reserved at $1, settled at $5: the spend crosses the limit and everything stops.
          a1: [paid(graph, 1), { ...paid(graph, 5), reserveUsd: 1 }],
        },
      },
      { budget: { limitUsd: 5, reserveFraction: 1 } },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    const everyone = Promise.all(
      ['lead', 'a', 'b', 'a1'].map(async (name) => {
        while (!t.c.list().some((x) => x.name === name)) await t.advance(1, 1);
        return t.c.waitFor(t.byName(name).id, TERMINAL);
      }),
    );
    const done = await everyone;
    expect(done.map((x) => [x.name, x.status, x.stopReason])).toEqual([
      ['lead', 'stopped', 'budget'],
      ['a', 'stopped', 'budget'],
      ['b', 'stopped', 'budget'],
      ['a1', 'stopped', 'budget'],
    ]);
    expect(t.c.budget()).toMatchObject({ budgetStopped: true, spentUsd: 8, reservedUsd: 0 });
    expect(rootId).toBe(t.byName('lead').id);
  });

  it('a call whose estimate does not fit is never made: reservations keep parallel children under the line', async () => {
    // Each child call reserves $2 but costs $1.5: four children race for $9 of reserve headroom.
    const step = (s: ScriptStep): ScriptStep => ({ ...paid(s, 1.5), reserveUsd: 2 });
    const names = ['p', 'q', 'r', 's'];
    const children = Object.fromEntries(names.map((n) => [n, [step(graph), step(graph), step(report(n))]]));
    const t = team({ agents: { lead: [paid(spawn(...names), 1), wait, paid(finish(), 0.5)], ...children } }, { budget: { limitUsd: 10 } });
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.c.waitFor(rootId, TERMINAL);
    const spentByChildren = t.store
      .listUsage(t.c.runId)
      .filter((u) => u.agentId !== rootId)
      .reduce((sum, u) => sum + u.costUsd, 0);
    expect(1 + spentByChildren).toBeLessThanOrEqual(9);
    expect(t.c.get(rootId).status).toBe('completed');
  });
});

describe('pause policy', () => {
  const pausing = () =>
    team(
      {
        agents: {
          lead: [paid(spawn('a', 'b'), 1), wait, wait, paid(finish('all reported'), 1)],
          a: [paid(graph, 1), paid(graph, 1), paid(graph, 1), paid(report('a'), 1)],
          b: [paid(graph, 1), paid(graph, 1), paid(graph, 1), paid(report('b'), 1)],
        },
      },
      { budget: { limitUsd: 3, policy: 'pause' }, concurrency: { model: 1 } },
    );

  it('parks at the limit, resumes with a higher limit, parks again; the model is never told', async () => {
    const t = pausing();
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.advance(10, 10);
    const a = t.byName('a').id;
    const b = t.byName('b').id;
    expect([t.c.get(a).status, t.c.get(b).status]).toEqual(['budgetPaused', 'budgetPaused']);
    expect(t.c.budget()).toMatchObject({ spentUsd: 3, limitUsd: 3, policy: 'pause' });
    const callsBefore = t.model.calls.length;

    expect((await t.c.resumeBudget(5)).sort()).toEqual([a, b].sort());
    await t.advance(10, 10);
    expect(t.c.budget()).toMatchObject({ spentUsd: 5, limitUsd: 5 });
    expect(t.model.calls.length).toBe(callsBefore + 2);
    expect([t.c.get(a).status, t.c.get(b).status]).toEqual(['budgetPaused', 'budgetPaused']);

    await t.c.resumeBudget(100);
    expect((await t.c.waitFor(rootId, TERMINAL)).status).toBe('completed');
    expect(t.model.calls.some((c) => JSON.stringify(c.request.messages).includes('[BUDGET'))).toBe(false);
    t.model.assertComplete();
  });

  it('stopping a parked agent releases only it', async () => {
    const t = pausing();
    await t.c.start({ name: 'lead', task: 'x' });
    await t.advance(10, 10);
    const a = t.byName('a').id;
    expect(await t.c.stop(a)).toEqual([a]);
    expect(t.c.get(a).status).toBe('stopped');
    expect(t.byName('b').status).toBe('budgetPaused');
  });

  it('an invalid new limit raises CONFIG_INVALID and changes nothing', async () => {
    const t = pausing();
    await t.c.start({ name: 'lead', task: 'x' });
    await t.advance(10, 10);
    for (const bad of [0, -1, Number.NaN, Number.POSITIVE_INFINITY, '5' as unknown as number]) {
      await expect(t.c.resumeBudget(bad)).rejects.toMatchObject({ code: 'CONFIG_INVALID' });
    }
    expect(t.c.budget()).toMatchObject({ limitUsd: 3 });
    expect(t.byName('a').status).toBe('budgetPaused');
  });

  it('an operator pause parks agents before their next call; calls in flight finish; resume continues', async () => {
    const t = team(
      { agents: { lead: [paid(graph, 1), { ...paid(graph, 1), delayMs: 1_000 }, paid(graph, 1), paid(finish(), 1)] } },
      { budget: { limitUsd: 100, policy: 'pause' } },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.advance(10, 10);
    await t.c.pauseBudget();
    expect(t.c.budget().paused).toBe(true);
    await t.advance(1_000, 100);
    expect(t.c.get(rootId).status).toBe('budgetPaused');
    expect(t.model.calls).toHaveLength(2);
    expect(t.c.budget().spentUsd).toBe(2);
    await t.c.resumeBudget();
    expect((await t.c.waitFor(rootId, TERMINAL)).status).toBe('completed');
    expect(t.c.budget()).toMatchObject({ paused: false, spentUsd: 4 });
  });

  it("an execution that finishes while its agent is budget-paused is in the agent's first call once the budget resumes", async () => {
    const JOB = '019f4b19-eafd-74ed-baa6-000000000042';
    const provision = provisioning(JOB);
    const t = team(
      { agents: { lead: [{ ...paid({ tool: 'provision', args: {} }, 1), delayMs: 1_000 }, paid(graph, 1), paid(finish(), 1)] } },
      { tools: [provision], budget: { limitUsd: 100, policy: 'pause' } },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.advance(10, 10);
    await t.c.pauseBudget();
    await t.advance(1_000, 100);
    expect(t.c.get(rootId).status).toBe('budgetPaused');
    expect(await t.c.executions.finish(JOB, { status: 'completed', result: 'container 7 up' })).toBe(true);
    await t.advance(60_000, 10_000);
    expect(t.model.calls).toHaveLength(1);
    await t.c.resumeBudget();
    expect((await t.c.waitFor(rootId, TERMINAL)).status).toBe('completed');
    expect(JSON.stringify(t.model.calls[1]!.request.messages)).toContain(`execution ${JOB} completed: container 7 up`);
    expect(t.c.executions.get(JOB)).toMatchObject({ status: 'completed', continuedAt: expect.any(Number) });
  });

  it('an execution that finished while its agent was budget-paused reaches it after a restart too, once the budget resumes', async () => {
    const JOB = '019f4b19-eafd-74ed-baa6-000000000043';
    const provision = provisioning(JOB);
    const store = memoryStore();
    const t = team(
      { agents: { lead: [{ ...paid({ tool: 'provision', args: {} }, 1), delayMs: 1_000 }, paid(finish(), 1)] } },
      { store, tools: [provision], budget: { limitUsd: 100, policy: 'pause' } },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.advance(10, 10);
    await t.c.pauseBudget();
    await t.advance(1_000, 100);
    expect(await t.c.executions.finish(JOB, { status: 'completed', result: 'container 8 up' })).toBe(true);
    await t.advance(10, 10);
    await t.c.shutdown();

    const model = scriptedModel({ agents: { lead: [paid(finish(), 1)] } }, { clock: t.clock });
    const again = await resumeCoordinator({ store, model, clock: t.clock, tools: [provision], budget: { policy: 'pause' } });
    expect(again.get(rootId).status).toBe('budgetPaused');
    await again.resumeBudget();
    expect((await again.waitFor(rootId, TERMINAL)).status).toBe('completed');
    expect(JSON.stringify(model.calls[0]!.request.messages)).toContain(`execution ${JOB} completed: container 8 up`);
    await again.shutdown();
  });

  it('after a restart the parked agents stay parked and the raised limit is kept, recomputed from the ledger', async () => {
    const store = memoryStore();
    const t = team(
      { agents: { lead: [paid(graph, 2), paid(graph, 2), paid(graph, 2), paid(finish(), 1)] } },
      { store, budget: { limitUsd: 3, policy: 'pause' } },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.advance(10, 10);
    expect(t.c.get(rootId).status).toBe('budgetPaused');
    await t.c.resumeBudget(5);
    await t.advance(10, 10);
    expect(t.c.get(rootId).status).toBe('budgetPaused');
    await t.c.shutdown();

    const model = scriptedModel({ agents: { lead: [paid(graph, 2), paid(finish(), 1)] } }, { clock: t.clock });
    const again = await resumeCoordinator({ store, model, clock: t.clock, budget: { policy: 'pause' } });
    expect(again.budget()).toMatchObject({ spentUsd: 4, limitUsd: 5, paused: false });
    expect(again.get(rootId).status).toBe('budgetPaused');
    expect(model.calls).toHaveLength(0);
    await again.resumeBudget(10);
    expect((await again.waitFor(rootId, TERMINAL)).status).toBe('completed');
    expect(again.budget().spentUsd).toBe(7);
    await again.shutdown();
  });
});
