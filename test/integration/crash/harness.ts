/**
 * The kill -9 crash harness (reliability.md §3). Each trial runs the child team on a fresh
 * database file, kills it with SIGKILL at a random point (start-up, steady state, a second crash
 * during a resume, or inside the recovery transaction), then checks the invariants on the file,
 * resumes to the end in a new process and checks them again. The acknowledgement ledger lives
 * here, in the parent, filled only from the child's `ACK` lines.
 *
 * Kills are timed by events, not by the clock: the child prints a line at each step of its
 * start-up and at every model call of a worker, and the parent kills after a random number of
 * them (plus a random share of the gap since the previous line). A window in milliseconds let 38 %
 * of first children finish before the kill on a quiet machine and almost none under load; counted
 * in events, the kill lands at the same point of the run either way. How many events an uncrashed
 * run makes is measured once per harness run (`calibrationTicks`), and where every kill landed is
 * counted in `phases`.
 *
 * Three trial modes (teams.ts), the same invariants in each (verify.ts):
 * - `default`: 4 workers with delegations; steady-state kills at a worker's model call.
 * - `in-doubt`: tools with a side effect (an fsynced line in a file), idempotent or not; most
 *   kills aim at a tool between its `started` ledger row and its recorded result, and the
 *   in-doubt rules are checked on top (inDoubtCheck.ts).
 * - `group`: 24–40 workers moving at once, so commits carry many agents' writes; most kills aim
 *   inside such a commit or right after it, before its effects (acknowledgements, wakes) run, and
 *   a group killed inside its commit must be on the file whole or not at all.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openStore } from '../../../src/store/sqliteStore.js';
import { emptyCounts, type CrashCounts, type Violation } from './counts.js';
import { observeInDoubt, verifyInDoubt, type InDoubtSeen } from './inDoubtCheck.js';
import { runChild, type ChildRun, type KillPlan, type Progress } from './runChild.js';
import type { TeamName } from './teams.js';
import { verify, verifyGroupAtomic } from './verify.js';
import { seededRandom } from '../../helpers/random.js';

export { VIOLATIONS, type CrashCounts } from './counts.js';

export interface CrashOptions {
  trials: number;
  seed: number;
  /** The trial mode (the team the child runs and where the kills aim); `default` unless said. */
  mode?: TeamName;
  /**
   * Negative control: a planted bug in the first child of each trial. `true` is the default
   * mode's (acknowledge before the send); the others are named (child.ts).
   */
  buggy?: boolean | 'ack-early' | 'skip-started' | 'commit-behind';
  synchronous?: 'FULL' | 'NORMAL';
  /** The child's store commits on a worker thread (`openStore({ commitThread: true })`), or moves them there mid-run (`'auto'`: child.ts). */
  commitThread?: boolean | 'auto';
  /** Trials run side by side. */
  parallel?: number;
  /** Where the compiled child lives. */
  childPath?: string;
  /**
   * Checked after each trial: once it holds, no further trial starts (those already running
   * finish and are counted). For a negative control that only has to show its planted bug is
   * caught; `trials` stays the cap, and `counts.trials` says how many ran.
   */
  stopWhen?: (counts: CrashCounts) => boolean;
}

/** The compiled child: beside this file when it runs compiled (npm run crash), else in dist/. */
const defaultChild = () =>
  fileURLToPath(new URL(import.meta.url.endsWith('.js') ? './child.js' : '../../../dist/test/integration/crash/child.js', import.meta.url));

/** The steady-state event each mode's kills are counted in. */
const STEADY: Record<TeamName, Progress> = { default: 'TICK', 'in-doubt': 'TOOL', group: 'GROUP' };

