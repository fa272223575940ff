/**
 * The CLI's configuration: `troupe.config.json` (or `--config <file>`), then the environment
 * (OPENAI_API_KEY, OPENAI_BASE_URL), then flags — each later source overrides the earlier. What a
 * run was started with (never its API key) is saved in the database, so `troupe resume` needs no
 * flags.
 * @module
 */
import type { ApprovalRules } from '../host/async/approvalRules.js';
import { existsSync, readFileSync } from 'node:fs';
import { parseProactiveConfig } from '../autonomy/proactiveConfig.js';
import type { ProactiveTrigger } from '../autonomy/proactiveTrigger.js';
import { isValidAgentName } from '../host/options.js';
import type { BudgetOptions, Limits, ReviewOptions } from '../host/options.js';
import { ConfigError } from '../errors.js';
import { priceOf } from '../model/prices.js';
import type { ModelPrice } from '../model/types.js';
import { checkConfig } from './configSchema.js';
import { mcpServersOf, type McpServersSection } from './mcpConfig.js';

export interface CliConfig {
  model?: string;
  baseURL?: string;
  apiKey?: string;
  /** Stream answers (token deltas reach the live view and `--json`). */
  stream?: boolean;
  maxOutputTokens?: number;
  timeoutMs?: number;
  /** Streaming: no byte from the server for this long ends the attempt as a timeout. */
  idleTimeoutMs?: number;
  /** A cheaper model on the same server for compaction and background review. */
  auxiliaryModel?: string;
  /**
   * Named agent definitions `spawn_agent` can name (`CoordinatorOptions.profiles`); `model` is a
   * model on the same server (default: the run's), `tools` names tools or MCP servers.
   */
  profiles?: Record<string, CliProfile>;
  /** The model's context window in tokens: sessions are compacted before they overflow it. */
  contextWindow?: number;
  /** Images kept per session and the compaction line (`CoordinatorOptions.session`). */
  session?: { maxImages?: number | null; compactAt?: number };
  interactive?: boolean;
  budget?: BudgetOptions;
  limits?: Partial<Limits>;
  concurrency?: { model?: number; tools?: number; adaptive?: boolean };
  rateLimit?: { requests: number; intervalMs: number };
  /**
   * Which steps ask a person (`CoordinatorOptions.approvals` as rules); saved with the run, so every
   * host of it asks the same. Default `{ ask: ["destructive"] }`; `false`: nothing asks.
   */
  approvals?: ApprovalRules | false;
  /** Requests and tokens per minute per model endpoint (`CoordinatorOptions.quota`). */
  quota?: { requestsPerMinute?: number; tokensPerMinute?: number };
  /** The endpoint's circuit breaker (`CoordinatorOptions.breaker`; a worker shares it with the cluster); false: none. */
  breaker?: { failureThreshold?: number; cooldownMs?: number; openTimeoutMs?: number } | false;
  idleResumeMs?: number;
  /** The database file. Default `.troupe/troupe.db`. */
  db?: string;
  /** Background review: `{ everyTurns, maxSteps?, subAgents? }` (off when absent). */
  review?: ReviewOptions;
  /** What a new run's root reads of the promoted notes (`troupe notes`): `{ maxChars }`, or false for none. */
  notes?: { maxChars?: number } | false;
  /**
   * `troupe serve`: proactive triggers, as `parseProactiveConfig` accepts them (snake_case or
   * camelCase keys). Validated when the file is read.
   */
  proactive?: ProactiveSection;
  /** `troupe serve`: the health checks' interval and the failures at which one is logged at error. */
  watchdog?: WatchdogSection;
  /** MCP servers whose tools the team gets (mcpConfig.ts); never saved with a run. */
  mcpServers?: McpServersSection;
  /** Export OpenTelemetry spans and metrics over OTLP/HTTP (`--otel`; see src/cli/otel.ts). Saved with the run. */
  otel?: boolean;
  /** An MCP server that fails to start ends the command (`--strict-mcp`) instead of running without its tools. */
  strictMcp?: boolean;
}

