/**
 * Proactive triggers: agent work started by the environment rather than by a user message.
 *
 * Four trigger types:
 * - `file_change`: `fs.watch(watchPath)` (non-recursive: changes in sub-directories are not seen),
 *   filtered by globs (`*`, `?`) on the changed file's basename. No patterns → every change.
 * - `disk_threshold` / `load_threshold`: one shared polling loop (interval clamped to 5–30 s, first
 *   poll one interval after `start()`; polls never overlap). A trigger fires on every poll at which
 *   its probe is at or above the threshold, subject to its cooldown.
 * - `schedule`: either every `intervalMs` (first fire one interval after `start()`) or on a cron
 *   expression. Croner only computes the next run time (a paused job, no callback, so no croner
 *   timer ever runs); every timer goes through the injected clock. A run missed because the clock
 *   jumped fires once, not once per missed run. Cron expressions use the host's local time
 *   unless the trigger names a `timezone`.
 *
 * Every trigger event goes through one pipeline:
 * 1. cooldown: an event less than `cooldownMs` (default 5 min) after the last event that passed
 *    this check is dropped, counted and audited (`proactive.trigger_dropped`). The cooldown starts
 *    when an event passes the check, so a denied event also starts it (a human is not asked again
 *    on every poll);
 * 2. the prompt is rendered from `promptTemplate` ({@link renderTemplate});
 * 3. with `requiresConfirmation`, the {@link ApprovalGate} is asked (risk `mutation`, action = the
 *    trigger name, agentId = the session id `proactive-<name>`, so one approval covers that
 *    trigger's fires during the gate's window); denied, or no gate configured → counted and
 *    audited (`proactive.trigger_denied`), nothing fires. An automatic event whose approval
 *    arrives after `stop()` is discarded;
 * 4. `proactive.trigger_fired` is audited and `onFire` is called; an `onFire` that throws or
 *    rejects is logged, counted (`failed`) and audited (`proactive.fire_failed`).
 *
 * `stop()` closes watchers and clears timers, then waits for `onFire` calls in progress (not for
 * approvals still pending: those are discarded when they settle).
 * @module
 */
import { promises as fsp, watch, type FSWatcher } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { Cron } from 'croner';
import { pino, type Logger } from 'pino';
import { systemClock, type Clock } from '../clock.js';
import { ConfigError } from '../errors.js';
import type { ApprovalGate } from './approvalGate.js';
import type { EventBus } from './eventBus.js';

export type TriggerType = 'file_change' | 'disk_threshold' | 'load_threshold' | 'schedule';

export type ProactiveTarget = { agent: string } | { root: true };

export interface ProactiveTrigger {
  name: string;
  type: TriggerType;
  /** `${var}` and legacy `{var}`: trigger_name, trigger_type, timestamp (ISO), path, value. */
  promptTemplate: string;
  /** Events within this long of the last accepted one are dropped and counted; default 300 000. */
  cooldownMs?: number;
  /** Ask the ApprovalGate before firing; denied (with an audit event) when no gate is configured. */
  requiresConfirmation?: boolean;
  /** Who gets the work; default `{ root: true }`. */
  target?: ProactiveTarget;
  /** file_change: the directory (or file) to watch, non-recursively. */
  watchPath?: string;
  /** file_change: globs (`*`, `?`) on the changed file's basename, e.g. `*.log`; default: any. */
  watchPatterns?: string[];
  /** disk_threshold: a path on the filesystem to measure. */
  diskPath?: string;
  /** disk_threshold: fire at or above this used percentage, in (0, 100]. */
  diskThresholdPct?: number;
  /** load_threshold: fire at or above this 1-minute load average per core (> 0). */
  loadThresholdPerCore?: number;
  /** schedule: fire every intervalMs (exactly one of intervalMs and cron). */
  intervalMs?: number;
  /** schedule: a croner expression (5 or 6 fields), e.g. `*\/5 * * * *`. */
  cron?: string;
  /** schedule with cron: an IANA time zone for the expression; default the host's local time. */
  timezone?: string;
}

