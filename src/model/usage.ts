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

const isTokens = (value: unknown): value is number =>
  typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= MAX_TOKENS_PER_CALL;

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
