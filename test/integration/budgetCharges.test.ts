/**
 * A budget counts every call (issue 31, items 6 and 7). A response with no `usage` was charged $0,
 * so a budget never stopped it (41 calls under a $0.20 limit, $0 spent): it is now charged at its
 * reservation, else the estimate of its request, as invalid usage is, and said once in the log and
 * the events. A model troupe has no price for counted $0 without a word: a limit with such a model
 * is refused up front (CONFIG_INVALID naming the model and `budget.prices`), unless the model
 * prices its own calls (`estimateCostUsd` and `usage.costUsd`, as the scripted model does).
 */
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { ProviderError } from '../../src/errors.js';
import { createCoordinator } from '../../src/host/createCoordinator.js';
import { resumeCoordinator } from '../../src/host/resumeCoordinator.js';
import { createLogger } from '../../src/logging/createLogger.js';
import { openaiModel } from '../../src/model/openaiModel.js';
import { scriptedModel } from '../../src/model/scriptedModel.js';
import type { Model, ModelTurn } from '../../src/model/types.js';
import { memoryStore } from '../../src/store/memoryStore.js';
import type { Store } from '../../src/store/types.js';
import type { FakeReply } from '../../src/testing/fakeOpenAIServer.js';
import { openaiTeam } from '../helpers/provider.js';
import { team, TERMINAL } from '../helpers/team.js';

const PRICE = { inputPer1M: 2, outputPer1M: 8 };
const NO_USAGE_LOG = 'the model reported no usage for a call: such calls are charged at their estimate';
const UNPRICED_LOG = 'no price for this model and its usage carries no costUsd: such calls are charged at their estimate (set budget.prices)';

/** A pino logger at warn whose lines the test can read. */
function capture() {
  const lines: { msg: string; reason?: string; chargedUsd?: number }[] = [];
  const logger = createLogger({ level: 'warn' }, new Writable({ write: (c, _e, cb) => (lines.push(JSON.parse(String(c))), cb()) }));
  return { logger, lines };
}

const estimatedEvents = (store: Store, runId: string) => store.listEvents(runId).filter((e) => e.type === 'budget.usageEstimated');

/** A wire answer that calls `name` and reports no usage at all. */
const noUsage = (name: string, args: Record<string, unknown> = {}): FakeReply => ({ message: { toolCalls: [{ name, arguments: args }] }, usage: null });