export interface ProactiveFire {
  trigger: string;
  /** `proactive-<trigger name>`. */
  sessionId: string;
  prompt: string;
  target: ProactiveTarget;
  /** `clock.now()` when it fired. */
  at: number;
}

export interface ProactiveProbes {
  /** Default: `fs.promises.statfs`, used / (used + available to unprivileged users), as `df` shows. */
  disk?: (path: string) => Promise<{ usedPct: number }>;
  /** Default: `os.loadavg()[0] / os.cpus().length` (always 0 on Windows). */
  load?: () => { perCore: number };
}

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

export interface TriggerStats {
  /** Fires that reached `onFire` (including those whose onFire then failed). */
  fired: number;
  /** Events dropped by the cooldown. */
  dropped: number;
  /** Events denied by the approval gate (or for want of one). */
  denied: number;
  /** Fires whose `onFire` threw or rejected. */
  failed: number;
  lastFiredAt: number | null;
}

export const DEFAULT_COOLDOWN_MS = 300_000;
export const DEFAULT_POLL_INTERVAL_MS = 15_000;
export const MIN_POLL_INTERVAL_MS = 5_000;
export const MAX_POLL_INTERVAL_MS = 30_000;

/** The largest delay Node's timers honour (larger values fire after 1 ms); longer waits are chained. */
const MAX_TIMER_MS = 2_147_483_647;

const TRIGGER_TYPES: readonly TriggerType[] = ['file_change', 'disk_threshold', 'load_threshold', 'schedule'];

const COMMON_FIELDS = ['name', 'type', 'promptTemplate', 'cooldownMs', 'requiresConfirmation', 'target'] as const;
const TYPE_FIELDS: Record<TriggerType, readonly (keyof ProactiveTrigger)[]> = {
  file_change: ['watchPath', 'watchPatterns'],
  disk_threshold: ['diskPath', 'diskThresholdPct'],
  load_threshold: ['loadThresholdPerCore'],
  schedule: ['intervalMs', 'cron', 'timezone'],
};
const ALL_FIELDS = new Set<string>([...COMMON_FIELDS, ...Object.values(TYPE_FIELDS).flat()]);

// ---------------------------------------------------------------------------------------------
// Templates and globs

const PLACEHOLDER = /\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

/**
 * Substitutes `${name}` and legacy `{name}` placeholders from `vars` in one pass (substituted
 * values are not expanded again). Never throws: unknown names and malformed placeholders
 * (`${oops`, `{`, `}{`, `{1x}`) stay exactly as written.
 */
export function renderTemplate(template: string, vars: Record<string, string>): string {
  try {
    return String(template).replace(PLACEHOLDER, (whole: string, braced?: string, legacy?: string) => {
      const key = braced ?? legacy ?? '';
      if (vars === null || typeof vars !== 'object' || !Object.hasOwn(vars, key)) return whole;
      const value: unknown = vars[key];
      return typeof value === 'string' ? value : String(value);
    });
  } catch {
    try {
      return String(template);
    } catch {
      return '';
    }
  }
}

/** A glob on a basename: `*` is any run of characters, `?` exactly one; everything else is literal. */
export function globToRegExp(glob: string): RegExp {
  let source = '';
  for (const ch of glob) {
    if (ch === '*') source += '.*';
    else if (ch === '?') source += '.';
    else source += ch.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  }
  return new RegExp(`^${source}$`, 'su');
}

// ---------------------------------------------------------------------------------------------
// Validation (shared by the constructor and parseProactiveConfig)

function show(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message || err.name || 'Error';
  if (typeof err === 'string') return err;
  return show(err);
}

type FieldName = (field: keyof ProactiveTrigger) => string;

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function fail(where: string, field: string, problem: string, value: unknown): never {
  throw new ConfigError(`${where}.${field} ${problem}, got ${show(value)}`, { details: { field: `${where}.${field}`, value } });
}

