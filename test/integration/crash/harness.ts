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
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { recoverRun } from '../../../src/host/resumeCoordinator.js';
import { openStore } from '../../../src/store/sqliteStore.js';

const STINT_TYPES = new Set(['completion', 'completed', 'failed', 'crashed', 'stopped']);

export interface CrashCounts {
  trials: number;
  /** Workers' model calls in one uncrashed run (measured first): the range the steady-state kills are drawn from. */
  calibrationTicks: number;
  /** First children killed (at start-up or in steady state), second children killed while resuming, recovery loops killed inside recovery. */
  killsDuringStart: number;
  killsDuringResume: number;
  killsDuringRecovery: number;
  /**
   * Where each child of a trial was when the kill landed, as `<child>:<phase>` — the last progress
   * line the parent had seen: `start:boot` (opening the file), `start:open` (creating the run),
   * `start:steady`, `resume:boot`, `resume:recovering` (recovery and respawn), `resume:resumed`,
   * `recovery:recovering`; `<child>:finished` when it ended before its kill.
   */
  phases: Record<string, number>;
  acked: number;
  lostAcks: number;
  duplicateDeliveries: number;
  duplicateNotices: number;
  missingNotices: number;
  integrityFailures: number;
  checksumFailures: number;
  recoveryNotIdempotent: number;
  runsNotCompleted: number;
  /** Delegations seen: dispatched in total, and acknowledged complete by the child. */
  delegations: number;
  delegationsInterrupted: number;
  delegationsAckedDone: number;
  delegationsLeftRunning: number;
  delegationsDowngraded: number;
  delegationMessagesWrong: number;
  childErrors: number;
  /** The first few child failures, for the log. */
  errors: string[];
  trialsWithViolation: number;
  failingSeeds: number[];
  seconds: number;
}

export interface CrashOptions {
  trials: number;
  seed: number;
  /** Negative control: the child acknowledges before it sends. */
  buggy?: boolean;
  synchronous?: 'FULL' | 'NORMAL';
  /** Trials run side by side. */
  parallel?: number;
  /** Where the compiled child lives. */
  childPath?: string;
}

/** The compiled child: beside this file when it runs compiled (npm run crash), else in dist/. */
const defaultChild = () =>
  fileURLToPath(new URL(import.meta.url.endsWith('.js') ? './child.js' : '../../../dist/test/integration/crash/child.js', import.meta.url));

function lcg(seed: number) {
  let s = seed >>> 0 || 1;
  return () => ((s = (s * 1103515245 + 12345) >>> 0) / 2 ** 32);
}

/** The child's progress lines (see child.ts): the named steps of its start-up, and one TICK per model call or recovery pass. */
type Progress = 'BOOT' | 'OPEN' | 'RUN' | 'RESUMED' | 'TICK';
const PROGRESS = new Set<string>(['BOOT', 'OPEN', 'RUN', 'RESUMED', 'TICK']);

/**
 * When to SIGKILL a child: upon the `count`-th `line`, after `jitter` (0..1) times the gap between
 * that line and the one before it — so a kill can land anywhere between two events, not only
 * right after one.
 */
interface KillPlan {
  line: Progress;
  count: number;
  jitter: number;
}

interface ChildRun {
  acks: string[];
  delegationsDone: string[];
  done: string | null;
  killed: boolean;
  /** The last named step (not TICK) the parent had seen when the kill landed, or when the child ended. */
  step: Progress | null;
  ticks: number;
  failed: string | null;
}

/** A child hangs if it runs this long: it is ended and reported as a failure. */
const HANG_MS = 30_000;

