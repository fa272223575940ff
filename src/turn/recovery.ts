/**
 * What to do when a turn's model call fails (DESIGN §4's table), as one pure function: no clock, no
 * store, no model — the caller applies the decision. The attempts already made are persisted with
 * the agent (machine context `attempts`), so a restart in the middle of a turn's retries continues
 * the count instead of starting a fresh set.
 * @module
 */
import type { RecoveryAttempts, SerializedError } from '../../machines/types.js';
import { ProviderError, serializeError } from '../errors.js';

/** Image strips per turn (a request rejected while the session holds images). */
export const MAX_IMAGE_STRIPS = 3;
/** Compactions per turn (context overflow). */
export const MAX_COMPACTIONS = 2;

/** Statuses with which a request can be rejected because of the images it carries. */
const IMAGE_REJECTION_STATUSES = new Set([400, 404, 422]);

export type Recovery =
  /** Replace every image of the session with a placeholder, then retry. */
  | { kind: 'stripImages' }
  /** Summarise the older part of the session with the same model, then retry. */
  | { kind: 'compact' }
  /** Wait, then retry the same call. */
  | { kind: 'retry'; delayMs: number }
  /** Give up: the agent fails (a provider error that recovery cannot fix). */
  | { kind: 'fail'; error: SerializedError }
  /** Not a provider failure: a bug or a crash escaping the model; the agent crashes. */
  | { kind: 'crash'; error: SerializedError };

export interface RecoveryContext {
  /** Whether the session holds images (only then can stripping them help). */
  hasImages: boolean;
  retry: { maxRetries: number; baseDelayMs: number; maxDelayMs: number };
}

/**
 * Delay before retry `retry` (1-based): min(base·2^(retry-1), max), or what the server asked for
 * (`retry-after`), also capped at `max` (`retry.maxDelayMs`): no server holds an agent longer than
 * the run allows between retries (a retry sent early and refused again counts as one more retry).
 */
export function backoffMs(retry: number, base: number, max: number, retryAfterMs: number | undefined): number {
  return Math.min(retryAfterMs ?? base * 2 ** (retry - 1), max);
}

export const noAttempts = (turn: number): RecoveryAttempts => ({ turn, retries: 0, compactions: 0, imageStrips: 0 });

/**
 * The decision for `err` after `attempts`: images rejected → strip (≤ 3); context overflow →
 * compact (≤ 2); transient → retry with backoff (≤ maxRetries); other provider errors → fail;
 * anything else → crash.
 */
export function decideRecovery(err: unknown, attempts: RecoveryAttempts, ctx: RecoveryContext): Recovery {
  if (!(err instanceof ProviderError)) return { kind: 'crash', error: serializeError(err) };
  if (ctx.hasImages && attempts.imageStrips < MAX_IMAGE_STRIPS && err.status !== undefined && IMAGE_REJECTION_STATUSES.has(err.status)) {
    return { kind: 'stripImages' };
  }
  if (err.code === 'PROVIDER_CONTEXT_OVERFLOW' && attempts.compactions < MAX_COMPACTIONS) return { kind: 'compact' };
  if (err.retryable && attempts.retries < ctx.retry.maxRetries) {
    return { kind: 'retry', delayMs: backoffMs(attempts.retries + 1, ctx.retry.baseDelayMs, ctx.retry.maxDelayMs, err.retryAfterMs) };
  }
  return { kind: 'fail', error: failure(err, attempts.retries) };
}

/** The error an agent fails with, saying how many retries it took. */
export function failure(err: unknown, retries: number): SerializedError {
  const error = serializeError(err);
  if (retries > 0) error.message = `${error.message} (after ${retries} ${retries === 1 ? 'retry' : 'retries'})`;
  return error;
}

/** The attempts after applying `decision`. */
export function afterDecision(attempts: RecoveryAttempts, decision: Recovery): RecoveryAttempts {
  switch (decision.kind) {
    case 'stripImages':
      return { ...attempts, imageStrips: attempts.imageStrips + 1 };
    case 'compact':
      return { ...attempts, compactions: attempts.compactions + 1 };
    case 'retry':
      return { ...attempts, retries: attempts.retries + 1 };
    default:
      return attempts;
  }
}
