/**
 * One quota per provider endpoint (issue 34 item 2): requests and tokens per minute, taken before a
 * call starts — as the budget reserves money — and shared by every run of the process (one
 * `QuotaStore` in memory) or, on PostgreSQL, by the cluster (quotaPg.ts). A 429 with `retry-after`
 * pauses the endpoint for everyone until then, not only the agent that got it.
 *
 * Windows are fixed clock minutes on troupe's clock: at most `requestsPerMinute` calls start in any
 * minute [k·60 s, (k+1)·60 s). A call takes 1 request plus its estimated tokens (prompt estimate +
 * max output); its answer settles the tokens to the real usage, so later callers get the room back.
 * @module
 */
import { randomUUID } from 'node:crypto';
import { sleep, type Clock } from '../clock.js';

export const QUOTA_WINDOW_MS = 60_000;

export interface QuotaLimits {
  requestsPerMinute: number | null;
  tokensPerMinute: number | null;
}

/** What a take got: the call may start, or the time (troupe's clock) to try again and whether a 429 paused the endpoint. */
export type QuotaTake = { ok: true } | { ok: false; retryAt: number; pausedUntil: number | null };

/**
 * The shared counters (the port): one row per endpoint with its current window's requests and
 * tokens and the time a 429 paused it until. Each operation is atomic where the counters live.
 */
export interface QuotaStore {
  /** Take 1 request and `tokens` from the window starting at `window` if both fit and the endpoint is not paused at `now`. */
  take(endpoint: string, window: number, tokens: number, limits: QuotaLimits, now: number, signal?: AbortSignal): Promise<QuotaTake>;
  /** Add `tokens` (negative: give back) to the window a take came from; nothing if that window is over. */
  adjust(endpoint: string, window: number, tokens: number, signal?: AbortSignal): Promise<void>;
  /** Pause the endpoint until `until` (a later pause wins). */
  pause(endpoint: string, until: number, signal?: AbortSignal): Promise<void>;
}

interface Row {
  window: number;
  requests: number;
  tokens: number;
  pausedUntil: number;
}

/** The decision one take makes on a row (shared by the memory store and the PostgreSQL tests of it). */
function decide(row: Row, window: number, tokens: number, limits: QuotaLimits, now: number): QuotaTake {
  if (row.pausedUntil > now) return { ok: false, retryAt: row.pausedUntil, pausedUntil: row.pausedUntil };
  const current = row.window >= window;
  const requests = current ? row.requests : 0;
  const taken = current ? row.tokens : 0;
  const requestsFit = limits.requestsPerMinute === null || requests + 1 <= limits.requestsPerMinute;
  // A call larger than the whole token quota still starts alone in an empty window (else never).
  const tokensFit = limits.tokensPerMinute === null || taken === 0 || taken + tokens <= limits.tokensPerMinute;
  if (!requestsFit || !tokensFit) return { ok: false, retryAt: Math.max(row.window, window) + QUOTA_WINDOW_MS, pausedUntil: null };
  row.window = Math.max(row.window, window);
  row.requests = requests + 1;
  row.tokens = taken + tokens;
  return { ok: true };
}

/** The counters of one process: every run it hosts (a worker with `--concurrency 50`) shares them. */
export class MemoryQuotaStore implements QuotaStore {
  readonly #rows = new Map<string, Row>();