function runChild(child: string, args: string[], plan: KillPlan | null, buggy: boolean): Promise<ChildRun> {
  return new Promise((resolve) => {
    const proc = spawn(process.execPath, [child, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, BUGGY: buggy ? 'ack-early' : '' },
    });
    const run: ChildRun = { acks: [], delegationsDone: [], done: null, killed: false, step: null, ticks: 0, failed: null };
    let out = '';
    let err = '';
    let seen = 0;
    let lastAt = performance.now();
    let killTimer: NodeJS.Timeout | undefined;
    const kill = () => {
      if (run.killed || proc.exitCode !== null || proc.signalCode !== null) return;
      run.killed = true;
      proc.kill('SIGKILL');
    };
    const progress = (line: Progress) => {
      const now = performance.now();
      const gap = now - lastAt;
      lastAt = now;
      if (line === 'TICK') run.ticks++;
      else if (!run.killed) run.step = line;
      if (!plan || line !== plan.line || ++seen !== plan.count) return;
      const delay = plan.jitter * gap;
      if (delay < 1) kill();
      else killTimer = setTimeout(kill, delay);
    };
    proc.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      for (let i = out.indexOf('\n'); i >= 0; i = out.indexOf('\n')) {
        const line = out.slice(0, i);
        out = out.slice(i + 1);
        if (PROGRESS.has(line)) progress(line as Progress);
        else if (line.startsWith('ACK ')) run.acks.push(line.slice(4));
        else if (line.startsWith('NACK ')) run.acks.splice(run.acks.indexOf(line.slice(5)), 1);
        else if (line.startsWith('DONE ')) run.done = line.slice(5);
        else if (line.startsWith('DDONE ')) run.delegationsDone.push(line.slice(6));
      }
    });
    proc.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    // A child that hangs is a failure, not a hang: the guard ends it either way.
    const guard = setTimeout(() => proc.kill('SIGKILL'), HANG_MS);
    proc.on('close', (code) => {
      clearTimeout(guard);
      clearTimeout(killTimer);
      if (!run.killed && code !== 0) run.failed = `exit ${code}: ${err.slice(0, 2_000)}`;
      resolve(run);
    });
  });
}

