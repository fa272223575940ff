/**
 * Adaptive admission of model calls (issue 36 item 3, `concurrency.adaptive`): the model queue
 * admits fewer calls at once while the event loop lags and more again when it does not, never
 * above the user's `concurrency.model` and never below `min(concurrency.model, 8)` — at the default
 * cap it changes nothing. Every turn costs the loop CPU (~1 ms at scale, most of it the model call's
 * HTTP and parsing): a process asked for more calls than it can serve answers them all late, and
 * every timer, commit and the root's spawn turns with them; admitting fewer keeps the loop
 * responsive and loses nothing the CPU could have done.
 *
 * The policy is AIMD on the event-loop delay's p99 of each window: above `maxLagMs` the limit is
 * multiplied by 0.7; below half of it the limit grows by 1/16 of the cap (back from the floor to
 * the cap in 16 windows); in between it holds. A window closes when a call ends at least WINDOW_MS
 * after the last one closed (on the run's clock): no timer of its own, nothing at all while no call
 * ends, and at most one histogram read per window.
 *
 * Off by default, measured: it cannot tell its own turns' CPU from another process's. The scale
 * bench (K = 1,000, memory, on a 2-core machine other processes loaded to ~11) with it on: loop
 * delay p99 105 ms against 2,263 ms, but 4.0x the time (12 % of ideal against 49 %) — the loop
 * lagged for want of the CPU others held, and fewer calls in flight only idled the model's latency.
 * @module
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { Clock } from '../../clock.js';

/** The event-loop delay p99 (ms) since the last read; each read starts a new window. */
export type LagSource = () => number;

export interface AdmissionPolicy {
  /** The user's `concurrency.model`: the limit never goes above it. */
  cap: number;
  /** The limit never goes below it. */
  floor: number;
  /** A window's event-loop delay p99 above which fewer calls are admitted. */
  maxLagMs: number;
}

/** The target for the event-loop delay p99 at scale. */
export const DEFAULT_MAX_LAG_MS = 50;
/** How long a window lasts at least (one histogram read per window). */
export const WINDOW_MS = 500;
/** The lowest limit the policy sets (or the cap, when lower). */
const FLOOR = 8;
const INCREASE_STEPS = 16;

export function admissionPolicy(cap: number, maxLagMs = DEFAULT_MAX_LAG_MS): AdmissionPolicy {
  return { cap, floor: Math.min(cap, FLOOR), maxLagMs };
}

/** The next limit after a window whose event-loop delay p99 was `lagMs` (pure). */
export function nextLimit(limit: number, lagMs: number, policy: AdmissionPolicy): number {
  const { cap, floor, maxLagMs } = policy;
  if (lagMs > maxLagMs) return Math.max(floor, Math.floor((limit * 7) / 10));
  if (lagMs < maxLagMs / 2) return Math.min(cap, limit + Math.max(1, Math.ceil(cap / INCREASE_STEPS)));
  return Math.min(cap, Math.max(floor, limit));
}

/** The process's event-loop delay (node:perf_hooks), read as one window's p99 in ms. */
function eventLoopLag(): { lag: LagSource; close(): void } {
  const histogram = monitorEventLoopDelay({ resolution: 10 });
  histogram.enable();
  return {
    lag: () => {
      // No sample yet (the window was shorter than the resolution): no lag seen.
      const p99 = histogram.count === 0 ? 0 : histogram.percentile(99) / 1e6;
      histogram.reset();
      return p99;
    },
    close: () => histogram.disable(),
  };
}

/** What the admission sets: p-queue's `concurrency` (changeable while it runs; a raise starts waiting tasks at once). */
interface Limited {
  concurrency: number;
}

/** The policy applied to a queue: `ended()` is told of every call that ends. */
export class AdaptiveAdmission {
  readonly #queue: Limited;
  readonly #policy: AdmissionPolicy;
  readonly #clock: Clock;
  readonly #lag: LagSource;
  #windowStart: number;

  constructor(queue: Limited, policy: AdmissionPolicy, deps: { clock: Clock; lag: LagSource }) {
    this.#queue = queue;
    this.#policy = policy;
    this.#clock = deps.clock;
    this.#lag = deps.lag;
    this.#windowStart = deps.clock.now();
    queue.concurrency = policy.cap;
  }

  /** A call ended: when its window is over, the limit follows the window's lag. */
  ended(): void {
    const now = this.#clock.now();
    if (now - this.#windowStart < WINDOW_MS) return;
    this.#windowStart = now;
    const next = nextLimit(this.#queue.concurrency, this.#lag(), this.#policy);
    if (next !== this.#queue.concurrency) this.#queue.concurrency = next;
  }
}

/** A queue that tells when a call ends (p-queue's 'next'). */
interface Observed extends Limited {
  on(event: 'next', listener: () => void): unknown;
  off(event: 'next', listener: () => void): unknown;
}

/**
 * With `concurrency.adaptive` on: the model queue's limit follows the event-loop delay (this
 * process's own monitor unless a source is given), read when a call ends. Null when it is off.
 */
export function attachAdmission(
  queue: Observed,
  concurrency: { model: number; adaptive: { maxLagMs: number; lag: LagSource | null } | null },
  clock: Clock,
): { close(): void } | null {
  const adaptive = concurrency.adaptive;
  if (adaptive === null) return null;
  const own = adaptive.lag === null ? eventLoopLag() : null;
  const admission = new AdaptiveAdmission(queue, admissionPolicy(concurrency.model, adaptive.maxLagMs), { clock, lag: adaptive.lag ?? own!.lag });
  const ended = () => admission.ended();
  queue.on('next', ended);
  return { close: () => (queue.off('next', ended), own?.close()) };
}
