/**
 * The hosting loop, the only one (DESIGN §13): claim a run, host it, let it go. A worker is a
 * long-running process (any number, on any machines, over one PostgreSQL) that claims runs that
 * want a host; `troupe run`, `demo` and `resume` on a SQLite file run the same loop over the file
 * they own (hosting/sqliteHosting.ts), keeping their one run. A run found new is booted (`boot`),
 * any other resumed, in one place; it is let go once all its agents are parked with nothing due.
 *
 * - Claims: `claimNext` (PostgreSQL: FOR UPDATE SKIP LOCKED) until `concurrency` runs are hosted.
 * - Wakes: pushed by the store where it can (PostgreSQL: LISTEN on a dedicated connection; a posted
 *   request or a submitted run NOTIFYs in its transaction), with a poll as the backstop (a
 *   notification is lost while the connection is down; SQLite has only the poll). LISTEN does not
 *   work through a transaction-mode pooler: point workers at the server.
 * - Fencing: each hosted run's writes go through its lease's port; a lost lease (another worker
 *   claimed the run after this one stalled past its lease) shuts the run's coordinator down at once.
 * - Release: when the coordinator is idle, no request is open, and nothing runs in the background,
 *   the run is shut down cleanly and released `parked` until its earliest idle timer (or `done`),
 *   conditional on no wake having been posted meanwhile.
 * - Kept runs (`keep`, serve's main run): hosted until the worker stops, never released when idle;
 *   one another worker holds is claimed as soon as it is free (at each poll, and at its wakes).
 * @module
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { pino, type Logger } from 'pino';
import { DEFAULT_IDLE_RESUME_MS } from '../../machines/types.js';
import { createCoordinator, type Coordinator } from '../host/createCoordinator.js';
import { resumeCoordinator, type ResumeOptions } from '../host/resumeCoordinator.js';
import type { StorePort } from '../store/port.js';
import type { Store } from '../store/types.js';
import type { LeaseOptions, ReleaseState, RunLease } from '../store/postgres/lease.js';
import type { PostgresStore } from '../store/postgres/store.js';
import { pgBreakerStore } from '../providers/breakerPg.js';
import { pgQuotaStore } from '../providers/quotaPg.js';
import { TroupeError } from '../errors.js';
import { transientStoreError } from '../store/postgres/connect.js';
import { applyOpenRequests } from '../hosting/apply.js';
import type { HostingStore } from '../hosting/hostingStore.js';
import { postgresHosting } from '../hosting/postgresHosting.js';
import { releaseStateAfter } from '../hosting/release.js';
import { wakeTimer } from './wakeTimer.js';

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

export interface WorkerOptions {
  /** The runs' store: a PostgreSQL store (its runs are shared by every worker), or any hosting port (sqliteHosting). */
  store: PostgresStore | HostingStore;
  /** The owner written on lease rows (default `<host>:<pid>:<random>`). */
  id?: string;
  /** Runs hosted at once (default 10). */
  concurrency?: number;
  /** Lease time-to-live (default 15 s): how soon another worker takes over after this one dies. */
  ttlMs?: number;
  /** Heartbeat period (default ttlMs / 3). */
  heartbeatMs?: number;
  /** The backstop poll for runnable runs and requests (default 5 s). */
  pollMs?: number;
  /**
   * What a hosted run needs: model, tools, limits… (the store and run id are the worker's). Asked
   * each time the run is claimed, so it can follow the settings saved with the run.
   */
  hostOptions: (runId: string) => HostedOptions | Promise<HostedOptions>;
  /** Told each time a run is hosted (tests and the crash harness watch through it). */
  onHost?: (c: Coordinator<StorePort>, lease: RunLease) => void;
  /** Told each time a hosting of a run ends, with the error that ended it if one did (its resume failed…). */
  onEnd?: (runId: string, error: unknown) => void;
  logger?: Logger;
  /** Its timers do not keep the process alive (the library's host: its caller decides how long the process lives). */
  unref?: boolean;
}

export interface Worker {
  readonly id: string;
  /** Ids of the runs hosted now. */
  hosted(): string[];
  /** The lease options this worker claims with (`submitRun`'s `hold` hands a run over with them). */
  readonly lease: LeaseOptions;
  /**
   * Host run `runId` until this worker stops, even while it is idle (it is never released parked);
   * `held` is a claim of it made with {@link Worker.lease}. Resolves true once hosted here, false
   * while another worker holds it: this worker then claims it as soon as it is free.
   */
  keep(runId: string, held?: RunLease): Promise<boolean>;
  /**
   * Host `c`, a coordinator its caller built and holds (the library's `createCoordinator` on a file
   * this process owns), through this loop: its inbox applied as requests come, kept until it shuts
   * down or the worker stops. Never rebuilt or shut down here: the caller owns that handle.
   * Resolves once claimed (RUN_LOCKED: this process hosts the run already).
   */
  adopt(c: Coordinator<Store | StorePort>): Promise<void>;
  /** The coordinators of the runs hosted now (a run between two hostings has none). */
  coordinators(): Coordinator<StorePort>[];
  /** Stop claiming, shut every hosted run down and release it (runnable: another worker takes it). */
  stop(): Promise<void>;
}

