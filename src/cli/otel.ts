/**
 * `--otel` (config `otel: true`): the run's GenAI spans and metrics go over OTLP/HTTP to
 * `OTEL_EXPORTER_OTLP_ENDPOINT` (default http://localhost:4318; `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
 * and the other standard OTEL_* variables are honoured by the exporters). The SDK and exporter
 * packages are optional peer dependencies, loaded only here: the library itself needs only
 * `@opentelemetry/api`. Message content is never exported from the CLI.
 * @module
 */
import { ConfigError } from '../errors.js';
import type { TelemetryOptions } from '../trace/tracer.js';

export interface CliTelemetry {
  /** For the coordinator's `telemetry` option (empty when `--otel` is off). */
  options: { telemetry?: TelemetryOptions };
  /** Flush what is buffered and stop the exporters (before the process exits). */
  shutdown(): Promise<void>;
}

const OFF: CliTelemetry = { options: {}, shutdown: () => Promise.resolve() };

const OTEL_PACKAGES = [
  '@opentelemetry/sdk-trace-base@2',
  '@opentelemetry/sdk-metrics@2',
  '@opentelemetry/resources@2',
  '@opentelemetry/exporter-trace-otlp-http@0.223',
  '@opentelemetry/exporter-metrics-otlp-http@0.223',
];

async function load() {
  try {
    const [traceSdk, metricsSdk, resources, traceExporter, metricExporter] = await Promise.all([
      import('@opentelemetry/sdk-trace-base'),
      import('@opentelemetry/sdk-metrics'),
      import('@opentelemetry/resources'),
      import('@opentelemetry/exporter-trace-otlp-http'),
      import('@opentelemetry/exporter-metrics-otlp-http'),
    ]);
    return { traceSdk, metricsSdk, resources, traceExporter, metricExporter };
  } catch (err) {
    throw new ConfigError(`--otel needs the OpenTelemetry SDK and OTLP exporters: npm install ${OTEL_PACKAGES.join(' ')}`, { cause: err });
  }
}

export async function cliTelemetry(enabled: boolean | undefined, env: NodeJS.ProcessEnv): Promise<CliTelemetry> {
  if (!enabled) return OFF;
  const { traceSdk, metricsSdk, resources, traceExporter, metricExporter } = await load();
  const resource = resources.resourceFromAttributes({ 'service.name': env.OTEL_SERVICE_NAME ?? 'troupe' });
  const tracerProvider = new traceSdk.BasicTracerProvider({
    resource,
    spanProcessors: [new traceSdk.BatchSpanProcessor(new traceExporter.OTLPTraceExporter())],
  });
  const meterProvider = new metricsSdk.MeterProvider({
    resource,
    readers: [new metricsSdk.PeriodicExportingMetricReader({ exporter: new metricExporter.OTLPMetricExporter() })],
  });
  return {
    options: { telemetry: { tracerProvider, meterProvider } },
    shutdown: async () => {
      // An unreachable collector must not turn a finished run into a failed exit.
      await Promise.allSettled([tracerProvider.shutdown(), meterProvider.shutdown()]);
    },
  };
}