function makeCron(expr: string, timezone: string | undefined): Cron {
  return new Cron(expr, timezone === undefined ? { paused: true } : { paused: true, timezone });
}

/** Checks one trigger (types, ranges, type-specific fields); throws ConfigError naming the field. */
function validateTrigger(t: unknown, where: string, name: FieldName): asserts t is ProactiveTrigger {
  if (!isObject(t)) throw new ConfigError(`${where} must be an object, got ${show(t)}`, { details: { field: where } });
  for (const key of Object.keys(t)) {
    if (!ALL_FIELDS.has(key) && t[key] !== undefined) {
      throw new ConfigError(`${where} has an unknown field "${key}"`, { details: { field: `${where}.${key}` } });
    }
  }
  if (typeof t.name !== 'string' || t.name.trim() === '') fail(where, name('name'), 'must be a non-empty string', t.name);
  if (!TRIGGER_TYPES.includes(t.type as TriggerType)) {
    fail(where, name('type'), `must be one of ${TRIGGER_TYPES.join(', ')}`, t.type);
  }
  const type = t.type as TriggerType;
  if (typeof t.promptTemplate !== 'string') fail(where, name('promptTemplate'), 'must be a string', t.promptTemplate);
  if (t.cooldownMs !== undefined && (typeof t.cooldownMs !== 'number' || !Number.isFinite(t.cooldownMs) || t.cooldownMs < 0)) {
    fail(where, name('cooldownMs'), 'must be a finite number >= 0', t.cooldownMs);
  }
  if (t.requiresConfirmation !== undefined && typeof t.requiresConfirmation !== 'boolean') {
    fail(where, name('requiresConfirmation'), 'must be a boolean', t.requiresConfirmation);
  }
  if (t.target !== undefined) {
    const target = t.target;
    const ok =
      isObject(target) &&
      ((Object.keys(target).length === 1 && typeof target.agent === 'string' && target.agent.trim() !== '') ||
        (Object.keys(target).length === 1 && target.root === true));
    if (!ok) fail(where, name('target'), 'must be { agent: "<name>" } or { root: true }', target);
  }
  for (const other of TRIGGER_TYPES) {
    if (other === type) continue;
    for (const field of TYPE_FIELDS[other]) {
      if (t[field] !== undefined && !TYPE_FIELDS[type].includes(field)) {
        fail(where, name(field), `is not allowed on a ${type} trigger (it belongs to ${other})`, t[field]);
      }
    }
  }

  switch (type) {
    case 'file_change':
      if (typeof t.watchPath !== 'string' || t.watchPath === '') {
        fail(where, name('watchPath'), 'is required for a file_change trigger (a non-empty path)', t.watchPath);
      }
      if (
        t.watchPatterns !== undefined &&
        (!Array.isArray(t.watchPatterns) || !t.watchPatterns.every((p) => typeof p === 'string' && p !== ''))
      ) {
        fail(where, name('watchPatterns'), 'must be an array of non-empty glob strings', t.watchPatterns);
      }
      break;
    case 'disk_threshold':
      if (typeof t.diskPath !== 'string' || t.diskPath === '') {
        fail(where, name('diskPath'), 'is required for a disk_threshold trigger (a non-empty path)', t.diskPath);
      }
      if (
        typeof t.diskThresholdPct !== 'number' ||
        !Number.isFinite(t.diskThresholdPct) ||
        t.diskThresholdPct <= 0 ||
        t.diskThresholdPct > 100
      ) {
        fail(where, name('diskThresholdPct'), 'is required for a disk_threshold trigger (a number in (0, 100])', t.diskThresholdPct);
      }
      break;
    case 'load_threshold':
      if (typeof t.loadThresholdPerCore !== 'number' || !Number.isFinite(t.loadThresholdPerCore) || t.loadThresholdPerCore <= 0) {
        fail(where, name('loadThresholdPerCore'), 'is required for a load_threshold trigger (a finite number > 0)', t.loadThresholdPerCore);
      }
      break;
    case 'schedule': {
      const hasInterval = t.intervalMs !== undefined;
      const hasCron = t.cron !== undefined;
      if (hasInterval === hasCron) {
        throw new ConfigError(
          `${where} (schedule) needs exactly one of ${name('intervalMs')} and ${name('cron')}, got ${hasInterval ? 'both' : 'neither'}`,
          { details: { field: `${where}.${name(hasInterval ? 'cron' : 'intervalMs')}` } },
        );
      }
      if (hasInterval) {
        if (typeof t.intervalMs !== 'number' || !Number.isFinite(t.intervalMs) || t.intervalMs < 1) {
          fail(where, name('intervalMs'), 'must be a finite number >= 1 (ms)', t.intervalMs);
        }
        if (t.timezone !== undefined) fail(where, name('timezone'), 'applies only to a cron schedule', t.timezone);
      } else {
        if (typeof t.cron !== 'string' || t.cron.trim() === '') fail(where, name('cron'), 'must be a cron expression', t.cron);
        if (t.timezone !== undefined && (typeof t.timezone !== 'string' || t.timezone === '')) {
          fail(where, name('timezone'), 'must be an IANA time zone name', t.timezone);
        }
        try {
          makeCron(t.cron, t.timezone as string | undefined);
        } catch (err) {
          fail(where, name('cron'), `is not a valid cron expression (${errorMessage(err)})`, t.cron);
        }
        try {
          makeCron(t.cron, t.timezone as string | undefined).nextRun(new Date(0));
        } catch (err) {
          fail(where, name('timezone'), `is not a valid time zone (${errorMessage(err)})`, t.timezone);
        }
      }
      break;
    }
  }
}

