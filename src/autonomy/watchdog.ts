/**
 * A generic health monitor: callers `register(name, check)` a zero-argument check returning
 * `true` (healthy) or `false` (or throwing / rejecting / not settling within `checkTimeoutMs`),
 * and the watchdog polls every registered check on a fixed interval of the injected clock.
 *
 * - Every check of every round publishes one `watchdog.health_check` {@link AuditEvent} on the
 *   optional bus, whatever the outcome.
 * - A failure is logged at warn, except the one that makes `consecutiveFailures` reach
 *   `failureThreshold`, which is logged at error (once per unhealthy streak); a recovery
 *   (unhealthy → healthy) is logged at info.
 * - Rounds never overlap: the next polling round is armed only after the previous one completed,
 *   and `checkNow()` called while a round is in progress runs right after it.
 * - `stop()` only stops scheduling: a round already in progress finishes and records, logs and
 *   emits its results normally (as `checkNow()` does on a stopped watchdog).
 * - A check unregistered (or unregistered and registered again) while its round is in progress
 *   has its result discarded: nothing is recorded, logged or emitted for it.
 * @module
 */
import type { Logger } from 'pino';
import { silentLogger } from '../logging/createLogger.js';
import { systemClock, type Clock } from '../clock.js';
import { ConfigError, errorMessage } from '../errors.js';
import type { AuditEvent, EventBus } from './eventBus.js';

export interface SubsystemHealth {
  name: string;
  /** `true` until the first failed check. */
  healthy: boolean;
  consecutiveFailures: number;
  /** `clock.now()` when the last check settled; `null` before the first one. */
  lastChecked: number | null;
  /** Why the last check failed; `null` when it passed (or has not run yet). */
  lastError: string | null;
}

/** `true` means healthy; `false`, throwing or rejecting means unhealthy. */
export type HealthCheck = () => boolean | Promise<boolean>;

export interface WatchdogOptions {
  /** Delay between the end of one polling round and the start of the next; default 60 000. */
  intervalMs?: number;
  /** Consecutive failures at which the failure is logged at error; default 3. */
  failureThreshold?: number;
  clock?: Clock;
  /** Default: a silent pino logger. */
  logger?: Logger;
  bus?: EventBus;
  /** A check that has not settled after this long counts as failed with "timed out"; default 10 000. */
  checkTimeoutMs?: number;
}

export const HEALTH_CHECK_EVENT = 'watchdog.health_check';

/** The largest delay Node's timers honour (larger values fire after 1 ms). */
const MAX_TIMER_MS = 2_147_483_647;

interface Entry {
  readonly check: HealthCheck;
  readonly health: SubsystemHealth;
}

type Outcome = { healthy: true } | { healthy: false; error: string };

function validateMs(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < 1 || value > MAX_TIMER_MS) {
    throw new ConfigError(`watchdog ${name} must be an integer between 1 and ${MAX_TIMER_MS}, got ${String(value)}`, {
      details: { option: name, value },
    });
  }
  return value;
}

export class Watchdog {
  readonly #intervalMs: number;
  readonly #failureThreshold: number;
  readonly #checkTimeoutMs: number;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #bus: EventBus | undefined;
  readonly #entries = new Map<string, Entry>();

  #running = false;
  /** The armed polling timer, if any. */
  #timer: unknown = undefined;
  #hasTimer = false;
  /** A polling round is queued or running (it re-arms the timer when it completes). */
  #pollInFlight = false;
  /** Settles when the last queued round completes; rounds are chained so they never overlap. */
  #tail: Promise<void> | undefined = undefined;

  constructor(options: WatchdogOptions = {}) {
    this.#intervalMs = validateMs('intervalMs', options.intervalMs, 60_000);
    this.#checkTimeoutMs = validateMs('checkTimeoutMs', options.checkTimeoutMs, 10_000);
    const threshold = options.failureThreshold ?? 3;
    if (!Number.isInteger(threshold) || threshold < 1) {
      throw new ConfigError(`watchdog failureThreshold must be an integer >= 1, got ${String(threshold)}`, {
        details: { option: 'failureThreshold', value: threshold },
      });
    }
    this.#failureThreshold = threshold;
    this.#clock = options.clock ?? systemClock;
    this.#logger = options.logger ?? silentLogger();
    this.#bus = options.bus;
  }

  /** Whether polling is on (between `start()` and `stop()`). */
  get running(): boolean {
    return this.#running;
  }

