/**
 * A TEST HOOK: a simulated clock in a child process, driven by the test through the child's stdin,
 * so that processes (workers, hosts) live through a simulated day in seconds and in lockstep.
 * Nothing in src/ knows of it: the child passes the clock where troupe takes one (a hosted run's
 * `clock`), and leases stay on real time (their expiry is what a failover waits for).
 *
 * The protocol is one line each way:
 * - the test writes `ADVANCE <ms>` (0 allowed: a settle without moving time);
 * - the child moves its clock, waits until the work that came due settled (`settle`), and answers
 *   `AT <now>`. The test sends the next line only after that answer: time moves deterministically,
 *   and nothing stands in for synchronisation but the answers.
 *
 * Child side: {@link drivenClock}. Test side: {@link ClockedChild}.
 * @module
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { SimulatedClock } from 'xstate';

/**
 * In the child: a clock at `startMs` that moves when the test says so. `settle` resolves once the
 * work made due by a move has settled (the child decides what that is: its runs idle, no call in flight).
 */
export function drivenClock(startMs: number, settle: () => Promise<void>): SimulatedClock {
  const clock = new SimulatedClock();
  clock.set(startMs);
  let queue = Promise.resolve();
  createInterface({ input: process.stdin }).on('line', (line) => {
    const [verb, value] = line.trim().split(' ');
    if (verb !== 'ADVANCE') return;
    queue = queue.then(async () => {
      clock.increment(Number(value));
      await settle();
      process.stdout.write(`AT ${clock.now()}\n`);
    });
  });
  return clock;
}

/** In the test: a child process whose stdout lines are kept and awaited, and whose driven clock is moved. */
export class ClockedChild {
  readonly proc: ChildProcess;
  readonly lines: string[] = [];
  stderr = '';
  #waiters = new Set<{ ok: (line: string) => boolean; resolve: (line: string) => void }>();
  #exited = false;

  constructor(file: string, args: string[]) {
    this.proc = spawn(process.execPath, [file, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
    createInterface({ input: this.proc.stdout! }).on('line', (line) => {
      this.lines.push(line);
      for (const w of this.#waiters) {
        if (w.ok(line)) {
          this.#waiters.delete(w);
          w.resolve(line);
        }
      }
    });
    this.proc.stderr!.on('data', (chunk: Buffer) => (this.stderr += chunk.toString()));
    this.proc.on('exit', () => (this.#exited = true));
  }

  /** The first line (already printed or still to come) that `ok` accepts; fails after `timeoutMs` or when the child exits first. */
  line(ok: (line: string) => boolean, timeoutMs = 30_000): Promise<string> {
    const seen = this.lines.find(ok);
    if (seen !== undefined) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const fail = (why: string) => {
        this.#waiters.delete(waiter);
        reject(new Error(`${why} waiting for a line; stdout ${JSON.stringify(this.lines)}; stderr ${this.stderr.slice(0, 2_000)}`));
      };
      const timer = setTimeout(() => fail(`timed out after ${timeoutMs} ms`), timeoutMs);
      const onExit = () => fail('the child exited');
      const waiter = {
        ok,
        resolve: (line: string) => {
          clearTimeout(timer);
          this.proc.off('exit', onExit);
          resolve(line);
        },
      };
      this.#waiters.add(waiter);
      if (this.#exited) onExit();
      else this.proc.once('exit', onExit);
    });
  }

  /** Move the child's clock by `ms` and resolve with its time once the work that came due settled. */
  async advance(ms: number): Promise<number> {
    const answered = this.linesOf('AT').length;
    this.proc.stdin!.write(`ADVANCE ${ms}\n`);
    // Lines are kept before waiters are asked: the answer to this move is the next AT line.
    await this.line(() => this.linesOf('AT').length > answered);
    return Number(this.linesOf('AT')[answered]);
  }

  /** Lines starting with `prefix`, without it. */
  linesOf(prefix: string): string[] {
    return this.lines.filter((l) => l.startsWith(`${prefix} `)).map((l) => l.slice(prefix.length + 1));
  }

  kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    if (this.#exited) return Promise.resolve();
    return new Promise((resolve) => {
      this.proc.once('exit', () => resolve());
      this.proc.kill(signal);
    });
  }
}