function validateTriggers(triggers: unknown, where: string, nameFor: (index: number) => FieldName): ProactiveTrigger[] {
  if (!Array.isArray(triggers)) throw new ConfigError(`${where} must be an array, got ${show(triggers)}`, { details: { field: where } });
  const seen = new Set<string>();
  triggers.forEach((t: unknown, i) => {
    const at = `${where}[${i}]`;
    validateTrigger(t, at, nameFor(i));
    if (seen.has(t.name)) fail(at, nameFor(i)('name'), 'must be unique among triggers', t.name);
    seen.add(t.name);
  });
  return triggers as ProactiveTrigger[];
}

// ---------------------------------------------------------------------------------------------
// Config parsing

interface KeySpec {
  field: keyof ProactiveTrigger;
  /** Seconds in the config, milliseconds in the trigger. */
  seconds?: true;
  /** `agent: "<name>"` → `target: { agent }`. */
  agent?: true;
}

const CONFIG_KEYS: Record<string, KeySpec> = {
  name: { field: 'name' },
  type: { field: 'type' },
  trigger_type: { field: 'type' },
  triggerType: { field: 'type' },
  prompt_template: { field: 'promptTemplate' },
  promptTemplate: { field: 'promptTemplate' },
  cooldown_seconds: { field: 'cooldownMs', seconds: true },
  cooldownSeconds: { field: 'cooldownMs', seconds: true },
  cooldownMs: { field: 'cooldownMs' },
  requires_confirmation: { field: 'requiresConfirmation' },
  requiresConfirmation: { field: 'requiresConfirmation' },
  agent: { field: 'target', agent: true },
  target: { field: 'target' },
  watch_path: { field: 'watchPath' },
  watchPath: { field: 'watchPath' },
  watch_patterns: { field: 'watchPatterns' },
  watchPatterns: { field: 'watchPatterns' },
  disk_path: { field: 'diskPath' },
  diskPath: { field: 'diskPath' },
  disk_threshold_pct: { field: 'diskThresholdPct' },
  diskThresholdPct: { field: 'diskThresholdPct' },
  load_threshold_per_core: { field: 'loadThresholdPerCore' },
  loadThresholdPerCore: { field: 'loadThresholdPerCore' },
  interval_seconds: { field: 'intervalMs', seconds: true },
  intervalSeconds: { field: 'intervalMs', seconds: true },
  intervalMs: { field: 'intervalMs' },
  cron: { field: 'cron' },
  timezone: { field: 'timezone' },
};

