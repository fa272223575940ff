/**
 * The model's server is untrusted (issue 13): fast-check generates what a broken or hostile
 * OpenAI-compatible server sends — broken JSON, wrong types, huge and negative numbers, SSE split at
 * every byte, duplicate and out-of-range tool-call indices, megabyte strings, hostile error bodies —
 * and a real coordinator drives a small team through the real `openai` client against the fake
 * server, on a simulated clock, with a budget limit. Whatever arrives:
 * - no uncaught exception and no unhandled rejection;
 * - every agent ends in a documented terminal status, with a documented error code, never INTERNAL;
 * - the spend never decreases, is never NaN, and stays within the limit plus the README's slack
 *   (what calls cost beyond their reservations: only usage troupe believes can cost more than was
 *   reserved, so the slack is what the believable usage served could cost); every ledger row holds
 *   believable numbers;
 * - the event loop never stalls more than 100 ms while the team processes the answers.
 *
 * The stall check is made for a loaded 2-core machine. A 5 ms timer measures how late each tick is,
 * counting a late tick only as far as the process used CPU meanwhile: a process the OS did not
 * schedule is late but not stalled by its own code, while a synchronous loop over a hostile index
 * is both. What remains of noise (a major GC, JIT warm-up) does not repeat, so a scenario over the
 * bound is run twice more and fails only if it stalls every time. Checked against the code before
 * issue 13, where streamed tool calls lived in an array indexed by the SSE `index`: an index of 1e7
 * kept the loop busy ~290 ms per answer and failed this check in each of its 3 runs (larger
 * indices run into the per-scenario timeout); on that code the suite's first finding with the
 * default runs was the INTERNAL crash on `tool_calls` that is not an array. It also found the
 * `openai` client's quadratic reading of one huge SSE event (a 4 MB event: 200+ ms stretches),
 * now bounded by boundedFetch.
 *
 * Replay a failure: PROPERTY_SEED=<seed> PROPERTY_PATH=<path> npx vitest run test/property/wireFuzz.property.test.ts
 */
import { fc, test } from '@fast-check/vitest';
import { afterAll, beforeAll, expect } from 'vitest';
import { SimulatedClock } from 'xstate';
import { TERMINAL_STATUSES } from '../../machines/types.js';
import { createCoordinator, type Coordinator } from '../../src/host/createCoordinator.js';
import { ERROR_CODES } from '../../src/errors.js';
import { createLogger } from '../../src/logging/createLogger.js';
import { openaiModel } from '../../src/model/openaiModel.js';
import { memoryStore } from '../../src/store/memoryStore.js';
import { createFakeOpenAIServer, type FakeReply } from '../../src/testing/fakeOpenAIServer.js';
import { agentNameOf } from '../../src/testing/wireScript.js';
import { replyArb, type FuzzReply } from '../helpers/wireArbitraries.js';

/** USD per 1M tokens of the fuzzed model; cached input at the input price. */
const PRICE = { inputPer1M: 1, outputPer1M: 4 };
const MAX_OUTPUT_TOKENS = 1_000;
// 100 ms failed (122–131 ms, CPU-confirmed) on fe1ad35 too when npm test ran beside the kill -9
// trials on 2 cores; the stalls this guards against measured 200–290 ms.
const STALL_MS = 150;
const MAX_TOKENS = 1e9;

const TERMINAL = [...TERMINAL_STATUSES];

const scenarioArb = fc
  .record({ stream: fc.boolean(), children: fc.integer({ min: 0, max: 2 }), limitUsd: fc.constantFrom(0.02, 0.05, 1) })
  .chain(({ stream, children, limitUsd }) =>
    fc.record({
      stream: fc.constant(stream),
      limitUsd: fc.constant(limitUsd),
      root: fc.array(replyArb(true, stream), { minLength: 1, maxLength: 4 }),
      children: fc.array(fc.array(replyArb(false, stream), { maxLength: 3 }), { minLength: children, maxLength: children }),
    }),
  );
type Scenario = typeof scenarioArb extends fc.Arbitrary<infer T> ? T : never;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isTokens = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= MAX_TOKENS;

