/**
 * Ownership of a run, with fencing. A run is hosted by at most one worker: its lease row (owner,
 * epoch, lease_until) is claimed by bumping the epoch, renewed by heartbeat, and every commit of
 * the run checks the epoch in its own transaction. Zero rows means another worker claimed the run
 * since: this one has lost it, must stop hosting at once, and never writes again (`LEASE_LOST`).
 * Lease times in the row are the database's clock, so workers on machines with skewed clocks agree
 * on when a lease expired.
 *
 * The host also keeps a local expiry (`guard`, localExpiry.ts: on its monotonic and its wall
 * clock). The database's `lease_until` is at least that late, so once the local expiry passes
 * another worker may be about to claim the run: the lease then counts as lost, before any model or
 * tool call, commit or read (a process that was SIGSTOPped or partitioned past its lease learns it
 * at its first step after waking).
 *
 * A commit or a read is retried (backoff, a new connection each time) while the lease is locally
 * valid, so a dropped connection or a database restart costs a delay, not the hosting. Each commit of an epoch
 * carries a sequence number written in its transaction (`commit_seq`): a retry first checks whether
 * an earlier attempt whose answer never came did commit, so a batch is never applied twice.
 *
 * A commit is one round trip (batch.ts): the fence and every row of the batch in one query, one
 * transaction, so no transaction ever waits on the host: a host frozen mid-commit holds no lock on
 * the lease row, and failover takes the TTL plus one claim interval whatever the old host was doing.
 * @module
 */
import type pg from 'pg';
import type { Logger } from 'pino';
import { TroupeError } from '../../errors.js';
import type { Redactor } from '../../logging/redact.js';
import type { LeaseGuard, StorePort } from '../port.js';
import { operationError, transientStoreError } from './connect.js';
import { preparedStatementsLost, requiredFailure, StatementBatch } from './batch.js';
import { applyPgOp, flushPgOps, Pending, StagedCache, type OwnerCache } from './ops.js';
import { localExpiry, sentNow, type LeaseClocks, type SentAt } from './localExpiry.js';
import { pgReads } from './reads.js';

/** The database's clock in milliseconds (one expression, used by every lease statement). */
export const DB_NOW = '(extract(epoch from clock_timestamp()) * 1000)::bigint';

export interface LeaseOptions extends LeaseClocks {
  /** Who claims (a worker id); shown in status and written on the lease row. */
  owner: string;
  /** How long a claim or renewal holds without a heartbeat (default 15 s). */
  ttlMs?: number;
  /** Heartbeat period (default ttlMs / 3); 0 turns the heartbeat off (tests, a short submit). */
  heartbeatMs?: number;
  /** Told once per store when its commits stop using prepared statements (see {@link StatementMode}). */
  logger?: Pick<Logger, 'warn'>;
}

/**
 * Whether a store's commits use statements prepared on their connection: one per store, shared by
 * its leases. A connection that turns out not to hold them (a pooler in transaction mode between)
 * switches every lease of the store to plain statements for good, so each later lease does not
 * pay a failed attempt of its own.
 */
export interface StatementMode {
  prepare: boolean;
}

/** Why a run is let go: runnable (someone else should host it), parked until `wakeAt`, or done. */
export type ReleaseState = { state: 'runnable' } | { state: 'parked'; wakeAt: number | null } | { state: 'done' };

export interface RunLease {
  readonly runId: string;
  readonly owner: string;
  /** The fencing token: every commit of `port` checks it. */
  readonly epoch: number;
  /** The run's store port, fenced by this lease (its `boot` is the epoch, its `guard` this lease). */
  readonly port: StorePort;
  /** The error this lease was lost with (a fenced commit or a renewal found another epoch, or it expired locally), if any. */
  readonly lost: TroupeError | null;
  /** Null while surely held; else why not (and the lease is lost from then on). */
  check(): TroupeError | null;
  /** Told once, when the lease is found lost. */
  onLost(listener: (err: TroupeError) => void): void;
  /** Extend the lease; false (and `lost` set) if another worker holds the run now. */
  renew(): Promise<boolean>;
  /**
   * Let the run go (fenced): no owner, lease expired, the given state. With `ifWakeSeq`, only if
   * no wake was posted since that sequence was read (else false: keep hosting, there is work).
   */
  release(state: ReleaseState, ifWakeSeq?: number): Promise<boolean>;
  /** Stop the heartbeat without releasing (the lease then expires). */
  abandon(): void;
}