  #row(endpoint: string): Row {
    let row = this.#rows.get(endpoint);
    if (!row) this.#rows.set(endpoint, (row = { window: -Infinity, requests: 0, tokens: 0, pausedUntil: -Infinity }));
    return row;
  }

  take(endpoint: string, window: number, tokens: number, limits: QuotaLimits, now: number): Promise<QuotaTake> {
    return Promise.resolve(decide(this.#row(endpoint), window, tokens, limits, now));
  }

  adjust(endpoint: string, window: number, tokens: number): Promise<void> {
    const row = this.#rows.get(endpoint);
    if (row && row.window === window) row.tokens = Math.max(0, row.tokens + tokens);
    return Promise.resolve();
  }

  pause(endpoint: string, until: number): Promise<void> {
    const row = this.#row(endpoint);
    row.pausedUntil = Math.max(row.pausedUntil, until);
    return Promise.resolve();
  }
}

/** The process-wide counters: the default of every run that sets no `quotaStore`. */
export const processQuotaStore: QuotaStore = new MemoryQuotaStore();

/** Per store, the waiters of this process to wake when room is given back. */
const WAKERS = new WeakMap<QuotaStore, Set<() => void>>();

/** What a started call holds: settled with its real tokens, or released if it failed. */
export interface QuotaTicket {
  readonly endpoint: string;
  readonly window: number;
  readonly tokens: number;
}

/** What the quota tells its run (a view event): an endpoint paused by a 429 until `until`, or a call waiting for it. */
export type QuotaNotice = { state: 'paused'; endpoint: string; until: number };

/** A run's view of the shared quota: its limits, its clock, the shared store. */
export class Quota {
  readonly limits: QuotaLimits;
  readonly #clock: Clock;
  readonly #store: QuotaStore;
  readonly #notify: (notice: QuotaNotice) => void;
  /** The pause last told of, by endpoint (a pause is told once, by whoever meets it first in this run). */
  readonly #told = new Map<string, number>();

  constructor(deps: { clock: Clock; store: QuotaStore; limits: QuotaLimits; notify?: (notice: QuotaNotice) => void }) {
    this.limits = deps.limits;
    this.#clock = deps.clock;
    this.#store = deps.store;
    this.#notify = deps.notify ?? (() => undefined);
  }

  /** Whether token estimates are needed (only a token quota reads the request). */
  get countsTokens(): boolean {
    return this.limits.tokensPerMinute !== null;
  }

  /**
   * Resolves with a ticket once 1 request and `tokens` are taken from the endpoint's window; waits
   * (on troupe's clock) while the window is full or a 429 paused the endpoint. Rejects with the
   * signal's reason if it aborts first: a waiter that gave up holds nothing.
   */
  async acquire(endpoint: string, tokens: number, signal?: AbortSignal): Promise<QuotaTicket> {
    for (;;) {
      if (signal?.aborted) throw signal.reason;
      const now = this.#clock.now();
      const window = now - (now % QUOTA_WINDOW_MS);
      const took = await this.#store.take(endpoint, window, tokens, this.limits, now, signal);
      if (took.ok) return { endpoint, window, tokens };
      // Paused by a 429 another run or worker got: this run is told too.
      if (took.pausedUntil !== null) this.#tell(endpoint, took.pausedUntil);
      await this.#wait(Math.max(1, took.retryAt - this.#clock.now()), signal);
    }
  }

  /** Sleep until `ms` pass or a caller of the same store in this process gives room back, whichever is first. */
  #wait(ms: number, signal: AbortSignal | undefined): Promise<void> {
    if (signal?.aborted) return Promise.reject(signal.reason as Error);
    let wakers = WAKERS.get(this.#store);
    if (!wakers) WAKERS.set(this.#store, (wakers = new Set()));
    const local = new AbortController();
    const wake = () => local.abort();
    wakers.add(wake);
    const onAbort = () => local.abort(signal?.reason);
    signal?.addEventListener('abort', onAbort, { once: true });
    return sleep(this.#clock, ms, local.signal)
      .catch(() => {
        if (signal?.aborted) throw signal.reason;
      })
      .finally(() => {
        wakers.delete(wake);
        signal?.removeEventListener('abort', onAbort);
      });
  }

  /** The call answered: its tokens become what it really used (the unused room goes back). */
  settle(ticket: QuotaTicket, usedTokens: number): Promise<void> {
    if (!this.countsTokens || usedTokens === ticket.tokens) return Promise.resolve();
    const given = usedTokens < ticket.tokens;
    return this.#store.adjust(ticket.endpoint, ticket.window, usedTokens - ticket.tokens).then(() => {
      // Waiters of this process try again at once (another worker's find the room at their next try).
      if (given) for (const wake of WAKERS.get(this.#store) ?? []) wake();
    });
  }

  /** A provider said 429 with a `retry-after`: the endpoint pauses for every caller of the store. */
  pause(endpoint: string, retryAfterMs: number): Promise<void> {
    const until = this.#clock.now() + retryAfterMs;
    this.#tell(endpoint, until);
    return this.#store.pause(endpoint, until);
  }

  #tell(endpoint: string, until: number): void {
    if ((this.#told.get(endpoint) ?? -Infinity) >= until) return;
    this.#told.set(endpoint, until);
    this.#notify({ state: 'paused', endpoint, until });
  }
}

const anonymous = new WeakMap<object, string>();
/** The quota key of a model: its `endpoint`, else the model object itself (an endpoint of its own). */
export function endpointOf(model: { readonly endpoint?: string }): string {
  if (typeof model.endpoint === 'string' && model.endpoint !== '') return model.endpoint;
  let key = anonymous.get(model);
  if (key === undefined) anonymous.set(model, (key = `model:${randomUUID()}`));
  return key;
}