/** What `usage` costs if it is believable by the README's rule; 0 if it is not (it is then charged at its reservation). */
function believedCost(usage: unknown): number {
  if (!isObject(usage) || !isTokens(usage.prompt_tokens) || !isTokens(usage.completion_tokens)) return 0;
  return (usage.prompt_tokens * PRICE.inputPer1M + usage.completion_tokens * PRICE.outputPer1M) / 1e6;
}

const parse = (text: string): unknown => {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
};

/**
 * The most a served answer could be charged beyond its reservation: the cost of any believable
 * usage it carries, found however the client could have read the body (whole JSON, each SSE
 * event, each `data:` line).
 */
function slackOf(served: FuzzReply): number {
  if (served.body === '') return 0;
  const candidates: unknown[] = [parse(served.body)];
  let data: string[] = [];
  for (const line of served.body.split(/\r\n|\r|\n/)) {
    if (line === '') {
      candidates.push(parse(data.join('\n')));
      data = [];
    } else if (line.startsWith('data:')) {
      const value = line.slice(line.startsWith('data: ') ? 6 : 5);
      data.push(value);
      candidates.push(parse(value));
    }
  }
  candidates.push(parse(data.join('\n')));
  return Math.max(0, ...candidates.map((c) => (isObject(c) ? believedCost(c.usage) : 0)));
}

const silent = createLogger({ level: 'silent' });

const PROBE_MS = 5;

/**
 * How long the event loop was kept busy: the gaps between ticks of a 5 ms timer, each counted only
 * as far as the process used CPU meanwhile — a process the OS did not schedule (a loaded machine)
 * is late but not stalled by its own code, a synchronous loop over a hostile index is both.
 */
function stallProbe() {
  let last = performance.now();
  let lastCpu = process.cpuUsage();
  let busyMs = 0;
  const tick = () => {
    const now = performance.now();
    const cpu = process.cpuUsage();
    const late = now - last - PROBE_MS;
    const used = (cpu.user - lastCpu.user + cpu.system - lastCpu.system) / 1000;
    busyMs = Math.max(busyMs, Math.min(late, used));
    last = now;
    lastCpu = cpu;
  };
  const timer = setInterval(tick, PROBE_MS);
  return {
    /** The longest stretch (ms) the loop was kept busy since the probe started. */
    stop(): number {
      // A stall right before the end is followed by promise jobs only, before any timer runs:
      // the last stretch is measured here.
      tick();
      clearInterval(timer);
      return busyMs;
    },
  };
}

/** Wait until every agent of the run is terminal (children may be spawned meanwhile). */
async function allEnded(c: Coordinator): Promise<void> {
  for (;;) {
    const agents = c.list();
    await Promise.all(agents.map((a) => c.waitFor(a.id, TERMINAL)));
    if (c.list().length === agents.length) return;
  }
}

const spawnReply = (children: number): FakeReply => ({
  message: { toolCalls: Array.from({ length: children }, (_, i) => ({ name: 'spawn_agent', arguments: { name: `w${i}`, task: 'Work on it.' } })) },
});

async function runScenario(s: Scenario) {
  const clock = new SimulatedClock();
  const samples: number[] = [];
  const served: FuzzReply[] = [];
  const holder: { c?: Coordinator } = {};
  const queues = new Map<string, (FuzzReply | FakeReply)[]>([
    ['lead', [...(s.children.length > 0 ? [spawnReply(s.children.length)] : []), ...s.root]],
    ...s.children.map((list, i): [string, FuzzReply[]] => [`w${i}`, [...list]]),
  ]);
  const server = await createFakeOpenAIServer((request) => {
    if (holder.c) samples.push(holder.c.budget().spentUsd);
    const next = queues.get(agentNameOf(request))?.shift();
    if (next === undefined) return { status: 500, body: { error: { message: 'no reply left', type: 'fuzz', param: null, code: null } } };
    if (!('reply' in next)) return next;
    served.push(next);
    return next.reply;
  });
  const model = openaiModel({
    model: 'fuzz-model',
    baseURL: server.url,
    apiKey: 'sk-fuzz',
    clock,
    stream: s.stream,
    price: PRICE,
    maxOutputTokens: MAX_OUTPUT_TOKENS,
  });
  const store = memoryStore();
  const c = createCoordinator({ model, store, clock, logger: silent, budget: { limitUsd: s.limitUsd }, retry: { maxRetries: 0 } });
  holder.c = c;
  const unsubscribe = c.subscribe(() => samples.push(c.budget().spentUsd));
  const probe = stallProbe();
  let busyMs = 0;
  try {
    await c.start({ name: 'lead', task: 'Work on it.' });
    await allEnded(c);
  } finally {
    busyMs = probe.stop();
    unsubscribe();
    await c.shutdown();
    await server.close();
  }
  samples.push(c.budget().spentUsd);
  return { agents: c.list(), budget: c.budget(), rows: store.listUsage(c.runId), samples, served, busyMs };
}

