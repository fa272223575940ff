/**
 * The exit-code table (EXIT_ROWS, from which the README's table is generated) and exitCodeFor
 * agree: every error code a row names exits with that row's code, `PROVIDER_*` with 6, every
 * other code with 70; every code a row names exists.
 */
import { describe, expect, it } from 'vitest';
import { EXIT, EXIT_ROWS, exitCodeFor } from '../../../src/cli/exitCodes.js';
import { ERROR_CODES } from '../../../src/errors.js';

describe('exit codes', () => {
  it('codes are distinct, and every error code a row names is a real one (or the PROVIDER_* family)', () => {
    const codes = Object.values(EXIT_ROWS).map((r) => r.code);
    expect(new Set(codes).size).toBe(codes.length);
    for (const row of Object.values(EXIT_ROWS)) for (const e of row.errors) expect(e === 'PROVIDER_*' || Object.hasOwn(ERROR_CODES, e), e).toBe(true);
  });

  it('every error code a row names exits with that row’s code; every other code exits 70', () => {
    const named = new Map<string, number>();
    for (const row of Object.values(EXIT_ROWS)) for (const code of row.errors) named.set(code, row.code);
    for (const code of Object.keys(ERROR_CODES)) {
      const expected = named.get(code) ?? (code.startsWith('PROVIDER_') ? named.get('PROVIDER_*') : undefined) ?? EXIT.INTERNAL;
      expect(exitCodeFor(code), code).toBe(expected);
    }
    expect(exitCodeFor(undefined)).toBe(EXIT.INTERNAL);
    expect(exitCodeFor('toString')).toBe(EXIT.INTERNAL);
  });
});
