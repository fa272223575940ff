/**
 * The kill -9 crash harness as tests. `npm test` runs a share of the trials (5 per mode, 6 per
 * team on the commit thread; below COVERAGE_MIN the coverage checks are left to the full run);
 * `npm run test:crash` runs the full counts: 200 trials per mode with their coverage checks (CI
 * runs it in place of the share). Each negative control stops at the first trial that catches
 * its planted bug. CRASH_TRIALS / CRASH_MODE_TRIALS / CRASH_THREAD_TRIALS / CRASH_SEED override
 * them (replay a failing seed with CRASH_SEED=<seed> CRASH_TRIALS=1 CRASH_MODE_TRIALS=1).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { runCrashTrials, VIOLATIONS, type CrashCounts, type CrashOptions } from './harness.js';

const CHILD = fileURLToPath(new URL('../../../dist/test/integration/crash/child.js', import.meta.url));

/** Start `child own <db>` and resolve with the process and its verdict (LEADER or REFUSED). */
function contender(db: string): Promise<{ proc: ChildProcess; verdict: string }> {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, [CHILD, db, 'own', '1'], { stdio: ['ignore', 'pipe', 'inherit'] });
    proc.stdout!.once('data', (chunk: Buffer) => resolve({ proc, verdict: chunk.toString().trim() }));
    proc.once('error', reject);
  });
}

const FULL = process.env.CRASH_FULL === '1';
const TRIALS = Number(process.env.CRASH_TRIALS ?? (FULL ? 200 : 5));
const MODE_TRIALS = Number(process.env.CRASH_MODE_TRIALS ?? (FULL ? 200 : 5));
const SEED = Number(process.env.CRASH_SEED ?? 1);
/**
 * Trials of each team with the child's commits on a worker thread. Its check that kills landed
 * inside a commit applies at any count: with 2 trials a run missed it, so npm test keeps 6.
 */
const THREAD_TRIALS = Number(process.env.CRASH_THREAD_TRIALS ?? (FULL ? 60 : 6));
/** Races of two processes for one file's lock (three processes each). */
const RACES = FULL ? 10 : 3;
/** Below this many trials the coverage checks are skipped: a replay of a few seeds need not reach every phase. */
const COVERAGE_MIN = 20;

function report(label: string, counts: CrashCounts): void {
  // The counts are the result: printed so CI logs show what the trials covered.
  process.stderr.write(`\ncrash harness (${label}): ${JSON.stringify(counts)}\nkill phases: ${JSON.stringify(counts.phases)}\n`);
}

function expectNoViolation(counts: CrashCounts): void {
  expect(counts.failingSeeds, `replay with CRASH_SEED=<seed> CRASH_TRIALS=1 (files kept with CRASH_KEEP=1); ${counts.errors.join(' | ')}`).toEqual([]);
  expect(Object.fromEntries(VIOLATIONS.map((v) => [v, counts[v]]))).toEqual(Object.fromEntries(VIOLATIONS.map((v) => [v, 0])));
}

const phase = (counts: CrashCounts, ...keys: string[]) => keys.reduce((sum, key) => sum + (counts.phases[key] ?? 0), 0);

