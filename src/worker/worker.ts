/**
 * A worker: a long-running process (any number, on any machines, over one PostgreSQL) that claims
 * runs that want a host, hosts each with the normal resume path, and lets a run go once all its
 * agents are parked with nothing due (DESIGN §12, issue 17).
 *
 * - Claims: `claimNext` (FOR UPDATE SKIP LOCKED) until `concurrency` runs are hosted.
 * - Wakes: LISTEN on a dedicated connection (a posted request or a submitted run NOTIFYs in its
 *   transaction), with a slow poll as the backstop (a notification is lost while the connection is
 *   down). LISTEN does not work through a transaction-mode pooler: point workers at the server.
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
import type pg from 'pg';
import { pino, type Logger } from 'pino';
import { TERMINAL_STATUSES } from '../../machines/types.js';
import type { Coordinator } from '../host/createCoordinator.js';
import { resumeCoordinator, type ResumeOptions } from '../host/resumeCoordinator.js';
import type { StorePort } from '../store/port.js';
import type { LeaseOptions, ReleaseState, RunLease } from '../store/postgres/lease.js';
import { wakeChannel, type PostgresStore } from '../store/postgres/store.js';
import type { AgentRow } from '../store/types.js';
import { TroupeError } from '../errors.js';
import { applyRequests } from './requests.js';
import { openRequests, wakeSeq } from './inbox.js';

export type HostOptions = Omit<ResumeOptions<StorePort>, 'store' | 'runId'>;

/** How a run is hosted, and what to close once this worker stops hosting it (a demo's fake server). */
export type HostedOptions = HostOptions & { dispose?: () => Promise<void> };

