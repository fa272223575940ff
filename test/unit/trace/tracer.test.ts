/**
 * The tracer's edges (issue 20): what a restart reads back is checked before it becomes a link,
 * `telemetry: false` calls nothing, the CLI's `otel` setting is checked, and `--otel` shuts down
 * cleanly with nobody listening.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';
import { loadConfigFile } from '../../../src/cli/config.js';
import { cliTelemetry, type CliTelemetry } from '../../../src/cli/otel.js';
import type { WriteOp } from '../../../src/store/port.js';
import { NO_TRACE, runTrace, tracingRegistered } from '../../../src/trace/tracer.js';

const agent = { id: 'a1', name: 'lead', parentId: null, depth: 0 };
const child = { id: 'c1', name: 'scout', parentId: 'a1', depth: 1 };
const agents = new Map([agent, child].map((a) => [a.id, a]));
const deps = (staged: WriteOp[] = [], now = 0) => ({
  runId: 'run_1',
  modelFor: () => 'm',
  now: () => now,
  stage: (op: WriteOp) => staged.push(op),
  agent: (id: string) => agents.get(id),
});

function recording() {
  const exporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const staged: WriteOp[] = [];
  const tracer = runTrace({ tracerProvider }, deps(staged, 42));
  return { exporter, tracerProvider, staged, tracer };
}

describe('the run tracer', () => {
  it('restore: a damaged trace.stint row is ignored, a valid one becomes the link of the next stint', () => {
    const valid = { traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', traceFlags: 1 };
    for (const [data, links] of [
      [{ traceId: 'not-hex', spanId: 'b7ad6b7169203331' }, 0],
      [{ traceId: '00000000000000000000000000000000', spanId: '0000000000000000' }, 0],
      [{ spanId: 'b7ad6b7169203331' }, 0],
      ['a string', 0],
      [valid, 1],
    ] as const) {
      const { exporter, tracer } = recording();
      tracer.restore([
        { agentId: 'a1', data },
        { agentId: null, data: valid },
      ]);
      tracer.stintStarted(agent);
      tracer.stintEnded('a1', { status: 'completed' });
      const [span] = exporter.getFinishedSpans();
      expect(span!.links, JSON.stringify(data)).toHaveLength(links);
      if (links) expect(span!.links[0]!.context).toMatchObject({ traceId: valid.traceId, spanId: valid.spanId });
    }
  });

  it('a recording stint stages its span context once, with the commit group', () => {
    const { staged, tracer } = recording();
    tracer.stintStarted(agent);
    tracer.stintStarted(agent); // already open: nothing new
    expect(staged).toHaveLength(1);
    expect(staged[0]).toMatchObject({ op: 'appendEvent', row: { runId: 'run_1', agentId: 'a1', type: 'trace.stint', at: 42 } });
  });

  it('events on the open stint; close ends what is open', () => {
    const { exporter, tracer } = recording();
    tracer.stintStarted(agent);
    tracer.event('a1', 'troupe.nudge');
    tracer.close(() => 'running');
    const [span] = exporter.getFinishedSpans();
    expect(span!.events.map((e) => e.name)).toEqual(['troupe.nudge', 'troupe.shutdown']);
    expect(span!.attributes['troupe.status']).toBe('running');
  });

  it('an event for a dormant agent: a troupe.dormant span beside its stints, linked to its last stint; an unknown id is ignored', () => {
    const { exporter, tracer, staged } = recording();
    tracer.stintStarted(agent);
    tracer.stintStarted(child); // under the lead's stint (no tool open)
    tracer.stintEnded('c1', { status: 'waiting' });
    tracer.event('c1', 'troupe.budget.reserve_trip');
    tracer.budgetWarning('c1', '[BUDGET NOTICE] 75 % spent');
    tracer.event('nobody', 'troupe.budget.stop');
    tracer.stintEnded('a1', { status: 'completed' });
    const spans = exporter.getFinishedSpans();
    const [stint, dormant, warned] = spans.filter((s) => s.attributes['gen_ai.agent.id'] === 'c1');
    const lead = spans.find((s) => s.name === 'invoke_agent lead')!;
    expect(spans).toHaveLength(4);
    expect([dormant!.name, warned!.name]).toEqual(['troupe.dormant scout', 'troupe.dormant scout']);
    expect(dormant!.events.map((e) => e.name)).toEqual(['troupe.budget.reserve_trip']);
    expect(warned!.events.map((e) => [e.name, e.attributes])).toEqual([['troupe.budget.warning', { 'troupe.budget.band': 'BUDGET NOTICE' }]]);
    for (const s of [dormant!, warned!]) {
      expect(s.parentSpanContext?.spanId).toBe(lead.spanContext().spanId);
      expect(s.links.map((l) => [l.context.spanId, l.attributes])).toEqual([[stint!.spanContext().spanId, { 'troupe.link': 'last_stint' }]]);
      expect(s.attributes).toMatchObject({ 'gen_ai.agent.name': 'scout', 'gen_ai.conversation.id': 'run_1', 'troupe.parent_id': 'a1' });
      expect(s.attributes['gen_ai.operation.name']).toBeUndefined();
    }
    // Not a stint: no trace.stint row, so a restart still links to the stint.
    expect(staged).toHaveLength(2);
  });

  it('a dormant change: one span holding its notice and its stall; a notice from system to a parked agent is on its own dormant span', () => {
    const { exporter, tracer } = recording();
    tracer.stintStarted(agent);
    tracer.stintStarted(child);
    tracer.stintEnded('c1', { status: 'waiting' });
    tracer.stintEnded('a1', { status: 'waiting' });
    // Both parked: the child's wait times out into a stall; the lead is told.
    tracer.dormantChanged(child, 'waiting');
    tracer.notice({ from: 'c1', to: 'a1', kind: 'stalled' });
    tracer.stintEnded('c1', { status: 'stalled' });
    tracer.notice({ from: 'system', to: 'a1', kind: 'budget_reserve_stop' });
    const dormant = exporter.getFinishedSpans().filter((s) => s.name.startsWith('troupe.dormant '));
    expect(dormant.map((s) => [s.name, s.events.map((e) => e.name)])).toEqual([
      ['troupe.dormant scout', ['troupe.notice', 'troupe.stall']],
      ['troupe.dormant lead', ['troupe.notice']],
    ]);
    expect(dormant[0]!.attributes).toMatchObject({ 'troupe.status.from': 'waiting', 'troupe.status': 'stalled' });
    expect(dormant[0]!.events[0]!.attributes).toEqual({ 'troupe.notice.kind': 'stalled', 'troupe.notice.from': 'c1', 'troupe.notice.to': 'a1' });
    expect(dormant[1]!.events[0]!.attributes).toMatchObject({ 'troupe.notice.kind': 'budget_reserve_stop', 'troupe.notice.to': 'a1' });
    // The lead's later stint still links to its last stint, not to a dormant span.
    tracer.stintStarted(agent);
    tracer.close(() => 'running');
    const stints = exporter.getFinishedSpans().filter((s) => s.name === 'invoke_agent lead');
    expect(stints[1]!.links[0]!.context.spanId).toBe(stints[0]!.spanContext().spanId);
  });

  it('with no provider given: a global SDK registered when the run starts records; with nothing registered the tracer is NO_TRACE', async () => {
    const { trace } = await import('@opentelemetry/api');
    // Where the API registers globals (its major version in the key): cleared for this test, restored after.
    const key = Symbol.for('opentelemetry.js.api.1');
    const registry = globalThis as Record<symbol, unknown>;
    const saved = registry[key];
    delete registry[key];
    try {
      expect(runTrace(undefined, deps())).toBe(NO_TRACE);
      expect(runTrace({ recordContent: true }, deps())).toBe(NO_TRACE);
      expect(tracingRegistered(undefined)).toBe(false);
      const exporter = new InMemorySpanExporter();
      expect(trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }))).toBe(true);
      expect(tracingRegistered(undefined)).toBe(true);
      const tracer = runTrace(undefined, deps());
      tracer.stintStarted(agent);
      tracer.stintEnded('a1', { status: 'completed' });
      expect(exporter.getFinishedSpans().map((s) => s.name)).toEqual(['invoke_agent lead']);
    } finally {
      trace.disable();
      if (saved === undefined) delete registry[key];
      else registry[key] = saved;
    }
  });

  it('telemetry: false is the tracer that calls nothing; tracingRegistered says when links can be read', () => {
    const staged: WriteOp[] = [];
    expect(runTrace(false, deps(staged))).toBe(NO_TRACE);
    expect(tracingRegistered(false)).toBe(false);
    // Nothing registered globally in this test file.
    expect(tracingRegistered(undefined)).toBe(false);
    expect(tracingRegistered({ tracerProvider: new BasicTracerProvider() })).toBe(true);
  });
});

describe('the CLI setting', () => {
  it('config "otel" must be a boolean', () => {
    const dir = mkdtempSync(join(tmpdir(), 'troupe-otel-'));
    const file = join(dir, 'troupe.config.json');
    writeFileSync(file, JSON.stringify({ otel: 'yes' }));
    expect(() => loadConfigFile(file)).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID', message: expect.stringContaining('otel must be boolean') }));
    writeFileSync(file, JSON.stringify({ otel: true }));
    expect(loadConfigFile(file)).toEqual({ otel: true });
  });

  it('--otel off: no providers; on: providers that shut down cleanly with no collector listening', async () => {
    const warned: string[] = [];
    const off = await cliTelemetry(false, {}, (line) => warned.push(line));
    expect(off.options).toEqual({});
    const on = await cliTelemetry(true, { OTEL_SERVICE_NAME: 'troupe-test', OTEL_EXPORTER_OTLP_ENDPOINT: await closedPort() }, (line) => warned.push(line));
    expect(on.options.telemetry?.tracerProvider).toBeDefined();
    expect(on.options.telemetry?.meterProvider).toBeDefined();
    expect(on.options.telemetry?.recordContent).toBeUndefined();
    await expect(on.shutdown()).resolves.toBeUndefined();
    expect(warned).toHaveLength(1);
  });

  it('--otel with no collector: one warning line naming the endpoint (no credentials), and the exit waits for no flush', async () => {
    const warned: string[] = [];
    const url = (await closedPort()).replace('http://127.0.0.1', 'http://user:pw@localhost');
    const on = await cliTelemetry(true, { OTEL_EXPORTER_OTLP_ENDPOINT: url }, (line) => warned.push(line), 3_600_000);
    // The exporters retry a refused export for ~10 s before they drop it (a 2.7 s demo exited after
    // 11.9 s): here a flush that never ends, which the exit must not wait for.
    neverFlushes(on);
    await on.shutdown();
    expect(warned).toEqual([
      expect.stringMatching(/^troupe: --otel: no OpenTelemetry collector answers at http:\/\/localhost:\d+\/v1\/traces \(ECONNREFUSED\); .*\n$/),
    ]);
    expect(warned[0]).not.toContain('pw');
  });

  it('--otel with a collector that accepts but never answers: the exit waits at most the flush bound', async () => {
    const held: Socket[] = [];
    const server = createServer((socket) => void held.push(socket));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const warned: string[] = [];
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const on = await cliTelemetry(true, { OTEL_EXPORTER_OTLP_ENDPOINT: url }, (line) => warned.push(line), 200);
      neverFlushes(on);
      await on.shutdown();
      expect(warned).toEqual([]);
    } finally {
      for (const socket of held) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

/** Providers whose shutdown (their last flush) never ends. */
function neverFlushes(on: CliTelemetry): void {
  const never = () => new Promise<void>(() => undefined);
  Object.assign(on.options.telemetry!.tracerProvider!, { shutdown: never });
  Object.assign(on.options.telemetry!.meterProvider!, { shutdown: never });
}

/** The URL of a port nobody listens on (bound, then closed). */
async function closedPort(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return `http://127.0.0.1:${port}`;
}
