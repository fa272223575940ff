import { describe, expect, it } from 'vitest';
import { classifyHttpFailure, isContextOverflow, MAX_RETRY_AFTER_MS, retryAfterMs } from '../../../src/model/providerErrors.js';

describe('retryAfterMs', () => {
  const now = Date.parse('2026-11-29T12:00:00Z');
  it('prefers retry-after-ms, then retry-after in seconds or as an HTTP date', () => {
    expect(retryAfterMs({ 'retry-after-ms': '1500', 'retry-after': '9' }, now)).toBe(1500);
    expect(retryAfterMs({ 'retry-after': '3' }, now)).toBe(3000);
    expect(retryAfterMs({ 'retry-after': 'Sun, 29 Nov 2026 12:00:07 GMT' }, now)).toBe(7000);
    expect(retryAfterMs(new Headers({ 'Retry-After-Ms': '250' }), now)).toBe(250);
  });
  it('ignores garbage and negatives, clamps huge values, and a past date means now', () => {
    expect(retryAfterMs({ 'retry-after-ms': 'soon' }, now)).toBeUndefined();
    expect(retryAfterMs({ 'retry-after': '-4' }, now)).toBeUndefined();
    expect(retryAfterMs({ 'retry-after': '86400' }, now)).toBe(MAX_RETRY_AFTER_MS);
    expect(retryAfterMs({ 'retry-after': 'Sun, 29 Nov 2026 11:00:00 GMT' }, now)).toBe(0);
    expect(retryAfterMs(undefined, now)).toBeUndefined();
  });
});

describe('classifyHttpFailure', () => {
  const classify = (status: number | undefined, extra: { headers?: Record<string, string>; code?: string; message?: string } = {}) =>
    classifyHttpFailure({ status, headers: extra.headers, code: extra.code, message: extra.message ?? 'nope' });

  it.each([
    [408, 'PROVIDER_UNAVAILABLE', true],
    [409, 'PROVIDER_UNAVAILABLE', true],
    [429, 'PROVIDER_RATE_LIMITED', true],
    [500, 'PROVIDER_UNAVAILABLE', true],
    [529, 'PROVIDER_UNAVAILABLE', true],
    [401, 'PROVIDER_AUTH', false],
    [403, 'PROVIDER_AUTH', false],
    [400, 'PROVIDER_BAD_REQUEST', false],
    [404, 'PROVIDER_BAD_REQUEST', false],
    [422, 'PROVIDER_BAD_REQUEST', false],
    [undefined, 'PROVIDER_UNAVAILABLE', true],
  ] as const)('HTTP %s → %s (retryable %s)', (status, code, retryable) => {
    expect(classify(status)).toMatchObject({ code, retryable, status });
  });

  it('x-should-retry overrides the status either way', () => {
    expect(classify(400, { headers: { 'x-should-retry': 'true' } }).retryable).toBe(true);
    expect(classify(503, { headers: { 'x-should-retry': 'false' } }).retryable).toBe(false);
  });

  it('a 429 for exhausted quota is not worth waiting for', () => {
    expect(classify(429, { code: 'insufficient_quota' })).toMatchObject({ code: 'PROVIDER_RATE_LIMITED', retryable: false });
  });

  it('context overflow by code or by the wording of OpenAI-compatible servers', () => {
    expect(classify(400, { code: 'context_length_exceeded' }).code).toBe('PROVIDER_CONTEXT_OVERFLOW');
    expect(classify(400, { message: "This model's maximum context length is 4096 tokens" }).code).toBe('PROVIDER_CONTEXT_OVERFLOW');
    expect(classify(400, { message: 'the request exceeds the available context size, try increasing it' }).code).toBe('PROVIDER_CONTEXT_OVERFLOW');
    expect(classify(400, { message: 'Invalid value for temperature: 3 is greater than the maximum of 2' }).code).toBe('PROVIDER_BAD_REQUEST');
    expect(isContextOverflow(400, null, 'prompt is too long: 210000 tokens > 200000 maximum')).toBe(true);
    expect(isContextOverflow(500, null, 'maximum context length')).toBe(false);
  });

  it('keeps the server-requested delay', () => {
    expect(classify(429, { headers: { 'retry-after-ms': '1500' } }).retryAfterMs).toBe(1500);
  });
});
