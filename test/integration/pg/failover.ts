/**
 * The kill -9 failover harness on PostgreSQL. Three worker processes (workerChild.ts) host runs of
 * one schema; each trial submits a run and SIGKILLs the worker hosting it after a random number of
 * its sub-agents' model calls (a quarter of the trials kill its next host too). A replacement
 * worker starts at once; the run must be taken over once the lease expires and finish. Then every
 * invariant is checked on the database: nothing acknowledged lost, each delivered message in its
 * agent's session once, each child stint told to its parent exactly once, recovery idempotent,
 * every run completed. The acknowledgement ledger lives here, filled only from `ACK` lines.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { recoverRun } from '../../../src/host/resumeCoordinator.js';
import { openPostgresStore } from '../../../src/store/postgres/store.js';
import { submitRun } from '../../../src/worker/submit.js';
import { freshSchema, PG_URL } from '../../helpers/pg.js';

const STINT_TYPES = new Set(['completion', 'completed', 'failed', 'crashed', 'stopped']);
const CHILD = fileURLToPath(new URL(import.meta.url.endsWith('.js') ? './workerChild.js' : '../../../dist/test/integration/pg/workerChild.js', import.meta.url));

export interface FailoverCounts {
  trials: number;
  kills: number;
  /** Kills that landed while the run's host was in the middle of it (its TICKs kept coming until then). */
  acked: number;
  lostAcks: number;
  duplicateDeliveries: number;
  duplicateNotices: number;
  missingNotices: number;
  recoveryNotIdempotent: number;
  runsNotCompleted: number;
  childErrors: number;
  errors: string[];
  /** Takeover after a kill: from the kill to the next TICK of the run on another worker (ms). */
  takeoverMs: number[];
  seconds: number;
}

export const VIOLATIONS = ['lostAcks', 'duplicateDeliveries', 'duplicateNotices', 'missingNotices', 'recoveryNotIdempotent', 'runsNotCompleted', 'childErrors'] as const;

export interface FailoverOptions {
  trials: number;
  seed: number;
  buggy?: boolean;
  /** Runs in flight at once (default 3). */
  parallel?: number;
  ttlMs?: number;
}

function lcg(seed: number) {
  let s = seed >>> 0 || 1;
  return () => ((s = (s * 1103515245 + 12345) >>> 0) / 2 ** 32);
}

interface Worker {
  proc: ChildProcess;
  killed: boolean;
  ready: Promise<void>;
  stderr: string;
}

interface Trial {
  runId: string;
  ticks: number;
  /** Kill the host upon these tick counts. */
  killAt: number[];
  killedAt: number | null;
  acks: Set<string>;
}