/** How an error names a field the config left out, when the trigger is written in snake_case. */
const SNAKE_NAMES: Record<keyof ProactiveTrigger, string> = {
  name: 'name',
  type: 'trigger_type',
  promptTemplate: 'prompt_template',
  cooldownMs: 'cooldown_seconds',
  requiresConfirmation: 'requires_confirmation',
  target: 'agent',
  watchPath: 'watch_path',
  watchPatterns: 'watch_patterns',
  diskPath: 'disk_path',
  diskThresholdPct: 'disk_threshold_pct',
  loadThresholdPerCore: 'load_threshold_per_core',
  intervalMs: 'interval_seconds',
  cron: 'cron',
  timezone: 'timezone',
};

/**
 * Parses the `proactive` section of a config file: `{ enabled?: boolean, triggers: [...] }`, each
 * trigger with snake_case or camelCase keys (`trigger_type`/`type`, `watch_path`,
 * `cooldown_seconds` → cooldownMs, `interval_seconds` → intervalMs, `agent: "<name>"` → target, …).
 * A missing section (`undefined` / `null`) or `enabled: false` gives `[]` (the triggers are still
 * validated). Unknown keys, a field given twice (`watch_path` and `watchPath`), wrong types and
 * everything the ProactiveManager constructor rejects throw ConfigError naming the key as written.
 */
export function parseProactiveConfig(raw: unknown): ProactiveTrigger[] {
  if (raw === undefined || raw === null) return [];
  const where = 'proactive';
  if (!isObject(raw)) throw new ConfigError(`${where} must be an object, got ${show(raw)}`, { details: { field: where } });
  for (const key of Object.keys(raw)) {
    if (key !== 'enabled' && key !== 'triggers') {
      throw new ConfigError(`${where} has an unknown field "${key}" (expected enabled, triggers)`, {
        details: { field: `${where}.${key}` },
      });
    }
  }
  if (raw.enabled !== undefined && typeof raw.enabled !== 'boolean') fail(where, 'enabled', 'must be a boolean', raw.enabled);
  const list = raw.triggers ?? [];
  if (!Array.isArray(list)) fail(where, 'triggers', 'must be an array', list);

  const namers: FieldName[] = [];
  const triggers = list.map((entry: unknown, i): ProactiveTrigger => {
    const at = `${where}.triggers[${i}]`;
    if (!isObject(entry)) throw new ConfigError(`${at} must be an object, got ${show(entry)}`, { details: { field: at } });
    const used = new Map<keyof ProactiveTrigger, string>();
    const snake = Object.keys(entry).some((key) => key.includes('_'));
    namers.push((field) => used.get(field) ?? (snake ? SNAKE_NAMES[field] : field));
    const out: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(entry)) {
      const spec = Object.hasOwn(CONFIG_KEYS, key) ? CONFIG_KEYS[key] : undefined;
      if (!spec) throw new ConfigError(`${at} has an unknown field "${key}"`, { details: { field: `${at}.${key}` } });
      const previous = used.get(spec.field);
      if (previous !== undefined) {
        throw new ConfigError(`${at}.${key} duplicates ${at}.${previous}; give only one`, { details: { field: `${at}.${key}` } });
      }
      used.set(spec.field, key);
      if (value === undefined || value === null) continue;
      if (spec.seconds) {
        if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) fail(at, key, 'must be a finite number of seconds >= 0', value);
        out[spec.field] = Math.round(value * 1000);
      } else if (spec.agent) {
        if (typeof value !== 'string' || value.trim() === '') fail(at, key, 'must be a non-empty agent name', value);
        out.target = { agent: value };
      } else {
        out[spec.field] = value;
      }
    }
    return out as unknown as ProactiveTrigger;
  });

  validateTriggers(triggers, `${where}.triggers`, (i) => namers[i] ?? ((field) => field));
  return raw.enabled === false ? [] : triggers;
}

