/**
 * What a model says a call used is checked here, once, before the budget believes it — the wire
 * reading in `openaiModel` and the budget ledger (for any custom `Model`) both use `checkUsage`.
 * Token counts are non-negative integers up to `MAX_TOKENS_PER_CALL`, cached input never exceeds
 * input, and dollar amounts are finite, non-negative and at most `MAX_USD_PER_CALL`; anything else
 * (negative, NaN, strings, 1e300, …) is invalid usage, which the ledger charges at the call's
 * reserved estimate instead (so spend never goes down and never becomes NaN).
 * @module
 */
import type { TurnUsage } from '../../machines/types.js';
import { priceUsage } from './prices.js';
import type { ModelPrice, ModelTurn } from './types.js';

/**
 * The most tokens of any one kind a single call may report: 10^9, over a thousand times the
 * largest context windows offered today. More is a broken or hostile server, not usage.
 */
export const MAX_TOKENS_PER_CALL = 1_000_000_000;

/**
 * The most one call may cost, in USD ($1,000,000: 10^9 tokens at $1,000 per million). A larger
 * `costUsd`, or an estimate above it, is not believed.
 */
export const MAX_USD_PER_CALL = 1_000_000;

/** Usage that can be believed (`undefined`: the call reported none), or why it cannot. */
export type CheckedUsage = { ok: true; usage: Partial<TurnUsage> | undefined } | { ok: false; reason: string };

const show = (value: unknown): string => {
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (typeof value === 'number' || typeof value === 'boolean' || value === null || value === undefined) return String(value);
  return typeof value;
};

/** A dollar amount troupe can add to the ledger: a finite number in [0, MAX_USD_PER_CALL]. */
export function isUsd(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 && value <= MAX_USD_PER_CALL;
}

const isTokens = (value: unknown): value is number => typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= MAX_TOKENS_PER_CALL;

const TOKEN_FIELDS = ['inputTokens', 'outputTokens', 'cachedInputTokens'] as const;

/**
 * A model's `usage` as troupe's `TurnUsage`: every field optional (a missing count is 0), every
 * present one valid. `undefined` and `null` mean the call reported no usage.
 */
export function checkUsage(raw: unknown): CheckedUsage {
  if (raw === undefined || raw === null) return { ok: true, usage: undefined };
  if (typeof raw !== 'object' || Array.isArray(raw)) return { ok: false, reason: `usage is ${show(raw)}, not an object` };
  const u = raw as Record<string, unknown>;
  const usage: Partial<TurnUsage> = {};
  for (const key of TOKEN_FIELDS) {
    const value = u[key];
    if (value === undefined) continue;
    if (!isTokens(value)) return { ok: false, reason: `${key} is ${show(value)}, not an integer in [0, ${MAX_TOKENS_PER_CALL}]` };
    usage[key] = value;
  }
  if ((usage.cachedInputTokens ?? 0) > (usage.inputTokens ?? 0)) {
    return { ok: false, reason: `cachedInputTokens (${usage.cachedInputTokens}) exceed inputTokens (${usage.inputTokens ?? 0})` };
  }
  if (u.costUsd !== undefined) {
    if (!isUsd(u.costUsd)) return { ok: false, reason: `costUsd is ${show(u.costUsd)}, not a number in [0, ${MAX_USD_PER_CALL}]` };
    usage.costUsd = u.costUsd;
  }
  return { ok: true, usage };
}

/**
 * Chat Completions `usage` from the wire (`prompt_tokens`, `completion_tokens`,
 * `prompt_tokens_details.cached_tokens`), checked. A usage object must carry both counts; `null`
 * stands for a missing optional field, as JSON servers send it.
 */
export function usageFromWire(raw: unknown): CheckedUsage {
  if (raw === undefined || raw === null) return { ok: true, usage: undefined };
  if (typeof raw !== 'object' || Array.isArray(raw)) return { ok: false, reason: `usage is ${show(raw)}, not an object` };
  const u = raw as Record<string, unknown>;
  const details = u.prompt_tokens_details;
  if (details !== undefined && details !== null && (typeof details !== 'object' || Array.isArray(details))) {
    return { ok: false, reason: `usage.prompt_tokens_details is ${show(details)}, not an object` };
  }
  const cached = (details as Record<string, unknown> | null | undefined)?.cached_tokens;
  return checkUsage({
    inputTokens: u.prompt_tokens === undefined ? null : u.prompt_tokens,
    outputTokens: u.completion_tokens === undefined ? null : u.completion_tokens,
    ...(cached === undefined || cached === null ? {} : { cachedInputTokens: cached }),
  });
}

/**
 * What the budget makes of one call's usage report, given the model's price (if any):
 * - `priced`: believed, and priced at `costUsd` (its own `costUsd`, else its tokens at the price);
 * - `invalid`: it cannot be believed (`reason`): flagged by the model, out of bounds, or priced
 *   beyond one call's bound;
 * - `noUsage`: the call reported none (no `usage`, or an object that says nothing);
 * - `unpriced`: tokens with no `costUsd` and no price.
 * All but `priced` are charged at the call's estimate by the ledger.
 */
export type UsageVerdict =
  | { kind: 'priced'; costUsd: number; usage: Partial<TurnUsage> }
  | { kind: 'invalid'; reason: string }
  | { kind: 'noUsage' }
  | { kind: 'unpriced'; usage: Partial<TurnUsage> };

export function judgeUsage(answer: Pick<ModelTurn, 'usage' | 'invalidUsage'> | undefined, price: ModelPrice | undefined): UsageVerdict {
  if (answer?.invalidUsage !== undefined) {
    return { kind: 'invalid', reason: typeof answer.invalidUsage === 'string' ? answer.invalidUsage : 'the model flagged its usage as invalid' };
  }
  const checked = checkUsage(answer?.usage);
  if (!checked.ok) return { kind: 'invalid', reason: checked.reason };
  const usage = checked.usage;
  if (usage === undefined || (usage.costUsd === undefined && usage.inputTokens === undefined && usage.outputTokens === undefined)) return { kind: 'noUsage' };
  let costUsd = usage.costUsd;
  if (costUsd === undefined) {
    // Nothing used costs nothing, priced or not.
    if (!price) return usage.inputTokens || usage.outputTokens ? { kind: 'unpriced', usage } : { kind: 'priced', costUsd: 0, usage };
    costUsd = priceUsage(usage, price);
  }
  if (!isUsd(costUsd)) return { kind: 'invalid', reason: `the usage prices at ${costUsd} USD, more than one call can cost (${MAX_USD_PER_CALL})` };
  return { kind: 'priced', costUsd, usage };
}
