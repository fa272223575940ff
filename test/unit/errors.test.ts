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

  it('every code is listed in the README error table, and the table lists no other code', () => {
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    const section = readme.slice(readme.indexOf('## Errors'));
    const listed = new Set([...section.matchAll(/^\| `([A-Z_]+)` \|/gm)].map((m) => m[1]));
    expect([...listed].sort()).toEqual(Object.keys(ERROR_CODES).sort());
    for (const [code, { retryable }] of Object.entries(ERROR_CODES)) {
      expect(section, code).toMatch(new RegExp(`^\\| \`${code}\` \\| ${retryable ? 'yes' : 'no'} \\|`, 'm'));
    }
  });
});
