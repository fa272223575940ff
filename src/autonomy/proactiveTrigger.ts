/**
 * What a proactive trigger is (`ProactiveTrigger`) and when one is well-formed. Four types, each
 * with its own fields: `file_change` (watchPath, watchPatterns), `disk_threshold` (diskPath,
 * diskThresholdPct), `load_threshold` (loadThresholdPerCore) and `schedule` (exactly one of
 * intervalMs and cron, with an optional timezone for cron). A field of another type, an unknown
 * field, a wrong type or an out-of-range value is a ConfigError naming the field; names are unique
 * among a list of triggers. The ProactiveManager constructor and parseProactiveConfig both validate
 * here, so the two cannot accept different triggers.
 * @module
 */
import { Cron } from 'croner';
import { ConfigError } from '../errors.js';

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

const TRIGGER_TYPES: readonly TriggerType[] = ['file_change', 'disk_threshold', 'load_threshold', 'schedule'];

const COMMON_FIELDS = ['name', 'type', 'promptTemplate', 'cooldownMs', 'requiresConfirmation', 'target'] as const;
const TYPE_FIELDS: Record<TriggerType, readonly (keyof ProactiveTrigger)[]> = {
  file_change: ['watchPath', 'watchPatterns'],
  disk_threshold: ['diskPath', 'diskThresholdPct'],
  load_threshold: ['loadThresholdPerCore'],
  schedule: ['intervalMs', 'cron', 'timezone'],
};
const ALL_FIELDS = new Set<string>([...COMMON_FIELDS, ...Object.values(TYPE_FIELDS).flat()]);

export function show(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message || err.name || 'Error';
  if (typeof err === 'string') return err;
  return show(err);
}

export type FieldName = (field: keyof ProactiveTrigger) => string;

export const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

export function fail(where: string, field: string, problem: string, value: unknown): never {
  throw new ConfigError(`${where}.${field} ${problem}, got ${show(value)}`, { details: { field: `${where}.${field}`, value } });
}

export function makeCron(expr: string, timezone: string | undefined): Cron {
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
      if (t.watchPatterns !== undefined && (!Array.isArray(t.watchPatterns) || !t.watchPatterns.every((p) => typeof p === 'string' && p !== ''))) {
        fail(where, name('watchPatterns'), 'must be an array of non-empty glob strings', t.watchPatterns);
      }
      break;
    case 'disk_threshold':
      if (typeof t.diskPath !== 'string' || t.diskPath === '') {
        fail(where, name('diskPath'), 'is required for a disk_threshold trigger (a non-empty path)', t.diskPath);
      }
      if (typeof t.diskThresholdPct !== 'number' || !Number.isFinite(t.diskThresholdPct) || t.diskThresholdPct <= 0 || t.diskThresholdPct > 100) {
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
        throw new ConfigError(`${where} (schedule) needs exactly one of ${name('intervalMs')} and ${name('cron')}, got ${hasInterval ? 'both' : 'neither'}`, {
          details: { field: `${where}.${name(hasInterval ? 'cron' : 'intervalMs')}` },
        });
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

export function validateTriggers(triggers: unknown, where: string, nameFor: (index: number) => FieldName): ProactiveTrigger[] {
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
