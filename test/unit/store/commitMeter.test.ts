/**
 * When `commitThread: 'auto'` moves a file's commits to the thread (sqliteWriter.ts): the rule on
 * one window, the meter's windows, and the default staying off where the thread cannot run (these
 * TypeScript sources have no compiled `sqliteWriterThread.js` beside them).
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { portOf } from '../../../src/store/port.js';
import { openStore } from '../../../src/store/sqliteStore.js';
import { AUTO_COMMIT_THREAD, commitMeter, outgrewMainThread } from '../../../src/store/sqliteWriter.js';

const RULE = AUTO_COMMIT_THREAD;

describe("the 'auto' rule", () => {
  it('moves only when commits took the share of a whole window, in long commits', () => {
    // 10,000 agents measured: ~30 % of the loop in commits of 6-9 ms.
    expect(outgrewMainThread(RULE, { elapsedMs: 1_000, busyMs: 300, commits: 40 })).toBe(true);
    // One agent's turns: a loop mostly in its own short commits (fsyncs), nothing to gain.
    expect(outgrewMainThread(RULE, { elapsedMs: 1_000, busyMs: 600, commits: 1_200 })).toBe(false);
    // 1,000 agents: a sixth of the loop in commits of ~1 ms.
    expect(outgrewMainThread(RULE, { elapsedMs: 1_000, busyMs: 164, commits: 150 })).toBe(false);
    // Long commits, rarely: a quiet loop.
    expect(outgrewMainThread(RULE, { elapsedMs: 1_000, busyMs: 100, commits: 10 })).toBe(false);
    // Not a whole window yet.
    expect(outgrewMainThread(RULE, { elapsedMs: 999, busyMs: 999, commits: 1 })).toBe(false);
    // The edges are inclusive.
    expect(outgrewMainThread(RULE, { elapsedMs: 1_000, busyMs: 200, commits: 100 })).toBe(true);
  });

  it('the meter decides once per window and starts the next afresh', () => {
    const meter = commitMeter(RULE);
    // A window of long commits: 10 ms every 40 ms (25 %).
    const long = Array.from({ length: 26 }, (_, i) => meter.record(i * 40, i * 40 + 10));
    expect(long.slice(0, 25).every((m) => !m)).toBe(true);
    expect(long[25]).toBe(true);
    // Then a window of short ones only: its verdict is its own, not carried over.
    const short = Array.from({ length: 2_001 }, (_, i) => meter.record(2_000 + i * 0.5, 2_000 + i * 0.5 + 0.4));
    expect(short.some((m) => m)).toBe(false);
    // A long idle gap inside a window dilutes it: a quiet process never moves.
    const quiet = commitMeter(RULE);
    expect(quiet.record(0, 5)).toBe(false);
    expect(quiet.record(60_000, 60_005)).toBe(false);
  });
});

describe("'auto' from the TypeScript sources", () => {
  it('stays on the main thread: the thread entry is the compiled one', async () => {
    const store = openStore({ path: join(mkdtempSync(join(tmpdir(), 'troupe-meter-')), 's.db'), commitThread: { windowMs: 0, share: 0, commitMs: 0 } });
    const run = {
      id: 'r',
      createdAt: 1,
      interactive: false,
      rootId: null,
      budget: { limitUsd: null, budgetStopped: false, reserveStopped: false, paused: false, resumeEpoch: 0, reserveNoticeClaimed: false },
    };
    await portOf(store).commit([{ op: 'insertRun', run }]);
    await portOf(store).commit([{ op: 'updateRun', id: 'r', patch: { interactive: true } }]);
    expect(store.commitsOnThread).toBe(false);
    expect(store.getRun('r')?.interactive).toBe(true);
    store.close();
  });
});