interface Hosted {
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
 * (a restored agent's wake for its mail runs after the recovery's commit).
 */
async function settledIdle(c: Coordinator<Store | StorePort>, port: WatchedPort): Promise<void> {
  for (;;) {
    await c.whenIdle();
    await port.quiet();
    if (c.list().every((a) => a.status !== 'running')) return;
  }
}

const isHostingStore = (store: PostgresStore | HostingStore): store is HostingStore => typeof (store as HostingStore).openRequests === 'function';

export async function startWorker(options: WorkerOptions): Promise<Worker> {
  const store = isHostingStore(options.store) ? options.store : postgresHosting(options.store, options.pollMs);
  // On PostgreSQL the runs' model endpoint quotas are the cluster's (a run's own quotaStore wins).
  const clusterQuota = isHostingStore(options.store) ? {} : { quotaStore: pgQuotaStore(options.store.pool) };
  // And the endpoints' circuit breakers (a run's own breaker store wins; a run without one has none).
  const breakerStore = isHostingStore(options.store) ? null : pgBreakerStore(options.store.pool);
  const clusterBreaker = (breaker: HostedOptions['breaker']): Pick<HostedOptions, 'breaker'> =>
    breakerStore === null || breaker === false ? {} : { breaker: { store: breakerStore, ...breaker } };
  const id = options.id ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  const concurrency = options.concurrency ?? 10;
  const logger = options.logger ?? pino({ level: 'silent' });
  const lease = { owner: id, ttlMs: options.ttlMs ?? 15_000, ...(options.heartbeatMs !== undefined ? { heartbeatMs: options.heartbeatMs } : {}) };
  const hosted = new Map<string, Hosted>();
  const kept = new Set<string>();
  let stopping = false;
  let filling = false;
  let refill = false;

  async function fill(): Promise<void> {
    if (filling) {
      refill = true;
      return;
    }
    filling = true;
    try {
      do {
        refill = false;
        while (!stopping && hosted.size < concurrency) {
          const claimed = await store.claimNext(lease);
          if (!claimed) break;
          host(claimed);
        }
      } while (refill && !stopping);
    } catch (err) {
      logger.warn({ err }, 'claiming runs failed; retrying at the next poll');
    } finally {
      filling = false;
    }
  }

  const wake = wakeTimer(store, fill, logger);

  /** Claim a kept run that is not hosted here; false while another worker holds it. */
  async function claimKept(runId: string): Promise<boolean> {
    if (hosted.has(runId)) return true;
    if (stopping) return false;
    try {
      host(await store.claim(runId, lease));
      return true;
    } catch (err) {
      if (!(err instanceof TroupeError && err.code === 'RUN_LOCKED')) logger.warn({ err, runId }, 'claiming a kept run failed; retrying at the next poll');
      return false;
    }
  }

  function host(claimed: RunLease, hosting: (entry: Hosted) => Promise<void> = hostLoop): void {
    const entry: Hosted = { lease: claimed, c: null, nudge: () => undefined, busy: Promise.resolve() };
    hosted.set(claimed.runId, entry);
    claimed.onLost((err) => {
      logger.warn({ runId: claimed.runId, err }, 'lease lost: this worker stops hosting the run');
      // The coordinator ends itself (its port's guard); the loop wakes to tear the hosting down.
      entry.nudge();
    });
    // One end per hosting: the loop's own teardown shuts its coordinator down before the run leaves
    // `hosted` (only then may this worker claim it again).
    let failure: unknown;
    entry.busy = hosting(entry)
      .catch((err: unknown) => {
        failure = err;
        logger.error({ err, runId: claimed.runId }, 'hosting a run failed');
      })
      .finally(() => {
        claimed.abandon();
        hosted.delete(claimed.runId);
        options.onEnd?.(claimed.runId, failure);
        void fill();
      });
  }

  /** Wait for the next nudge (or `ms`, the poll period by default). */
  const nudged = (entry: Hosted, ms = options.pollMs ?? 5_000) =>
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
      await hostClaimed(entry, { ...clusterQuota, ...hostOptions, ...clusterBreaker(hostOptions.breaker) }, boot);
    } finally {
      await dispose?.();
    }
  }

  /** A coordinator the caller holds (`adopt`): kept, its requests applied, until it or the worker stops. */
  async function hostGiven(entry: Hosted, c: Coordinator<Store | StorePort>): Promise<void> {
    const runId = entry.lease.runId;
    kept.add(runId);
    try {
      options.onHost?.(c as Coordinator<StorePort>, entry.lease);
      await hostCoordinator(entry, c, watchedPort(entry.lease.port), lostRace(entry.lease), DEFAULT_IDLE_RESUME_MS);
    } finally {
      kept.delete(runId);
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
    while (!held.lost && !stopping) {
      let c: Coordinator<StorePort>;
      // Booted here when new (one place boots or resumes a run), resumed otherwise.
      let fresh = false;
      try {
        fresh = boot !== undefined && (await guarded(port.getRun(runId))) === undefined;
        c = fresh
          ? createCoordinator<StorePort>({ ...hostOptions, store: port, runId })
          : await guarded(resumeCoordinator<StorePort>({ ...hostOptions, store: port, runId }));
      } catch (err) {
        if (held.lost || stopping) return;
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
      if (stopping || outcome === 'failed') {
        // A clean stop lets the run go as its rows say (done, parked, or runnable with work to do);
        // a failure lets another worker resume from what committed (a failed coordinator's memory is not trusted).
        const clean = stopping && (failure === null || failure.code === 'COORDINATOR_SHUT_DOWN');
        const state = clean
          ? await guarded(releaseStateAfter(held.port, runId, idleResumeMs)).catch((): ReleaseState => ({ state: 'runnable' }))
          : { state: 'runnable' as const };
        await guarded(held.release(state)).catch(() => undefined);
        if (failure && !stopping && failure.code !== 'COORDINATOR_SHUT_DOWN')
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
  const backoff = (n: number) => Math.min(100 * 2 ** n, Math.floor(lease.ttlMs / 3));

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
    for (;;) {
      // A coordinator shut down by its owner (`adopt`) has nothing more to apply.
      if (held.lost || stopping || !c.health().ok) return 'failed';
      try {
        await guarded(applyOpenRequests(c, () => store.openRequests(runId), held));
        const idle = settledIdle(c, port).then(
          () => 'idle' as const,
          () => 'failed' as const,
        );
        const woke = nudged(entry).then(() => 'nudged' as const);
        const why = await Promise.race([idle, woke]);
        if (held.lost || stopping || why === 'failed' || !c.health().ok) return 'failed';
        if (why === 'nudged') continue;
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
        if (kept.has(runId)) {
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
          if (state.state === 'parked' && state.wakeAt !== null) void wake.arm();
          return 'released';
        }
        return 'again'; // a wake arrived meanwhile: host it again
      } catch (err) {
        if (held.lost || stopping) return 'failed';
        if (!transientStoreError(err)) throw err;
        // A read or an answer failed: the coordinator is fine; try again while the lease holds.
        logger.warn({ err, runId }, 'a store read of the hosting loop failed; retrying while the lease holds');
        if (!c.health().ok) return 'failed';
        await nudged(entry, backoff(retries++));
      }
    }
  }

  // Wakes: pushed by the store where it can (LISTEN on PostgreSQL); the poll is the backstop.
  const stopListening = await store.listen((runId) => {
    const entry = hosted.get(runId);
    if (entry) entry.nudge();
    else if (kept.has(runId)) void claimKept(runId);
    else void fill();
  }, logger);
  const poll = setInterval(() => {
    for (const runId of kept) void claimKept(runId);
    void fill();
    void wake.arm();
    for (const entry of hosted.values()) entry.nudge();
  }, options.pollMs ?? 5_000);
  if (options.unref) poll.unref();
  await fill();
  await wake.arm();

  return {
    id,
    hosted: () => [...hosted.keys()],
    lease,
    keep(runId, held) {
      kept.add(runId);
      if (held && !hosted.has(runId) && !stopping) host(held);
      return claimKept(runId);
    },
    async adopt(c) {
      if (stopping) throw new TroupeError('COORDINATOR_SHUT_DOWN', 'the worker is stopping');
      const held = await store.claim(c.runId, lease);
      host(held, (entry) => hostGiven(entry, c));
    },
    coordinators: () => [...hosted.values()].flatMap((e) => (e.c ? [e.c] : [])),
    async stop() {
      stopping = true;
      clearInterval(poll);
      wake.stop();
      const entries = [...hosted.values()];
      for (const entry of entries) {
        entry.nudge();
        void entry.c?.shutdown();
      }
      await Promise.all(entries.map((e) => e.busy));
      await stopListening();
    },
  };
}
