/**
 * Spans for agents that are not running (issue 20): a parked agent has no actor and no open stint,
 * yet a wait that times out stalls it, a stop reaches it, and the notices these owe go to a parent
 * that may be parked too. Each such change is a `troupe.dormant {name}` span, beside the agent's
 * stints and linked to its last one, holding the change's events (SDK in-memory exporter,
 * simulated clock).
 */
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';
import type { ScriptStep } from '../../src/model/scriptedModel.js';
import { defineTool } from '../../src/tools/defineTool.js';
import { flush, team } from '../helpers/team.js';

const EXECUTION = '019f4b19-eafd-74ed-baa6-d24a27b3f52c';

/** Asynchronous work the scout parks on: while it runs, the run is not quiescent (no dead-wait report). */
const provision = defineTool({
  name: 'provision',
  description: 'Start provisioning a container (asynchronous).',
  parameters: { type: 'object', properties: { id: { type: 'string' } }, required: ['id'] },
  risk: 'mutation',
  execute: ({ id }: { id: string }) => ({ status: `pct_create auto-approved — execution ${id} running.` }),
});

const startWork: ScriptStep = { tool: 'provision', args: { id: EXECUTION } };
const spawnScout: ScriptStep = { tool: 'spawn_agent', args: { name: 'scout', task: 'provision and wait' } };
const graph: ScriptStep = { tool: 'view_agent_graph', args: {} };
const waitFor = (timeoutSeconds?: number): ScriptStep => ({
  tool: 'wait_for_agents',
  args: { reason: 'my work', ...(timeoutSeconds === undefined ? {} : { timeout_seconds: timeoutSeconds }) },
});

function sdk() {
  const exporter = new InMemorySpanExporter();
  return { exporter, tracerProvider: new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }) };
}

const id = (s: ReadableSpan) => s.spanContext().spanId;
const ns = (t: [number, number]) => BigInt(t[0]) * 1_000_000_000n + BigInt(t[1]);

