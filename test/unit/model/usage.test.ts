import { describe, expect, it } from 'vitest';
import { checkUsage, isUsd, MAX_TOKENS_PER_CALL, MAX_USD_PER_CALL, usageFromWire } from '../../../src/model/usage.js';

describe('checkUsage: the one rule for what usage troupe believes', () => {
  it('accepts integer token counts in [0, 10^9] with cached <= input, and a costUsd in [0, 10^6]', () => {
    expect(checkUsage(undefined)).toEqual({ ok: true, usage: undefined });
    expect(checkUsage(null)).toEqual({ ok: true, usage: undefined });
    expect(checkUsage({})).toEqual({ ok: true, usage: {} });
    const max = { inputTokens: MAX_TOKENS_PER_CALL, outputTokens: MAX_TOKENS_PER_CALL, cachedInputTokens: MAX_TOKENS_PER_CALL, costUsd: MAX_USD_PER_CALL };
    expect(checkUsage(max)).toEqual({ ok: true, usage: max });
    expect(checkUsage({ inputTokens: 0, outputTokens: 0, costUsd: 0 })).toEqual({ ok: true, usage: { inputTokens: 0, outputTokens: 0, costUsd: 0 } });
  });

  it.each<[string, unknown]>([
    ['negative tokens', { inputTokens: -1 }],
    ['-1e9 tokens', { inputTokens: -1e9, outputTokens: -1e9 }],
    ['tokens past the bound', { outputTokens: MAX_TOKENS_PER_CALL + 1 }],
    ['1e300 tokens', { inputTokens: 1e300 }],
    ['fractional tokens', { inputTokens: 1.5 }],
    ['NaN tokens', { inputTokens: Number.NaN }],
    ['Infinity tokens', { outputTokens: Number.POSITIVE_INFINITY }],
    ['string tokens', { inputTokens: '12' }],
    ['null tokens', { outputTokens: null }],
    ['more cached than input', { inputTokens: 3, cachedInputTokens: 4 }],
    ['cached with no input', { cachedInputTokens: 1 }],
    ['a negative cost', { costUsd: -0.01 }],
    ['a NaN cost', { costUsd: Number.NaN }],
    ['a cost past the bound', { costUsd: MAX_USD_PER_CALL * 2 }],
    ['a string cost', { costUsd: '0.1' }],
    ['a number', 7],
    ['a string', 'usage'],
    ['an array', [1, 2]],
  ])('rejects %s, saying why', (_name, raw) => {
    const checked = checkUsage(raw);
    expect(checked.ok).toBe(false);
    expect(!checked.ok && checked.reason).toMatch(/\w/);
  });

  it('isUsd is the same bound for amounts alone (estimates)', () => {
    expect([0, 0.5, MAX_USD_PER_CALL].every(isUsd)).toBe(true);
    expect([-1, Number.NaN, Number.POSITIVE_INFINITY, MAX_USD_PER_CALL + 1, '1', null].some((v) => isUsd(v))).toBe(false);
  });
});

describe('usageFromWire: Chat Completions usage through the same rule', () => {
  it('maps prompt, completion and cached tokens; null details mean none cached', () => {
    expect(usageFromWire({ prompt_tokens: 10, completion_tokens: 5, prompt_tokens_details: { cached_tokens: 4 } })).toEqual({
      ok: true,
      usage: { inputTokens: 10, outputTokens: 5, cachedInputTokens: 4 },
    });
    expect(usageFromWire({ prompt_tokens: 10, completion_tokens: 5, prompt_tokens_details: null })).toEqual({
      ok: true,
      usage: { inputTokens: 10, outputTokens: 5 },
    });
    expect(usageFromWire({ prompt_tokens: 10, completion_tokens: 5, prompt_tokens_details: { cached_tokens: null } })).toEqual({
      ok: true,
      usage: { inputTokens: 10, outputTokens: 5 },
    });
    expect(usageFromWire(null)).toEqual({ ok: true, usage: undefined });
  });

  it.each<[string, unknown]>([
    ['a missing prompt count', { completion_tokens: 5 }],
    ['a null completion count', { prompt_tokens: 5, completion_tokens: null }],
    ['negative counts', { prompt_tokens: -1e9, completion_tokens: -1e9 }],
    ['string counts', { prompt_tokens: '10', completion_tokens: '5' }],
    ['details that are a string', { prompt_tokens: 1, completion_tokens: 1, prompt_tokens_details: 'x' }],
    ['more cached than prompt tokens', { prompt_tokens: 1, completion_tokens: 1, prompt_tokens_details: { cached_tokens: 2 } }],
    ['usage that is a string', 'lots'],
  ])('rejects %s', (_name, raw) => {
    expect(usageFromWire(raw).ok).toBe(false);
  });
});
