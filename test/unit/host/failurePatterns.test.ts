/** The team's failure-pattern tracker (issue 34 item 9): distinct agents, a window, one trip per window. */
import { describe, expect, it } from 'vitest';
import { FailurePatterns, failurePatternNoticeKey } from '../../../src/host/agents/failurePatterns.js';
import { resolveOptions } from '../../../src/host/resolveOptions.js';
import { failureFingerprint } from '../../../src/turn/fingerprint.js';

const fp = failureFingerprint('fetch', { url: 'https://example.test/x' }, 'TOOL_FAILED');
const policy = { threshold: 3, windowMs: 60_000 };

describe('FailurePatterns', () => {
  it('trips at the third distinct agent, not on repeats of one agent', () => {
    const t = new FailurePatterns(policy);
    expect(t.record('a', fp, 0)).toBeNull();
    expect(t.record('a', fp, 1)).toBeNull();
    expect(t.record('b', fp, 2)).toBeNull();
    expect(t.record('b', fp, 3)).toBeNull();
    expect(t.record('c', fp, 4)).toEqual({ fingerprint: fp, agents: ['a', 'b', 'c'], at: 4 });
  });

  it('trips once per window, and again in a later window', () => {
    const t = new FailurePatterns(policy);
    for (const [i, id] of ['a', 'b', 'c'].entries()) t.record(id, fp, i);
    expect(t.record('d', fp, 10)).toBeNull();
    expect(t.record('a', fp, 59_999)).toBeNull();
    // A minute after the trip, three agents within the window again: a second trip.
    expect(t.record('b', fp, 60_002)?.agents).toEqual(['a', 'd', 'b']);
  });

  it('failures older than the window do not count', () => {
    const t = new FailurePatterns(policy);
    t.record('a', fp, 0);
    t.record('b', fp, 30_000);
    expect(t.record('c', fp, 60_000)).toBeNull(); // a's failure is a window old
    expect(t.record('a', fp, 60_001)?.agents).toEqual(['b', 'c', 'a']);
  });

  it('another fingerprint counts apart', () => {
    const t = new FailurePatterns(policy);
    const other = failureFingerprint('fetch', { url: 'https://example.test/x' }, 'TOOL_TIMEOUT');
    t.record('a', fp, 0);
    t.record('b', fp, 1);
    expect(t.record('c', other, 2)).toBeNull();
  });

  it('a trip restored from its notice key is not repeated within its window', () => {
    const t = new FailurePatterns(policy);
    t.restore(['notice:x:0', failurePatternNoticeKey(fp.id, 100, 'parent1'), 'failure_pattern:bad']);
    for (const [i, id] of ['a', 'b'].entries()) t.record(id, fp, 200 + i);
    expect(t.record('c', fp, 300)).toBeNull();
    expect(t.record('c', fp, 60_100)?.at).toBe(60_100);
  });
});

describe('the failurePatterns option', () => {
  const model = { complete: () => Promise.reject(new Error('unused')) };
  it('defaults to 3 agents in 10 minutes; false turns it off', () => {
    expect(resolveOptions({ model }).failurePatterns).toEqual({ threshold: 3, windowMs: 600_000 });
    expect(resolveOptions({ model, failurePatterns: false }).failurePatterns).toBeNull();
    expect(resolveOptions({ model, failurePatterns: { threshold: 2 } }).failurePatterns).toEqual({ threshold: 2, windowMs: 600_000 });
  });

  it('bad input is a typed CONFIG_INVALID error', () => {
    for (const bad of [{ threshold: 1 }, { threshold: 2.5 }, { windowMs: 0 }, { windowMs: '10m' }, true, []] as unknown[]) {
      expect(() => resolveOptions({ model, failurePatterns: bad as never })).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID' }));
    }
  });
});
