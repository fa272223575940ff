/**
 * OpenTelemetry GenAI spans (issue 20) with the SDK's in-memory exporter: the offline demo team's
 * span tree (names, parents, attributes, events for the 429 retry, the stall and the reserve
 * trip), no message content unless asked for, and a resumed stint linking to the span it continues.
 */
import { SpanKind } from '@opentelemetry/api';
import { AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { resumeCoordinator } from '../../src/host/resumeCoordinator.js';
import { scriptedModel } from '../../src/model/scriptedModel.js';
import { memoryStore } from '../../src/store/memoryStore.js';
import { STINT_EVENT } from '../../src/trace/attributes.js';
import type { TelemetryOptions } from '../../src/trace/tracer.js';
import { team, TERMINAL } from '../helpers/team.js';

const DEMO_PRICE = { inputPer1M: 2, cachedInputPer1M: 0.5, outputPer1M: 8 };
const DEMO_BUDGET = { limitUsd: 0.5, prices: { scripted: DEMO_PRICE } };

function sdk() {
  const exporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  return { exporter, tracerProvider };
}

const id = (s: ReadableSpan) => s.spanContext().spanId;
const parentOf = (s: ReadableSpan) => s.parentSpanContext?.spanId;
const events = (s: ReadableSpan) => s.events.map((e) => e.name);

/** The demo team on a simulated clock, to the end of its root. */
async function demoTeam(telemetry: TelemetryOptions | undefined) {
  const t = team('demo', { interactive: true, budget: DEMO_BUDGET, idleResumeMs: 20_000, ...(telemetry ? { telemetry } : {}) });
  const rootId = await t.c.start({ name: 'lead', task: 'Review this repository with a small team.' });
  const done = t.c.waitFor(rootId, [...TERMINAL]);
  let root: Awaited<typeof done> | undefined;
  void done.then((r) => (root = r));
  for (let i = 0; i < 200 && !root; i++) await t.advance(1_000);
  expect(root?.status).toBe('completed');
  await t.c.whenIdle();
  await t.c.shutdown();
  return { ...t, rootId };
}

describe('GenAI spans of the demo team (in-memory exporter)', () => {
  it('the span tree: stints, model calls and tools, parents, attributes and events', async () => {
    const { exporter, tracerProvider } = sdk();
    const { c } = await demoTeam({ tracerProvider });
    const spans = exporter.getFinishedSpans();
    const byId = new Map(spans.map((s) => [id(s), s]));
    const named = (prefix: string) => spans.filter((s) => s.name.startsWith(prefix));

    // One trace for the whole run.
    expect(new Set(spans.map((s) => s.spanContext().traceId)).size).toBe(1);

    // invoke_agent per stint: the lead's first stint is the root span.
    const stints = named('invoke_agent ');
    const leadStints = stints.filter((s) => s.name === 'invoke_agent lead');
    expect(leadStints.length).toBeGreaterThan(1); // it parks on wait_for_agents and is woken
    const firstLead = leadStints[0]!;
    expect(parentOf(firstLead)).toBeUndefined();
    expect(firstLead.attributes).toMatchObject({ 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'lead', 'gen_ai.conversation.id': c.runId });
    expect(firstLead.attributes['troupe.status']).toBe('waiting');
    // A later stint of the lead sits under its first one (one trace) and links to the previous one.
    expect(parentOf(leadStints[1]!)).toBe(id(firstLead));
    expect(leadStints[1]!.links[0]?.context.spanId).toBe(id(firstLead));
    expect(leadStints[2]!.links[0]?.context.spanId).toBe(id(leadStints[1]!));
    expect(leadStints.at(-1)!.attributes['troupe.status']).toBe('completed');

    // Each child's first stint sits under the lead's execute_tool spawn_agent span.
    const spawns = named('execute_tool spawn_agent');
    expect(spawns).toHaveLength(4);
    for (const name of ['scout', 'flaky', 'talker', 'prober']) {
      const first = stints.find((s) => s.name === `invoke_agent ${name}`)!;
      const spawn = byId.get(parentOf(first)!)!;
      expect(spawn.name).toBe('execute_tool spawn_agent');
      expect(parentOf(spawn)).toBe(id(firstLead));
      expect(first.attributes['troupe.parent_id']).toBe(firstLead.attributes['gen_ai.agent.id']);
    }
    // chat spans: CLIENT, under a stint, usage and cost.
    const chats = named('chat ');
    expect(chats.length).toBeGreaterThan(10);
    for (const chat of chats) {
      expect(chat.kind).toBe(SpanKind.CLIENT);
      expect(byId.get(parentOf(chat)!)!.name).toMatch(/^invoke_agent /);
    }
    const leadChat = chats.find((s) => parentOf(s) === id(firstLead))!;
    expect(leadChat.name).toBe('chat scripted');
    expect(leadChat.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.request.model': 'scripted',
      'gen_ai.usage.input_tokens': 2400,
      'gen_ai.usage.output_tokens': 180,
      'gen_ai.usage.cache_read.input_tokens': 0,
      'troupe.purpose': 'main',
    });
    expect(leadChat.attributes['troupe.cost_usd']).toBeCloseTo((2400 * 2 + 180 * 8) / 1e6, 9);

    // flaky: the 429 is a retry event (reason and delay) on its one chat span, which then succeeds.
    const flaky = stints.find((s) => s.name === 'invoke_agent flaky')!;
    const flakyChats = chats.filter((s) => parentOf(s) === id(flaky));
    expect(flakyChats).toHaveLength(1);
    const retry = flakyChats[0]!.events.find((e) => e.name === 'troupe.retry')!;
    expect(retry.attributes).toMatchObject({ 'error.type': 'PROVIDER_RATE_LIMITED' });
    expect(retry.attributes!['troupe.retry.delay_ms']).toBeGreaterThanOrEqual(500);
    expect(flakyChats[0]!.status.code).not.toBe(2);

    // prober: the 403 fails the chat span and the stint with error.type.
    const prober = stints.find((s) => s.name === 'invoke_agent prober')!;
    expect(prober.attributes).toMatchObject({ 'troupe.status': 'failed', 'error.type': 'PROVIDER_AUTH' });
    expect(chats.find((s) => parentOf(s) === id(prober))!.attributes['error.type']).toBe('PROVIDER_AUTH');

    // talker: two nudges, then the stall (an event and the stint's status) and its stall notice.
    const talker = stints.find((s) => s.name === 'invoke_agent talker')!;
    expect(events(talker).filter((e) => e === 'troupe.nudge')).toHaveLength(2);
    expect(events(talker)).toContain('troupe.stall');
    expect(talker.attributes['troupe.status']).toBe('stalled');
    expect(talker.events.find((e) => e.name === 'troupe.notice')?.attributes).toMatchObject({ 'troupe.notice.kind': 'stalled' });

    // The reserve trip: an event on the stint whose call tripped it (the lead's big read).
    const tripped = stints.filter((s) => events(s).includes('troupe.budget.reserve_trip'));
    expect(tripped.map((s) => s.name)).toEqual(['invoke_agent lead']);
    // Once: later calls past the line do not trip it again.
    expect(spans.flatMap((s) => events(s)).filter((e) => e === 'troupe.budget.reserve_trip')).toHaveLength(1);
    // The completion notices are events on the children's stints.
    expect(stints.find((s) => s.name === 'invoke_agent scout')!.events.find((e) => e.name === 'troupe.notice')?.attributes).toMatchObject({
      'troupe.notice.kind': 'completion',
    });
    // Budget warnings went into calls after 70 %.
    expect(stints.some((s) => events(s).includes('troupe.budget.warning'))).toBe(true);

    // execute_tool spans carry the call id; no content by default anywhere.
    for (const tool of named('execute_tool ')) expect(tool.attributes['gen_ai.tool.call.id']).toMatch(/^call_/);
    for (const s of spans) {
      for (const key of Object.keys(s.attributes)) expect(key).not.toMatch(/messages|arguments|result|system_instructions/);
    }
  });

  it('recordContent: messages and tool arguments are on the spans', async () => {
    const { exporter, tracerProvider } = sdk();
    await demoTeam({ tracerProvider, recordContent: true });
    const spans = exporter.getFinishedSpans();
    const chat = spans.find((s) => s.name.startsWith('chat '))!;
    expect(String(chat.attributes['gen_ai.input.messages'])).toContain('Review this repository');
    expect(String(chat.attributes['gen_ai.output.messages'])).toContain('spawn_agent');
    const spawn = spans.find((s) => s.name === 'execute_tool spawn_agent')!;
    expect(String(spawn.attributes['gen_ai.tool.call.arguments'])).toContain('scout');
  });

  it('metrics: token usage and operation duration histograms', async () => {
    const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
    const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
    const meterProvider = new MeterProvider({ readers: [reader] });
    await demoTeam({ meterProvider });
    await reader.forceFlush();
    const metrics = exporter.getMetrics().flatMap((r) => r.scopeMetrics.flatMap((s) => s.metrics));
    const usage = metrics.find((m) => m.descriptor.name === 'gen_ai.client.token.usage')!;
    const duration = metrics.find((m) => m.descriptor.name === 'gen_ai.client.operation.duration')!;
    const input = usage.dataPoints.find((p) => p.attributes['gen_ai.token.type'] === 'input')!;
    expect((input.value as { sum: number }).sum).toBeGreaterThan(200_000);
    expect(duration.descriptor.unit).toBe('s');
    expect(duration.dataPoints.some((p) => p.attributes['error.type'] === 'PROVIDER_AUTH')).toBe(true);
    await meterProvider.shutdown();
  });

  it('a context overflow: a retry event (no delay) on the main call, the compaction its own chat span; a failed tool call', async () => {
    const { exporter, tracerProvider } = sdk();
    const graph = { tool: 'view_agent_graph', args: {} };
    const t = team(
      {
        agents: {
          lead: [
            { tool: 'no_such_tool', args: {} },
            graph,
            { error: { code: 'PROVIDER_CONTEXT_OVERFLOW', status: 400 } },
            { text: 'summary of the work so far', usage: { inputTokens: 900, outputTokens: 30 } },
            { tool: 'finish', args: { summary: 'done' } },
          ],
        },
      },
      { telemetry: { tracerProvider } },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    expect((await t.c.waitFor(rootId, [...TERMINAL])).status).toBe('completed');
    await t.c.shutdown();
    const chats = exporter.getFinishedSpans().filter((s) => s.name === 'chat scripted');
    expect(chats.map((s) => s.attributes['troupe.purpose'])).toEqual(['main', 'main', 'compaction', 'main']);
    expect(chats[2]!.attributes['gen_ai.usage.input_tokens']).toBe(900);
    const retry = chats[3]!.events.find((e) => e.name === 'troupe.retry')!;
    expect(retry.attributes).toEqual({ 'error.type': 'PROVIDER_CONTEXT_OVERFLOW' });
    // A failed tool call: its span carries the error code.
    const tools = exporter.getFinishedSpans().filter((s) => s.name.startsWith('execute_tool '));
    expect(tools.map((s) => [s.name, s.attributes['error.type'] ?? null])).toEqual([
      ['execute_tool no_such_tool', 'TOOL_NOT_FOUND'],
      ['execute_tool view_agent_graph', null],
      ['execute_tool finish', null],
    ]);
  });

  it('a background review: its calls are chat spans of purpose review on the reviewed agent', async () => {
    const { exporter, tracerProvider } = sdk();
    const graph = { tool: 'view_agent_graph', args: {} };
    const t = team(
      {
        agents: {
          lead: [graph, graph, { tool: 'finish', args: { summary: 'done' } }],
          'lead:review': [{ tool: 'review_done', args: { reason: 'nothing new' }, usage: { inputTokens: 50, outputTokens: 5 } }],
        },
      },
      { review: { everyTurns: 2, maxSteps: 1 }, telemetry: { tracerProvider } },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    expect((await t.c.waitFor(rootId, [...TERMINAL])).status).toBe('completed');
    await t.c.reviews.settled();
    await t.c.shutdown();
    const spans = exporter.getFinishedSpans();
    const review = spans.filter((s) => s.attributes['troupe.purpose'] === 'review');
    expect(review).toHaveLength(1);
    expect(review[0]!.attributes['gen_ai.usage.input_tokens']).toBe(50);
    expect(spans.find((s) => id(s) === parentOf(review[0]!))!.name).toBe('invoke_agent lead');
  });

  it('no SDK: nothing recorded, no stint rows written', async () => {
    const { store } = await demoTeam(undefined);
    const run = store.listRuns().at(-1)!;
    expect(store.eventsOf(run.id, STINT_EVENT)).toEqual([]);
  });
});

describe('a resumed stint links to the span it continues', () => {
  it('after an abandoned process (no shutdown), the respawned running agent links to its persisted stint', async () => {
    const first = sdk();
    const store = memoryStore();
    const clock = new SimulatedClock();
    const script = {
      agents: {
        lead: [
          { tool: 'view_agent_graph', args: {}, delayMs: 60_000 },
          { tool: 'finish', args: { summary: 'done' } },
        ],
      },
    };
    const a = team(script, { store, clock, telemetry: { tracerProvider: first.tracerProvider } });
    const rootId = await a.c.start({ name: 'lead', task: 'Look around.' });
    await a.advance(1_000);
    // The lead is mid-call when the process "dies": nothing ends, nothing is flushed.
    const rows = store.eventsOf(a.c.runId, STINT_EVENT);
    expect(rows).toHaveLength(1);
    const persisted = rows[0]!.data as { traceId: string; spanId: string };
    expect(first.exporter.getFinishedSpans()).toEqual([]);

    const second = sdk();
    // The new process has its own clock; the old one's call never returns.
    const later = new SimulatedClock();
    const resumedModel = scriptedModel({ agents: { lead: [{ tool: 'finish', args: { summary: 'done after the restart' } }] } }, { clock: later });
    const b = await resumeCoordinator({ store, model: resumedModel, clock: later, telemetry: { tracerProvider: second.tracerProvider } });
    const done = b.waitFor(rootId, [...TERMINAL]);
    let status: string | undefined;
    void done.then((r) => (status = r.status));
    for (let i = 0; i < 50 && !status; i++) {
      await new Promise((r) => setImmediate(r));
      later.increment(100);
    }
    expect(status).toBe('completed');
    await b.shutdown();
    const resumed = second.exporter.getFinishedSpans().find((s) => s.name === 'invoke_agent lead')!;
    expect(resumed.links).toHaveLength(1);
    expect(resumed.links[0]!.context).toMatchObject({ traceId: persisted.traceId, spanId: persisted.spanId });
    // The resumed stint wrote its own row: the next restart links to it.
    expect(store.eventsOf(a.c.runId, STINT_EVENT).at(-1)!.data).toMatchObject({ spanId: resumed.spanContext().spanId });
    await a.c.shutdown();
  });
});
