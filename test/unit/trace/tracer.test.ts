/**
 * The tracer's edges (issue 20): what a restart reads back is checked before it becomes a link,
 * `telemetry: false` calls nothing, the CLI's `otel` setting is checked, and `--otel` shuts down
 * cleanly with nobody listening.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';
import { loadConfigFile } from '../../../src/cli/config.js';
import { cliTelemetry } from '../../../src/cli/otel.js';
import type { WriteOp } from '../../../src/store/port.js';
import { NO_TRACE, runTrace, tracingRegistered } from '../../../src/trace/tracer.js';

const agent = { id: 'a1', name: 'lead', parentId: null, depth: 0 };

function recording() {
  const exporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const staged: WriteOp[] = [];
  const tracer = runTrace({ tracerProvider }, { runId: 'run_1', model: 'm', now: () => 42, stage: (op) => staged.push(op) });
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
      tracer.restore([{ agentId: 'a1', data }, { agentId: null, data: valid }]);
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

  it('events on an agent with no open stint are dropped; close ends what is open', () => {
    const { exporter, tracer } = recording();
    tracer.event('a1', 'troupe.nudge');
    tracer.stintStarted(agent);
    tracer.event('a1', 'troupe.nudge');
    tracer.close(() => 'running');
    const [span] = exporter.getFinishedSpans();
    expect(span!.events.map((e) => e.name)).toEqual(['troupe.nudge', 'troupe.shutdown']);
    expect(span!.attributes['troupe.status']).toBe('running');
  });

  it('telemetry: false is the tracer that calls nothing; tracingRegistered says when links can be read', () => {
    const staged: WriteOp[] = [];
    expect(runTrace(false, { runId: 'r', model: 'm', now: () => 0, stage: (op) => staged.push(op) })).toBe(NO_TRACE);
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
    const off = await cliTelemetry(false, {});
    expect(off.options).toEqual({});
    const on = await cliTelemetry(true, { OTEL_SERVICE_NAME: 'troupe-test' });
    expect(on.options.telemetry?.tracerProvider).toBeDefined();
    expect(on.options.telemetry?.meterProvider).toBeDefined();
    expect(on.options.telemetry?.recordContent).toBeUndefined();
    await expect(on.shutdown()).resolves.toBeUndefined();
  });
});
