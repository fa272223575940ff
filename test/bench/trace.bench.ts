/**
 * Benchmark (not part of `npm test`; run `npm run bench`): what OpenTelemetry costs per turn.
 *
 * One agent takes 1,000 turns of one no-op user tool (an instant model, in memory), three ways,
 * interleaved run by run so that drift of this noisy VM hits all three alike:
 *
 * - off: `telemetry: false` — no OpenTelemetry call at all (the code path before issue 20);
 * - API, no SDK: the default, with no provider registered (what every library user gets);
 *   the bar is ≤ 5 % over `off`;
 * - SDK + no-op exporters: a BasicTracerProvider with a BatchSpanProcessor and a MeterProvider with
 *   a periodic reader, both exporting nowhere: every span and histogram point is really recorded.
 *
 * Figures: median CPU µs per turn of each (process CPU time, not wall time: other work on this
 * shared VM then matters less), and the median of each round's ratio to the `off` run beside it.
 */
import { AggregationTemporality, MeterProvider, PeriodicExportingMetricReader, type PushMetricExporter } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, BatchSpanProcessor, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { afterAll, bench, describe } from 'vitest';
import type { Model, ModelRequest, ModelTurn } from '../../src/model/types.js';
import type { TelemetryOptions } from '../../src/trace/tracer.js';
import { compiled } from './compiled.js';
import { runs } from './runs.js';

// The compiled package, as a user runs it (compiled.ts).
const { createCoordinator } = await compiled<typeof import('../../src/host/createCoordinator.js')>('src/host/createCoordinator.js');
const { defineTool } = await compiled<typeof import('../../src/tools/defineTool.js')>('src/tools/defineTool.js');

const TURNS = 1_000;
const ROUNDS = 30;

const noop = defineTool({ name: 'noop', description: 'does nothing', parameters: { type: 'object' }, execute: () => 'ok' });

function instantModel(): Model & { turns: number } {
  let seq = 0;
  const model = {
    name: 'instant',
    turns: 0,
    complete(request: ModelRequest): Promise<ModelTurn> {
      model.turns++;
      const call = request.turn < TURNS ? { name: 'noop', args: {} } : { name: 'finish', args: { summary: 'done' } };
      return Promise.resolve({
        text: null,
        toolCalls: [{ id: `c${++seq}`, name: call.name, arguments: JSON.stringify(call.args) }],
        usage: { inputTokens: 100, outputTokens: 10 },
      });
    },
  };
  return model;
}

/** ExportResultCode.SUCCESS (of @opentelemetry/core, not a dependency of ours). */
const SUCCESS = 0;

const nowhere: SpanExporter = { export: (_spans, done) => done({ code: SUCCESS }), shutdown: () => Promise.resolve() };
const nowhereMetrics: PushMetricExporter = {
  export: (_metrics, done) => done({ code: SUCCESS }),
  forceFlush: () => Promise.resolve(),
  shutdown: () => Promise.resolve(),
  selectAggregationTemporality: () => AggregationTemporality.CUMULATIVE,
};

function sdk(): TelemetryOptions & { shutdown(): Promise<void> } {
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(nowhere)] });
  const meterProvider = new MeterProvider({ readers: [new PeriodicExportingMetricReader({ exporter: nowhereMetrics, exportIntervalMillis: 60_000 })] });
  return { tracerProvider, meterProvider, shutdown: async () => void (await Promise.all([tracerProvider.shutdown(), meterProvider.shutdown()])) };
}

/** µs per turn of one agent's 1,000 turns. */
async function run(telemetry: TelemetryOptions | false | undefined): Promise<number> {
  const model = instantModel();
  const coordinator = createCoordinator({ model, tools: [noop], limits: { maxTurns: TURNS + 1 }, ...(telemetry === undefined ? {} : { telemetry }) });
  // CPU time of this process, not wall time: on a shared 2-core VM, waiting for a core is noise.
  const t0 = process.cpuUsage();
  const rootId = await coordinator.start({ name: 'lead', task: 'work' });
  const root = await coordinator.waitFor(rootId, ['completed', 'failed', 'crashed', 'stopped']);
  const spent = process.cpuUsage(t0);
  const us = spent.user + spent.system;
  if (root.status !== 'completed') throw new Error(`root ended ${root.status}: ${root.error?.message}`);
  await coordinator.shutdown();
  return us / model.turns;
}

const samples = { off: [] as number[], api: [] as number[], sdk: [] as number[] };

describe('OpenTelemetry cost per turn (in memory, instant model)', () => {
  bench(
    `off / API without SDK / SDK + no-op exporters, ${ROUNDS} interleaved rounds × ${TURNS} turns`,
    async () => {
      for (let round = 0; round < ROUNDS; round++) {
        // The order alternates, so that neither goes first (warmer or colder) every time.
        const off = round % 2 === 0 ? await run(false) : 0;
        const api = await run(undefined);
        samples.off.push(round % 2 === 0 ? off : await run(false));
        samples.api.push(api);
        const withSdk = sdk();
        samples.sdk.push(await run(withSdk));
        await withSdk.shutdown();
      }
    },
    runs(1, 1),
  );
});

afterAll(() => {
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
  // Paired: each round's ratio to the `off` run next to it, then the median of those ratios.
  const over = (xs: number[]) => (median(xs.map((x, i) => x / samples.off[i]!)) - 1) * 100;
  const line = (label: string, xs: number[]) =>
    `${label.padEnd(30)} ${median(xs).toFixed(1).padStart(7)} µs/turn  ${over(xs).toFixed(1).padStart(6)} % over off (median of ${xs.length} paired rounds)`;
  process.stderr.write(
    ['', line('telemetry: false (off)', samples.off), line('API, no SDK (default)', samples.api), line('SDK + no-op exporters', samples.sdk), ''].join('\n'),
  );
});
