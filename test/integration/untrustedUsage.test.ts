/**
 * Usage the budget cannot believe (issue 13, item 1): negative, absurd or mistyped token counts
 * and costs, from the wire (openaiModel against the fake server) or from a custom Model, are
 * charged at the call's reserved estimate, logged once per call, and never make the spend go down
 * or become NaN.
 */
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { createCoordinator } from '../../src/host/createCoordinator.js';
import { ProviderError } from '../../src/errors.js';
import { createLogger } from '../../src/logging/createLogger.js';
import type { Model, ModelRequest, ModelTurn } from '../../src/model/types.js';
import { memoryStore } from '../../src/store/memoryStore.js';
import { openaiTeam } from '../helpers/provider.js';
import { TERMINAL } from '../helpers/team.js';
import { completion, rawJson, rawSse, sse, chunk, usageChunk, wireCall, wireUsage } from '../helpers/wire.js';

const PRICE = { inputPer1M: 2, outputPer1M: 8 };
const INVALID_USAGE_LOG = 'the model reported usage that cannot be believed; the call is charged at its estimate';

/** A pino logger at warn whose lines the test can read. */
function capture() {
  const lines: { msg: string; reason?: string; chargedUsd?: number; estimate?: unknown }[] = [];
  const logger = createLogger({ level: 'warn' }, new Writable({ write: (c, _e, cb) => (lines.push(JSON.parse(String(c))), cb()) }));
  return { logger, lines, invalid: () => lines.filter((l) => l.msg === INVALID_USAGE_LOG) };
}

/** The root's only answer: finish, with `usage` as the server sends it (JSON or SSE). */
function finishWith(usage: unknown, stream: boolean) {
  const call = wireCall('finish', { summary: 'done' });
  if (!stream) return rawJson(completion({ tool_calls: [call] }, { usage }));
  return rawSse(sse([chunk({ role: 'assistant', tool_calls: [{ index: 0, ...call }] }), chunk({}, 'tool_calls'), usageChunk(usage)]));
}

const BAD_WIRE_USAGE: [string, unknown][] = [
  ['prompt and completion tokens of -1e9', wireUsage(-1e9, -1e9)],
  ['token counts as strings', wireUsage('12', '3')],
  ['1e300 tokens', wireUsage(1e300, 1e300)],
  ['more tokens than the bound (10^9 + 1)', wireUsage(1e9 + 1, 0)],
  ['fractional tokens', wireUsage(1.5, 2)],
  ['more cached than input tokens', wireUsage(10, 5, 20)],
  ['a missing completion count', { prompt_tokens: 10 }],
  ['usage that is not an object', 'lots'],
  ['cached tokens as an object', wireUsage(10, 5, { n: 1 })],
];

/** One run of a root that finishes at once; what it spent, what was reserved, what was logged. */
async function runOnce(usage: unknown, stream: boolean, limitUsd?: number) {
  const { logger, lines, invalid } = capture();
  const t = await openaiTeam(
    { lead: [finishWith(usage, stream)] },
    { model: { stream, price: PRICE, maxOutputTokens: 1_000 }, coordinator: { logger, ...(limitUsd === undefined ? {} : { budget: { limitUsd } }) } },
  );
  await using _ = t;
  const arrived = t.nextRequest().then(() => t.c.budget().reservedUsd);
  const rootId = await t.c.start({ name: 'lead', task: 'Finish.' });
  const reservedUsd = await arrived;
  const root = await t.c.waitFor(rootId, TERMINAL);
  return { root, budget: t.c.budget(), rows: t.store.listUsage(t.c.runId), reservedUsd, lines, invalid: invalid() };
}

describe.each([false, true])('invalid usage from the wire (stream: %s)', (stream) => {
  it.each(BAD_WIRE_USAGE)('%s: the call is charged at its reservation, logged once, and the run goes on', async (_name, usage) => {
    const run = await runOnce(usage, stream, 5);
    expect(run.root.status).toBe('completed');
    expect(run.reservedUsd).toBeGreaterThan(0);
    expect(run.budget.spentUsd).toBe(run.reservedUsd);
    expect(run.budget.reservedUsd).toBe(0);
    expect(run.rows).toEqual([expect.objectContaining({ purpose: 'main', costUsd: run.reservedUsd, inputTokens: 0, outputTokens: 0, cachedInputTokens: 0 })]);
    expect(run.invalid).toHaveLength(1);
    expect(run.invalid[0]).toMatchObject({ chargedUsd: run.reservedUsd, reason: expect.any(String) });
  });

  it('with no limit set (nothing reserved) invalid usage is charged at the estimate it would have reserved', async () => {
    const limited = await runOnce(wireUsage(-1e9, -1e9), stream, 5);
    const unlimited = await runOnce(wireUsage(-1e9, -1e9), stream);
    expect(unlimited.reservedUsd).toBe(0);
    expect(unlimited.budget.spentUsd).toBe(limited.reservedUsd);
    expect(unlimited.invalid).toHaveLength(1);
  });

  it('valid usage up to the bound (10^9 tokens) is believed as reported', async () => {
    const run = await runOnce(wireUsage(1e9, 0, 1e9), stream);
    // All input cached, priced at the input price (no cached price set): 10^9 × $2 / 10^6.
    expect(run.budget.spentUsd).toBe(2_000);
    expect(run.rows[0]).toMatchObject({ inputTokens: 1e9, cachedInputTokens: 1e9, outputTokens: 0 });
    expect(run.invalid).toEqual([]);
  });
});

