/**
 * How `troupe run`, `demo` and `resume` host a run in this process: through the hosting loop every
 * host uses (worker/worker.ts, DESIGN §13), over a SQLite file this process owns or a PostgreSQL
 * schema (a fenced lease: if this process dies, a worker takes the run over). The loop claims the
 * run, and boots it if it is new (`boot`) or resumes it, in one place. The loop keeps the run until `stop`, applies what other processes post to its
 * inbox (found at its poll), and hands back the coordinator it hosts the run with.
 * @module
 */
import type { Coordinator } from '../host/createCoordinator.js';
import type { HostingStore } from '../hosting/hostingStore.js';
import type { StorePort } from '../store/port.js';
import { TroupeError } from '../errors.js';
import { runExistsError } from '../host/options.js';
import { startWorker } from '../worker/worker.js';
import type { HostedOptions, RunBoot } from '../worker/runHosting.js';
import { newId } from '../host/mail/messaging.js';

/** How often the loop looks for requests other processes posted (SQLite has no push; PostgreSQL's LISTEN wakes it sooner). */
const INBOX_POLL_MS = 200;

export interface HostedRun {
  readonly c: Coordinator<StorePort>;
  readonly runId: string;
  readonly rootId: string;
  /** Shut the run down cleanly and let it go. */
  stop(): Promise<void>;
}

export async function hostRun(
  hosting: HostingStore,
  options: HostedOptions,
  run: { boot: Omit<RunBoot, 'onStarted'> } | { runId: string; rootId: string },
  /** Told the coordinator as soon as it exists, before any turn of the run (a view subscribes here). */
  onHosted: (c: Coordinator<StorePort>) => void = () => undefined,
): Promise<HostedRun> {
  let hosted!: (c: Coordinator<StorePort>) => void;
  let failHosted!: (err: unknown) => void;
  let started!: (rootId: string) => void;
  let failBoot!: (err: unknown) => void;
  const first = new Promise<Coordinator<StorePort>>((resolve, reject) => ((hosted = resolve), (failHosted = reject)));
  const booted = new Promise<string>((resolve, reject) => ((started = resolve), (failBoot = reject)));
  first.catch(() => undefined);
  booted.catch(() => undefined);
  const boot = 'boot' in run ? { ...run.boot, onStarted: started } : undefined;
  const worker = await startWorker({
    store: hosting,
    // It hosts the run it is given (kept), never one it would go looking for (claimNext).
    concurrency: 0,
    pollMs: INBOX_POLL_MS,
    hostOptions: () => ({ ...options, ...(boot ? { boot } : {}) }),
    onHost: (c) => {
      onHosted(c);
      hosted(c);
    },
    // Before the run was hosted (or booted): its resume failed. Settled once; a later end is the run's own.
    onEnd: (runId, err) => {
      const why = err ?? new TroupeError('RUN_NOT_LIVE', `run ${runId} could not be hosted`);
      failHosted(why);
      failBoot(why);
    },
  });
  try {
    const runId = 'boot' in run ? `run_${newId()}` : run.runId;
    // A new run's claim is its boot: taken here, it refuses an id the file already holds.
    if ('boot' in run && (await hosting.reads.getRun(runId))) throw runExistsError(runId);
    // Another process hosts it (a worker, another command): not ours to host now.
    if (!(await worker.keep(runId)))
      throw new TroupeError('RUN_LOCKED', `run ${runId} is hosted by another process; stop it first, or send to the run instead`);
    const c = await first;
    const rootId = 'boot' in run ? await booted : run.rootId;
    return { c, runId, rootId, stop: () => worker.stop() };
  } catch (err) {
    await worker.stop();
    throw err;
  }
}
