import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/logging/createLogger.js';
import { createRedactor, MIN_SECRET_LENGTH, REDACTED } from '../../../src/logging/redact.js';

const KEY = 'sk-abc123DEF456';

describe('createRedactor', () => {
  it('replaces every occurrence of every secret, in text and inside JSON', () => {
    const r = createRedactor([KEY, undefined, null]);
    expect(r.scrub(`401: bad key ${KEY}; again ${KEY}.`)).toBe(`401: bad key ${REDACTED}; again ${REDACTED}.`);
    expect(r.scrub('nothing secret here')).toBe('nothing secret here');
    const json = r.scrubJson({ error: { message: `key ${KEY}` }, [KEY]: [KEY, 1, null] });
    expect(JSON.parse(json)).toEqual({ error: { message: `key ${REDACTED}` }, [REDACTED]: [REDACTED, 1, null] });
  });

  it('a secret with characters JSON escapes is found in JSON text too, and JSON stays valid', () => {
    const odd = 'pa"ss\\word-123';
    const r = createRedactor([odd]);
    const json = r.scrubJson({ text: `the key is ${odd}!` });
    expect(JSON.parse(json)).toEqual({ text: `the key is ${REDACTED}!` });
    // Text that already holds JSON (a logged line) is scrubbed by the escaped form.
    expect(r.scrub(JSON.stringify({ text: odd }))).toBe(`{"text":"${REDACTED}"}`);
  });

  it('a longer secret that contains a shorter one is replaced whole; short values are not secrets', () => {
    const r = createRedactor(['abcdefgh', 'abcdefgh-and-more']);
    expect(r.scrub('x abcdefgh-and-more y abcdefgh')).toBe(`x ${REDACTED} y ${REDACTED}`);
    const short = createRedactor(['a'.repeat(MIN_SECRET_LENGTH - 1)]);
    expect(short.scrub('a'.repeat(20))).toBe('a'.repeat(20));
  });

  it('secrets added later apply from then on (a key read from a config file after start-up)', () => {
    const r = createRedactor();
    expect(r.scrub(KEY)).toBe(KEY);
    r.add(KEY);
    expect(r.scrub(KEY)).toBe(REDACTED);
  });

  it('createLogger({ redactor }) scrubs the value from every record, message and error alike', () => {
    let out = '';
    const sink = new Writable({ write: (chunk: Buffer, _e, done) => ((out += chunk.toString()), done()) });
    const logger = createLogger({ redactor: createRedactor([KEY]) }, sink);
    logger.error({ err: new Error(`HTTP 401: Incorrect API key provided: ${KEY}`), note: KEY }, `failed with ${KEY}`);
    expect(out).not.toContain(KEY);
    expect(out.match(/\[redacted\]/g)?.length).toBeGreaterThanOrEqual(3);
  });
});
