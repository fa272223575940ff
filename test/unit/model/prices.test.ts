/** The prompt estimate's lengths (model/prices.ts): what JSON.stringify would give, without building the text. */
import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import { jsonChars } from '../../../src/model/prices.js';

describe('jsonChars', () => {
  test.prop([fc.jsonValue()])('is the length of JSON.stringify for JSON values', (value) => {
    expect(jsonChars(value)).toBe(JSON.stringify(value).length);
  });

  test.prop([
    fc.object({ withNullPrototype: false, values: [fc.string(), fc.integer(), fc.constant(undefined), fc.double(), fc.boolean(), fc.constant(null)] }),
  ])('and for objects with undefined fields, non-finite numbers and sparse values', (value) => {
    expect(jsonChars(value)).toBe(JSON.stringify(value).length);
    expect(jsonChars([value, undefined])).toBe(JSON.stringify([value, undefined]).length);
  });

  it('counts a string over 64 K characters by its length, its escapes left out', () => {
    const long = `"${'\n'.repeat(70_000)}"`;
    expect(jsonChars({ text: long })).toBe('{"text":'.length + long.length + 2 + 1);
    expect(JSON.stringify({ text: long }).length).toBeGreaterThan(jsonChars({ text: long }));
  });
});
