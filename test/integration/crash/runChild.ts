/**
 * One child process of the crash harness: spawn it, read its lines, and SIGKILL it at the point a
 * kill plan names (counted in the child's own progress lines, not in milliseconds).
 */
import { spawn } from 'node:child_process';

/**
 * The child's progress lines (see child.ts): the named steps of its start-up, one TICK per
 * worker's model call or recovery pass, TOOL / EFFECT around a side effect of an in-doubt tool
 * (its ledger row is committed before TOOL; its result after EFFECT), and GROUP / GROUPED around
 * a group commit that carries the writes of several agents.
 */
export type Progress = 'BOOT' | 'OPEN' | 'RUN' | 'RESUMED' | 'TICK' | 'TOOL' | 'EFFECT' | 'GROUP' | 'GROUPED';
const PROGRESS = new Set<string>(['BOOT', 'OPEN', 'RUN', 'RESUMED', 'TICK', 'TOOL', 'EFFECT', 'GROUP', 'GROUPED']);
const NAMED = new Set<Progress>(['BOOT', 'OPEN', 'RUN', 'RESUMED']);

/**
 * When to SIGKILL a child: upon the `count`-th `line`, after `jitter` (0..1) times the gap between
 * that line and the one before it — so a kill can land anywhere between two events, not only
 * right after one.
 */
export interface KillPlan {
  line: Progress;
  count: number;
  jitter: number;
}

export interface ChildRun {
  acks: string[];
  delegationsDone: string[];
  done: string | null;
  killed: boolean;
  /** The last named step (BOOT, OPEN, RUN, RESUMED) the parent had seen when the kill landed, or when the child ended. */
  step: Progress | null;
  /** The last progress line the child printed before it died (read to the end of its output). */
  last: Progress | null;
  /** How many agents the last GROUP line's commit carried, and the ids of the messages it enqueued. */
  lastGroupAgents: number;
  lastGroupMessages: string[];
  /** Progress lines seen, by kind. */
  seen: Partial<Record<Progress, number>>;
  failed: string | null;
}

/** A child hangs if it runs this long: it is ended and reported as a failure. */
const HANG_MS = 30_000;

/** `env` is added to the child's environment (the team, a planted bug). */
export function runChild(child: string, args: string[], plan: KillPlan | null, env: Record<string, string>): Promise<ChildRun> {
  return new Promise((resolve) => {
    const proc = spawn(process.execPath, [child, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
    const run: ChildRun = {
      acks: [],
      delegationsDone: [],
      done: null,
      killed: false,
      step: null,
      last: null,
      lastGroupAgents: 0,
      lastGroupMessages: [],
      seen: {},
      failed: null,
    };
    let out = '';
    let err = '';
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
      run.last = line;
      const count = (run.seen[line] = (run.seen[line] ?? 0) + 1);
      if (NAMED.has(line) && !run.killed) run.step = line;
      if (!plan || line !== plan.line || count !== plan.count || run.killed) return;
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
        else if (line.startsWith('GROUP ')) {
          const [agents, ids] = line.slice(6).split(' ');
          run.lastGroupAgents = Number(agents);
          run.lastGroupMessages = ids ? ids.split(',') : [];
          progress('GROUP');
        } else if (line.startsWith('ACK ')) run.acks.push(line.slice(4));
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