// ---------------------------------------------------------------------------------------------
// The manager

interface TriggerState {
  readonly trigger: ProactiveTrigger;
  readonly sessionId: string;
  readonly cooldownMs: number;
  readonly target: ProactiveTarget;
  readonly patterns: RegExp[] | undefined;
  readonly cron: Cron | undefined;
  readonly stats: TriggerStats;
  /** When the last event passed the cooldown check; null before the first. */
  cooldownFrom: number | null;
}

/** Where an event came from: a watcher / timer / poll of one `start()` epoch, or `fireNow`. */
type Origin = { epoch: number } | 'manual';

/** The default disk probe: used / (used + available to unprivileged users), in percent, as `df` shows. */
export async function defaultDiskProbe(path: string): Promise<{ usedPct: number }> {
  const s = await fsp.statfs(path);
  const used = s.blocks - s.bfree;
  const total = used + s.bavail;
  return { usedPct: total > 0 ? (used / total) * 100 : 0 };
}

/** The default load probe: the 1-minute load average per CPU (always 0 on Windows). */
export function defaultLoadProbe(): { perCore: number } {
  const [load1 = 0] = os.loadavg();
  return { perCore: load1 / Math.max(1, os.cpus().length) };
}

export class ProactiveManager {
  readonly #states = new Map<string, TriggerState>();
  readonly #onFire: ProactiveOptions['onFire'];
  readonly #gate: ApprovalGate | undefined;
  readonly #bus: EventBus | undefined;
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
  readonly #firing = new Set<Promise<void>>();

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
    this.#onFire = options.onFire;
    this.#gate = options.gate;
    this.#bus = options.bus;
    this.#clock = options.clock ?? systemClock;
    this.#logger = options.logger ?? pino({ level: 'silent' });
    this.#diskProbe = options.probes?.disk ?? defaultDiskProbe;
    this.#loadProbe = options.probes?.load ?? defaultLoadProbe;