export interface LeaseRow {
  run_id: string;
  owner: string | null;
  epoch: number;
  lease_until: number;
  state: ReleaseState['state'];
  wake_at: number | null;
  wake_seq: number;
  commit_seq: number;
}

/** What a claim statement returns. */
export interface ClaimedRow {
  run_id: string;
  epoch: number;
  commit_seq: number;
}

const lostError = (runId: string, epoch: number) =>
  new TroupeError('LEASE_LOST', `run ${runId}: lease epoch ${epoch} is no longer held (another worker claimed the run); this worker stops hosting it`);

const expiredError = (runId: string, epoch: number, ttl: number, cause?: unknown) =>
  new TroupeError(
    'LEASE_LOST',
    `run ${runId}: lease epoch ${epoch} may have expired (no renewal reached the database within its ${ttl} ms); this worker stops hosting it`,
    cause === undefined ? {} : { cause },
  );

/** First retry of a failed commit; doubles up to a quarter of the TTL. */
const RETRY_BASE_MS = 25;

/**
 * A claimed lease over `pool`: fenced port, local expiry, heartbeat, release. `sentAt` is when the
 * claim statement was sent (on both of `options`' clocks): the local expiry counts from it.
 */
export function heldLease(pool: pg.Pool, row: ClaimedRow, options: LeaseOptions, redactor: Redactor, sentAt: SentAt, mode: StatementMode): RunLease {
  const runId = row.run_id;
  const epoch = row.epoch;
  const owner = options.owner;
  const ttl = options.ttlMs ?? 15_000;
  const { remaining, extend } = localExpiry(options, ttl, sentAt);
  // The number of the last commit of this epoch. A lease's commits run one at a time (the group
  // committer has one in flight; a resume's recovery commit comes before it), so one counter will do.
  let seq = row.commit_seq;
  const listeners: ((err: TroupeError) => void)[] = [];
  let lost: TroupeError | null = null;
  let heartbeat: NodeJS.Timeout | null = null;
  let expiry: NodeJS.Timeout | null = null;
  let renewing: Promise<boolean> | null = null;
  const cache: OwnerCache = { agents: new Map(), sessionLength: new Map() };
  /** Rejects when the lease is lost: what every wait on the database races against. */
  let rejectLost!: (err: TroupeError) => void;
  const whenLost = new Promise<never>((_resolve, reject) => (rejectLost = reject));
  whenLost.catch(() => undefined);

  const stopTimers = () => {
    if (heartbeat) clearInterval(heartbeat);
    if (expiry) clearTimeout(expiry);
    heartbeat = null;
    expiry = null;
  };
  const loseIt = (err: TroupeError = lostError(runId, epoch)): TroupeError => {
    if (lost) return lost;
    lost = err;
    stopTimers();
    rejectLost(err);
    for (const l of listeners.splice(0)) l(err);
    return err;
  };
  const check = (): TroupeError | null => {
    if (lost) return lost;
    if (remaining() <= 0) return loseIt(expiredError(runId, epoch, ttl));
    return null;
  };
  /** Arm the timer that declares the lease lost at its local expiry (re-armed by every renewal). */
  const armExpiry = () => {
    if (lost) return;
    if (expiry) clearTimeout(expiry);
    expiry = setTimeout(
      () => {
        if (check() === null) armExpiry();
      },
      Math.max(1, Math.ceil(remaining())),
    );
    expiry.unref();
  };
  armExpiry();
  /** Milliseconds left of the local lease (at least 1: pg treats 0 as no timeout). */
  const left = () => Math.max(1, Math.floor(remaining()));
  /** `promise`, unless the lease is lost first (its rejection is then handled, never thrown). */
  const raced = <T>(promise: Promise<T>): Promise<T> => {
    promise.catch(() => undefined);
    return Promise.race([promise, whenLost]);
  };

  /** Send `sql` on `client` as one query: its statements prepared on the connection while the store's mode says so. */
  async function send(client: pg.PoolClient, sql: StatementBatch, q: (text: string) => Promise<unknown>): Promise<void> {
    if (!mode.prepare) return void (await q(sql.text()));
    const batch = sql.on(client);
    try {
      await q(batch.text);
      batch.prepared();
    } catch (err) {
      // A statement that raised ran after the PREPAREs; a batch that failed on one applied nothing.
      if (requiredFailure(err)) batch.prepared();
      else if (preparedStatementsLost(err)) {
        if (mode.prepare) {
          mode.prepare = false;
          options.logger?.warn(
            { runId, code: (err as { code?: unknown }).code },
            'PostgreSQL: a connection lacked the statements prepared on it (a pooler in transaction mode between?); commits go as plain statements from now on',
          );
        }
        return send(client, sql, q);
      }
      throw err;
    }
  }

  /** The cache changes of the last attempt whose batch was sent (it may have committed unanswered). */
  let sent: StagedCache | null = null;
  /** One attempt at a commit: resolves once committed (now or by an earlier attempt of the same batch). */
  async function attempt(ops: Parameters<StorePort['commit']>[0], target: number): Promise<void> {
    let client: pg.PoolClient;
    const connecting = pool.connect();
    try {
      client = await raced(connecting);
    } catch (err) {
      // Lost while connecting: the connection, if it comes, goes back at once (checked out with
      // nobody listening, a reset would be an unhandled 'error').
      connecting.then(
        (late) => late.release(),
        () => undefined,
      );
      if (err instanceof TroupeError) throw err;
      throw operationError(err, `run ${runId}: a commit`);
    }
    let broken: unknown;
    // A connection the server ends while it is checked out (an idle-in-transaction timeout, a
    // restart) emits 'error': the query fails, the process must not.
    const onError = (err: unknown) => (broken = err);
    client.on('error', onError);
    // Every statement is bounded by what is left of the lease: a black-holed connection does not
    // hold the host past it.
    const q = <R extends pg.QueryResultRow>(text: string, values?: unknown[]) => {
      const gone = check();
      if (gone) return Promise.reject(gone);
      return client.query<R>({ text, ...(values ? { values } : {}), query_timeout: left() } as pg.QueryConfig);
    };
    const staged = new StagedCache(cache);
    const sql = new StatementBatch();
    // The server's own bound, as the client's is the lease (SET LOCAL: this transaction only).
    sql.add(`SET LOCAL statement_timeout = ${ttl}`);
    // The fence first: a stale owner's batch stops here, in the same round trip, with nothing applied.
    sql.require(
      'UPDATE run_leases SET commit_seq = $4 WHERE run_id = $1 AND epoch = $2 AND owner = $3 AND commit_seq = $4 - 1',
      [runId, epoch, owner, target],
      'LEASE_LOST',
      `run ${runId}: lease epoch ${epoch} no longer holds commit ${target - 1}`,
    );
    // Rows are gathered and written a table at a time (multi-row statements), all after the fence.
    const ctx = { sql, read: q, boot: epoch, redactor, cache: staged, pending: new Pending() };
    try {
      for (const op of ops) await applyPgOp(ctx, op);
      flushPgOps(ctx);
      const earlier = sent;
      sent = staged;
      try {
        await send(client, sql, q);
      } catch (err) {
        const failed = requiredFailure(err);
        if (failed?.code !== 'LEASE_LOST') throw failed ?? err;
        // Nothing of the batch was applied (the server rolled it back; the connection is idle again).
        const { rows } = await q<{ epoch: number; owner: string | null; commit_seq: number }>(
          'SELECT epoch, owner, commit_seq FROM run_leases WHERE run_id = $1',
          [runId],
        );
        const held = rows[0];
        // An earlier attempt of this batch committed, but its answer never came: what that attempt
        // staged is what the database holds (this one's reads may have seen its rows).
        if (held && held.epoch === epoch && held.owner === owner && held.commit_seq === target && earlier) {
          earlier.keep();
          return;
        }
        throw loseIt();
      }
      staged.keep();
    } catch (err) {
      // The connection is closed, not rolled back: a ROLLBACK could wait on a dead or black-holed
      // connection, and the server aborts the transaction of a connection that closes.
      broken ??= err ?? new Error('commit failed');
      if (err instanceof TroupeError && err.code === 'LEASE_LOST') throw err;
      throw operationError(err, `run ${runId}: a commit`);
    } finally {
      client.off('error', onError);
      client.release(broken as Error | undefined);
    }
  }

  /**
   * `operation`, repeated with backoff (on a new connection: a failed one is never reused) while it
   * fails transiently and the lease holds; past the lease, the lease is what is lost.
   */
  async function withRetries<T>(operation: () => Promise<T>): Promise<T> {
    for (let retry = 0; ; retry++) {
      try {
        return await operation();
      } catch (err) {
        if (err instanceof TroupeError && err.code === 'LEASE_LOST') throw err;
        if (!transientStoreError(err)) throw err;
        const delay = Math.min(RETRY_BASE_MS * 2 ** retry, Math.floor(ttl / 4));
        if (delay >= remaining()) throw loseIt(expiredError(runId, epoch, ttl, err));
        await raced(new Promise((resolve) => setTimeout(resolve, delay)));
      }
    }
  }

  async function commitNow(ops: Parameters<StorePort['commit']>[0]): Promise<void> {
    const gone = check();
    if (gone) throw gone;
    if (ops.length === 0) return;
    const target = seq + 1;
    sent = null;
    await withRetries(() => attempt(ops, target));
    seq = target;
  }

  // One commit at a time, whoever calls: two in flight would take the same number, and the second
  // would find it "already applied" and write nothing (a host's own event beside its group commit).
  let tail: Promise<unknown> = Promise.resolve();
  function commit(ops: Parameters<StorePort['commit']>[0]): Promise<void> {
    const next = tail.then(() => commitNow(ops));
    tail = next.catch(() => undefined);
    return next;
  }

  async function renewOnce(): Promise<boolean> {
    if (check()) return false;
    const at = sentNow(options);
    try {
      const { rowCount } = await raced(
        pool.query({
          text: `UPDATE run_leases SET lease_until = ${DB_NOW} + $4 WHERE run_id = $1 AND epoch = $2 AND owner = $3`,
          values: [runId, epoch, owner, ttl],
          // Past its TTL a renewal no longer extends anything (it counts from when it was sent).
          query_timeout: ttl,
        } as pg.QueryConfig),
      );
      if (rowCount === 0) {
        loseIt();
        return false;
      }
      if (lost) return false;
      extend(at);
      armExpiry();
      return true;
    } catch {
      // The database is unreachable: the lease runs out locally unless a later beat gets through;
      // the fence keeps every write safe meanwhile.
      return check() === null;
    }
  }
  /** One renewal at a time: beats that come while one hangs (a partition) do not pile up. */
  const renew = (): Promise<boolean> => (renewing ??= renewOnce().finally(() => (renewing = null)));

  const period = options.heartbeatMs ?? Math.floor(ttl / 3);
  const startHeartbeat = () => {
    if (period <= 0 || lost) return;
    heartbeat = setInterval(() => void renew(), period);
    heartbeat.unref();
  };
  startHeartbeat();

  // Reads of a hosted run are the lease's too: none starts once it may be lost, none outwaits it,
  // and one that fails transiently is repeated (a read is idempotent) rather than failing the
  // resume or the agent that needed it.
  const reads = pgReads(
    {
      query: ((config: pg.QueryConfig | string, values?: unknown[]) =>
        withRetries(() => {
          const gone = check();
          if (gone) return Promise.reject(gone);
          return raced(pool.query(typeof config === 'string' ? { text: config, ...(values ? { values } : {}) } : config));
        })) as pg.Pool['query'],
    },
    { session: (id, n) => cache.sessionLength.set(id, n) },
  );
  const guard: LeaseGuard = {
    check,
    onLost(listener) {
      if (lost) listener(lost);
      else listeners.push(listener);
    },
  };

  return {
    runId,
    owner,
    epoch,
    // The store's redactor also scrubs what the run's agents are told (sessions.ts).
    port: { boot: epoch, commit, guard, redactor, ...reads },
    get lost() {
      return lost;
    },
    check,
    onLost: guard.onLost,
    renew,
    async release(next, ifWakeSeq) {
      if (heartbeat) clearInterval(heartbeat);
      heartbeat = null;
      if (lost) return false;
      const wakeAt = next.state === 'parked' ? next.wakeAt : null;
      const { rowCount } = await raced(
        pool.query({
          text: `UPDATE run_leases SET owner = NULL, lease_until = 0, state = $4, wake_at = $5
                 WHERE run_id = $1 AND epoch = $2 AND owner = $3 AND ($6::bigint IS NULL OR wake_seq = $6::bigint)`,
          values: [runId, epoch, owner, next.state, wakeAt, ifWakeSeq ?? null],
          query_timeout: ttl,
        } as pg.QueryConfig),
      );
      if (rowCount === 0 && ifWakeSeq === undefined) loseIt();
      if (rowCount === 1) {
        // Released: nobody holds it through this lease any more (no timer keeps the process alive);
        // a late write through it is refused here, saying so, as the database's fence would.
        stopTimers();
        lost = new TroupeError('LEASE_LOST', `run ${runId}: lease epoch ${epoch} was released by this worker; it writes nothing more through it`);
        rejectLost(lost);
        listeners.splice(0);
      } else startHeartbeat();
      return rowCount === 1;
    },
    abandon: stopTimers,
  };
}
