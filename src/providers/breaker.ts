/**
 * A circuit breaker per provider endpoint (seed 000, issue 34 item 1), shared by every agent of
 * every run in the process that calls that endpoint (`Model.endpoint`; a model without one is an
 * endpoint of its own) and, given a `BreakerStore` (a worker on PostgreSQL: breakerPg.ts), by every
 * worker of the cluster. The transitions are breakerState.ts's pure reducer.
 *
 * - **closed**: calls go. `failureThreshold` outage failures in a row (no connection, a timeout,
 *   5xx/408/409) open it; any other answer from the endpoint, even an error, resets the count.
 * - **open**: calls park at the gate at no cost — no call, no retry attempt spent — until
 *   `cooldownMs` has passed; then exactly one call goes as the **probe** (half-open).
 * - **half-open**: the probe's success closes it and releases every parked call; its outage
 *   failure opens it again for another `cooldownMs`.
 * - Open for `openTimeoutMs` in all (since the outage began): the parked calls fail with
 *   `PROVIDER_CIRCUIT_OPEN`, one typed outcome per agent.
 *
 * The call that opens the breaker, and one in flight when it opened, park too instead of
 * surfacing their failure: the outage is the breaker's to wait out, not each agent's retries.
 * Time is the run's clock. Alone, the state is in memory (a new process starts closed). Shared,
 * this process keeps a copy of the cluster's row: re-read before a call once it is `syncMs` old
 * (so a breaker another worker opened parks this worker's calls before they go), and every `syncMs`
 * while calls park; the probe is claimed in the row, so one probe goes across the cluster. Outage
 * failures and the probe's outcome are written to the row; plain successes are not (a count another
 * worker began is reset by its own next answer).
 * @module
 */
import type { Clock } from '../clock.js';
import { ProviderError, type ErrorCode } from '../errors.js';
import type { Model } from '../model/types.js';
import { CLOSED, stepBreaker, type BreakerEvent, type BreakerPolicy, type BreakerRow, type BreakerState, type BreakerStep } from './breakerState.js';

export type { BreakerPolicy, BreakerState } from './breakerState.js';

/** A change of a breaker's state, told to every run using it (a `provider.breaker` event). */
export interface BreakerChange {
  endpoint: string;
  state: BreakerState;
  /** Outage failures in a row that led here. */
  failures: number;
  /** When the outage began (null once closed). */
  openSince: number | null;
  at: number;
}

/**
 * Where a cluster's breakers live (the port): each operation steps the endpoint's row with
 * `stepBreaker` atomically where it lives and returns the step.
 */
export interface BreakerStore {
  /** The endpoint's row (closed if it has none). */
  read(endpoint: string): Promise<BreakerRow>;
  /** Step the endpoint's row by `event` under `policy`, atomically. */
  step(endpoint: string, event: BreakerEvent, policy: BreakerPolicy): Promise<BreakerStep>;
}

/** A breaker shared through `store`, its copy re-read once `syncMs` old. */
export interface BreakerShare {
  store: BreakerStore;
  syncMs: number;
}

/**
 * A permission to call: `probe` is the one call let through while the breaker is not closed,
 * `claimedAt` when it was claimed (its identity: a lapsed probe reports as an ordinary call).
 */
export interface Ticket {
  readonly probe: boolean;
  readonly claimedAt?: number;
}

const GO: Ticket = Object.freeze({ probe: false });
const probeOf = (ticket: Ticket): number | null => (ticket.probe ? (ticket.claimedAt ?? null) : null);

/** Failures that say the endpoint is down, not that it refused this request. */
const OUTAGE: ReadonlySet<ErrorCode> = new Set(['PROVIDER_CONNECTION', 'PROVIDER_TIMEOUT', 'PROVIDER_UNAVAILABLE']);

/** Whether `err` says the endpoint is down (the breaker counts it). */
const isOutage = (err: unknown): boolean => err instanceof ProviderError && OUTAGE.has(err.code);

