/**
 * Hosting one claimed run (DESIGN §13), the worker's claim loop apart (worker.ts): boot it when new
 * or resume it, apply its inbox requests as they come, and let it go once it is idle with nothing
 * open or running in the background (parked or done) — or host it anew when it woke meanwhile. A
 * store error while deciding is retried while the lease holds; a coordinator that failed is shut
 * down and the run released for a fresh resume from what committed. One teardown per coordinator.
 * @module
 */
import type { Logger } from 'pino';
import { DEFAULT_IDLE_RESUME_MS } from '../../machines/types.js';
import { createCoordinator, type Coordinator } from '../host/createCoordinator.js';
import { resumeCoordinator } from '../host/resumeCoordinator.js';
import type { StorePort } from '../store/port.js';
import type { Store } from '../store/types.js';
import type { ReleaseState, RunLease } from '../store/postgres/lease.js';
import { transientStoreError } from '../store/postgres/connect.js';
import { applyOpenRequests } from '../hosting/apply.js';
import type { HostingStore } from '../hosting/hostingStore.js';
import { releaseStateAfter } from '../hosting/release.js';
import type { ResumeOptions } from '../host/resumeCoordinator.js';

type HostOptions = Omit<ResumeOptions<StorePort>, 'store' | 'runId'>;

/**
 * A run the host boots when it finds it new (`troupe run` hosting in-process): its root and the
 * run's first event, and who is told the root's id once it is registered. Found existing, the run
 * is resumed as any other (the boot is for the first hosting only).
 */
export interface RunBoot {
  root: { name: string; task: string; skills?: string[] };
  event?: { type: string; data: Record<string, unknown> };
  onStarted?: (rootId: string) => void;
}

/** How a run is hosted, what to close once this worker stops hosting it (a demo's fake server), and how to boot it if it is new. */
export type HostedOptions = HostOptions & { dispose?: () => Promise<void>; boot?: RunBoot };

/** What hosting a run needs of its worker. */
export interface HostingDeps {
  readonly store: HostingStore;
  readonly options: {
    hostOptions(runId: string): HostedOptions | Promise<HostedOptions>;
    onHost?: (c: Coordinator<StorePort>, lease: RunLease) => void;
    /** The backstop poll (default 5 s): how long a hosting waits for a nudge. */
    pollMs?: number;
    unref?: boolean;
  };
  readonly logger: Logger;
  /** The lease's time-to-live: a retried store read backs off to a third of it at most. */
  readonly ttlMs: number;
  /** Whether the worker is stopping. */
  stopping(): boolean;
  /** Runs hosted until the worker stops, never released when idle (an adopted coordinator's is added while hosted). */
  readonly kept: Set<string>;
  /** The wake timer for parked runs' deadlines (armed when a run is released parked with one). */
  readonly wake: { arm(): Promise<void> };
  /** The cluster's endpoint quotas and breakers on PostgreSQL (a run's own win). */
  readonly clusterQuota: Pick<HostedOptions, 'quotaStore'>;
  clusterBreaker(breaker: HostedOptions['breaker']): Pick<HostedOptions, 'breaker'>;
}

export interface Hosted {
  lease: RunLease;
  c: Coordinator<StorePort> | null;
  /** Resolves the wait of the hosting loop (a request arrived, a stop, a loss). */
  nudge: () => void;
  busy: Promise<void>;
}

/** Register a new run's root (its first turn follows) and write its first event. */
async function bootRun(c: Coordinator<StorePort>, boot: RunBoot, port: StorePort): Promise<void> {
  const rootId = await c.start(boot.root);
  if (boot.event)
    await port.commit([{ op: 'appendEvent', row: { runId: c.runId, agentId: null, type: boot.event.type, data: boot.event.data, at: Date.now() } }]);
  boot.onStarted?.(rootId);
}

/** A port that knows whether a commit is in flight (effects that wake agents run after their commit). */
interface WatchedPort extends StorePort {
  /** Resolves once no commit is in flight and none started in the next turn of the event loop. */
  quiet(): Promise<void>;
}

function watchedPort(port: StorePort): WatchedPort {
  let inFlight = 0;
  let started = 0;
  const turn = () => new Promise((resolve) => setImmediate(resolve));
  return {
    ...port,
    boot: port.boot,
    async commit(ops) {
      inFlight += 1;
      started += 1;
      try {
        await port.commit(ops);
      } finally {
        inFlight -= 1;
      }
    },
    async quiet() {
      for (;;) {
        const seen = started;
        await turn();
        if (inFlight === 0 && started === seen) return;
        while (inFlight > 0) await turn();
      }
    },
  };
}

