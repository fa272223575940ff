/**
 * The kill -9 crash harness (reliability.md §3). Each trial runs the child team on a fresh
 * database file, kills it with SIGKILL at a random point (start-up, steady state, a second crash
 * during a resume, or inside the recovery transaction), then checks the invariants on the file,
 * resumes to the end in a new process and checks them again. The acknowledgement ledger lives
 * here, in the parent, filled only from the child's `ACK` lines.
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
  killsDuringStart: number;
  killsDuringResume: number;
  killsDuringRecovery: number;
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

interface ChildRun {
  acks: string[];
  delegationsDone: string[];
  done: string | null;
  killed: boolean;
  failed: string | null;
}

/**
 * @param killAfterMs when to SIGKILL the child: a number counts from the spawn; `{ afterOpenMs }`
 * counts from the moment it opened the database (its start-up time varies with the machine's load).
 */
function runChild(child: string, args: string[], killAfterMs: number | { afterOpenMs: number } | null, buggy: boolean): Promise<ChildRun> {
  return new Promise((resolve) => {
    const proc = spawn(process.execPath, [child, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, BUGGY: buggy ? 'ack-early' : '' },
    });
    const run: ChildRun = { acks: [], delegationsDone: [], done: null, killed: false, failed: null };
    let out = '';
    let err = '';
    proc.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      for (let i = out.indexOf('\n'); i >= 0; i = out.indexOf('\n')) {
        const line = out.slice(0, i);
        out = out.slice(i + 1);
        if (line === 'OPEN' && typeof killAfterMs === 'object' && killAfterMs !== null) armKill(killAfterMs.afterOpenMs);
        else if (line.startsWith('ACK ')) run.acks.push(line.slice(4));
        else if (line.startsWith('NACK ')) run.acks.splice(run.acks.indexOf(line.slice(5)), 1);
        else if (line.startsWith('DONE ')) run.done = line.slice(5);
        else if (line.startsWith('DDONE ')) run.delegationsDone.push(line.slice(6));
      }
    });
    proc.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    const kill = () => {
      run.killed = true;
      proc.kill('SIGKILL');
    };
    // A child that hangs is a failure, not a hang: the guard ends it either way.
    let timer = typeof killAfterMs === 'number' ? setTimeout(kill, killAfterMs) : setTimeout(() => proc.kill('SIGKILL'), 30_000);
    function armKill(ms: number) {
      clearTimeout(timer);
      timer = setTimeout(kill, ms);
    }
    proc.on('close', (code) => {
      clearTimeout(timer);
      if (!run.killed && code !== 0) run.failed = `exit ${code}: ${err.slice(0, 2_000)}`;
      resolve(run);
    });
  });
}

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
  const counts: CrashCounts = {
    trials: 0,
    killsDuringStart: 0,
    killsDuringResume: 0,
    killsDuringRecovery: 0,
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
    try {
      // A quarter of the kills land during start-up (timed from the spawn; the child needs ~500 ms
      // to load and open the file); the rest during steady state, timed from the open.
      const when = random();
      const killAt = when < 0.25 ? 100 + Math.floor(random() * 600) : { afterOpenMs: Math.floor(random() * 900) };
      const first = await runChild(child, [path, 'start', String(trialSeed), sync], killAt, options.buggy ?? false);
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
      if (extra < 0.25 && hasRun()) {
        // A second crash, this time while resuming.
        const second = await runChild(child, [path, 'resume', String(trialSeed), sync], 300 + Math.floor(random() * 700), false);
        second.delegationsDone.forEach((d) => ackedDone.add(d));
        if (second.killed) counts.killsDuringResume++;
        childError(second, 'resume');
      } else if (extra < 0.4) {
        const recovery = await runChild(child, [path, 'recover-loop', String(trialSeed), sync], 450 + Math.floor(random() * 300), false);
        if (recovery.killed) counts.killsDuringRecovery++;
      }
      violations += await verify(path, acked, ackedDone, counts, false);
      // Resume to the end in a fresh process (unless the first kill came before a run existed).
      if (hasRun()) {
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