describe('kill -9 at random points, then resume', () => {
  it(`${TRIALS} trials: nothing acknowledged is lost, nothing is told twice or not at all, recovery is idempotent, every run completes`, async () => {
    const counts = await runCrashTrials({ trials: TRIALS, seed: SEED, parallel: 2 });
    report('FULL', counts);
    expectNoViolation(counts);
    // The trials must actually have crashed things, in every phase. Kills are timed by the
    // child's events, so these shares hold on a quiet and on a loaded machine alike: every first
    // child is killed (a quarter at start-up), a quarter of the trials crash a resume and a sixth
    // a recovery. The rarer phases are required only of full runs. A first child that finishes
    // before its kill lands is not killed: 177 to 198 of 200 were in CI runs here, so the bar is
    // 80 % (a harness whose kills stopped landing would fall far below it).
    if (TRIALS < COVERAGE_MIN) return;
    expect(counts.killsDuringStart).toBeGreaterThan(TRIALS * 0.8);
    expect(phase(counts, 'start:boot', 'start:open')).toBeGreaterThan(TRIALS * 0.05);
    expect(phase(counts, 'start:steady')).toBeGreaterThan(TRIALS / 2);
    expect(counts.killsDuringResume).toBeGreaterThan(TRIALS * 0.1);
    expect(counts.killsDuringRecovery).toBeGreaterThan(TRIALS * 0.05);
    expect(counts.acked).toBeGreaterThan(TRIALS);
    expect(counts.delegations).toBeGreaterThan(TRIALS);
    expect(counts.delegationsInterrupted).toBeGreaterThan(0);
    if (TRIALS >= 100) expect(phase(counts, 'resume:recovering')).toBeGreaterThan(0);
  }, 1_800_000);

  it(`in doubt, ${MODE_TRIALS} trials: no non-idempotent call runs twice, every call cut in doubt is told once, idempotent re-runs keep their key`, async () => {
    const counts = await runCrashTrials({ trials: MODE_TRIALS, seed: SEED + 200_000, parallel: 2, mode: 'in-doubt' });
    report('in-doubt', counts);
    expectNoViolation(counts);
    if (MODE_TRIALS < COVERAGE_MIN) return;
    // Kills landed between a tool's committed start and its recorded result, before and after its
    // effect, for both kinds of tool (counted on the file, not guessed from the timing).
    expect(counts.inDoubtCalls).toBeGreaterThan(MODE_TRIALS / 2);
    expect(counts.inDoubtIdempotent).toBeGreaterThan(MODE_TRIALS / 2);
    expect(counts.inDoubtWithEffect).toBeGreaterThan(MODE_TRIALS / 4);
    expect(counts.inDoubtWithoutEffect).toBeGreaterThan(MODE_TRIALS / 4);
    expect(counts.idempotentReruns).toBeGreaterThan(MODE_TRIALS / 4);
    expect(counts.notRunCalls).toBeGreaterThan(0);
    expect(phase(counts, 'start:tool-running', 'start:tool-effected', 'resume:tool-running', 'resume:tool-effected')).toBeGreaterThan(MODE_TRIALS / 4);
    expect(counts.acked).toBeGreaterThan(MODE_TRIALS);
  }, 1_800_000);

  it(`group commit, ${MODE_TRIALS} trials: kills inside and right after commits of many agents lose nothing acknowledged and tear no group`, async () => {
    const counts = await runCrashTrials({ trials: MODE_TRIALS, seed: SEED + 300_000, parallel: 2, mode: 'group' });
    report('group', counts);
    expectNoViolation(counts);
    if (MODE_TRIALS < COVERAGE_MIN) return;
    // Kills landed inside a commit carrying several agents' writes (between its start and its
    // return) and right after one, before its effects ran; those groups held several agents each.
    const inCommit = phase(counts, 'start:in-commit', 'resume:in-commit');
    expect(inCommit).toBeGreaterThan(MODE_TRIALS / 4);
    expect(phase(counts, 'start:after-commit', 'resume:after-commit')).toBeGreaterThan(MODE_TRIALS / 10);
    expect(counts.agentsInKilledGroups / inCommit).toBeGreaterThan(3);
    // Those that carried two or more messages were checked all-or-none on the file.
    expect(counts.groupsCheckedAtomic).toBeGreaterThan(MODE_TRIALS / 10);
    expect(counts.acked).toBeGreaterThan(MODE_TRIALS * 5);
  }, 1_800_000);

  it(`commits on a thread (openStore commitThread), ${THREAD_TRIALS} trials each of the default and group teams and of the group team moving its commits mid-run: nothing acknowledged is lost, no group torn`, async () => {
    const plain = await runCrashTrials({ trials: THREAD_TRIALS, seed: SEED + 600_000, parallel: 2, commitThread: true });
    report('commit thread', plain);
    expectNoViolation(plain);
    expect(plain.killsDuringStart).toBeGreaterThan(0);
    expect(plain.acked).toBeGreaterThan(0);
    const group = await runCrashTrials({ trials: THREAD_TRIALS, seed: SEED + 700_000, parallel: 2, mode: 'group', commitThread: true });
    report('commit thread, group', group);
    expectNoViolation(group);
    expect(phase(group, 'start:in-commit', 'resume:in-commit')).toBeGreaterThan(0);
    expect(group.acked).toBeGreaterThan(0);
    // 'auto': each process commits on the main thread, then moves them to the thread mid-run. A kill
    // lands inside a commit only once commits are on the thread (on the main thread GROUPED follows
    // GROUP in the same tick): these seeds aim 5 of 6 first kills at a GROUP line, 3 of them in the
    // run's second half (SEED + 800_000 aimed 1, and a full root suite's load once left 0 in-commit).
    const moved = await runCrashTrials({ trials: THREAD_TRIALS, seed: SEED + 800_066, parallel: 2, mode: 'group', commitThread: 'auto' });
    report('commits moved to the thread, group', moved);
    expectNoViolation(moved);
    expect(phase(moved, 'start:in-commit', 'resume:in-commit')).toBeGreaterThan(0);
    expect(moved.acked).toBeGreaterThan(0);
  }, 1_800_000);

  // A negative control shows the harness catches a planted bug: it stops at the first trial that
  // does (its trial count stays the cap: a bug the harness stopped catching still runs them all,
  // then fails). The full run only raises the cap; its trials after the catch asserted nothing more
  // and cost CI ~2 minutes.
  async function negativeControl(label: string, options: CrashOptions, caught: (counts: CrashCounts) => boolean): Promise<CrashCounts> {
    const counts = await runCrashTrials({ ...options, stopWhen: caught });
    report(label, counts);
    return counts;
  }

  it('negative control: acknowledging before the commit is caught', async () => {
    const counts = await negativeControl(
      'negative control',
      { trials: FULL ? 60 : 20, seed: SEED + 100_000, parallel: 2, buggy: 'ack-early' },
      (c) => c.lostAcks > 0,
    );
    expect(counts.lostAcks).toBeGreaterThan(0);
  }, 600_000);

  it('negative control: a tool run without its started row is caught (told not run, run again)', async () => {
    const options: CrashOptions = { trials: FULL ? 40 : 10, seed: SEED + 400_000, parallel: 2, mode: 'in-doubt', buggy: 'skip-started' };
    const counts = await negativeControl('negative control in-doubt', options, (c) => c.notRunButRan > 0 && c.opRanTwice > 0);
    expect(counts.notRunButRan).toBeGreaterThan(0);
    expect(counts.opRanTwice).toBeGreaterThan(0);
  }, 600_000);

  it('negative control: a store port that resolves before its commit is durable is caught', async () => {
    const options: CrashOptions = { trials: FULL ? 40 : 10, seed: SEED + 500_000, parallel: 2, mode: 'group', buggy: 'commit-behind' };
    const counts = await negativeControl('negative control group', options, (c) => c.lostAcks > 0);
    expect(counts.lostAcks).toBeGreaterThan(0);
  }, 600_000);
});

