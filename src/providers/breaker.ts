/**
 * A circuit breaker per provider endpoint (seed 000, issue 34 item 1), shared by every agent of
 * every run in the process that calls that endpoint (`Model.endpoint`; a model without one is an
 * endpoint of its own).
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
 * Time is the run's clock; the state is in memory (a new process starts closed).
 * @module
 */
import type { Clock } from '../clock.js';
import { ProviderError, type ErrorCode } from '../errors.js';
import type { Model } from '../model/types.js';

export interface BreakerPolicy {
  failureThreshold: number;
  cooldownMs: number;
  openTimeoutMs: number;
}

export type BreakerState = 'closed' | 'open' | 'halfOpen';

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

/** A permission to call: `probe` is the one call let through while the breaker is not closed. */
export interface Ticket {
  readonly probe: boolean;
}

const GO: Ticket = Object.freeze({ probe: false });
const PROBE: Ticket = Object.freeze({ probe: true });

/** Failures that say the endpoint is down, not that it refused this request. */
const OUTAGE: ReadonlySet<ErrorCode> = new Set(['PROVIDER_CONNECTION', 'PROVIDER_TIMEOUT', 'PROVIDER_UNAVAILABLE']);

/** Whether `err` says the endpoint is down (the breaker counts it). */
const isOutage = (err: unknown): boolean => err instanceof ProviderError && OUTAGE.has(err.code);

export class Breaker {
  readonly endpoint: string;
  readonly #clock: Clock;
  readonly #policy: BreakerPolicy;
  #state: BreakerState = 'closed';
  #failures = 0;
  #openSince: number | null = null;
  /** When the next probe may go (open). */
  #probeAt = 0;
  /** Parked callers: each re-reads the state when told. */
  readonly #parked = new Set<() => void>();
  readonly #listeners = new Set<(change: BreakerChange) => void>();

  constructor(endpoint: string, clock: Clock, policy: BreakerPolicy) {
    this.endpoint = endpoint;
    this.#clock = clock;
    this.#policy = policy;
  }

  get state(): BreakerState {
    return this.#state;
  }

  /** Hear state changes; returns a way to stop. */
  listen(listener: (change: BreakerChange) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** A ticket at once when closed (the fast path: no promise); null: `wait` for one. */
  now(): Ticket | null {
    return this.#state === 'closed' ? GO : null;
  }

  /** A ticket once a call may go: at once if closed, as the probe when due, else when it closes. */
  async wait(signal: AbortSignal): Promise<Ticket> {
    for (;;) {
      if (signal.aborted) throw signal.reason;
      if (this.#state === 'closed') return GO;
      const now = this.#clock.now();
      const deadline = this.#openSince! + this.#policy.openTimeoutMs;
      if (now >= deadline) {
        throw new ProviderError(
          'PROVIDER_CIRCUIT_OPEN',
          `The endpoint ${this.endpoint} has been unreachable for ${Math.round((now - this.#openSince!) / 1000)} s (circuit open since ${new Date(this.#openSince!).toISOString()})`,
          { retryable: false },
        );
      }
      if (this.#state === 'open' && now >= this.#probeAt) {
        this.#change('halfOpen');
        return PROBE;
      }
      // Half-open: the probe decides; open: the next probe time. Either way no later than the deadline.
      await this.#park(Math.min(this.#state === 'open' ? this.#probeAt : deadline, deadline) - now, signal);
    }
  }

  /** The endpoint answered: closed, the count reset. */
  succeeded(_ticket: Ticket): void {
    this.#failures = 0;
    if (this.#state !== 'closed') this.#close();
  }

  /** The ticket was not used (the call never left: the budget halted it, or it was cancelled). */
  unused(ticket: Ticket): void {
    // A probe that never went: the next caller probes at once.
    if (ticket.probe && this.#state === 'halfOpen') {
      this.#probeAt = this.#clock.now();
      this.#change('open');
    }
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
    this.#failures += 1;
    if (ticket.probe) {
      this.#open();
      return 'park';
    }
    if (this.#state === 'closed') {
      if (this.#failures < this.#policy.failureThreshold) return 'surface';
      this.#open();
    }
    // Open or half-open: the outage is the breaker's to wait out.
    return 'park';
  }

  #open(): void {
    const now = this.#clock.now();
    this.#openSince ??= now;
    this.#probeAt = now + this.#policy.cooldownMs;
    this.#change('open');
  }

  #close(): void {
    this.#openSince = null;
    this.#change('closed');
  }

  #change(state: BreakerState): void {
    this.#state = state;
    const change: BreakerChange = { endpoint: this.endpoint, state, failures: this.#failures, openSince: this.#openSince, at: this.#clock.now() };
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

/** Breakers by clock (a test's simulated clock is a world of its own), then by endpoint. */
const named = new WeakMap<Clock, Map<string, Breaker>>();
const anonymous = new WeakMap<Clock, WeakMap<Model, Breaker>>();

/**
 * The process's breaker for `model`'s endpoint on `clock` (made with `policy` by its first user:
 * later users share it as it is).
 */
export function breakerFor(model: Model, clock: Clock, policy: BreakerPolicy): Breaker {
  if (model.endpoint !== undefined) {
    let byEndpoint = named.get(clock);
    if (!byEndpoint) named.set(clock, (byEndpoint = new Map()));
    let breaker = byEndpoint.get(model.endpoint);
    if (!breaker) byEndpoint.set(model.endpoint, (breaker = new Breaker(model.endpoint, clock, policy)));
    return breaker;
  }
  let byModel = anonymous.get(clock);
  if (!byModel) anonymous.set(clock, (byModel = new WeakMap()));
  let breaker = byModel.get(model);
  if (!breaker) byModel.set(model, (breaker = new Breaker(model.name ?? 'model', clock, policy)));
  return breaker;
}