/**
 * Idle for good: no agent running, and no commit in flight whose after-effects could wake one
 * (a restored agent's wake for its mail runs after the recovery's commit). Ends early, judging
 * nothing, once `stale()`: a watch its hosting no longer waits for lists no agent.
 */
async function settledIdle(c: Coordinator<Store | StorePort>, port: WatchedPort, stale: () => boolean): Promise<void> {
  for (;;) {
    await c.whenIdle();
    if (stale()) return;
    await port.quiet();
    if (stale() || c.list().every((a) => a.status !== 'running')) return;
  }
}

/** One idle watch of a hosting (`settledIdle`); marked stale once its hosting no longer trusts or waits for it, it lists no agent. */
class IdleWatch {
  stale = false;
  readonly idle: Promise<'idle' | 'failed'>;
  constructor(c: Coordinator<Store | StorePort>, port: WatchedPort) {
    this.idle = settledIdle(c, port, () => this.stale).then(
      () => 'idle' as const,
      () => 'failed' as const,
    );
  }
}

/** The hosting of one claimed run: `hostLoop` boots or resumes it; `hostGiven` hosts a coordinator its caller holds (`adopt`). */
export function runHosting(deps: HostingDeps) {
  const { store, options, logger } = deps;

  /** Wait for the next nudge (or `ms`, the poll period by default). */
  const nudged = (entry: Hosted, ms = options.pollMs ?? 5_000): Promise<void> =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      if (options.unref) timer.unref();
      entry.nudge = () => {
        clearTimeout(timer);
        resolve();
      };
    });

  async function hostLoop(entry: Hosted): Promise<void> {
    const { lease: held } = entry;
    const runId = held.runId;
    const { dispose, boot, ...hostOptions } = await options.hostOptions(runId);
    try {
      await hostClaimed(entry, { ...deps.clusterQuota, ...hostOptions, ...deps.clusterBreaker(hostOptions.breaker) }, boot);
    } finally {
      await dispose?.();
    }
  }

  /** A coordinator the caller holds (`adopt`): kept, its requests applied, until it or the worker stops. */
  async function hostGiven(entry: Hosted, c: Coordinator<Store | StorePort>): Promise<void> {
    const runId = entry.lease.runId;
    deps.kept.add(runId);
    try {
      options.onHost?.(c as Coordinator<StorePort>, entry.lease);
      await hostCoordinator(entry, c, watchedPort(entry.lease.port), lostRace(entry.lease), DEFAULT_IDLE_RESUME_MS);
    } finally {
      deps.kept.delete(runId);
    }
  }

  /**
   * Host a claimed run until it is released, its lease is lost, or the worker stops. A store error
   * while deciding (reading requests, rows) is retried while the lease holds; a coordinator that
   * failed is shut down and the run released for a fresh resume from what committed.
   */
  async function hostClaimed(entry: Hosted, hostOptions: HostOptions, boot: RunBoot | undefined): Promise<void> {
    const { lease: held } = entry;
    const runId = held.runId;
    const idleResumeMs = hostOptions.idleResumeMs ?? DEFAULT_IDLE_RESUME_MS;
    const port = watchedPort(held.port);
    const guarded = lostRace(held);
    let retries = 0;
    while (!held.lost && !deps.stopping()) {
      let c: Coordinator<StorePort>;
      // Booted here when new (one place boots or resumes a run), resumed otherwise.
      let fresh = false;
      try {
        fresh = boot !== undefined && (await guarded(port.getRun(runId))) === undefined;
        c = fresh
          ? createCoordinator<StorePort>({ ...hostOptions, store: port, runId })
          : await guarded(resumeCoordinator<StorePort>({ ...hostOptions, store: port, runId }));
      } catch (err) {
        if (held.lost || deps.stopping()) return;
        if (!transientStoreError(err)) throw err;
        logger.warn({ err, runId }, 'resuming a run failed on a store error; retrying while the lease holds');
        await nudged(entry, backoff(retries++));
        continue;
      }
      entry.c = c;
      let outcome: 'released' | 'again' | 'failed';
      try {
        options.onHost?.(c, held);
        if (fresh) await guarded(bootRun(c, boot!, port));
        outcome = await hostCoordinator(entry, c, port, guarded, idleResumeMs);
      } finally {
        // The one teardown of this coordinator, whatever ended it.
        entry.c = null;
        await c.shutdown();
      }
      if (outcome === 'released' || held.lost) return;
      const failure = c.health().error;
      if (deps.stopping() || outcome === 'failed') {
        // A clean stop lets the run go as its rows say (done, parked, or runnable with work to do);
        // a failure lets another worker resume from what committed (a failed coordinator's memory is not trusted).
        const clean = deps.stopping() && (failure === null || failure.code === 'COORDINATOR_SHUT_DOWN');
        const state = clean
          ? await guarded(releaseStateAfter(held.port, runId, idleResumeMs)).catch((): ReleaseState => ({ state: 'runnable' }))
          : { state: 'runnable' as const };
        await guarded(held.release(state)).catch(() => undefined);
        if (failure && !deps.stopping() && failure.code !== 'COORDINATOR_SHUT_DOWN')
          logger.error({ runId, err: failure }, 'the run failed on this worker; released for another');
        return;
      }
      retries = 0;
    }
  }

  /** Every wait on the database also ends when the lease is lost (a partition must not hold the loop). */
  function lostRace(held: RunLease): <T>(promise: Promise<T>) => Promise<T> {
    const whenLost = new Promise<never>((_resolve, reject) => held.onLost(reject));
    whenLost.catch(() => undefined);
    return <T>(promise: Promise<T>): Promise<T> => {
      promise.catch(() => undefined);
      return Promise.race([promise, whenLost]);
    };
  }

  /** Backoff of a retried store read: 100 ms doubling up to a third of the lease. */
  const backoff = (n: number) => Math.min(100 * 2 ** n, Math.floor(deps.ttlMs / 3));

  /**
   * One coordinator's hosting: apply requests as they come until the run is idle with nothing
   * open, then release it (parked or done). 'again': host it anew (it woke while being let go).
   */
  async function hostCoordinator(
    entry: Hosted,
    c: Coordinator<Store | StorePort>,
    port: WatchedPort,
    guarded: <T>(promise: Promise<T>) => Promise<T>,
    idleResumeMs: number,
  ): Promise<'released' | 'again' | 'failed'> {
    const { lease: held } = entry;
    const runId = held.runId;
    let retries = 0;
    // One idle watch at a time, kept across the rounds a nudge or the poll wins. A watch per round
    // left one waiter behind per round (every 200 ms for a library host), and once the run fell
    // idle each of them listed every agent: 650 lists at K = 10,000, ~95 s of CPU before
    // shutdown() could finish. A watch begun before a round applied requests is not trusted (it
    // may have judged the run idle before their work began): a fresh one replaces it.
    let watch: IdleWatch | null = null;
    try {
      for (;;) {
        // A coordinator shut down by its owner (`adopt`) has nothing more to apply.
        if (held.lost || deps.stopping() || !c.health().ok) return 'failed';
        try {
          const applied = await guarded(applyOpenRequests(c, () => store.openRequests(runId), held));
          if (watch !== null && applied.size > 0) watch.stale = true;
          if (watch === null || watch.stale) watch = new IdleWatch(c, port);
          const woke = nudged(entry).then(() => 'nudged' as const);
          const why = await Promise.race([watch.idle, woke]);
          if (held.lost || deps.stopping() || why === 'failed' || !c.health().ok) return 'failed';
          if (why === 'nudged') continue;
          watch = null;
          const seq = await guarded(store.wakeSeq(runId));
          if ((await guarded(store.openRequests(runId))).length > 0) continue;
          if (c.delegations.list().some((d) => d.status === 'running')) {
            await nudged(entry);
            continue;
          }
          const agents = await held.port.listAgents(runId);
          if ((await held.port.executionsOf(agents.map((a) => a.id))).some((e) => e.status === 'running')) {
            await nudged(entry);
            continue;
          }
          if (deps.kept.has(runId)) {
            await nudged(entry);
            continue;
          }
          await c.shutdown();
          entry.c = null;
          // After a clean shutdown the rows are what the run is: decide from them.
          const state = await releaseStateAfter(held.port, runId, idleResumeMs);
          // Woke while shutting down, or mail waits for a parked agent: host it again.
          if (state.state === 'runnable') return 'again';
          if (await guarded(held.release(state, seq))) {
            if (state.state === 'parked' && state.wakeAt !== null) void deps.wake.arm();
            return 'released';
          }
          return 'again'; // a wake arrived meanwhile: host it again
        } catch (err) {
          if (held.lost || deps.stopping()) return 'failed';
          if (!transientStoreError(err)) throw err;
          // A read or an answer failed: the coordinator is fine; try again while the lease holds.
          logger.warn({ err, runId }, 'a store read of the hosting loop failed; retrying while the lease holds');
          if (!c.health().ok) return 'failed';
          await nudged(entry, backoff(retries++));
        }
      }
    } finally {
      // Whatever ended this hosting, its watch lists no agent when the run falls idle.
      if (watch) watch.stale = true;
    }
  }

  return { hostLoop, hostGiven };
}
