/**
 * `decideRecovery`: the one table that says what a failed model call becomes (DESIGN §4) — strip
 * images, compact, retry after a backoff, fail or crash — from the error and the attempts already
 * made, which the agent persists (resume.test.ts checks that a restart continues the count).
 */
import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import type { RecoveryAttempts } from '../../../machines/types.js';
import { ProviderError, TroupeError, type ErrorCode } from '../../../src/errors.js';
import { afterDecision, backoffMs, decideRecovery, MAX_COMPACTIONS, MAX_IMAGE_STRIPS, noAttempts, type Recovery } from '../../../src/turn/recovery.js';

const retry = { maxRetries: 5, baseDelayMs: 2_000, maxDelayMs: 90_000 };
const ctx = { hasImages: false, retry };
const attempts = (over: Partial<RecoveryAttempts> = {}): RecoveryAttempts => ({ ...noAttempts(7), ...over });
type ProviderCode = Extract<ErrorCode, `PROVIDER_${string}`>;
const provider = (code: ProviderCode, extra: { status?: number; retryAfterMs?: number } = {}) => new ProviderError(code, `scripted ${code}`, extra);

describe('decideRecovery', () => {
  it('a transient provider error is retried with exponential backoff, capped, until maxRetries', () => {
    const err = provider('PROVIDER_UNAVAILABLE', { status: 503 });
    expect(decideRecovery(err, attempts(), ctx)).toEqual({ kind: 'retry', delayMs: 2_000 });
    expect(decideRecovery(err, attempts({ retries: 1 }), ctx)).toEqual({ kind: 'retry', delayMs: 4_000 });
    expect(decideRecovery(err, attempts({ retries: 3 }), ctx)).toEqual({ kind: 'retry', delayMs: 16_000 });
    expect(decideRecovery(err, attempts({ retries: 4 }), { ...ctx, retry: { ...retry, maxDelayMs: 20_000 } })).toEqual({ kind: 'retry', delayMs: 20_000 });
    const last = decideRecovery(err, attempts({ retries: 5 }), ctx);
    expect(last).toMatchObject({ kind: 'fail', error: { code: 'PROVIDER_UNAVAILABLE', message: 'scripted PROVIDER_UNAVAILABLE (after 5 retries)' } });
  });

  it('waits what the server asked (retry-after) instead of the backoff', () => {
    expect(decideRecovery(provider('PROVIDER_RATE_LIMITED', { status: 429, retryAfterMs: 1_500 }), attempts({ retries: 2 }), ctx)).toEqual({
      kind: 'retry',
      delayMs: 1_500,
    });
  });

  it('a retry-after longer than retry.maxDelayMs is capped at it (a server cannot hold the agent 600 s)', () => {
    const slow = provider('PROVIDER_RATE_LIMITED', { status: 429, retryAfterMs: 600_000 });
    expect(decideRecovery(slow, attempts(), ctx)).toEqual({ kind: 'retry', delayMs: 90_000 });
    expect(decideRecovery(slow, attempts(), { ...ctx, retry: { ...retry, maxDelayMs: 5_000 } })).toEqual({ kind: 'retry', delayMs: 5_000 });
    expect(backoffMs(1, 2_000, 30_000, 45_000)).toBe(30_000);
    expect(backoffMs(1, 2_000, 30_000, 29_999)).toBe(29_999);
  });

  it('a provider error that repeating cannot fix fails at once, without "after N retries" when none were made', () => {
    for (const code of ['PROVIDER_AUTH', 'PROVIDER_BAD_REQUEST', 'PROVIDER_REFUSAL', 'PROVIDER_INVALID_RESPONSE'] as const) {
      expect(decideRecovery(provider(code, { status: 400 }), attempts(), ctx)).toEqual({
        kind: 'fail',
        error: expect.objectContaining({ code, message: `scripted ${code}` }),
      });
    }
    expect(decideRecovery(provider('PROVIDER_AUTH'), attempts({ retries: 1 }), ctx)).toMatchObject({
      kind: 'fail',
      error: { message: 'scripted PROVIDER_AUTH (after 1 retry)' },
    });
  });

  it('a context overflow is compacted twice at most, then fails', () => {
    const err = provider('PROVIDER_CONTEXT_OVERFLOW', { status: 400 });
    expect(decideRecovery(err, attempts(), ctx)).toEqual({ kind: 'compact' });
    expect(decideRecovery(err, attempts({ compactions: MAX_COMPACTIONS - 1 }), ctx)).toEqual({ kind: 'compact' });
    expect(decideRecovery(err, attempts({ compactions: MAX_COMPACTIONS }), ctx)).toMatchObject({ kind: 'fail', error: { code: 'PROVIDER_CONTEXT_OVERFLOW' } });
  });

  it('a request rejected (400, 404, 422) while the session holds images strips them, three times at most', () => {
    const withImages = { ...ctx, hasImages: true };
    for (const status of [400, 404, 422])
      expect(decideRecovery(provider('PROVIDER_BAD_REQUEST', { status }), attempts(), withImages)).toEqual({ kind: 'stripImages' });
    // Other statuses, no images, or strips used up: the error is judged on its own.
    expect(decideRecovery(provider('PROVIDER_AUTH', { status: 403 }), attempts(), withImages)).toMatchObject({ kind: 'fail' });
    expect(decideRecovery(provider('PROVIDER_BAD_REQUEST', { status: 400 }), attempts(), ctx)).toMatchObject({ kind: 'fail' });
    expect(decideRecovery(provider('PROVIDER_BAD_REQUEST', { status: 400 }), attempts({ imageStrips: MAX_IMAGE_STRIPS }), withImages)).toMatchObject({
      kind: 'fail',
    });
    // An overflow with images is stripped first, then compacted.
    const overflow = provider('PROVIDER_CONTEXT_OVERFLOW', { status: 400 });
    expect(decideRecovery(overflow, attempts(), withImages)).toEqual({ kind: 'stripImages' });
    expect(decideRecovery(overflow, attempts({ imageStrips: MAX_IMAGE_STRIPS }), withImages)).toEqual({ kind: 'compact' });
  });

  it('anything that is not a provider error crashes the agent: a bug is not retried', () => {
    expect(decideRecovery(new TypeError('x is undefined'), attempts(), ctx)).toMatchObject({
      kind: 'crash',
      error: { code: 'INTERNAL', message: 'x is undefined' },
    });
    expect(decideRecovery(new TroupeError('SCRIPT_EXHAUSTED', 'no step'), attempts(), ctx)).toMatchObject({ kind: 'crash' });
  });

  it('afterDecision counts the attempt the decision makes, and only that one', () => {
    const a = attempts({ retries: 1, compactions: 1, imageStrips: 1 });
    expect(afterDecision(a, { kind: 'retry', delayMs: 1 })).toEqual({ ...a, retries: 2 });
    expect(afterDecision(a, { kind: 'compact' })).toEqual({ ...a, compactions: 2 });
    expect(afterDecision(a, { kind: 'stripImages' })).toEqual({ ...a, imageStrips: 2 });
    expect(afterDecision(a, { kind: 'fail', error: { code: 'INTERNAL', message: 'm', retryable: false } })).toBe(a);
  });

  it('backoffMs: base·2^(n-1), or the server’s delay, either capped at max', () => {
    expect([1, 2, 3, 4, 5, 6, 7].map((n) => backoffMs(n, 2_000, 90_000, undefined))).toEqual([2_000, 4_000, 8_000, 16_000, 32_000, 64_000, 90_000]);
    expect(backoffMs(3, 2_000, 90_000, 0)).toBe(0);
  });
});

