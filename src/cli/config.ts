/**
 * The CLI's configuration: `troupe.config.json` (or `--config <file>`), then the environment
 * (OPENAI_API_KEY, OPENAI_BASE_URL), then flags — each later source overrides the earlier. What a
 * run was started with (never its API key) is saved in the database, so `troupe resume` needs no
 * flags.
 * @module
 */
import { existsSync, readFileSync } from 'node:fs';
import type { BudgetOptions, Limits } from '../coordinator/options.js';
import { ConfigError } from '../errors.js';

export interface CliConfig {
  model?: string;
  baseURL?: string;
  apiKey?: string;
  /** Stream answers (token deltas reach the live view and `--json`). */
  stream?: boolean;
  maxOutputTokens?: number;
  timeoutMs?: number;
  interactive?: boolean;
  budget?: BudgetOptions;
  limits?: Partial<Limits>;
  concurrency?: { model?: number; tools?: number };
  rateLimit?: { requests: number; intervalMs: number };
  idleResumeMs?: number;
  /** The database file. Default `.troupe/troupe.db`. */
  db?: string;
}

/** What is saved with a run (an `cli.run` event): everything needed to resume it, no secrets. */
export type SavedRunConfig = Omit<CliConfig, 'apiKey'> & { demo?: boolean };

export const DEFAULT_DB = '.troupe/troupe.db';
export const DEFAULT_CONFIG_FILE = 'troupe.config.json';

const KEYS = new Set<keyof CliConfig>([
  'model',
  'baseURL',
  'apiKey',
  'stream',
  'maxOutputTokens',
  'timeoutMs',
  'interactive',
  'budget',
  'limits',
  'concurrency',
  'rateLimit',
  'idleResumeMs',
  'db',
]);

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
  for (const key of Object.keys(parsed)) {
    if (!KEYS.has(key as keyof CliConfig)) throw new ConfigError(`Unknown key "${key}" in ${file}; known keys: ${[...KEYS].join(', ')}`);
  }
  return parsed as CliConfig;
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
        typeof value === 'object' && value !== null && !Array.isArray(value) && typeof prev === 'object' && prev !== null
          ? { ...prev, ...value }
          : value;
    }
  }
  return out;
}

export const fromEnv = (env: NodeJS.ProcessEnv): Partial<CliConfig> =>
  defined({ apiKey: env.OPENAI_API_KEY, baseURL: env.OPENAI_BASE_URL });

export const MODEL_HINT = `troupe run needs a model. Point it at any OpenAI-compatible server:

  troupe run "<task>" --model gpt-4.1-mini                 # OPENAI_API_KEY from the environment
  troupe run "<task>" --model qwen2.5:7b --base-url http://127.0.0.1:11434/v1   # Ollama, no key

or put { "model": "gpt-4.1-mini" } (and "baseURL") in ${DEFAULT_CONFIG_FILE}.
To see troupe work without any model or key, run the offline demo: troupe demo`;

/** Everything of a config that may be written to the database. */
export function toSaved(config: CliConfig, demo: boolean): SavedRunConfig {
  const { apiKey: _omit, ...rest } = config;
  void _omit;
  return { ...rest, ...(demo ? { demo } : {}) };
}
