/**
 * The health checks `troupe serve` registers with its {@link Watchdog}: the store, the model
 * endpoint and the coordinators' queues. Each is a `HealthCheck`: it resolves `true` when healthy
 * and throws (rejects) with the reason when not, so the watchdog records a useful `lastError`.
 * @module
 */
import { systemClock, type Clock } from '../clock.js';
import type { HealthCheck } from '../autonomy/watchdog.js';
import type { Coordinator } from '../host/createCoordinator.js';
import { errorMessage } from '../errors.js';
import type { Store } from '../store/types.js';

/** Between the end of one round of health checks and the next, unless the config says otherwise. */
export const DEFAULT_WATCHDOG_INTERVAL_MS = 30_000;

/** Where the `openai` client sends requests when no base URL is configured. */
export const OPENAI_DEFAULT_BASE_URL = 'https://api.openai.com/v1';
const DEFAULT_MODEL_CHECK_TIMEOUT_MS = 5_000;

/**
 * A run id no run has: reading it is one indexed lookup that touches the database. No NUL in it:
 * PostgreSQL's text refuses one (22021), which would make every check of a healthy server fail.
 */
const PROBE_RUN_ID = '\u0001troupe-health-probe';

/**
 * `store`: a cheap read of the database succeeds (it fails once the store is closed or broken).
 * Any store's `getRun`: SQLite's answers at once, PostgreSQL's (`store.reads`) asks the server.
 */
export function storeCheck(store: { getRun(runId: string): ReturnType<Store['getRun']> | Promise<unknown> }): HealthCheck {
  return async () => {
    await store.getRun(PROBE_RUN_ID);
    return true;
  };
}

export interface ModelCheckOptions {
  /** The endpoint's base URL (as given to `openaiModel`); default the OpenAI API. */
  baseURL?: string | undefined;
  /** Sent as a bearer token when non-empty (so a real endpoint answers 200 rather than 401). */
  apiKey?: string | undefined;
  /** Abort the request after this long on `clock`; default 5 000. */
  timeoutMs?: number;
  clock?: Clock;
  /** Aborts any request in flight (the host is shutting down). */
  signal?: AbortSignal;
  /** Default: the global `fetch`. */
  fetch?: typeof fetch;
}

/**
 * `model`: GET `<baseURL>/models`. Any HTTP answer below 500 means the endpoint is up (a 401 or a
 * 404 is still a server answering); a 5xx, a refused connection, a DNS failure or no answer within
 * `timeoutMs` is unhealthy.
 */
export function modelCheck(options: ModelCheckOptions = {}): HealthCheck {
  const base = (options.baseURL && options.baseURL.trim() !== '' ? options.baseURL : OPENAI_DEFAULT_BASE_URL).replace(/\/+$/, '');
  const url = `${base}/models`;
  const timeoutMs = options.timeoutMs ?? DEFAULT_MODEL_CHECK_TIMEOUT_MS;
  const clock = options.clock ?? systemClock;
  const doFetch = options.fetch ?? fetch;
  const headers: Record<string, string> = { accept: 'application/json' };
  if (options.apiKey) headers.authorization = `Bearer ${options.apiKey}`;

  return async () => {
    const controller = new AbortController();
    const timedOut = new Error(`GET ${url}: no answer within ${timeoutMs} ms`);
    const timer = clock.setTimeout(() => controller.abort(timedOut), timeoutMs);
    const onAbort = () => controller.abort(new Error(`GET ${url}: cancelled`));
    if (options.signal?.aborted) onAbort();
    options.signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const response = await doFetch(url, { method: 'GET', headers, signal: controller.signal });
      // Only the status matters: do not hold the connection for a body nobody reads.
      await response.body?.cancel().catch(() => undefined);
      if (response.status >= 500) throw new Error(`GET ${url} answered ${response.status}`);
      return true;
    } catch (err) {
      if (controller.signal.aborted) throw controller.signal.reason as Error;
      const cause = (err as { cause?: unknown }).cause;
      throw new Error(`GET ${url} failed: ${errorMessage(err)}${cause === undefined ? '' : ` (${errorMessage(cause)})`}`, { cause: err });
    } finally {
      clock.clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
    }
  };
}

/** How many checks in a row a queue may hold waiting calls with none running before it is unhealthy. */
const STUCK_QUEUE_CHECKS = 2;

/**
 * `queue`: every coordinator (read at each check) reports `health().ok`, and no queue has calls
 * waiting while none runs `stuckChecks` (default 2) checks in a row.
 */
export function queueCheck(coordinators: () => Iterable<Pick<Coordinator, 'runId' | 'health'>>, options: { stuckChecks?: number } = {}): HealthCheck {
  const stuckChecks = options.stuckChecks ?? STUCK_QUEUE_CHECKS;
  /** `<runId> <queue>` → consecutive checks that found it stuck. */
  const stuck = new Map<string, number>();
  return () => {
    const problems: string[] = [];
    const seen = new Set<string>();
    for (const c of coordinators()) {
      const health = c.health();
      if (!health.ok) problems.push(`run ${c.runId} accepts no work (${health.error ? `${health.error.code}: ${health.error.message}` : 'failed'})`);
      for (const [name, queue] of [
        ['model', health.modelQueue],
        ['tool', health.toolQueue],
      ] as const) {
        const key = `${c.runId} ${name}`;
        seen.add(key);
        const count = queue.waiting > 0 && queue.running === 0 ? (stuck.get(key) ?? 0) + 1 : 0;
        if (count === 0) stuck.delete(key);
        else stuck.set(key, count);
        if (count >= stuckChecks) {
          problems.push(`run ${c.runId}: the ${name} queue has ${queue.waiting} call(s) waiting and none running (${count} checks in a row)`);
        }
      }
    }
    // A coordinator that went away takes its history with it.
    for (const key of [...stuck.keys()]) if (!seen.has(key)) stuck.delete(key);
    if (problems.length > 0) throw new Error(problems.join('; '));
    return true;
  };
}