describe('a call whose response has no usage is charged at its estimate (item 6)', () => {
  it.each([false, true])('the budget stops a model that never reports usage (stream: %s)', async (stream) => {
    const { logger, lines } = capture();
    const t = await openaiTeam(
      { lead: Array.from({ length: 40 }, () => noUsage('view_agent_graph')) },
      { model: { stream, price: PRICE, maxOutputTokens: 1_000 }, coordinator: { logger, budget: { limitUsd: 0.05 } } },
    );
    await using _ = t;
    const rootId = await t.c.start({ name: 'lead', task: 'Look around.' });
    const root = await t.c.waitFor(rootId, TERMINAL);
    expect(root).toMatchObject({ status: 'stopped', stopReason: 'budget' });
    const rows = t.store.listUsage(t.c.runId);
    // Each call costs about $0.0085 (its prompt at one token per 3 characters, 1,000 output tokens at $8/1M).
    expect(rows.length).toBeGreaterThanOrEqual(4);
    expect(rows.length).toBeLessThanOrEqual(6);
    expect(t.server.requests).toHaveLength(rows.length);
    for (const row of rows) expect(row.costUsd).toBeGreaterThan(0.008);
    const budget = t.c.budget();
    expect(budget.spentUsd).toBeCloseTo(
      rows.reduce((sum, r) => sum + r.costUsd, 0),
      12,
    );
    expect(budget.spentUsd).toBeLessThanOrEqual(0.05);
    expect(budget).toMatchObject({ budgetStopped: true, reservedUsd: 0 });
    // Said once for the run, not once per call.
    expect(estimatedEvents(t.store, t.c.runId)).toEqual([
      expect.objectContaining({ agentId: rootId, data: { model: 'fake-model', reason: 'noUsage', purpose: 'main', chargedUsd: rows[0]!.costUsd } }),
    ]);
    expect(lines.filter((l) => l.msg === NO_USAGE_LOG)).toHaveLength(1);
  });

  it('with no limit set (nothing reserved) it is charged the estimate of its request, as invalid usage is', async () => {
    const finishing = (limitUsd?: number) => async () => {
      const t = await openaiTeam(
        { lead: [noUsage('finish', { summary: 'done' })] },
        { model: { price: PRICE, maxOutputTokens: 1_000 }, coordinator: limitUsd === undefined ? {} : { budget: { limitUsd } } },
      );
      await using _ = t;
      const reserved = t.nextRequest().then(() => t.c.budget().reservedUsd);
      const rootId = await t.c.start({ name: 'lead', task: 'Finish.' });
      expect((await t.c.waitFor(rootId, TERMINAL)).status).toBe('completed');
      return { reservedUsd: await reserved, spentUsd: t.c.budget().spentUsd, events: estimatedEvents(t.store, t.c.runId) };
    };
    const limited = await finishing(5)();
    const unlimited = await finishing()();
    expect(limited.reservedUsd).toBeGreaterThan(0);
    expect(limited.spentUsd).toBe(limited.reservedUsd);
    expect(unlimited.reservedUsd).toBe(0);
    expect(unlimited.spentUsd).toBe(limited.reservedUsd);
    expect(unlimited.events).toHaveLength(1);
  });

  it('a custom model that never reports usage: main calls at their reservation, a compaction (never reserved) at its estimate', async () => {
    const { logger, lines } = capture();
    let calls = 0;
    const model: Model = {
      name: 'custom',
      price: PRICE,
      estimateCostUsd: (r) => (r.purpose === 'compaction' ? 0.125 : 0.25),
      async complete(request) {
        calls++;
        if (request.purpose === 'compaction') return { text: 'summary', toolCalls: [] };
        if (calls <= 3) return { text: null, toolCalls: [{ id: `g${calls}`, name: 'view_agent_graph', arguments: '{}' }] };
        if (calls === 4) throw new ProviderError('PROVIDER_CONTEXT_OVERFLOW', 'too long');
        // `usage: {}` says nothing either.
        return { text: null, toolCalls: [{ id: 'f', name: 'finish', arguments: '{"summary":"done"}' }], usage: {} };
      },
    };
    const store = memoryStore();
    const c = createCoordinator({ model, store, clock: new SimulatedClock(), logger, budget: { limitUsd: 5 } });
    const rootId = await c.start({ name: 'lead', task: 'Finish.' });
    expect((await c.waitFor(rootId, TERMINAL)).status).toBe('completed');
    await c.shutdown();
    expect(c.get(rootId).spentByPurpose).toEqual({ main: 4 * 0.25, compaction: 0.125 });
    expect(c.budget().spentUsd).toBeCloseTo(4 * 0.25 + 0.125, 12);
    expect(estimatedEvents(store, c.runId)).toHaveLength(1);
    expect(lines.filter((l) => l.msg === NO_USAGE_LOG)).toHaveLength(1);
  });

  it('tokens with no costUsd from a model that has no price are charged at its estimate (their tokens kept)', async () => {
    const { logger, lines } = capture();
    const model: Model = {
      name: 'my-finetune',
      estimateCostUsd: () => 0.25,
      complete: async () =>
        ({
          text: null,
          toolCalls: [{ id: 'f', name: 'finish', arguments: '{"summary":"done"}' }],
          usage: { inputTokens: 2_000_000, outputTokens: 100 },
        }) as ModelTurn,
    };
    const store = memoryStore();
    const c = createCoordinator({ model, store, clock: new SimulatedClock(), logger, budget: { limitUsd: 5 } });
    const rootId = await c.start({ name: 'lead', task: 'Finish.' });
    expect((await c.waitFor(rootId, TERMINAL)).status).toBe('completed');
    await c.shutdown();
    expect(c.budget().spentUsd).toBe(0.25);
    expect(store.listUsage(c.runId)).toEqual([expect.objectContaining({ costUsd: 0.25, inputTokens: 2_000_000, outputTokens: 100 })]);
    expect(estimatedEvents(store, c.runId)).toEqual([expect.objectContaining({ data: expect.objectContaining({ reason: 'unpriced', model: 'my-finetune' }) })]);
    expect(lines.filter((l) => l.msg === UNPRICED_LOG)).toHaveLength(1);
  });

  it('the scripted model (steps without usage cost $0): no charge; with no limit nothing is said, with a limit it is said once', async () => {
    const steps = {
      agents: {
        lead: [
          { tool: 'view_agent_graph', args: {} },
          { tool: 'view_agent_graph', args: {} },
          { tool: 'finish', args: { summary: 'done' } },
        ],
      },
    };
    const free = team(steps);
    await free.c.waitFor(await free.c.start({ name: 'lead', task: 'x' }), TERMINAL);
    expect(free.c.budget().spentUsd).toBe(0);
    expect(estimatedEvents(free.store, free.c.runId)).toEqual([]);
    await free.c.shutdown();

    const limited = team(steps, { budget: { limitUsd: 1 } });
    await limited.c.waitFor(await limited.c.start({ name: 'lead', task: 'x' }), TERMINAL);
    expect(limited.c.budget().spentUsd).toBe(0);
    expect(estimatedEvents(limited.store, limited.c.runId)).toEqual([
      expect.objectContaining({ data: expect.objectContaining({ reason: 'noUsage', chargedUsd: 0 }) }),
    ]);
    await limited.c.shutdown();
  });

  it('under a limit, a call admitted on an estimate of $0 is charged that estimate, not a second one', async () => {
    let estimates = 0;
    const model: Model = {
      name: 'custom',
      estimateCostUsd: () => (estimates++ === 0 ? 0 : 1),
      complete: async () => ({ text: null, toolCalls: [{ id: 'f', name: 'finish', arguments: '{"summary":"done"}' }] }),
    };
    const c = createCoordinator({ model, clock: new SimulatedClock(), budget: { limitUsd: 5 } });
    expect((await c.waitFor(await c.start({ name: 'lead', task: 'x' }), TERMINAL)).status).toBe('completed');
    await c.shutdown();
    expect(estimates).toBe(1);
    expect(c.budget().spentUsd).toBe(0);
  });

  it("a scripted step without usage is charged its own reserveUsd, never the next step's cost (no limit)", async () => {
    const t = team({
      agents: {
        lead: [
          { tool: 'view_agent_graph', args: {} },
          { tool: 'finish', args: { summary: 'done' }, usage: { costUsd: 1 } },
        ],
      },
    });
    await t.c.waitFor(await t.c.start({ name: 'lead', task: 'x' }), TERMINAL);
    expect(t.store.listUsage(t.c.runId).map((r) => r.costUsd)).toEqual([0, 1]);
    await t.c.shutdown();
  });
});