/** A custom model: the root calls `finish`; its usage (and estimate) are whatever the test says. */
function customModel(usage: unknown, estimate: (r: ModelRequest) => unknown = () => 0.25, extra: Partial<ModelTurn> = {}): Model {
  return {
    name: 'custom',
    price: PRICE,
    estimateCostUsd: estimate as (r: ModelRequest) => number,
    complete: async () => ({ text: null, toolCalls: [{ id: 'c1', name: 'finish', arguments: '{"summary":"done"}' }], usage, ...extra }) as ModelTurn,
  };
}

async function runCustom(model: Model, limitUsd: number | undefined = 5) {
  const { logger, lines, invalid } = capture();
  const c = createCoordinator({
    model,
    store: memoryStore(),
    clock: new SimulatedClock(),
    logger,
    ...(limitUsd === undefined ? {} : { budget: { limitUsd } }),
  });
  const rootId = await c.start({ name: 'lead', task: 'Finish.' });
  const root = await c.waitFor(rootId, TERMINAL);
  await c.shutdown();
  return { root, budget: c.budget(), lines, invalid: invalid() };
}

describe('invalid usage from a custom Model is handled by the ledger the same way', () => {
  it.each<[string, unknown]>([
    ['negative input tokens', { inputTokens: -1e9, outputTokens: -1e9 }],
    ['token counts as strings', { inputTokens: '12', outputTokens: '3' }],
    ['1e300 tokens', { inputTokens: 1e300 }],
    ['NaN tokens', { outputTokens: Number.NaN }],
    ['more cached than input tokens', { inputTokens: 1, cachedInputTokens: 2 }],
    ['a NaN costUsd', { costUsd: Number.NaN }],
    ['a negative costUsd', { costUsd: -5 }],
    ['an infinite costUsd', { costUsd: Number.POSITIVE_INFINITY }],
    ['a costUsd of 1e300', { costUsd: 1e300 }],
    ['a costUsd as a string', { costUsd: '1' }],
    ['usage that is not an object', 42],
  ])('%s: charged at the reservation, logged once', async (_name, usage) => {
    const run = await runCustom(customModel(usage));
    expect(run.root.status).toBe('completed');
    expect(run.budget.spentUsd).toBe(0.25);
    expect(run.invalid).toHaveLength(1);
  });

  it('a model that flags its own usage as invalid (invalidUsage) is charged at its estimate, with no limit too', async () => {
    const run = await runCustom(
      customModel({ costUsd: 99 }, () => 0.25, { invalidUsage: 'the provider lost count' }),
      undefined,
    );
    expect(run.budget.spentUsd).toBe(0.25);
    expect(run.invalid).toEqual([expect.objectContaining({ reason: 'the provider lost count', chargedUsd: 0.25 })]);
  });

  it("valid tokens whose price is beyond one call's bound ($10^6) are charged at the reservation", async () => {
    const model = { ...customModel({ inputTokens: 1e9 }), price: { inputPer1M: 5_000, outputPer1M: 0 } };
    const run = await runCustom(model);
    expect(run.budget.spentUsd).toBe(0.25);
    expect(run.invalid).toEqual([expect.objectContaining({ reason: expect.stringMatching(/prices at 5000000 USD/) })]);
  });

  it('valid usage from a custom model is believed: spend is its costUsd', async () => {
    const run = await runCustom(customModel({ costUsd: 0.5 }));
    expect(run.budget.spentUsd).toBe(0.5);
    expect(run.invalid).toEqual([]);
  });

  it.each<[string, unknown]>([
    ['NaN', Number.NaN],
    ['negative', -1],
    ['Infinity', Number.POSITIVE_INFINITY],
    ['a string', '0.25'],
    ['above the per-call bound', 2e6],
  ])("an estimateCostUsd that returns %s is replaced by troupe's own estimate (logged once)", async (_name, estimate) => {
    const model = customModel({ inputTokens: -1 }, () => estimate);
    const run = await runCustom(model);
    // The call was admitted (not refused as unaffordable, not NaN) and its invalid usage charged
    // at troupe's own estimate: the prompt at one token per 3 characters plus 4,096 output tokens.
    expect(run.root.status).toBe('completed');
    expect(run.budget.budgetStopped).toBe(false);
    expect(run.budget.spentUsd).toBeGreaterThan((4_096 * PRICE.outputPer1M) / 1e6);
    expect(run.budget.spentUsd).toBeLessThan(0.1);
    expect(run.lines.filter((l) => /estimateCostUsd/.test(l.msg))).toHaveLength(1);
  });

  it('a compaction with invalid usage (never reserved) is charged at the estimate of its request', async () => {
    let calls = 0;
    const model: Model = {
      name: 'custom',
      estimateCostUsd: (r) => (r.purpose === 'compaction' ? 0.125 : 0.25),
      async complete(request) {
        calls++;
        if (request.purpose === 'compaction') return { text: 'summary', toolCalls: [], usage: { inputTokens: -1 } };
        if (calls <= 3) return { text: null, toolCalls: [{ id: `g${calls}`, name: 'view_agent_graph', arguments: '{}' }], usage: { costUsd: 0.01 } };
        if (calls === 4) throw new ProviderError('PROVIDER_CONTEXT_OVERFLOW', 'too long');
        return { text: null, toolCalls: [{ id: 'f', name: 'finish', arguments: '{"summary":"done"}' }], usage: { costUsd: 0.01 } };
      },
    };
    const run = await runCustom(model);
    expect(run.root.status).toBe('completed');
    expect(run.budget.spentUsd).toBeCloseTo(4 * 0.01 + 0.125, 12);
    expect(run.invalid).toEqual([expect.objectContaining({ chargedUsd: 0.125 })]);
  });
});
