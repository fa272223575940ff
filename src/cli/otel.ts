/**
 * `--otel` (config `otel: true`): the run's GenAI spans and metrics go over OTLP/HTTP to
 * `OTEL_EXPORTER_OTLP_ENDPOINT` (default http://localhost:4318; `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
 * and the other standard OTEL_* variables are honoured by the exporters). The SDK and exporter
 * packages are optional peer dependencies, loaded only here: the library itself needs only
 * `@opentelemetry/api`. Message content is never exported from the CLI.
 * @module
 */
import { connect } from 'node:net';
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

/** How long a reachable collector may hold the exit while what is buffered is flushed. */
const FLUSH_MS = 3_000;
/** How long the start-up check waits for a TCP connection to the collector. */
const PROBE_MS = 1_000;

/** Where the trace exporter sends, by the OTLP/HTTP exporter's rules for the OTEL_* variables. */
function tracesEndpoint(env: NodeJS.ProcessEnv): string {
  const own = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
  if (own) return own;
  return `${(env.OTEL_EXPORTER_OTLP_ENDPOINT ?? 'http://localhost:4318').replace(/\/+$/, '')}/v1/traces`;
}

/** `url` without its user and password (they stay out of what is printed). */
function withoutCredentials(url: string): string {
  if (!URL.canParse(url)) return url;
  const { origin, pathname } = new URL(url);
  return `${origin}${pathname}`;
}

/** Null once a TCP connection to `url`'s host and port opens; else why not. */
function unreachable(url: string, timeoutMs: number): Promise<string | null> {
  let target: URL;
  try {
    target = new URL(url);
  } catch {
    return Promise.resolve('not a URL');
  }
  const port = Number(target.port) || (target.protocol === 'https:' ? 443 : 80);
  return new Promise((resolve) => {
    const socket = connect({ host: target.hostname.replace(/^\[|\]$/g, ''), port });
    const done = (why: string | null) => {
      socket.destroy();
      resolve(why);
    };
    socket.setTimeout(timeoutMs, () => done(`no connection within ${timeoutMs} ms`));
    socket.once('connect', () => done(null));
    socket.once('error', (err: NodeJS.ErrnoException) => done(err.code ?? err.message));
  });
}

/**
 * The CLI's telemetry. The collector is checked once at start (without delaying the run): when
 * none answers, `warn` gets one line and nothing is flushed at exit (the exporters would retry
 * for ~10 s before dropping it: a 2.7 s demo took 11.9 s); a collector that answers gets at most
 * `flushMs` for what is buffered.
 */
export async function cliTelemetry(
  enabled: boolean | undefined,
  env: NodeJS.ProcessEnv,
  warn: (line: string) => void,
  flushMs = FLUSH_MS,
): Promise<CliTelemetry> {
  if (!enabled) return OFF;
  const { traceSdk, metricsSdk, resources, traceExporter, metricExporter } = await load();
  const endpoint = tracesEndpoint(env);
  const reached = unreachable(endpoint, PROBE_MS).then((why) => {
    if (why === null) return true;
    warn(`troupe: --otel: no OpenTelemetry collector answers at ${withoutCredentials(endpoint)} (${why}); this run's spans and metrics are dropped\n`);
    return false;
  });
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
      // An unreachable collector must not turn a finished run into a failed exit, nor hold it.
      const flushed = Promise.allSettled([tracerProvider.shutdown(), meterProvider.shutdown()]);
      if (!(await reached)) return;
      let timer: NodeJS.Timeout | undefined;
      const bound = new Promise<void>((resolve) => (timer = setTimeout(resolve, flushMs)));
      await Promise.race([flushed, bound]);
      clearTimeout(timer);
    },
  };
}
