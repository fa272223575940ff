/**
 * The `proactive` section of a config file, turned into ProactiveTriggers: snake_case or camelCase
 * keys, seconds where the trigger has milliseconds, `agent: "<name>"` for a target. Every trigger
 * is then validated like the ProactiveManager's own (proactiveTrigger.ts), with errors naming the
 * key as the file wrote it.
 * @module
 */
import { ConfigError } from '../errors.js';
import { fail, isObject, show, validateTriggers, type FieldName, type ProactiveTrigger } from './proactiveTrigger.js';

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