/** How many steady-state events an uncrashed run of the team makes: what the steady-state kills are spread over. */
async function calibrate(child: string, seed: number, sync: string, mode: TeamName): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'troupe-crash-'));
  try {
    const run = await runChild(child, [join(dir, 'run.db'), 'start', String(seed), sync, mode], null, {});
    if (run.failed || run.done === null) throw new Error(`the calibration run failed: ${run.failed ?? 'no DONE line'}`);
    return run.seen[STEADY[mode]] ?? 0;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const PHASE: Partial<Record<Progress, string>> = { BOOT: 'boot', OPEN: 'open', RUN: 'steady', RESUMED: 'resumed', TICK: 'steady' };
/** Where a child of the new modes died: the last line it printed. */
const DIED_AT: Partial<Record<Progress, string>> = { TOOL: 'tool-running', EFFECT: 'tool-effected', GROUP: 'in-commit', GROUPED: 'after-commit' };

type Random = () => number;
const pick = <T>(random: Random, items: readonly T[]): T => items[Math.floor(random() * items.length)]!;

/** The first child's kill: a share at start-up, the rest at the mode's steady-state events. */
function firstPlan(mode: TeamName, random: Random, calibration: number): KillPlan {
  const atStart = mode === 'default' ? 0.25 : 0.1;
  if (random() < atStart) return { line: pick(random, ['BOOT', 'OPEN', 'RUN'] as const), count: 1, jitter: 0 };
  const count = 1 + Math.floor(random() * calibration);
  if (mode === 'default') return { line: 'TICK', count, jitter: random() };
  const r = random();
  if (mode === 'in-doubt') {
    // Between a tool's start and its effect, or after its effect; a few at a model call.
    if (r < 0.15) return { line: 'TICK', count: 1 + Math.floor(random() * calibration), jitter: random() };
    return { line: r < 0.6 ? 'TOOL' : 'EFFECT', count, jitter: random() };
  }
  // Inside the commit of a group (at once), or after it as its effects run.
  return r < 0.5 ? { line: 'GROUP', count, jitter: 0 } : { line: 'GROUPED', count, jitter: random() };
}

/** A second crash, while resuming: as it opens the file, inside recovery and the respawn, as it resumes, or at one of the events the first child left undone. */
function resumePlan(mode: TeamName, random: Random, calibration: number, first: ChildRun): KillPlan {
  const line = STEADY[mode];
  const left = Math.max(1, calibration - (first.seen[line] ?? 0));
  const at = random();
  if (at < 0.45) return { line: at < 0.15 ? 'BOOT' : at < 0.3 ? 'OPEN' : 'RESUMED', count: 1, jitter: 0 };
  return { line, count: 1 + Math.floor(random() * left), jitter: mode === 'group' ? 0 : random() };
}

function childEnv(options: CrashOptions): Record<string, string> {
  const bug = options.buggy === true ? 'ack-early' : options.buggy || '';
  return { BUGGY: bug };
}

export async function runCrashTrials(options: CrashOptions): Promise<CrashCounts> {
  const started = Date.now();
  const mode = options.mode ?? 'default';
  const child = options.childPath ?? defaultChild();
  const sync = `${options.synchronous ?? 'FULL'}${options.commitThread === 'auto' ? '+auto' : options.commitThread ? '+thread' : ''}`;
  const calibration = await calibrate(child, options.seed, sync, mode);
  const counts = emptyCounts(mode, calibration);
  if (mode === 'group') counts.groupsPerRun = calibration;

  async function trial(index: number): Promise<void> {
    const trialSeed = options.seed + index;
    const random = seededRandom(trialSeed);
    const dir = mkdtempSync(join(tmpdir(), 'troupe-crash-'));
    const path = join(dir, 'run.db');
    const args = (role: string) => [path, role, String(trialSeed), sync, mode];
    const acked = new Set<string>();
    const ackedDone = new Set<string>();
    const seen: InDoubtSeen = new Map();
    let violations = 0;
    // Which invariants this trial broke, and where: named in the failure message (a CI log then says what to look for).
    const noted: Violation[] = [];
    const phases: string[] = [];
    const phase = (who: string, run: ChildRun, named: (step: Progress | null) => string) => {
      const died = run.killed && run.last ? DIED_AT[run.last] : undefined;
      const key = `${who}:${run.killed ? (died ?? named(run.step)) : 'finished'}`;
      counts.phases[key] = (counts.phases[key] ?? 0) + 1;
      phases.push(key);
      if (run.killed && run.last === 'GROUP') counts.agentsInKilledGroups += run.lastGroupAgents;
    };
    const childError = (run: ChildRun, phase: string) => {
      if (!run.failed) return;
      counts.childErrors++;
      violations++;
      if (counts.errors.length < 3) counts.errors.push(`seed ${trialSeed} ${phase}: ${run.failed}`);
    };
    // After every child: in-doubt mode notes the calls its death left in doubt; a kill inside a
    // group commit must have left all of the group or none.
    const observe = (run: ChildRun) => {
      if (mode === 'in-doubt') observeInDoubt(path, seen, counts);
      if (run.killed && run.last === 'GROUP') violations += verifyGroupAtomic(path, run.lastGroupMessages, counts, noted);
    };
    try {
      const first = await runChild(child, args('start'), firstPlan(mode, random, calibration), childEnv(options));
      observe(first);
      phase('start', first, (step) => (step === null ? 'boot' : PHASE[step]!));
      first.acks.forEach((a) => acked.add(a));
      first.delegationsDone.forEach((d) => ackedDone.add(d));
      if (first.killed) counts.killsDuringStart++;
      childError(first, 'start');
      const hasRun = () => {
        const probe = openStore({ path });
        try {
          return probe.listRuns().length > 0;
        } finally {
          probe.close();
        }
      };
      const extra = random();
      const exists = hasRun();
      const clean = childEnv({ ...options, buggy: false });
      if (extra < 0.25 && exists) {
        const second = await runChild(child, args('resume'), resumePlan(mode, random, calibration, first), clean);
        observe(second);
        phase('resume', second, (step) => (step === 'OPEN' ? 'recovering' : step === null ? 'boot' : PHASE[step]!));
        second.delegationsDone.forEach((d) => ackedDone.add(d));
        if (second.killed) counts.killsDuringResume++;
        childError(second, 'resume');
      } else if (extra < 0.4 && exists) {
        // Inside the recovery transaction: the child runs it in a loop, one TICK per pass.
        const recoveryPlan: KillPlan = { line: 'TICK', count: 1 + Math.floor(random() * 10), jitter: random() };
        const recovery = await runChild(child, args('recover-loop'), recoveryPlan, clean);
        phase('recovery', recovery, (step) => (step === 'OPEN' ? 'recovering' : 'boot'));
        if (recovery.killed && recovery.step === 'OPEN') counts.killsDuringRecovery++;
        childError(recovery, 'recovery');
      }
      violations += await verify(path, acked, ackedDone, counts, false, noted);
      // Resume to the end in a fresh process (unless the first kill came before a run existed).
      if (exists) {
        const last = await runChild(child, args('resume'), null, clean);
        last.delegationsDone.forEach((d) => ackedDone.add(d));
        childError(last.done === null && !last.failed ? { ...last, failed: 'no DONE line' } : last, 'final resume');
        violations += await verify(path, acked, ackedDone, counts, true, noted);
        if (mode === 'in-doubt') violations += verifyInDoubt(path, seen, counts, noted);
      }
    } finally {
      counts.trials++;
      counts.acked += acked.size;
      counts.delegationsAckedDone += ackedDone.size;
      if (violations > 0) {
        if (noted.length > 0 && counts.errors.length < 10)
          counts.errors.push(`seed ${trialSeed}: ${[...new Set(noted)].join(', ')} (killed at ${phases.join(' then ')})`);
        counts.trialsWithViolation++;
        counts.failingSeeds.push(trialSeed);
      }
      // CRASH_KEEP=1 keeps the files of a failing trial for a post-mortem.
      if (violations > 0 && process.env.CRASH_KEEP) counts.errors.push(`seed ${trialSeed}: files kept in ${dir}`);
      else rmSync(dir, { recursive: true, force: true });
    }
  }

  const parallel = Math.max(1, options.parallel ?? 2);
  let next = 0;
  let stop = false;
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      while (!stop && next < options.trials) {
        await trial(next++);
        if (options.stopWhen?.(counts)) stop = true;
      }
    }),
  );
  counts.seconds = (Date.now() - started) / 1000;
  return counts;
}