    for (const t of triggers) {
      const trigger: ProactiveTrigger = {
        ...t,
        ...(t.watchPatterns ? { watchPatterns: [...t.watchPatterns] } : {}),
        ...(t.target ? { target: { ...t.target } } : {}),
      };
      const cooldownMs = t.cooldownMs ?? DEFAULT_COOLDOWN_MS;
      this.#states.set(t.name, {
        trigger,
        sessionId: `proactive-${t.name}`,
        cooldownMs,
        target: trigger.target ?? { root: true },
        patterns: trigger.watchPatterns?.map(globToRegExp),
        cron: t.cron !== undefined ? makeCron(t.cron, t.timezone) : undefined,
        stats: { fired: 0, dropped: 0, denied: 0, failed: 0, lastFiredAt: null },
        cooldownFrom: null,
      });
      if (t.requiresConfirmation && !this.#gate) {
        this.#logger.warn({ trigger: t.name }, 'proactive trigger requires confirmation but no approval gate is configured: it will always be denied');
      }
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
      else this.#armInterval(state, this.#clock.now() + (state.trigger.intervalMs ?? 0), epoch);
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
    await Promise.allSettled([...this.#firing]);
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
   * trigger_name, trigger_type and timestamp are always the trigger's own. Resolves whether it
   * fired (reached onFire); rejects with ConfigError for an unknown trigger name.
   */
  async fireNow(name: string, vars: Record<string, string> = {}): Promise<boolean> {
    const state = this.#states.get(name);
    if (!state) throw new ConfigError(`No proactive trigger named ${show(name)}`, { details: { trigger: name } });
    return this.#attempt(state, isObject(vars) ? (vars as Record<string, string>) : {}, 'manual');
  }

  // -- the pipeline ---------------------------------------------------------------------------

  #live(origin: Origin): boolean {
    return origin === 'manual' || (this.#running && origin.epoch === this.#epoch);
  }

  async #attempt(state: TriggerState, extra: Record<string, string>, origin: Origin): Promise<boolean> {
    const { trigger, stats } = state;
    const now = this.#clock.now();
    if (state.cooldownFrom !== null && now - state.cooldownFrom < state.cooldownMs) {
      stats.dropped++;
      const remainingMs = state.cooldownMs - (now - state.cooldownFrom);
      this.#logger.debug({ trigger: trigger.name, remainingMs }, 'proactive trigger dropped (cooldown)');
      this.#emit('proactive.trigger_dropped', state, { reason: 'cooldown', remainingMs });
      return false;
    }
    state.cooldownFrom = now;

    const vars: Record<string, string> = {
      ...extra,
      trigger_name: trigger.name,
      trigger_type: trigger.type,
      timestamp: new Date(now).toISOString(),
    };
    const prompt = renderTemplate(trigger.promptTemplate, vars);

    if (trigger.requiresConfirmation) {
      const gate = this.#gate;
      let reason: string;
      let approved = false;
      if (!gate) {
        reason = 'no approval gate configured';
      } else {
        try {
          const decision = await gate.request({
            agentId: state.sessionId,
            agentName: 'agent' in state.target ? state.target.agent : 'root',
            action: trigger.name,
            risk: 'mutation',
            args: { trigger: trigger.name, type: trigger.type, prompt, target: state.target },
            reason: prompt,
          });
          approved = decision.approved;
          reason = decision.reason;
        } catch (err) {
          reason = `denied: approval gate failed: ${errorMessage(err)}`;
        }
      }
      if (!approved) {
        stats.denied++;
        this.#logger.info({ trigger: trigger.name, reason }, 'proactive trigger denied');
        this.#emit('proactive.trigger_denied', state, { reason });
        return false;
      }
      if (!this.#live(origin)) {
        this.#logger.debug({ trigger: trigger.name }, 'proactive trigger approved after stop(): discarded');
        return false;
      }
    }

    const fire: ProactiveFire = {
      trigger: trigger.name,
      sessionId: state.sessionId,
      prompt,
      target: { ...state.target },
      at: this.#clock.now(),
    };
    stats.fired++;
    stats.lastFiredAt = fire.at;
    this.#logger.info({ trigger: trigger.name, sessionId: fire.sessionId }, 'proactive trigger fired');
    this.#emit('proactive.trigger_fired', state, { sessionId: fire.sessionId, target: fire.target, prompt });

    const run = (async () => {
      try {
        await this.#onFire(fire);
      } catch (err) {
        stats.failed++;
        this.#logger.error({ trigger: trigger.name, err }, 'proactive onFire failed');
        this.#emit('proactive.fire_failed', state, { sessionId: fire.sessionId, error: errorMessage(err) });
      }
    })();
    this.#firing.add(run);
    try {
      await run;
    } finally {
      this.#firing.delete(run);
    }
    return true;
  }

  /** Starts an automatic event without awaiting it; the pipeline never rejects. */
  #event(state: TriggerState, extra: Record<string, string>, origin: Origin): void {
    if (!this.#live(origin)) return;
    this.#attempt(state, extra, origin).catch((err: unknown) => {
      this.#logger.error({ trigger: state.trigger.name, err }, 'proactive trigger pipeline failed');
    });
  }

  #emit(type: string, state: TriggerState, fields: Record<string, unknown>): void {
    this.#bus?.emit({ type, at: this.#clock.now(), trigger: state.trigger.name, triggerType: state.trigger.type, ...fields });
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
      this.#emit('proactive.watch_failed', state, { path: dir, error: errorMessage(err) });
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
      this.#event(state, {}, { epoch });
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
      this.#event(state, {}, { epoch });
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
    this.#emit('proactive.probe_failed', state, { error: errorMessage(err) });
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
