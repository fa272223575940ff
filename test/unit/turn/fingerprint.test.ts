/** Failure fingerprints (issue 34 item 9): stable under key order and volatile parts, apart for other tools and error classes. */
import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import { TroupeError } from '../../../src/errors.js';
import { errorClassOf, failureFingerprint, normaliseArgs, normaliseString } from '../../../src/turn/fingerprint.js';

/** The same object with its keys in another order, at every depth. */
function shuffled(value: unknown, seed: number): unknown {
  if (Array.isArray(value)) return value.map((v, i) => shuffled(v, seed + i));
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value);
    const order = keys.map((k, i) => [k, (i * 7919 + seed * 104729) % (keys.length + 13)] as const).sort((a, b) => a[1] - b[1]);
    return Object.fromEntries(order.map(([k]) => [k, shuffled((value as Record<string, unknown>)[k], seed + 1)]));
  }
  return value;
}

const json = fc.jsonValue({ maxDepth: 3 });

describe('failureFingerprint', () => {
  test.prop([json, fc.integer({ min: 0, max: 1000 })])('the same arguments in any key order give the same fingerprint', (args, seed) => {
    const a = failureFingerprint('fetch', JSON.stringify(args), 'TOOL_FAILED');
    const b = failureFingerprint('fetch', JSON.stringify(shuffled(args, seed)), 'TOOL_FAILED');
    expect(b).toEqual(a);
  });

  test.prop([json, fc.string({ minLength: 1, maxLength: 12 }), fc.string({ minLength: 1, maxLength: 12 })])(
    'a different tool or error class gives a different fingerprint',
    (args, x, y) => {
      fc.pre(x !== y);
      const text = JSON.stringify(args);
      expect(failureFingerprint(x, text, 'TOOL_FAILED').id).not.toBe(failureFingerprint(y, text, 'TOOL_FAILED').id);
      expect(failureFingerprint('fetch', text, x).id).not.toBe(failureFingerprint('fetch', text, y).id);
    },
  );

  it('a megabyte argument is judged by its first 4,096 characters (bounded work on the event loop)', () => {
    const head = 'x'.repeat(4_096);
    const a = failureFingerprint('write', { text: `${head}${'a'.repeat(1 << 20)}` }, 'TOOL_FAILED');
    expect(failureFingerprint('write', { text: `${head}${'b'.repeat(1 << 20)}` }, 'TOOL_FAILED')).toEqual(a);
    expect(failureFingerprint('write', { text: `y${head.slice(1)}${'a'.repeat(1 << 20)}` }, 'TOOL_FAILED').id).not.toBe(a.id);
  });

  it('keys are sorted at every depth; parsed and raw arguments agree', () => {
    expect(normaliseArgs('{"b":{"y":true,"x":null},"a":[ "s" ]}')).toBe('{"a":["s"],"b":{"x":null,"y":true}}');
    expect(failureFingerprint('t', { b: 1, a: 'x' }, 'E')).toEqual(failureFingerprint('t', '{"a":"x","b":2}', 'E'));
  });

  it('numbers, timestamps, ids and the digits of paths are normalised; other text is not', () => {
    expect(normaliseArgs({ n: 42.5 })).toBe('{"n":"<n>"}');
    expect(normaliseString('at 2026-12-04T12:34:07.123Z')).toBe('at <time>');
    expect(normaliseString('run 019f4b19-eafd-74ed-baa6-000000000001')).toBe('run <uuid>');
    expect(normaliseString('msg_a1b2c3d4 and run_7Hq2x9')).toBe('<id> and <id>');
    expect(normaliseString('commit deadbeef1234')).toBe('commit <hex>');
    expect(normaliseString('/tmp/job-123/out.txt')).toBe(normaliseString('/tmp/job-9/out.txt'));
    expect(normaliseString('/srv/data/report.txt')).toBe('/srv/data/report.txt');
    expect(failureFingerprint('read', { path: '/a.txt' }, 'E').id).not.toBe(failureFingerprint('read', { path: '/b.txt' }, 'E').id);
  });

  it('a long string is hashed; two long strings that differ stay apart', () => {
    const long = 'x'.repeat(300);
    expect(normaliseString(long)).toMatch(/^<sha256:[0-9a-f]{16}>$/);
    expect(normaliseString(long)).not.toBe(normaliseString(`${long}y`));
  });

  it('malformed arguments are one string', () => {
    expect(normaliseArgs('{not json')).toBe('"{not json"');
  });
});

describe('errorClassOf', () => {
  it("a troupe code as it is; a wrapped throw refined by its cause's code or constructor", () => {
    expect(errorClassOf(new TroupeError('TOOL_TIMEOUT', 'slow'))).toBe('TOOL_TIMEOUT');
    const enoent = Object.assign(new Error('no file /tmp/a'), { code: 'ENOENT' });
    expect(errorClassOf(new TroupeError('TOOL_FAILED', 'x', { cause: enoent }))).toBe('TOOL_FAILED:ENOENT');
    expect(errorClassOf(new TroupeError('TOOL_FAILED', 'x', { cause: new TypeError('bad') }))).toBe('TOOL_FAILED:TypeError');
    expect(errorClassOf(new TroupeError('TOOL_FAILED', 'x', { cause: 'a string' }))).toBe('TOOL_FAILED');
  });
});
