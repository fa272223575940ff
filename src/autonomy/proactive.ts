/**
 * Proactive triggers: agent work started by the environment rather than by a user message. This
 * file owns the ProactiveManager — its lifecycle and the sources that turn the environment into
 * trigger events; what a trigger is lives in proactiveTrigger.ts, what happens to an event in
 * proactivePipeline.ts.
 *
 * The sources, one per trigger type:
 * - `file_change`: `fs.watch(watchPath)` (non-recursive: changes in sub-directories are not seen),
 *   filtered by globs (`*`, `?`) on the changed file's basename. No patterns → every change.
 * - `disk_threshold` / `load_threshold`: one shared polling loop (interval clamped to 5–30 s, first
 *   poll one interval after `start()`; polls never overlap). A trigger fires on every poll at which
 *   its probe (proactiveProbes.ts) is at or above the threshold, subject to its cooldown.
 * - `schedule`: either every `intervalMs` (at the multiples of intervalMs since the Unix epoch, so
 *   that every process ticks at the same times; the first one after `start()`) or on a cron
 *   expression. A schedule's fire carries its tick (the scheduled time, not when the timer ran),
 *   which `troupe serve` claims so that a tick fires once across processes (autonomy/fires.ts). Croner only computes the next run time (a paused job, no callback, so no croner
 *   timer ever runs); every timer goes through the injected clock. A run missed because the clock
 *   jumped fires once, not once per missed run. Cron expressions use the host's local time
 *   unless the trigger names a `timezone`.
 *
 * Every event goes through one pipeline (cooldown, approval, `onFire`: see proactivePipeline.ts).
 * Each `start()` begins a new epoch; a watcher, timer or poll of an older epoch does nothing, so
 * nothing fires automatically after `stop()`. `stop()` closes watchers and clears timers, then
 * waits for `onFire` calls in progress (not for approvals still pending: those are discarded when
 * they settle).
 * @module
 */
import { watch, type FSWatcher } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { silentLogger } from '../logging/createLogger.js';
import { systemClock, type Clock } from '../clock.js';
import { ConfigError } from '../errors.js';
import type { ApprovalGate } from './approvalGate.js';
import type { EventBus } from './eventBus.js';
import { newTriggerState, TriggerPipeline, type Origin, type ProactiveFire, type TriggerState, type TriggerStats } from './proactivePipeline.js';
import { defaultDiskProbe, defaultLoadProbe, type ProactiveProbes } from './proactiveProbes.js';
import { errorMessage, isObject, show, validateTriggers, type ProactiveTrigger } from './proactiveTrigger.js';

export interface ProactiveOptions {
  triggers: ProactiveTrigger[];
  /** The host turns a fire into a message to a named agent or a new root run. */
  onFire: (fire: ProactiveFire) => void | Promise<void>;
  gate?: ApprovalGate;
  bus?: EventBus;
  clock?: Clock;
  /** Default: a silent pino logger. */
  logger?: Logger;
  /** Threshold polling interval; clamped to 5 000..30 000, default 15 000. */
  pollIntervalMs?: number;
  probes?: ProactiveProbes;
}

const DEFAULT_POLL_INTERVAL_MS = 15_000;
const MIN_POLL_INTERVAL_MS = 5_000;
const MAX_POLL_INTERVAL_MS = 30_000;

/** The first multiple of `interval` after `t`: every process ticks an interval schedule at the same times. */
const nextMultiple = (t: number, interval: number): number => (Math.floor(t / interval) + 1) * interval;

/** The largest delay Node's timers honour (larger values fire after 1 ms); longer waits are chained. */
const MAX_TIMER_MS = 2_147_483_647;

export class ProactiveManager {
  readonly #states = new Map<string, TriggerState>();
  readonly #pipeline: TriggerPipeline;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #pollIntervalMs: number;
  readonly #diskProbe: (path: string) => Promise<{ usedPct: number }>;
  readonly #loadProbe: () => { perCore: number };

  #running = false;
  /** Bumped by start() and stop(): callbacks of an older epoch do nothing. */
  #epoch = 0;
  /** Armed timers by key (`schedule:<name>`, `poll`). */
  readonly #timers = new Map<string, unknown>();
  readonly #watchers = new Map<string, FSWatcher>();