export interface WorkerOptions {
  store: PostgresStore;
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
  logger?: Logger;
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

/** The earliest idle deadline of agents waiting on agents (what wakes a parked run), or null. */
export function nextDeadline(agents: readonly AgentRow[], idleResumeMs: number): number | null {
  let next: number | null = null;
  for (const a of agents) {
    if (a.status !== 'waiting' || a.waitKind !== 'agents' || a.waitingSince === null) continue;
    const at = a.waitingSince + (a.waitTimeoutMs ?? idleResumeMs);
    if (next === null || at < next) next = at;
  }
  return next;
}

/** How to let a run go, from its rows after a clean shutdown. */
export function releaseStateOf(agents: readonly AgentRow[], interactive: boolean, idleResumeMs: number): ReleaseState {
  const terminal = new Set<string>(TERMINAL_STATUSES);
  const root = agents.find((a) => a.parentId === null);
  if (agents.every((a) => terminal.has(a.status)) || (!interactive && root && terminal.has(root.status))) return { state: 'done' };
  return { state: 'parked', wakeAt: nextDeadline(agents, idleResumeMs) };
}

const DEFAULT_IDLE_RESUME_MS = 5 * 60_000;

/** Whether a waiting or stalled agent has undelivered mail (it is woken by it: not a run to let go). */
export function hasMailFor(agents: readonly AgentRow[], pending: readonly { to: string }[]): boolean {
  const parked = new Set(agents.filter((a) => a.status === 'waiting' || a.status === 'stalled').map((a) => a.id));
  return pending.some((m) => parked.has(m.to));
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
async function settledIdle(c: Coordinator<StorePort>, port: WatchedPort): Promise<void> {
  for (;;) {
    await c.whenIdle();
    await port.quiet();
    if (c.list().every((a) => a.status !== 'running')) return;
  }
}

export async function startWorker(options: WorkerOptions): Promise<Worker> {
  const { store } = options;
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

  function host(claimed: RunLease): void {
    const entry: Hosted = { lease: claimed, c: null, nudge: () => undefined, busy: Promise.resolve() };
    hosted.set(claimed.runId, entry);
    claimed.onLost((err) => {
      logger.warn({ runId: claimed.runId, err }, 'lease lost: this worker stops hosting the run');
      void entry.c?.shutdown();
      entry.nudge();
    });
    entry.busy = hostLoop(entry)
      .catch((err: unknown) => logger.error({ err, runId: claimed.runId }, 'hosting a run failed'))
      .finally(() => {
        claimed.abandon();
        hosted.delete(claimed.runId);
        void fill();
      });
  }

  /** Wait for the next nudge (or the poll period). */
  const nudged = (entry: Hosted) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, options.pollMs ?? 5_000);
      entry.nudge = () => {
        clearTimeout(timer);
        resolve();
      };
    });

  async function hostLoop(entry: Hosted): Promise<void> {
    const { lease: held } = entry;
    const runId = held.runId;
    const { dispose, ...hostOptions } = await options.hostOptions(runId);
    try {
      await hostClaimed(entry, hostOptions);
    } finally {
      await dispose?.();
    }
  }

  async function hostClaimed(entry: Hosted, hostOptions: HostOptions): Promise<void> {
    const { lease: held } = entry;
    const runId = held.runId;
    const idleResumeMs = hostOptions.idleResumeMs ?? DEFAULT_IDLE_RESUME_MS;
    const port = watchedPort(held.port);
    while (!held.lost && !stopping) {
      const c = await resumeCoordinator<StorePort>({ ...hostOptions, store: port, runId });
      entry.c = c;
      options.onHost?.(c, held);
      // Host until idle with nothing open; requests are applied as they come.
      for (;;) {
        await applyRequests(store, held, c);
        const idle = settledIdle(c, port).then(
          () => 'idle' as const,
          () => 'failed' as const,
        );
        const woke = nudged(entry).then(() => 'nudged' as const);
        const why = await Promise.race([idle, woke]);
        if (held.lost || stopping || why === 'failed') break;
        if (why === 'nudged') continue;
        const seq = await wakeSeq(store, runId);
        if ((await openRequests(store, runId)).length > 0) continue;
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
        const run = await held.port.getRun(runId);
        const rows = await held.port.listAgents(runId);
        // Woke while shutting down, or mail waits for a parked agent: host it again.
        if (rows.some((a) => a.status === 'running') || hasMailFor(rows, await held.port.pendingMessagesOf(runId))) break;
        if (await held.release(releaseStateOf(rows, run?.interactive ?? false, idleResumeMs), seq)) return;
        break; // a wake arrived meanwhile: host it again
      }
      const failure = c.health().error;
      await c.shutdown();
      entry.c = null;
      if (held.lost) return;
      if (stopping || (failure && failure.code !== 'COORDINATOR_SHUT_DOWN')) {
        // Let another worker resume from what committed (a failed coordinator's memory is not trusted).
        await held.release({ state: 'runnable' }).catch(() => undefined);
        if (failure && !stopping) logger.error({ runId, err: failure }, 'the run failed on this worker; released for another');
        return;
      }
    }
  }

  // Wakes: LISTEN on a dedicated connection, re-made when it drops; the poll is the backstop.
  let listener: pg.Client | null = null;
  async function listen(): Promise<void> {
    if (stopping) return;
    try {
      const client = await store.connectDedicated();
      client.on('notification', (n) => {
        const entry = n.payload ? hosted.get(n.payload) : undefined;
        if (entry) entry.nudge();
        else if (n.payload && kept.has(n.payload)) void claimKept(n.payload);
        else void fill();
      });
      client.on('error', () => {
        listener = null;
        void client.end().catch(() => undefined);
        setTimeout(() => void listen(), 1_000).unref();
      });
      await client.query(`LISTEN ${wakeChannel(store)}`);
      listener = client;
    } catch (err) {
      logger.warn({ err }, 'LISTEN failed; polling until it works again');
      setTimeout(() => void listen(), options.pollMs ?? 5_000).unref();
    }
  }
  await listen();
  const poll = setInterval(() => {
    for (const runId of kept) void claimKept(runId);
    void fill();
    for (const entry of hosted.values()) entry.nudge();
  }, options.pollMs ?? 5_000);
  await fill();

  return {
    id,
    hosted: () => [...hosted.keys()],
    lease,
    keep(runId, held) {
      kept.add(runId);
      if (held && !hosted.has(runId) && !stopping) host(held);
      return claimKept(runId);
    },
    coordinators: () => [...hosted.values()].flatMap((e) => (e.c ? [e.c] : [])),
    async stop() {
      stopping = true;
      clearInterval(poll);
      const entries = [...hosted.values()];
      for (const entry of entries) {
        entry.nudge();
        void entry.c?.shutdown();
      }
      await Promise.all(entries.map((e) => e.busy));
      await listener?.end().catch(() => undefined);
    },
  };
}
