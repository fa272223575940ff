/**
 * Where `openaiModel`'s calls run under `thread: 'auto'` (the default): on the main thread while
 * it keeps up, in the model thread (threadedModel.ts) while a large team keeps it busy. The
 * decision is per call and per model: a call already made finishes where it started.
 * @module
 */
import { performance } from 'node:perf_hooks';

/**
 * The calls move to the thread when, over a window of `windowMs`, the event loop was busy at
 * least `share` of the time while at least `calls` of this model's calls were in flight; they
 * move back once fewer than a quarter of `calls` are (the thread's cost is then not worth it).
 * Both conditions are needed: a busy loop with few calls out gains little from moving them
 * (the calls are not what keeps it busy), and many calls out on an idle loop cost it nothing.
 */
export interface ModelThreadRule {
  windowMs: number;
  share: number;
  calls: number;
}

/**
 * The default rule: a loop busy at least 60 % of a second with at least 1,200 calls out. An
 * agent has at most one call out, so a team of 1,000 never moves. Measured (scale bench, 2 cores,
 * the fake server answering in 0.5-2 s, nothing set): 10,000 agents kept 1,331-1,415 calls out
 * (p50; max 1,656-1,777) with the loop 0.80-0.89 busy (p50) for 96-105 s of a ~120 s run; in the
 * thread their event-loop delay p99 fell 118 → 47 ms (memory) and 127 → 46 ms (FULL), in 0.98×
 * and 0.92× the time, for 1.08× and 0.99× the CPU per turn. 1,000 agents (≤ 1,001 calls out, the
 * loop busy 0.49-0.70 p50, 0.94 p90 on FULL) gained no time from the thread in earlier runs
 * (1.01×) and paid 1.15-1.33× the CPU.
 */
export const AUTO_MODEL_THREAD: ModelThreadRule = { windowMs: 1_000, share: 0.6, calls: 1_200 };

/** Whether `value` is a rule: finite, non-negative numbers, `share` at most 1. */
export function isModelThreadRule(value: unknown): value is ModelThreadRule {
  const rule = value as Partial<Record<keyof ModelThreadRule, unknown>> | null;
  const number = (v: unknown, max: number) => typeof v === 'number' && Number.isFinite(v) && v >= 0 && v <= max;
  return typeof rule === 'object' && rule !== null && number(rule.windowMs, 3_600_000) && number(rule.share, 1) && number(rule.calls, 1e9);
}

/** The time (ms) and the event loop's cumulative busy time (ms): two readings give its busy share in between. */
export interface LoopClock {
  now(): number;
  activeMs(): number;
}

const processLoop: LoopClock = { now: () => performance.now(), activeMs: () => performance.eventLoopUtilization().active };

/** Whether the next calls go to the thread, given the last window's loop share (null: none measured yet). */
export function onThreadNext(rule: ModelThreadRule, onThread: boolean, window: { busy: number | null; inFlight: number }): boolean {
  if (onThread) return window.inFlight >= rule.calls / 4;
  return window.busy !== null && window.busy >= rule.share && window.inFlight >= rule.calls;
}

/** A model's router: `route()` at a call's start says where it runs; `begin`/`end` count it in flight. */
export interface ThreadRouter {
  route(): boolean;
  begin(): void;
  end(): void;
}

export function threadRouter(rule: ModelThreadRule, loop: LoopClock = processLoop): ThreadRouter {
  let onThread = false;
  let inFlight = 0;
  // The window's start (time, busy time); the loop's busy time is read once per window.
  let since = -Infinity;
  let activeSince = 0;
  return {
    route() {
      const now = loop.now();
      if (now - since < rule.windowMs) return onThread;
      const active = loop.activeMs();
      const busy = since === -Infinity || now <= since ? null : (active - activeSince) / (now - since);
      onThread = onThreadNext(rule, onThread, { busy, inFlight });
      since = now;
      activeSince = active;
      return onThread;
    },
    begin() {
      inFlight++;
    },
    end() {
      inFlight--;
    },
  };
}