  /** Adds a check; it first runs in the next round. Allowed while running. */
  register(name: string, check: HealthCheck): void {
    if (typeof name !== 'string' || name.trim() === '') {
      throw new ConfigError('watchdog subsystem name must be a non-empty string', { details: { name } });
    }
    if (typeof check !== 'function') {
      throw new ConfigError(`watchdog check for "${name}" must be a function`, { details: { name } });
    }
    if (this.#entries.has(name)) {
      throw new ConfigError(`watchdog subsystem "${name}" is already registered`, { details: { name } });
    }
    this.#entries.set(name, {
      check,
      health: { name, healthy: true, consecutiveFailures: 0, lastChecked: null, lastError: null },
    });
  }

  /** Removes a check and its health record; `false` when no such name was registered. */
  unregister(name: string): boolean {
    return this.#entries.delete(name);
  }

  /** Starts polling: the first round runs `intervalMs` after this call. Idempotent. */
  start(): void {
    if (this.#running) return;
    this.#running = true;
    // A polling round still in progress (stop() then start()) re-arms when it completes.
    if (!this.#pollInFlight) this.#arm();
  }

  /** Stops polling. Idempotent. A round in progress still finishes and reports normally. */
  stop(): void {
    if (!this.#running) return;
    this.#running = false;
    if (this.#hasTimer) {
      this.#clock.clearTimeout(this.#timer);
      this.#hasTimer = false;
      this.#timer = undefined;
    }
  }

  /**
   * Runs one round now (all checks called concurrently, synchronously within this call; or, when a
   * round is in progress, right after it) and resolves with the report. Works whether or not the
   * watchdog is started.
   */
  checkNow(): Promise<Record<string, SubsystemHealth>> {
    return this.#enqueueRound();
  }

  /** A copy of every registered subsystem's health, in registration order. */
  getReport(): Record<string, SubsystemHealth> {
    return Object.fromEntries([...this.#entries].map(([name, entry]) => [name, { ...entry.health }]));
  }

  #arm(): void {
    this.#hasTimer = true;
    this.#timer = this.#clock.setTimeout(() => this.#onTimer(), this.#intervalMs);
  }

  #onTimer(): void {
    this.#hasTimer = false;
    this.#timer = undefined;
    if (!this.#running) return;
    this.#pollInFlight = true;
    void this.#enqueueRound()
      .catch((err: unknown) => this.#logger.error({ err }, 'watchdog round failed'))
      .finally(() => {
        this.#pollInFlight = false;
        if (this.#running && !this.#hasTimer) this.#arm();
      });
  }

  /** Starts a round now (its checks are called synchronously) or, if one is in progress, after it. */
  #enqueueRound(): Promise<Record<string, SubsystemHealth>> {
    const previous = this.#tail;
    const round = previous ? previous.then(() => this.#runRound()) : this.#runRound();
    const settled = round.then(
      () => undefined,
      () => undefined,
    );
    this.#tail = settled;
    void settled.then(() => {
      if (this.#tail === settled) this.#tail = undefined;
    });
    return round;
  }

  async #runRound(): Promise<Record<string, SubsystemHealth>> {
    const entries = [...this.#entries.values()];
    await Promise.all(
      entries.map(async (entry) => {
        const outcome = await this.#runCheck(entry.check);
        // Unregistered (or replaced) while the check ran: discard the result.
        if (this.#entries.get(entry.health.name) !== entry) return;
        this.#record(entry.health, outcome);
      }),
    );
    return this.getReport();
  }

  /** Settles with the check's outcome; never rejects. */
  #runCheck(check: HealthCheck): Promise<Outcome> {
    return new Promise<Outcome>((resolve) => {
      let settled = false;
      const finish = (outcome: Outcome) => {
        if (settled) return;
        settled = true;
        this.#clock.clearTimeout(timer);
        resolve(outcome);
      };
      const timer = this.#clock.setTimeout(() => finish({ healthy: false, error: 'timed out' }), this.#checkTimeoutMs);
      let result: boolean | Promise<boolean>;
      try {
        result = check();
      } catch (err) {
        finish({ healthy: false, error: errorMessage(err) });
        return;
      }
      Promise.resolve(result).then(
        (value) => finish(value === true ? { healthy: true } : { healthy: false, error: value === false ? 'returned false' : `returned ${typeof value}` }),
        (err: unknown) => finish({ healthy: false, error: errorMessage(err) }),
      );
    });
  }

  #record(health: SubsystemHealth, outcome: Outcome): void {
    const now = this.#clock.now();
    const wasHealthy = health.healthy;
    health.lastChecked = now;
    if (outcome.healthy) {
      health.healthy = true;
      health.consecutiveFailures = 0;
      health.lastError = null;
      if (!wasHealthy) this.#logger.info({ subsystem: health.name }, `subsystem "${health.name}" recovered`);
    } else {
      health.healthy = false;
      health.consecutiveFailures += 1;
      health.lastError = outcome.error;
      const fields = { subsystem: health.name, consecutiveFailures: health.consecutiveFailures, error: outcome.error };
      if (health.consecutiveFailures === this.#failureThreshold) {
        this.#logger.error(fields, `subsystem "${health.name}" unhealthy: failure threshold reached`);
      } else {
        this.#logger.warn(fields, `subsystem "${health.name}" health check failed`);
      }
    }
    const event: AuditEvent = {
      type: HEALTH_CHECK_EVENT,
      at: now,
      name: health.name,
      healthy: health.healthy,
      consecutiveFailures: health.consecutiveFailures,
      error: health.lastError,
    };
    this.#bus?.emit(event);
  }
}