export async function runFailoverTrials(options: FailoverOptions): Promise<FailoverCounts> {
  const started = Date.now();
  const random = lcg(options.seed);
  const ttlMs = options.ttlMs ?? 600;
  const parallel = options.parallel ?? 3;
  const counts: FailoverCounts = {
    trials: 0,
    kills: 0,
    acked: 0,
    lostAcks: 0,
    duplicateDeliveries: 0,
    duplicateNotices: 0,
    missingNotices: 0,
    recoveryNotIdempotent: 0,
    runsNotCompleted: 0,
    childErrors: 0,
    errors: [],
    takeoverMs: [],
    seconds: 0,
  };
  const { schema, drop } = freshSchema();
  const store = await openPostgresStore({ url: PG_URL, schema });
  const trials = new Map<string, Trial>();
  const note = (text: string) => void (counts.errors.length < 8 && counts.errors.push(text));
  const workers: Worker[] = [];
  let closing = false;

  function startWorkerProcess(): Worker {
    const proc = spawn(process.execPath, [CHILD, PG_URL, schema, String(ttlMs), String(Math.floor(random() * 2 ** 31))], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, BUGGY: options.buggy ? 'ack-early' : '' },
    });
    let out = '';
    let readyResolve!: () => void;
    const w: Worker = { proc, killed: false, ready: new Promise((resolve) => (readyResolve = resolve)), stderr: '' };
    proc.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      for (let i = out.indexOf('\n'); i >= 0; i = out.indexOf('\n')) {
        const line = out.slice(0, i);
        out = out.slice(i + 1);
        if (line === 'READY') readyResolve();
        else if (line.startsWith('TICK ')) tick(w, line.slice(5));
        else if (line.startsWith('ACK ')) {
          const [runId, ...rest] = line.slice(4).split(' ');
          trials.get(runId!)?.acks.add(rest.join(' '));
        } else if (line.startsWith('NACK ')) {
          const [runId, ...rest] = line.slice(5).split(' ');
          trials.get(runId!)?.acks.delete(rest.join(' '));
        }
      }
    });
    proc.stderr!.on('data', (chunk: Buffer) => (w.stderr += chunk.toString()));
    proc.on('exit', (code) => {
      if (!w.killed && !closing) {
        counts.childErrors += 1;
        if (counts.errors.length < 3) counts.errors.push(`worker exit ${code}: ${w.stderr.slice(0, 1_000)}`);
      }
      const at = workers.indexOf(w);
      if (at >= 0) workers.splice(at, 1);
      if (!closing) workers.push(startWorkerProcess());
    });
    return w;
  }

  function tick(w: Worker, runId: string): void {
    const trial = trials.get(runId);
    if (!trial || w.killed) return;
    trial.ticks += 1;
    if (trial.killedAt !== null) {
      counts.takeoverMs.push(Date.now() - trial.killedAt);
      trial.killedAt = null;
    }
    if (trial.killAt[0] !== undefined && trial.ticks >= trial.killAt[0]) {
      trial.killAt.shift();
      w.killed = true;
      trial.killedAt = Date.now();
      counts.kills += 1;
      w.proc.kill('SIGKILL');
    }
  }

  async function waitDone(runId: string, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const { rows } = await store.pool.query<{ state: string; owner: string | null }>('SELECT state, owner FROM run_leases WHERE run_id = $1', [runId]);
      if (rows[0]?.state === 'done' && rows[0].owner === null) return true;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    return false;
  }

  async function verify(trial: Trial): Promise<void> {
    const { runId } = trial;
    const messages = await store.reads.listMessages(runId);
    const contents = new Set(messages.map((m) => m.content));
    for (const content of trial.acks) if (!contents.has(content)) counts.lostAcks += 1;
    counts.acked += trial.acks.size;
    for (const m of messages) {
      if (m.deliveredAt === null || m.from !== 'user') continue;
      const copies = (await store.reads.loadSession(m.to)).filter((i) => i.role === 'user' && i.content === m.content).length;
      if (copies !== 1) {
        counts.duplicateDeliveries += 1;
        note(`${runId}: message ${m.id} (${m.content}) is in ${m.to}'s session ${copies} times`);
      }
    }
    const agents = await store.reads.listAgents(runId);
    for (const a of agents) {
      if (a.parentId === null) continue;
      const items = messages.filter((m) => m.from === a.id && m.to === a.parentId && STINT_TYPES.has(m.type));
      const keys = new Set(items.map((m) => m.noticeKey));
      if (keys.size !== items.length || items.length > a.stint + 1) counts.duplicateNotices += 1;
      const terminal = ['completed', 'failed', 'crashed', 'stopped'].includes(a.status);
      if (terminal && !keys.has(`notice:${a.id}:${a.stint}`)) counts.missingNotices += 1;
    }
    if (agents.find((a) => a.parentId === null)?.status !== 'completed') {
      counts.runsNotCompleted += 1;
      note(`${runId}: ended with ${agents.map((a) => `${a.name}=${a.status}${a.stopReason ? `(${a.stopReason})` : ''}`).join(' ')}`);
    }
    // Recovery twice changes nothing (under a lease of the harness: the run is done and released).
    const lease = await store.claim(runId, { owner: 'verifier', heartbeatMs: 0 });
    const dump = async () => JSON.stringify([await lease.port.getRun(runId), await lease.port.listAgents(runId), await lease.port.listMessages(runId)]);
    await recoverRun(lease.port, runId, {});
    const once = await dump();
    await recoverRun(lease.port, runId, {});
    if ((await dump()) !== once) counts.recoveryNotIdempotent += 1;
    await lease.release({ state: 'done' });
  }

  async function trial(index: number): Promise<void> {
    const { runId } = await submitRun(store, { root: { name: 'lead', task: 'split the job' }, runId: `run_${options.seed}_${index}` });
    // Sub-agent model calls in an uncrashed run: WORKERS × (WORK_TURNS + 1) = 21.
    const first = 1 + Math.floor(random() * 20);
    const killAt = random() < 0.25 ? [first, first + 1 + Math.floor(random() * 6)] : [first];
    const t: Trial = { runId, ticks: 0, killAt, killedAt: null, acks: new Set() };
    trials.set(runId, t);
    const done = await waitDone(runId, 30_000);
    if (!done) {
      counts.runsNotCompleted += 1;
      const lease = (await store.leases()).find((l) => l.run_id === runId);
      const agents = await store.reads.listAgents(runId);
      note(`${runId}: not done after 30 s; lease ${JSON.stringify(lease)}; ${agents.map((a) => `${a.name}=${a.status}`).join(' ')}`);
    }
    else await verify(t);
    counts.trials += 1;
  }

  try {
    for (let i = 0; i < 3; i++) workers.push(startWorkerProcess());
    await Promise.all(workers.map((w) => w.ready));
    let next = 0;
    await Promise.all(
      Array.from({ length: parallel }, async () => {
        while (next < options.trials) await trial(next++);
      }),
    );
  } finally {
    closing = true;
    for (const w of workers) {
      w.killed = true;
      w.proc.kill('SIGKILL');
    }
    await store.close();
    await drop();
  }
  counts.seconds = Math.round((Date.now() - started) / 1000);
  return counts;
}

/** Figures for the README: the median and p90 of the takeover times. */
export function takeoverFigures(ms: readonly number[]): { median: number; p90: number } {
  const sorted = [...ms].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
  return { median: at(0.5), p90: at(0.9) };
}