export class Breaker {
  readonly endpoint: string;
  readonly #clock: Clock;
  readonly #policy: BreakerPolicy;
  readonly #share: BreakerShare | null;
  #row: BreakerRow = CLOSED;
  /** When the copy was last read from the shared row (-Infinity: never). */
  #syncedAt = -Infinity;
  #syncing: Promise<void> | null = null;
  /** Steps of the copy so far: a read or a write to the row answers for the copy only if none came after it began. */
  #version = 0;
  /** Writes to the row, in the order of the copy's steps (a read while one is pending is not taken). */
  #writes: Promise<unknown> = Promise.resolve();
  #writing = 0;
  /** Parked callers: each re-reads the state when told. */
  readonly #parked = new Set<() => void>();
  readonly #listeners = new Set<(change: BreakerChange) => void>();
  /** Told when writing to or reading from the shared row failed (the copy goes on alone meanwhile). */
  onShareError: (err: unknown) => void = () => undefined;

  constructor(endpoint: string, clock: Clock, policy: BreakerPolicy, share: BreakerShare | null = null) {
    this.endpoint = endpoint;
    this.#clock = clock;
    this.#policy = policy;
    this.#share = share;
  }

  get state(): BreakerState {
    return this.#row.state;
  }

  /** Hear state changes; returns a way to stop. */
  listen(listener: (change: BreakerChange) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** A ticket at once when closed (and, shared, the copy fresh): the fast path, no promise; null: `wait` for one. */
  now(): Ticket | null {
    return this.#row.state === 'closed' && !this.#stale() ? GO : null;
  }

  /** A ticket once a call may go: at once if closed, as the probe when due, else when it closes. */
  async wait(signal: AbortSignal): Promise<Ticket> {
    for (;;) {
      if (signal.aborted) throw signal.reason;
      if (this.#stale()) await this.#sync();
      const now = this.#clock.now();
      let verdict = this.#local({ type: 'claim', now });
      // The probe is the cluster's to give: claimed in the shared row.
      if (verdict.kind === 'probe' && this.#share) verdict = await this.#shared({ type: 'claim', now }, verdict);
      switch (verdict.kind) {
        case 'go':
          return GO;
        case 'probe':
          return { probe: true, claimedAt: now };
        case 'expired':
          throw new ProviderError(
            'PROVIDER_CIRCUIT_OPEN',
            `The endpoint ${this.endpoint} has been unreachable for ${Math.round((now - verdict.since) / 1000)} s (circuit open since ${new Date(verdict.since).toISOString()})`,
            { retryable: false },
          );
        case 'wait': {
          // Shared: another worker's probe may close it, seen at the next read.
          const until = this.#share ? Math.min(verdict.until, now + this.#share.syncMs) : verdict.until;
          await this.#park(until - now, signal);
          break;
        }
        default:
          break;
      }
    }
  }

  /** The endpoint answered: closed, the count reset. */
  succeeded(ticket: Ticket): void {
    const mattered = this.#row.state !== 'closed' || this.#row.failures > 0 || ticket.probe;
    this.#local({ type: 'succeeded' });
    if (mattered) void this.#shared({ type: 'succeeded' }, null);
  }

  /** The ticket was not used (the call never left: the budget halted it, or it was cancelled). */
  unused(ticket: Ticket): void {
    const event: BreakerEvent = { type: 'unused', now: this.#clock.now(), probe: probeOf(ticket) };
    this.#local(event);
    if (ticket.probe) void this.#shared(event, null);
  }

  /**
   * The call failed with `err`. `surface`: the agent's recovery handles it as before; `park`: the
   * endpoint is down — `wait` for a new ticket and call again.
   */
  failed(ticket: Ticket, err: unknown): 'surface' | 'park' {
    if (!isOutage(err)) {
      // The endpoint answered (a 4xx, a 429, a refusal): it is up.
      if (err instanceof ProviderError) this.succeeded(ticket);
      else this.unused(ticket);
      return 'surface';
    }
    const event: BreakerEvent = { type: 'failed', now: this.#clock.now(), probe: probeOf(ticket) };
    const verdict = this.#local(event);
    void this.#shared(event, null);
    return verdict.kind === 'park' ? 'park' : 'surface';
  }

  /** Step this process's copy; tell listeners and parked callers of a change of state. */
  #local(event: BreakerEvent): BreakerStep['verdict'] {
    const step = stepBreaker(this.#row, event, this.#policy);
    this.#version++;
    this.#adopt(step.row);
    return step.verdict;
  }

  /** Step the shared row (if any) and take it as this process's copy; `fallback` if the store failed. */
  async #shared<V extends BreakerStep['verdict'] | null>(event: BreakerEvent, fallback: V): Promise<BreakerStep['verdict'] | V> {
    if (!this.#share) return fallback;
    const store = this.#share.store;
    const version = this.#version;
    this.#writing++;
    const written = this.#writes.then(() => store.step(this.endpoint, event, this.#policy));
    this.#writes = written.catch(() => undefined);
    try {
      const step = await written;
      // A later step of the copy is on its way to the row: its answer is the newer.
      if (this.#version === version) {
        this.#syncedAt = this.#clock.now();
        this.#adopt(step.row);
      }
      return step.verdict;
    } catch (err) {
      this.onShareError(err);
      return fallback;
    } finally {
      this.#writing--;
    }
  }

  #stale(): boolean {
    return this.#share !== null && this.#clock.now() - this.#syncedAt >= this.#share.syncMs;
  }

  /** Read the shared row into the copy (one read at a time however many callers ask). */
  #sync(): Promise<void> {
    const share = this.#share!;
    const version = this.#version;
    this.#syncing ??= share.store
      .read(this.endpoint)
      .then(
        (row) => {
          this.#syncedAt = this.#clock.now();
          // Not over a step of the copy the row has not had yet (it may have read the row before the write).
          if (this.#version === version && this.#writing === 0) this.#adopt(row);
        },
        (err: unknown) => {
          // The copy goes on alone until the next read.
          this.#syncedAt = this.#clock.now();
          this.onShareError(err);
        },
      )
      .finally(() => (this.#syncing = null));
    return this.#syncing;
  }

  #adopt(row: BreakerRow): void {
    const before = this.#row.state;
    this.#row = row;
    if (row.state === before) return;
    const change: BreakerChange = { endpoint: this.endpoint, state: row.state, failures: row.failures, openSince: row.openSince, at: this.#clock.now() };
    for (const listener of this.#listeners) listener(change);
    for (const wake of [...this.#parked]) wake();
  }

  /** Until `ms` pass or the state changes; rejects if `signal` aborts. */
  #park(ms: number, signal: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      const done = () => {
        this.#clock.clearTimeout(timer);
        this.#parked.delete(done);
        signal.removeEventListener('abort', aborted);
        resolve();
      };
      const aborted = () => {
        done();
        reject(signal.reason);
      };
      const timer = this.#clock.setTimeout(done, Math.max(0, ms));
      this.#parked.add(done);
      signal.addEventListener('abort', aborted, { once: true });
    });
  }
}

/** This process's breakers by clock (a test's simulated clock is a world of its own), then by store, then by endpoint. */
const LOCAL = {};
const named = new WeakMap<Clock, WeakMap<object, Map<string, Breaker>>>();
const anonymous = new WeakMap<Clock, WeakMap<Model, Breaker>>();

/**
 * The process's breaker for `model`'s endpoint on `clock` (made with `policy` by its first user:
 * later users share it as it is), shared through `share` if given.
 */
export function breakerFor(model: Model, clock: Clock, policy: BreakerPolicy, share: BreakerShare | null = null): Breaker {
  if (model.endpoint !== undefined) {
    let byStore = named.get(clock);
    if (!byStore) named.set(clock, (byStore = new WeakMap()));
    const key = share?.store ?? LOCAL;
    let byEndpoint = byStore.get(key);
    if (!byEndpoint) byStore.set(key, (byEndpoint = new Map()));
    let breaker = byEndpoint.get(model.endpoint);
    if (!breaker) byEndpoint.set(model.endpoint, (breaker = new Breaker(model.endpoint, clock, policy, share)));
    return breaker;
  }
  // A model without an endpoint is one of this process's own: nobody else can share it.
  let byModel = anonymous.get(clock);
  if (!byModel) anonymous.set(clock, (byModel = new WeakMap()));
  let breaker = byModel.get(model);
  if (!breaker) byModel.set(model, (breaker = new Breaker(model.name ?? 'model', clock, policy)));
  return breaker;
}