describe('spans of dormant agents', () => {
  it('a parked scout whose wait times out: a dormant span with the stall, and the stall notice to its parked lead', async () => {
    const { exporter, tracerProvider } = sdk();
    // The lead's own wait never times out here; the scout's times out every 10 s (3rd time: stall).
    const t = team(
      { agents: { lead: [spawnScout, waitFor(), graph, waitFor()], scout: [startWork, waitFor(10), waitFor(10), waitFor(10)] } },
      { tools: [provision], idleResumeMs: 3_600_000, telemetry: { tracerProvider } },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'Send a scout.' });
    await t.advance(35_000);
    const scout = t.byName('scout');
    expect(t.c.get(scout.id).status).toBe('stalled');
    await t.c.shutdown();

    const spans = exporter.getFinishedSpans();
    const scoutStints = spans.filter((s) => s.name === 'invoke_agent scout');
    // Three stints (spawn, two timeout wakes), each ending waiting: the third timeout never ran it.
    expect(scoutStints.map((s) => s.attributes['troupe.status'])).toEqual(['waiting', 'waiting', 'waiting']);
    expect(scoutStints.flatMap((s) => s.events.map((e) => e.name))).not.toContain('troupe.stall');
    const dormant = spans.filter((s) => s.name === 'troupe.dormant scout');
    expect(dormant).toHaveLength(1);
    const stall = dormant[0]!;
    expect(stall.attributes).toMatchObject({
      'troupe.status.from': 'waiting',
      'troupe.status': 'stalled',
      'gen_ai.agent.id': scout.id,
      'troupe.parent_id': rootId,
    });
    expect(stall.events.map((e) => e.name)).toEqual(['troupe.notice', 'troupe.stall']);
    expect(stall.events[0]!.attributes).toEqual({ 'troupe.notice.kind': 'stalled', 'troupe.notice.from': scout.id, 'troupe.notice.to': rootId });
    // Beside the scout's stints (same parent: the lead's spawn_agent span), linked to the last one.
    expect(stall.parentSpanContext?.spanId).toBe(scoutStints[0]!.parentSpanContext?.spanId);
    expect(stall.links.map((l) => l.context.spanId)).toEqual([id(scoutStints[2]!)]);

    // The notice went between parked agents: the lead was waiting, its next stint (the wake the
    // notice caused) starts after the stall was recorded.
    const leadStints = spans.filter((s) => s.name === 'invoke_agent lead');
    expect(leadStints[0]!.attributes['troupe.status']).toBe('waiting');
    expect(ns(leadStints[0]!.endTime)).toBeLessThanOrEqual(ns(stall.startTime));
    expect(ns(leadStints[1]!.startTime)).toBeGreaterThanOrEqual(ns(stall.endTime));
    expect(leadStints[1]!.events.map((e) => e.name)).not.toContain('troupe.notice');
  });

  it('a budget stop reaching a parked scout: its stop and the notice it owes are on a dormant span', async () => {
    const { exporter, tracerProvider } = sdk();
    // The lead's second call comes back after the scout has parked, and costs more than the limit.
    const costly: ScriptStep = { ...graph, delayMs: 5_000, usage: { inputTokens: 10, outputTokens: 1, costUsd: 2 }, reserveUsd: 0 };
    const t = team(
      { agents: { lead: [spawnScout, costly, waitFor()], scout: [startWork, waitFor()] } },
      { tools: [provision], idleResumeMs: 3_600_000, budget: { limitUsd: 1 }, telemetry: { tracerProvider } },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'Send a scout.' });
    await flush();
    const scout = t.byName('scout');
    await t.c.waitFor(scout.id, ['waiting']);
    await t.advance(10_000);
    expect(t.c.get(scout.id)).toMatchObject({ status: 'stopped', stopReason: 'budget' });
    await t.c.shutdown();

    const spans = exporter.getFinishedSpans();
    // The trip: an event on the stint whose call caused it (the lead's, running).
    const lead = spans.filter((s) => s.name === 'invoke_agent lead');
    expect(lead.flatMap((s) => s.events.map((e) => e.name))).toContain('troupe.budget.stop');
    const dormant = spans.filter((s) => s.name === 'troupe.dormant scout');
    expect(dormant).toHaveLength(1);
    expect(dormant[0]!.attributes).toMatchObject({ 'troupe.status.from': 'waiting', 'troupe.status': 'stopped', 'troupe.stop_reason': 'budget' });
    expect(dormant[0]!.events.map((e) => [e.name, e.attributes])).toEqual([
      ['troupe.notice', { 'troupe.notice.kind': 'stopped', 'troupe.notice.from': scout.id, 'troupe.notice.to': rootId }],
    ]);
  });

  it('a background review of a parked agent: its call is a chat span on a dormant span of that agent', async () => {
    const { exporter, tracerProvider } = sdk();
    const t = team(
      {
        agents: {
          lead: [graph, { tool: 'respond_to_user', args: { message: 'Looked around.' } }],
          'lead:review': [{ tool: 'review_done', args: { reason: 'nothing new' }, usage: { inputTokens: 50, outputTokens: 5 } }],
        },
      },
      { interactive: true, review: { everyTurns: 2, maxSteps: 1 }, telemetry: { tracerProvider } },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    expect(await t.c.waitFor(rootId, ['waiting'])).toMatchObject({ waitKind: 'user' });
    await t.c.reviews.settled();
    await t.c.shutdown();
    const spans = exporter.getFinishedSpans();
    const review = spans.filter((s) => s.attributes['troupe.purpose'] === 'review');
    expect(review).toHaveLength(1);
    expect(review[0]!.attributes['gen_ai.usage.input_tokens']).toBe(50);
    const parent = spans.find((s) => id(s) === review[0]!.parentSpanContext?.spanId)!;
    const stints = spans.filter((s) => s.name === 'invoke_agent lead');
    expect(stints.map((s) => s.attributes['troupe.status'])).toEqual(['waiting']);
    expect(parent.name).toBe('troupe.dormant lead');
    expect(parent.links.map((l) => l.context.spanId)).toEqual([id(stints[0]!)]);
    // The dormant span ends after its call: checked by the order the exporter received them
    // (SimpleSpanProcessor exports at end). Their end times cannot show it: each span's clock is
    // anchored on Date.now() (1 ms steps), and one run here read the parent's end 0.83 ms early.
    expect(spans.indexOf(parent)).toBeGreaterThan(spans.indexOf(review[0]!));
  });
});