/** One profile of the config file. */
interface CliProfile {
  description: string;
  systemPrompt?: string;
  model?: string;
  tools?: string[];
  limits?: { maxTurns?: number };
}

/** The `proactive` section of the config file: `{ enabled?, triggers: [...] }` (see parseProactiveConfig). */
interface ProactiveSection {
  enabled?: boolean;
  triggers?: Record<string, unknown>[];
}

export interface WatchdogSection {
  /** Between the end of one round of health checks and the next; default 30 000. */
  intervalMs?: number;
  /** Consecutive failures of a check at which it is logged at error; default 3. */
  failureThreshold?: number;
}

/** What is saved with a run (an `cli.run` event): everything needed to resume it, no secrets. */
export type SavedRunConfig = Omit<CliConfig, 'apiKey' | 'proactive' | 'watchdog' | 'mcpServers'> & { demo?: boolean };

export const DEFAULT_DB = '.troupe/troupe.db';
const DEFAULT_CONFIG_FILE = 'troupe.config.json';

/** Read the config file: `path` must exist; without it, ./troupe.config.json is used if present. */
export function loadConfigFile(path: string | undefined): CliConfig {
  const file = path ?? (existsSync(DEFAULT_CONFIG_FILE) ? DEFAULT_CONFIG_FILE : undefined);
  if (file === undefined) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new ConfigError(`Cannot read the config file ${file}: ${(err as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new ConfigError(`Expected the config file ${file} to hold a JSON object`);
  }
  checkConfig(parsed, file);
  const { $schema: _schema, ...config } = parsed as CliConfig & { $schema?: string };
  void _schema;
  if (config.proactive !== undefined) proactiveTriggers(config.proactive, file);
  if (config.watchdog !== undefined) watchdogSection(config.watchdog, file);
  if (config.mcpServers !== undefined) mcpServersOf(config.mcpServers, file);
  return config;
}

/**
 * The triggers of a `proactive` section (none when it is missing or `enabled: false`), checked as
 * `parseProactiveConfig` checks them, and each name must be able to name the root agent of its run
 * `proactive-<name>` (one line of 1..64 characters). Throws ConfigError naming the file and field.
 */
export function proactiveTriggers(section: unknown, file = 'the config file'): ProactiveTrigger[] {
  let triggers: ProactiveTrigger[];
  try {
    triggers = parseProactiveConfig(section);
    // Disabled triggers are checked too: a section that is wrong stays wrong when re-enabled.
    const disabled = typeof section === 'object' && section !== null && (section as ProactiveSection).enabled === false;
    const all = disabled ? parseProactiveConfig({ ...section, enabled: true }) : triggers;
    all.forEach((t, i) => {
      if (!isValidAgentName(t.name)) {
        throw new ConfigError(
          `proactive.triggers[${i}].name must be one line of at most 64 characters (it names the root agent of run proactive-<name>), got ${JSON.stringify(t.name)}`,
          {
            details: { field: `proactive.triggers[${i}].name`, value: t.name },
          },
        );
      }
    });
  } catch (err) {
    if (err instanceof ConfigError) throw new ConfigError(`${file}: ${err.message}`, { cause: err, ...(err.details ? { details: err.details } : {}) });
    throw err;
  }
  return triggers;
}

/** The `watchdog` section, checked: `{ intervalMs?, failureThreshold? }`, whole numbers >= 1. */
export function watchdogSection(section: unknown, file = 'the config file'): WatchdogSection {
  if (section === undefined || section === null) return {};
  if (typeof section !== 'object' || Array.isArray(section))
    throw new ConfigError(`${file}: watchdog must be an object { intervalMs?, failureThreshold? }, got ${JSON.stringify(section)}`);
  const out: WatchdogSection = {};
  for (const [key, value] of Object.entries(section)) {
    if (key !== 'intervalMs' && key !== 'failureThreshold') {
      throw new ConfigError(`${file}: watchdog has an unknown field "${key}" (expected intervalMs, failureThreshold)`);
    }
    if (value === undefined) continue;
    const max = key === 'intervalMs' ? 2_147_483_647 : Number.MAX_SAFE_INTEGER;
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > max) {
      throw new ConfigError(`${file}: watchdog.${key} must be a whole number >= 1${key === 'intervalMs' ? ' (ms)' : ''}, got ${JSON.stringify(value)}`);
    }
    out[key] = value;
  }
  return out;
}

/** Drop undefined values so that they do not override a value from an earlier source. */
export function defined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** The config a run is resumed with: what was saved, then the file, env and flags given now. */
export function mergeConfig(...sources: Partial<CliConfig>[]): CliConfig {
  const out: CliConfig = {};
  for (const source of sources) {
    for (const [key, value] of Object.entries(source)) {
      if (value === undefined) continue;
      const prev = (out as Record<string, unknown>)[key];
      (out as Record<string, unknown>)[key] =
        typeof value === 'object' && value !== null && !Array.isArray(value) && typeof prev === 'object' && prev !== null ? { ...prev, ...value } : value;
    }
  }
  return out;
}

export const fromEnv = (env: NodeJS.ProcessEnv): Partial<CliConfig> => defined({ apiKey: env.OPENAI_API_KEY, baseURL: env.OPENAI_BASE_URL });

export const MODEL_HINT = `troupe run needs a model. Point it at any OpenAI-compatible server:

  troupe run "<task>" --model gpt-4.1-mini                 # OPENAI_API_KEY from the environment
  troupe run "<task>" --model qwen2.5:7b --base-url http://127.0.0.1:11434/v1   # Ollama, no key

or put { "model": "gpt-4.1-mini" } (and "baseURL") in ${DEFAULT_CONFIG_FILE}.
To see troupe work without any model or key, run the offline demo: troupe demo`;

/** Everything of a config that may be written to the database. */
export function toSaved(config: CliConfig, demo: boolean): SavedRunConfig {
  // The serve-only sections are not a run's settings.
  // mcpServers: their env and headers may hold secrets; resume reads them from the file again.
  const { apiKey: _omit, proactive: _proactive, watchdog: _watchdog, mcpServers: _mcp, ...rest } = config;
  void _omit;
  void _proactive;
  void _watchdog;
  void _mcp;
  return { ...rest, ...(demo ? { demo } : {}) };
}

/** `--price 0.15,0.6` or `0.15,0.6,0.075`: USD per 1M input, output and cached input tokens. */
export function parsePrice(text: string): ModelPrice {
  const parts = text.split(',').map((p) => p.trim());
  const numbers = parts.map(Number);
  if (parts.length < 2 || parts.length > 3 || parts.some((p) => p === '') || numbers.some((n) => !Number.isFinite(n) || n < 0)) {
    throw new ConfigError(`Expected --price to be <input>,<output>[,<cached input>] in USD per 1M tokens (numbers >= 0), got "${text}"`);
  }
  const [inputPer1M, outputPer1M, cachedInputPer1M] = numbers as [number, number, number | undefined];
  return { inputPer1M, outputPer1M, ...(cachedInputPer1M === undefined ? {} : { cachedInputPer1M }) };
}

/**
 * A budget binds only if calls have a price: with a limit and a model troupe has no price for
 * (every local model), every call would count $0 and the limit would never stop anything. That is
 * refused before anything starts, with the fix.
 */
export function requirePrice(config: CliConfig): void {
  const limit = config.budget?.limitUsd;
  if (limit === undefined || !config.model) return;
  if (priceOf({ name: config.model }, config.budget?.prices ?? {})) return;
  throw new ConfigError(
    `A budget of $${limit} cannot bind: troupe has no price for the model "${config.model}", so every call would count $0. ` +
      `Give its price in USD per 1M tokens: --price <input>,<output> (e.g. --price 0.15,0.6; --price 0,0 for a free local model, which makes the budget moot), ` +
      `or "budget": { "prices": { "${config.model}": { "inputPer1M": 0.15, "outputPer1M": 0.6 } } } in ${DEFAULT_CONFIG_FILE}.`,
    { details: { field: 'budget.prices' } },
  );
}