  constructor(options: ProactiveOptions) {
    if (!isObject(options)) throw new ConfigError('ProactiveManager options must be an object');
    if (typeof options.onFire !== 'function') {
      throw new ConfigError('ProactiveManager onFire must be a function', { details: { field: 'onFire' } });
    }
    const triggers = validateTriggers(options.triggers, 'triggers', () => (field) => field);
    const poll = options.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS;
    if (typeof poll !== 'number' || Number.isNaN(poll)) {
      throw new ConfigError(`ProactiveManager pollIntervalMs must be a number, got ${show(poll)}`, {
        details: { field: 'pollIntervalMs', value: poll },
      });
    }
    this.#pollIntervalMs = Math.min(MAX_POLL_INTERVAL_MS, Math.max(MIN_POLL_INTERVAL_MS, poll));
    this.#clock = options.clock ?? systemClock;
    this.#logger = options.logger ?? silentLogger();
    this.#diskProbe = options.probes?.disk ?? defaultDiskProbe;
    this.#loadProbe = options.probes?.load ?? defaultLoadProbe;
    this.#pipeline = new TriggerPipeline({
      onFire: options.onFire,
      gate: options.gate,
      bus: options.bus,
      clock: this.#clock,
      logger: this.#logger,
      live: (origin) => this.#live(origin),
    });

    for (const t of triggers) {
      const state = newTriggerState(t);
      this.#states.set(t.name, state);
      if (t.requiresConfirmation && !options.gate) {
        this.#logger.warn({ trigger: t.name }, 'proactive trigger requires confirmation but no approval gate is configured: it will always be denied');
      }
      const { cooldownMs } = state;
      if (t.type === 'schedule' && t.intervalMs !== undefined && cooldownMs > t.intervalMs) {
        this.#logger.warn(
          { trigger: t.name, intervalMs: t.intervalMs, cooldownMs },
          'proactive schedule interval is shorter than its cooldown: some runs will be dropped',
        );
      }
    }
  }

  /** Whether watchers, schedules and polling are on (between `start()` and `stop()`). */
  get running(): boolean {
    return this.#running;
  }

  /**
   * Opens the watchers and arms the schedules and the threshold poll. Throws ConfigError (with
   * nothing left running) when a watch path cannot be watched. A no-op while running.
   */
  start(): void {
    if (this.#running) return;
    const epoch = ++this.#epoch;
    const origin: Origin = { epoch };
    try {
      for (const state of this.#states.values()) {
        if (state.trigger.type === 'file_change') this.#watch(state, origin);
      }
    } catch (err) {
      this.#closeAll();
      this.#epoch++;
      throw err;
    }
    this.#running = true;
    for (const state of this.#states.values()) {
      if (state.trigger.type !== 'schedule') continue;
      if (state.cron) this.#armCron(state, this.#clock.now(), epoch);
      else this.#armInterval(state, nextMultiple(this.#clock.now(), state.trigger.intervalMs ?? 1), epoch);
    }
    if ([...this.#states.values()].some((s) => s.trigger.type === 'disk_threshold' || s.trigger.type === 'load_threshold')) {
      this.#armPoll(epoch);
    }
    this.#logger.info({ triggers: [...this.#states.keys()] }, 'proactive manager started');
  }

  /** Closes watchers and clears timers, then waits for `onFire` calls in progress. */
  async stop(): Promise<void> {
    const wasRunning = this.#running;
    this.#running = false;
    this.#epoch++;
    this.#closeAll();
    await this.#pipeline.settled();
    if (wasRunning) this.#logger.info('proactive manager stopped');
  }

  stats(): Record<string, TriggerStats> {
    const out: Record<string, TriggerStats> = {};
    for (const [name, state] of this.#states) out[name] = { ...state.stats };
    return out;
  }

  /**
   * Sends one event for the trigger through the whole pipeline (cooldown, approval, onFire),
   * whether or not the manager is running. `vars` add template variables (`path`, `value`, …);
   * trigger_name, trigger_type and timestamp are always the trigger's own; an `event_id` makes the
   * fire's tick `event:<id>` (the same event fires once across processes). Resolves whether it
   * fired (reached onFire); rejects with ConfigError for an unknown trigger name.
   */
  async fireNow(name: string, vars: Record<string, string> = {}): Promise<boolean> {
    const state = this.#states.get(name);
    if (!state) throw new ConfigError(`No proactive trigger named ${show(name)}`, { details: { trigger: name } });
    return this.#pipeline.attempt(state, isObject(vars) ? (vars as Record<string, string>) : {}, 'manual');
  }

  /** Whether an event of this origin may fire: a manual one always, an automatic one only in its own running epoch. */
  #live(origin: Origin): boolean {
    return origin === 'manual' || (this.#running && origin.epoch === this.#epoch);
  }

  /** Starts an automatic event without awaiting it; the pipeline never rejects. */
  #event(state: TriggerState, extra: Record<string, string>, origin: Origin, scheduled?: number): void {
    if (!this.#live(origin)) return;
    this.#pipeline.attempt(state, extra, origin, scheduled).catch((err: unknown) => {
      this.#logger.error({ trigger: state.trigger.name, err }, 'proactive trigger pipeline failed');
    });
  }

  // -- sources --------------------------------------------------------------------------------

  #watch(state: TriggerState, origin: Origin): void {
    const dir = state.trigger.watchPath ?? '';
    let watcher: FSWatcher;
    try {
      watcher = watch(dir, (_event, filename) => {
        const file = typeof filename === 'string' ? filename : null;
        if (state.patterns && state.patterns.length > 0) {
          if (file === null || !state.patterns.some((re) => re.test(file))) return;
        }
        this.#event(state, { path: file === null ? dir : join(dir, file) }, origin);
      });
    } catch (err) {
      throw new ConfigError(`proactive trigger "${state.trigger.name}" cannot watch ${show(dir)}: ${errorMessage(err)}`, {
        cause: err,
        details: { trigger: state.trigger.name, field: 'watchPath', value: dir },
      });
    }
    watcher.on('error', (err: unknown) => {
      this.#logger.error({ trigger: state.trigger.name, err }, 'proactive file watcher failed; it is closed');
      this.#pipeline.emit('proactive.watch_failed', state, { path: dir, error: errorMessage(err) });
      watcher.close();
      if (this.#watchers.get(state.trigger.name) === watcher) this.#watchers.delete(state.trigger.name);
    });
    this.#watchers.set(state.trigger.name, watcher);
  }

  /** Calls `fn` when the clock reaches `at`, chaining timers longer than Node allows. */
  #armAt(key: string, at: number, epoch: number, fn: () => void): void {
    const delay = Math.max(0, at - this.#clock.now());
    const step = Math.min(delay, MAX_TIMER_MS);
    const id = this.#clock.setTimeout(() => {
      if (this.#timers.get(key) !== id) return;
      this.#timers.delete(key);
      if (!this.#running || epoch !== this.#epoch) return;
      if (step < delay) this.#armAt(key, at, epoch, fn);
      else fn();
    }, step);
    this.#timers.set(key, id);
  }

  #armInterval(state: TriggerState, at: number, epoch: number): void {
    const interval = state.trigger.intervalMs ?? 1;
    this.#armAt(`schedule:${state.trigger.name}`, at, epoch, () => {
      const now = this.#clock.now();
      let next = at + interval;
      if (next <= now) next += interval * (Math.floor((now - next) / interval) + 1);
      this.#armInterval(state, next, epoch);
      this.#event(state, {}, { epoch }, at);
    });
  }

  #armCron(state: TriggerState, from: number, epoch: number): void {
    let next: Date | null = null;
    try {
      next = state.cron?.nextRun(new Date(from)) ?? null;
    } catch (err) {
      this.#logger.error({ trigger: state.trigger.name, err }, 'proactive cron schedule failed');
    }
    if (next === null) {
      this.#logger.warn({ trigger: state.trigger.name, cron: state.trigger.cron }, 'proactive cron schedule has no future run');
      return;
    }
    const at = next.getTime();
    this.#armAt(`schedule:${state.trigger.name}`, at, epoch, () => {
      this.#armCron(state, Math.max(at, this.#clock.now()), epoch);
      this.#event(state, {}, { epoch }, at);
    });
  }

  #armPoll(epoch: number): void {
    this.#armAt('poll', this.#clock.now() + this.#pollIntervalMs, epoch, () => {
      this.#poll({ epoch })
        .catch((err: unknown) => this.#logger.error({ err }, 'proactive threshold poll failed'))
        .finally(() => {
          if (this.#running && epoch === this.#epoch) this.#armPoll(epoch);
        });
    });
  }

  async #poll(origin: Origin): Promise<void> {
    let load: number | null | undefined;
    for (const state of this.#states.values()) {
      if (!this.#live(origin)) return;
      const { trigger } = state;
      if (trigger.type === 'disk_threshold') {
        const path = trigger.diskPath ?? '';
        let usedPct: number;
        try {
          usedPct = (await this.#diskProbe(path)).usedPct;
          if (typeof usedPct !== 'number' || !Number.isFinite(usedPct)) throw new Error(`probe returned ${show(usedPct)}`);
        } catch (err) {
          this.#probeFailed(state, err);
          continue;
        }
        if (usedPct >= (trigger.diskThresholdPct ?? 100)) this.#event(state, { path, value: usedPct.toFixed(1) }, origin);
      } else if (trigger.type === 'load_threshold') {
        if (load === undefined) {
          try {
            const perCore = this.#loadProbe().perCore;
            if (typeof perCore !== 'number' || !Number.isFinite(perCore)) throw new Error(`probe returned ${show(perCore)}`);
            load = perCore;
          } catch (err) {
            load = null;
            this.#probeFailed(state, err);
          }
        }
        if (load !== null && load >= (trigger.loadThresholdPerCore ?? Infinity)) {
          this.#event(state, { value: load.toFixed(2) }, origin);
        }
      }
    }
  }

  #probeFailed(state: TriggerState, err: unknown): void {
    this.#logger.warn({ trigger: state.trigger.name, err }, 'proactive threshold probe failed');
    this.#pipeline.emit('proactive.probe_failed', state, { error: errorMessage(err) });
  }

  #closeAll(): void {
    for (const id of this.#timers.values()) this.#clock.clearTimeout(id);
    this.#timers.clear();
    for (const watcher of this.#watchers.values()) {
      try {
        watcher.close();
      } catch (err) {
        this.#logger.warn({ err }, 'closing a proactive file watcher failed');
      }
    }
    this.#watchers.clear();
  }
}
