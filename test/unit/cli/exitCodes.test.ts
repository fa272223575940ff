import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { EXIT, exitCodeFor } from '../../../src/cli/exitCodes.js';
import { ERROR_CODES } from '../../../src/errors.js';

/** The README's exit-code table: code → the error codes its row names. */
function readmeTable(): Map<number, string[]> {
  const readme = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8');
  const start = readme.indexOf('**Exit codes**');
  const section = readme.slice(start, readme.indexOf('\n\n', readme.indexOf('| code |', start)));
  const rows = new Map<number, string[]>();
  for (const m of section.matchAll(/^\| (\d+) \| (.*) \|$/gm)) rows.set(Number(m[1]), [...m[2]!.matchAll(/`([A-Z_*]+)`/g)].map((c) => c[1]!));
  return rows;
}

describe('exit codes', () => {
  it('the README table lists exactly the codes EXIT defines', () => {
    expect([...readmeTable().keys()].sort((a, b) => a - b)).toEqual(Object.values(EXIT).sort((a, b) => a - b));
  });

  it('every error code a row names exits with that row’s code; every other code exits 70', () => {
    const named = new Map<string, number>();
    for (const [exit, codes] of readmeTable()) for (const code of codes) named.set(code, exit);
    for (const code of Object.keys(ERROR_CODES)) {
      const expected = named.get(code) ?? (code.startsWith('PROVIDER_') ? named.get('PROVIDER_*') : undefined) ?? EXIT.INTERNAL;
      expect(exitCodeFor(code), code).toBe(expected);
    }
    expect(exitCodeFor(undefined)).toBe(EXIT.INTERNAL);
    expect(exitCodeFor('toString')).toBe(EXIT.INTERNAL);
  });
});
