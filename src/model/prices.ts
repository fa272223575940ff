/**
 * What model calls cost: a price table (USD per million tokens) for well-known models, overridable
 * per coordinator (`budget.prices`), and the arithmetic that prices a usage row or estimates a call
 * before it is made.
 * @module
 */
import type { TurnUsage } from '../../machines/types.js';
import { ConfigError } from '../errors.js';
import type { Model, ModelPrice, ModelRequest } from './types.js';

/**
 * OpenAI list prices (USD per 1M tokens) as published in 2025. Prices change: pass
 * `budget.prices` (or `openaiModel({ price })`) for your models and your contract.
 */
export const DEFAULT_PRICES: Readonly<Record<string, ModelPrice>> = {
  'gpt-5': { inputPer1M: 1.25, cachedInputPer1M: 0.125, outputPer1M: 10 },
  'gpt-5-mini': { inputPer1M: 0.25, cachedInputPer1M: 0.025, outputPer1M: 2 },
  'gpt-5-nano': { inputPer1M: 0.05, cachedInputPer1M: 0.005, outputPer1M: 0.4 },
  'gpt-4.1': { inputPer1M: 2, cachedInputPer1M: 0.5, outputPer1M: 8 },
  'gpt-4.1-mini': { inputPer1M: 0.4, cachedInputPer1M: 0.1, outputPer1M: 1.6 },
  'gpt-4.1-nano': { inputPer1M: 0.1, cachedInputPer1M: 0.025, outputPer1M: 0.4 },
  'gpt-4o': { inputPer1M: 2.5, cachedInputPer1M: 1.25, outputPer1M: 10 },
  'gpt-4o-mini': { inputPer1M: 0.15, cachedInputPer1M: 0.075, outputPer1M: 0.6 },
  o3: { inputPer1M: 2, cachedInputPer1M: 0.5, outputPer1M: 8 },
  'o4-mini': { inputPer1M: 1.1, cachedInputPer1M: 0.275, outputPer1M: 4.4 },
};

/**
 * The price of `model` in `table`: an exact name, else the longest name it starts with followed by
 * a dash (`gpt-4.1-mini-2025-04-14` → `gpt-4.1-mini`).
 */
export function lookupPrice(table: Readonly<Record<string, ModelPrice>>, model: string): ModelPrice | undefined {
  if (Object.prototype.hasOwnProperty.call(table, model)) return table[model];
  let best: string | undefined;
  for (const name of Object.keys(table)) {
    if (model.startsWith(`${name}-`) && (best === undefined || name.length > best.length)) best = name;
  }
  return best === undefined ? undefined : table[best];
}

/**
 * The price a budget charges `model`'s usage at: `prices` (the `budget.prices` option) by name or
 * dated suffix first, then the model's own `price`, then the built-in table. Undefined: unpriced.
 */
export function priceOf(model: Pick<Model, 'name' | 'price'>, prices: Readonly<Record<string, ModelPrice>>): ModelPrice | undefined {
  const name = model.name ?? '';
  return lookupPrice(prices, name) ?? model.price ?? lookupPrice(DEFAULT_PRICES, name);
}

/**
 * Whether a budget can charge `model`'s calls: it has a price (`priceOf`), or it prices its own
 * calls — it says what a call will cost before it is made (`estimateCostUsd`) and reports what it
 * cost (`usage.costUsd`; a call that does not is charged its estimate), as `scriptedModel` does.
 */
function canPrice(model: Pick<Model, 'name' | 'price' | 'estimateCostUsd'>, prices: Readonly<Record<string, ModelPrice>>): boolean {
  return priceOf(model, prices) !== undefined || typeof model.estimateCostUsd === 'function';
}

/**
 * Refuse a budget that cannot bind: with a limit and a model the budget cannot price, every call
 * would count $0 and the limit would never stop anything (CONFIG_INVALID naming the model and the
 * `budget.prices` option; `where` says what set the limit).
 */