const codes: ProviderCode[] = [
  'PROVIDER_RATE_LIMITED',
  'PROVIDER_UNAVAILABLE',
  'PROVIDER_TIMEOUT',
  'PROVIDER_CONNECTION',
  'PROVIDER_AUTH',
  'PROVIDER_BAD_REQUEST',
  'PROVIDER_CONTEXT_OVERFLOW',
  'PROVIDER_REFUSAL',
  'PROVIDER_INVALID_RESPONSE',
];

// Whatever a provider keeps answering, recovery ends: every decision but the last one counts an
// attempt, and the attempts are bounded by maxRetries + MAX_COMPACTIONS + MAX_IMAGE_STRIPS.
test.prop([
  fc.array(fc.record({ code: fc.constantFrom(...codes), status: fc.option(fc.constantFrom(400, 404, 408, 422, 429, 500, 503), { nil: undefined }) }), {
    minLength: 1,
    maxLength: 5,
  }),
  fc.boolean(),
  fc.integer({ min: 0, max: 8 }),
])('recovery ends in fail after a bounded number of attempts, whatever the provider answers', (answers, hasImages, maxRetries) => {
  const bound = maxRetries + MAX_COMPACTIONS + MAX_IMAGE_STRIPS;
  let a = noAttempts(1);
  let decision: Recovery;
  let steps = 0;
  for (;;) {
    const { code, status } = answers[steps % answers.length]!;
    decision = decideRecovery(provider(code, status === undefined ? {} : { status }), a, { hasImages, retry: { ...retry, maxRetries } });
    if (decision.kind === 'fail' || decision.kind === 'crash') break;
    const next = afterDecision(a, decision);
    expect(next.retries + next.compactions + next.imageStrips).toBe(a.retries + a.compactions + a.imageStrips + 1);
    a = next;
    steps++;
    expect(steps).toBeLessThanOrEqual(bound);
  }
  expect(decision.kind).toBe('fail');
  expect(a.retries).toBeLessThanOrEqual(maxRetries);
  expect(a.compactions).toBeLessThanOrEqual(MAX_COMPACTIONS);
  expect(a.imageStrips).toBeLessThanOrEqual(MAX_IMAGE_STRIPS);
});
