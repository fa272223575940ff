import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ConfigError, ERROR_CODES, isTroupeError, ProviderError, serializeError, TroupeError } from '../../src/errors.js';

describe('errors', () => {
  it('carry a stable code, a retryable flag, a name and a cause', () => {
    const cause = new Error('root cause');
    const err = new ProviderError('PROVIDER_RATE_LIMITED', 'slow down', { cause, status: 429, retryAfterMs: 100 });
    expect(err).toBeInstanceOf(TroupeError);
    expect(err).toMatchObject({ name: 'ProviderError', code: 'PROVIDER_RATE_LIMITED', retryable: true, status: 429, cause });
    expect(new ConfigError('bad')).toMatchObject({ name: 'ConfigError', code: 'CONFIG_INVALID', retryable: false });
    expect(new TroupeError('MAILBOX_FULL', 'x', { retryable: false }).retryable).toBe(false);
  });

  it('survive JSON', () => {
    const json = JSON.parse(JSON.stringify(serializeError(new TroupeError('TOOL_TIMEOUT', 'slow'))));
    expect(json).toEqual({ code: 'TOOL_TIMEOUT', message: 'slow', retryable: true });
    expect(isTroupeError(json)).toBe(true);
    expect(isTroupeError({ code: 'NOPE' })).toBe(false);
    expect(serializeError('a string')).toEqual({ code: 'INTERNAL', message: 'a string', retryable: false });
  });

  it('every code is listed in the README under its retryable flag, and the lists name no other code', () => {
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    const section = readme.slice(readme.indexOf('## Errors'));
    const line = (label: string) => [...(section.match(new RegExp(`^${label}: (.*)$`, 'm'))?.[1] ?? '').matchAll(/`([A-Z_]+)`/g)].map((m) => m[1]);
    const retryable = line('Retryable');
    const not = line('Not retryable');
    expect([...retryable, ...not].sort()).toEqual(Object.keys(ERROR_CODES).sort());
    for (const [code, e] of Object.entries(ERROR_CODES)) expect(e.retryable ? retryable : not, code).toContain(code);
  });
});