/** Workers' model calls in one uncrashed run of the child team: what the steady-state kills are spread over. */
async function calibrate(child: string, seed: number, sync: string): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'troupe-crash-'));
  try {
    const run = await runChild(child, [join(dir, 'run.db'), 'start', String(seed), sync], null, false);
    if (run.failed || run.done === null) throw new Error(`the calibration run failed: ${run.failed ?? 'no DONE line'}`);
    return run.ticks;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const PHASE: Record<Progress, string> = { BOOT: 'boot', OPEN: 'open', RUN: 'steady', RESUMED: 'resumed', TICK: 'steady' };

/** Every count that must stay zero on the real code. */
export const VIOLATIONS = [
  'lostAcks',
  'duplicateDeliveries',
  'duplicateNotices',
  'missingNotices',
  'integrityFailures',
  'checksumFailures',
  'recoveryNotIdempotent',
  'runsNotCompleted',
  'delegationsLeftRunning',
  'delegationsDowngraded',
  'delegationMessagesWrong',
  'childErrors',
] as const;
type Violation = Exclude<(typeof VIOLATIONS)[number], 'childErrors'>;

/** Check the file after a crash. Returns the number of violations found. */
async function verify(path: string, acked: Set<string>, ackedDone: Set<string>, counts: CrashCounts, finished: boolean): Promise<number> {
  let violations = 0;
  const fail = (what: Violation, n = 1) => {
    counts[what] += n;
    violations += 1;
  };
  const store = openStore({ path });
  try {
    if (store.integrityCheck() !== 'ok') fail('integrityFailures');
    const bad = store.verifyChecksums();
    if (bad.messages.length + bad.sessionItems.length > 0) fail('checksumFailures');
    const run = store.listRuns().at(-1);
    if (!run) {
      // Killed before the run existed: nothing can have been acknowledged.
      if (acked.size > 0) fail('lostAcks', acked.size);
      return violations;
    }
    const messages = store.listMessages(run.id);
    const contents = new Set(messages.map((m) => m.content));
    for (const content of acked) {
      if (contents.has(content)) continue;
      fail('lostAcks');
      acked.delete(content); // counted once, not again at the next check
    }
    // Delivered exactly once: a delivered message's text is in its agent's session once.
    for (const m of messages) {
      if (m.deliveredAt === null || m.from !== 'user') continue;
      const copies = store.loadSession(m.to).filter((i) => i.role === 'user' && i.content === m.content).length;
      if (copies !== 1) fail('duplicateDeliveries');
    }
    // One item closes each child stint; a terminal child's current stint has its item.
    const agents = store.listAgents(run.id);
    for (const a of agents) {
      if (a.parentId === null) continue;
      const items = messages.filter((m) => m.from === a.id && m.to === a.parentId && STINT_TYPES.has(m.type));
      const keys = new Set(items.map((m) => m.noticeKey));
      if (keys.size !== items.length || items.length > a.stint + 1) fail('duplicateNotices');
      const terminal = ['completed', 'failed', 'crashed', 'stopped'].includes(a.status);
      if (terminal && !keys.has(`notice:${a.id}:${a.stint}`)) fail('missingNotices');
    }
    // Recovery twice changes nothing.
    const dump = () => JSON.stringify([store.listRuns(), store.listAgents(run.id), store.listMessages(run.id)]);
    await recoverRun(store, run.id, {});
    const once = dump();
    await recoverRun(store, run.id, {});
    if (dump() !== once) fail('recoveryNotIdempotent');
    // Delegations: after recovery none is running; each ended one told its agent exactly once;
    // one acknowledged as completed is never downgraded to interrupted.
    const delegations = store.listDelegations(run.id);
    const after = store.listMessages(run.id);
    for (const d of delegations) {
      if (d.status === 'running') fail('delegationsLeftRunning');
      const told = after.filter((m) => m.noticeKey === `deleg:${d.sessionId}:${d.delegationId}`);
      if (told.length !== 1 || told[0]!.to !== d.sessionId) fail('delegationMessagesWrong');
      if (ackedDone.has(`${d.sessionId}/${d.delegationId}`) && d.status !== 'completed') {
        fail('delegationsDowngraded');
        ackedDone.delete(`${d.sessionId}/${d.delegationId}`);
      }
    }
    if (finished) {
      counts.delegations += delegations.length;
      counts.delegationsInterrupted += delegations.filter((d) => d.status === 'interrupted').length;
    }
    if (finished && agents.find((a) => a.parentId === null)?.status !== 'completed') fail('runsNotCompleted');
  } finally {
    store.close();
  }
  return violations;
}

export async function runCrashTrials(options: CrashOptions): Promise<CrashCounts> {
  const started = Date.now();
  const child = options.childPath ?? defaultChild();
  const sync = options.synchronous ?? 'FULL';
  const calibrationTicks = await calibrate(child, options.seed, sync);
  const counts: CrashCounts = {
    trials: 0,
    calibrationTicks,
    killsDuringStart: 0,
    killsDuringResume: 0,
    killsDuringRecovery: 0,
    phases: {},
    acked: 0,
    lostAcks: 0,
    duplicateDeliveries: 0,
    duplicateNotices: 0,
    missingNotices: 0,
    integrityFailures: 0,
    checksumFailures: 0,
    recoveryNotIdempotent: 0,
    runsNotCompleted: 0,
    delegations: 0,
    delegationsInterrupted: 0,
    delegationsAckedDone: 0,
    delegationsLeftRunning: 0,
    delegationsDowngraded: 0,
    delegationMessagesWrong: 0,
    childErrors: 0,
    errors: [],
    trialsWithViolation: 0,
    failingSeeds: [],
    seconds: 0,
  };

  async function trial(index: number): Promise<void> {
    const trialSeed = options.seed + index;
    const random = lcg(trialSeed);
    const dir = mkdtempSync(join(tmpdir(), 'troupe-crash-'));
    const path = join(dir, 'run.db');
    const acked = new Set<string>();
    const ackedDone = new Set<string>();
    let violations = 0;
    const phase = (who: string, run: ChildRun, named: (step: Progress | null) => string) => {
      const key = `${who}:${run.killed ? named(run.step) : 'finished'}`;
      counts.phases[key] = (counts.phases[key] ?? 0) + 1;
    };
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
    try {
      // A quarter of the first kills land during start-up: right as the file opens, as the run is
      // created, or just after; the rest at a random model call of the run.
      const plan: KillPlan =
        random() < 0.25
          ? { line: pick(['BOOT', 'OPEN', 'RUN'] as const), count: 1, jitter: 0 }
          : { line: 'TICK', count: 1 + Math.floor(random() * calibrationTicks), jitter: random() };
      const first = await runChild(child, [path, 'start', String(trialSeed), sync], plan, options.buggy ?? false);
      phase('start', first, (step) => (step === null ? 'boot' : PHASE[step]));
      first.acks.forEach((a) => acked.add(a));
      first.delegationsDone.forEach((d) => ackedDone.add(d));
      const childError = (run: ChildRun, phase: string) => {
        if (!run.failed) return;
        counts.childErrors++;
        violations++;
        if (counts.errors.length < 3) counts.errors.push(`seed ${trialSeed} ${phase}: ${run.failed}`);
      };
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
      if (extra < 0.25 && exists) {
        // A second crash, this time while resuming: as it opens the file, inside recovery and the
        // respawn, as it resumes, or at one of the model calls the first child left undone.
        const left = Math.max(1, calibrationTicks - first.ticks);
        const at = random();
        const resumePlan: KillPlan =
          at < 0.45
            ? { line: at < 0.15 ? 'BOOT' : at < 0.3 ? 'OPEN' : 'RESUMED', count: 1, jitter: 0 }
            : { line: 'TICK', count: 1 + Math.floor(random() * left), jitter: random() };
        const second = await runChild(child, [path, 'resume', String(trialSeed), sync], resumePlan, false);
        phase('resume', second, (step) => (step === 'OPEN' ? 'recovering' : step === null ? 'boot' : PHASE[step]));
        second.delegationsDone.forEach((d) => ackedDone.add(d));
        if (second.killed) counts.killsDuringResume++;
        childError(second, 'resume');
      } else if (extra < 0.4 && exists) {
        // Inside the recovery transaction: the child runs it in a loop, one TICK per pass.
        const recoveryPlan: KillPlan = { line: 'TICK', count: 1 + Math.floor(random() * 10), jitter: random() };
        const recovery = await runChild(child, [path, 'recover-loop', String(trialSeed), sync], recoveryPlan, false);
        phase('recovery', recovery, (step) => (step === 'OPEN' ? 'recovering' : 'boot'));
        if (recovery.killed && recovery.step === 'OPEN') counts.killsDuringRecovery++;
        childError(recovery, 'recovery');
      }
      violations += await verify(path, acked, ackedDone, counts, false);
      // Resume to the end in a fresh process (unless the first kill came before a run existed).
      if (exists) {
        const last = await runChild(child, [path, 'resume', String(trialSeed), sync], null, false);
        last.delegationsDone.forEach((d) => ackedDone.add(d));
        childError(last.done === null && !last.failed ? { ...last, failed: 'no DONE line' } : last, 'final resume');
        violations += await verify(path, acked, ackedDone, counts, true);
      }
    } finally {
      counts.trials++;
      counts.acked += acked.size;
      counts.delegationsAckedDone += ackedDone.size;
      if (violations > 0) {
        counts.trialsWithViolation++;
        counts.failingSeeds.push(trialSeed);
      }
      rmSync(dir, { recursive: true, force: true });
    }
  }

  const parallel = Math.max(1, options.parallel ?? 2);
  let next = 0;
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      while (next < options.trials) await trial(next++);
    }),
  );
  counts.seconds = (Date.now() - started) / 1000;
  return counts;
}