export function requirePriceForBudget(
  model: Pick<Model, 'name' | 'price' | 'estimateCostUsd'>,
  prices: Readonly<Record<string, ModelPrice>>,
  limitUsd: number | null,
  where = 'budget.limitUsd',
): void {
  if (limitUsd === null || canPrice(model, prices)) return;
  const name = model.name ?? '';
  const key = JSON.stringify(name === '' ? 'my-model' : name);
  throw new ConfigError(
    `A budget (${where} ${limitUsd}) cannot bind: troupe has no price for the model ${name === '' ? '(unnamed)' : JSON.stringify(name)}, so every call would count $0. ` +
      `Give its price in USD per 1M tokens in the budget.prices option, e.g. budget: { limitUsd: ${limitUsd}, prices: { ${key}: { inputPer1M: 0.15, outputPer1M: 0.6 } } } ` +
      `(prices: { ${key}: { inputPer1M: 0, outputPer1M: 0 } } for a free local model, which makes the budget moot), or the model's own price (openaiModel({ price })). ` +
      'A custom model that prices its own calls implements estimateCostUsd and reports usage.costUsd.',
    { details: { field: 'budget.prices', model: model.name ?? null } },
  );
}

/** USD for one call's tokens. Cached input tokens are part of the input tokens, at their own price. */
export function priceUsage(usage: Partial<TurnUsage>, price: ModelPrice): number {
  const input = usage.inputTokens ?? 0;
  const cached = Math.min(usage.cachedInputTokens ?? 0, input);
  const output = usage.outputTokens ?? 0;
  return ((input - cached) * price.inputPer1M + cached * (price.cachedInputPer1M ?? price.inputPer1M) + output * price.outputPer1M) / 1e6;
}

/**
 * The JSON length of each session item and tool list met, by identity: both are never changed once
 * made (a session grows by new items, a rewrite makes new ones), and a call is estimated up to
 * three times (compaction, quota, budget) over its whole session — re-serialising it each time was
 * O(session) per call (a megabyte argument: ~70 ms on the event loop per call).
 */
const lengths = new WeakMap<object, number>();

function jsonLength(value: object): number {
  let n = lengths.get(value);
  if (n === undefined) lengths.set(value, (n = jsonChars(value)));
  return n;
}

/** Strings longer than this are counted by their length, not serialised (see jsonChars). */
const LONG = 1 << 16;

/**
 * `JSON.stringify(value).length` for plain data, without building the text: exact, except that a
 * string over 64 K characters counts as its length plus quotes, its escapes left out. Serialising a
 * megabyte string of non-ASCII text cost 40–90 ms on the event loop (wireFuzz); an estimate that
 * is one token per 3 characters does not need its escapes.
 */
export function jsonChars(value: unknown): number {
  switch (typeof value) {
    case 'string':
      return value.length > LONG ? value.length + 2 : JSON.stringify(value).length;
    case 'number':
    case 'boolean':
      return JSON.stringify(value).length;
    case 'object': {
      if (value === null) return 4;
      if (Array.isArray(value)) {
        let n = 2 + Math.max(0, value.length - 1);
        for (const v of value as unknown[]) n += v === undefined || typeof v === 'function' || typeof v === 'symbol' ? 4 : jsonChars(v);
        return n;
      }
      if (typeof (value as { toJSON?: unknown }).toJSON === 'function') return JSON.stringify(value).length;
      let n = 2;
      let fields = 0;
      for (const [key, v] of Object.entries(value)) {
        if (v === undefined || typeof v === 'function' || typeof v === 'symbol') continue;
        n += JSON.stringify(key).length + 1 + jsonChars(v);
        fields++;
      }
      return n + Math.max(0, fields - 1);
    }
    default:
      return 0;
  }
}

/**
 * A deliberately high estimate of a request's prompt tokens: one token per 3 characters of
 * everything sent (English averages about 4), plus a little per message.
 */
export function estimatePromptTokens(request: ModelRequest): number {
  let chars = request.system.length + jsonLength(request.tools);
  for (const item of request.messages) chars += jsonLength(item) + 12;
  return Math.ceil(chars / 3);
}

/** Output tokens reserved for a call when the model does not say (`maxOutputTokens`). */
export const DEFAULT_MAX_OUTPUT_TOKENS = 4_096;

/** Validate a price (USD per 1M tokens); `name` says where it came from in messages. */
export function checkPrice(name: string, price: unknown): ModelPrice {
  const p = (typeof price === 'object' && price !== null ? price : {}) as Record<string, unknown>;
  for (const key of ['inputPer1M', 'outputPer1M', 'cachedInputPer1M']) {
    const value = p[key];
    if (key === 'cachedInputPer1M' && value === undefined) continue;
    if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
      throw new ConfigError(`Expected ${name}.${key} to be a finite number >= 0, got ${JSON.stringify(value)} (${typeof value})`);
    }
  }
  return price as ModelPrice;
}
