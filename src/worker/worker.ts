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
import type { Logger } from 'pino';
import { silentLogger } from '../logging/createLogger.js';
import type { Coordinator } from '../host/createCoordinator.js';
import type { StorePort } from '../store/port.js';
import type { Store } from '../store/types.js';
import type { LeaseOptions, RunLease } from '../store/postgres/lease.js';
import type { PostgresStore } from '../store/postgres/store.js';
import { pgBreakerStore } from '../providers/breakerPg.js';
import { pgQuotaStore } from '../providers/quotaPg.js';
import { TroupeError } from '../errors.js';
import type { HostingStore } from '../hosting/hostingStore.js';
import { postgresHosting } from '../hosting/postgresHosting.js';
import { wakeTimer } from './wakeTimer.js';
import { runHosting, type Hosted, type HostedOptions } from './runHosting.js';

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
  const logger = options.logger ?? silentLogger();
  const ttlMs = options.ttlMs ?? 15_000;
  const lease: LeaseOptions = { owner: id, ttlMs, logger, ...(options.heartbeatMs !== undefined ? { heartbeatMs: options.heartbeatMs } : {}) };
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
  const { hostLoop, hostGiven } = runHosting({
    store,
    options,
    logger,
    ttlMs,
    stopping: () => stopping,
    kept,
    wake,
    clusterQuota,
    clusterBreaker,
  });

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