/** An OpenAI-compatible model troupe has no price for (nothing is called: the coordinator is refused first). */
const local = (price?: { inputPer1M: number; outputPer1M: number }) =>
  openaiModel({ model: 'qwen2.5:7b', baseURL: 'http://127.0.0.1:9/v1', apiKey: 'unused-key', ...(price ? { price } : {}) });
const UNPRICED = expect.objectContaining({ code: 'CONFIG_INVALID', message: expect.stringMatching(/no price for the model "qwen2\.5:7b".*budget\.prices/) });

describe('a budget needs a price (item 7)', () => {
  it('createCoordinator refuses a limit with a model troupe cannot price, naming the model and the prices option', () => {
    expect(() => createCoordinator({ model: local(), budget: { limitUsd: 5 } })).toThrow(UNPRICED);
    const custom: Model = { name: 'local', complete: async () => ({ text: 'x', toolCalls: [] }) };
    expect(() => createCoordinator({ model: custom, budget: { limitUsd: 5 } })).toThrow(
      expect.objectContaining({ code: 'CONFIG_INVALID', details: { field: 'budget.prices', model: 'local' } }),
    );
  });

  it.each<[string, () => Parameters<typeof createCoordinator>[0]]>([
    ['a price in budget.prices', () => ({ model: local(), budget: { limitUsd: 5, prices: { 'qwen2.5:7b': { inputPer1M: 0, outputPer1M: 0 } } } })],
    [
      'a price in budget.prices for the name without its dated suffix',
      () => ({ model: openaiModel({ model: 'my-model-2025-01-01', apiKey: 'unused-key' }), budget: { limitUsd: 5, prices: { 'my-model': PRICE } } }),
    ],
    ["the model's own price", () => ({ model: local(PRICE), budget: { limitUsd: 5 } })],
    ['a model in the built-in table', () => ({ model: openaiModel({ model: 'gpt-4.1-mini-2025-04-14', apiKey: 'unused-key' }), budget: { limitUsd: 5 } })],
    ['a model that prices its own calls (estimateCostUsd): the scripted model', () => ({ model: scriptedModel({ agents: {} }), budget: { limitUsd: 5 } })],
    ['no limit', () => ({ model: local(), budget: { policy: 'pause' } })],
  ])('accepted: %s', async (_name, options) => {
    const c = createCoordinator(options());
    await c.shutdown();
  });

  it("resumeCoordinator refuses a limit the model cannot price before it writes anything; keeping the run's limit is not refused", async () => {
    const store = memoryStore();
    const t = team({ agents: { lead: [{ tool: 'finish', args: { summary: 'done' }, usage: { costUsd: 0.5 } }] } }, { store, budget: { limitUsd: 5 } });
    await t.c.waitFor(await t.c.start({ name: 'lead', task: 'x' }), TERMINAL);
    await t.c.shutdown();
    const before = { run: store.getRun(t.c.runId), events: store.listEvents(t.c.runId).length };
    await expect(resumeCoordinator({ store, model: local(), budget: { limitUsd: 7 } })).rejects.toThrow(UNPRICED);
    // Nothing written: the recovery would have set the new limit.
    expect({ run: store.getRun(t.c.runId), events: store.listEvents(t.c.runId).length }).toEqual(before);
    const priced = await resumeCoordinator({ store, model: local(), budget: { limitUsd: 7, prices: { 'qwen2.5:7b': PRICE } }, clock: new SimulatedClock() });
    expect(priced.budget()).toMatchObject({ limitUsd: 7, spentUsd: 0.5 });
    await priced.shutdown();
    // A resume that keeps the run's limit (as `troupe stop` does, with a model that makes no call).
    const kept = await resumeCoordinator({ store, model: local(), clock: new SimulatedClock() });
    expect(kept.budget()).toMatchObject({ limitUsd: 7 });
    await kept.shutdown();
  });

  it('resumeBudget(limit) on a run with no limit and an unpriced model is refused and changes nothing', async () => {
    const c = createCoordinator({ model: local(), clock: new SimulatedClock() });
    await expect(c.resumeBudget(5)).rejects.toThrow(
      expect.objectContaining({ code: 'CONFIG_INVALID', message: expect.stringMatching(/resumeBudget limitUsd 5.*"qwen2\.5:7b"/) }),
    );
    expect(c.budget().limitUsd).toBeNull();
    await c.shutdown();
  });
});