const escaped: unknown[] = [];
const onEscape = (err: unknown) => escaped.push(err);
beforeAll(() => {
  process.on('uncaughtException', onEscape);
  process.on('unhandledRejection', onEscape);
});
afterAll(() => {
  process.off('uncaughtException', onEscape);
  process.off('unhandledRejection', onEscape);
});

function check(s: Scenario, run: Awaited<ReturnType<typeof runScenario>>): void {
  expect(escaped.splice(0), 'uncaught exceptions / unhandled rejections').toEqual([]);
  for (const agent of run.agents) {
    expect(TERMINAL, `${agent.name} ended ${agent.status}`).toContain(agent.status);
    if (agent.error) {
      expect(Object.keys(ERROR_CODES), `${agent.name} ended with code ${agent.error.code}`).toContain(agent.error.code);
      expect(agent.error.code, `${agent.name} crashed: ${agent.error.message.slice(0, 300)}`).not.toBe('INTERNAL');
    }
  }
  for (const [i, usd] of run.samples.entries()) {
    expect(Number.isFinite(usd), `spend sample ${i} is ${usd}`).toBe(true);
    if (i > 0) expect(usd, `spend went down at sample ${i}`).toBeGreaterThanOrEqual(run.samples[i - 1]!);
  }
  for (const row of run.rows) {
    expect([row.inputTokens, row.outputTokens, row.cachedInputTokens].every(isTokens), `row tokens ${JSON.stringify(row)}`).toBe(true);
    expect(row.cachedInputTokens).toBeLessThanOrEqual(row.inputTokens);
    expect(Number.isFinite(row.costUsd) && row.costUsd >= 0, `row cost ${row.costUsd}`).toBe(true);
  }
  const slack = run.served.reduce((sum, r) => sum + slackOf(r), 0);
  expect(run.budget.spentUsd, `spend past the limit $${s.limitUsd} + slack $${slack}`).toBeLessThanOrEqual(s.limitUsd + slack + 1e-9);
}

const replay = process.env.PROPERTY_SEED
  ? { seed: Number(process.env.PROPERTY_SEED), ...(process.env.PROPERTY_PATH ? { path: process.env.PROPERTY_PATH } : {}), endOnFailure: true }
  : {};

const RUNS = Number(process.env.PROPERTY_RUNS ?? 60);

test.prop([scenarioArb], { numRuns: RUNS, timeout: 20_000, ...replay })(
  'whatever the server sends: nothing escapes, every agent ends documented, spend stays sane and bounded, no stall',
  async (s) => {
    let run = await runScenario(s);
    check(s, run);
    // A stall caused by troupe's code repeats; one caused by a noisy machine does not.
    for (let again = 0; run.busyMs > STALL_MS && again < 2; again++) {
      run = await runScenario(s);
      check(s, run);
    }
    expect(run.busyMs, `the event loop was kept busy ${run.busyMs.toFixed(0)} ms in each of 3 runs of this scenario`).toBeLessThanOrEqual(STALL_MS);
  },
  // A scenario takes ~0.1–0.2 s (60 in 5–15 s on a loaded 2-core machine); room for shrinking a failure.
  Math.max(120_000, RUNS * 1_000),
);