/** The MCP variant starts a server per child (~3.5 s a trial): off in `npm test`, on in CI (`npm run test:crash`). */
const MCP_TRIALS = Number(process.env.CRASH_MCP_TRIALS ?? (FULL ? 20 : 0));

describe('kill -9 with an MCP server as the work', () => {
  it.skipIf(MCP_TRIALS === 0)(
    `an MCP server's mutation tool as the workers' work: ${MCP_TRIALS} trials, the same invariants`,
    async () => {
      process.env.CRASH_MCP = '1';
      try {
        const counts = await runCrashTrials({ trials: MCP_TRIALS, seed: SEED + 600_000, parallel: 2 });
        report('MCP', counts);
        expectNoViolation(counts);
        expect(counts.trials).toBe(MCP_TRIALS);
        expect(counts.killsDuringStart).toBeGreaterThan(MCP_TRIALS * 0.5);
      } finally {
        delete process.env.CRASH_MCP;
      }
    },
    900_000,
  );
});

describe('one owner per database', () => {
  it(`two processes racing, ${RACES} times: exactly one wins, the other gets RUN_LOCKED; after kill -9 a new process takes over`, async () => {
    for (let race = 0; race < RACES; race++) {
      const db = join(mkdtempSync(join(tmpdir(), 'troupe-own-')), 'run.db');
      const [a, b] = await Promise.all([contender(db), contender(db)]);
      expect([a.verdict, b.verdict].sort()).toEqual(['LEADER', 'REFUSED']);
      const leader = a.verdict === 'LEADER' ? a : b;
      const dead = new Promise((resolve) => leader.proc.once('close', resolve));
      leader.proc.kill('SIGKILL');
      await dead;
      const next = await contender(db);
      expect(next.verdict).toBe('LEADER');
      next.proc.kill('SIGKILL');
    }
  }, 120_000);
});
