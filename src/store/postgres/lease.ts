/**
 * Ownership of a run, with fencing. A run is hosted by at most one worker: its lease row (owner,
 * epoch, lease_until) is claimed by bumping the epoch, renewed by heartbeat, and every commit of
 * the run checks the epoch in its own transaction (`… WHERE run_id = $1 AND epoch = $2 FOR SHARE`).
 * Zero rows means another worker claimed the run since: this one has lost it, must stop hosting at
 * once, and never writes again (`LEASE_LOST`). Lease times are the database's clock, so workers on
 * machines with skewed clocks agree on when a lease expired.
 * @module
 */
import type pg from 'pg';
import { TroupeError } from '../../errors.js';
import type { Redactor } from '../../logging/redact.js';
import type { StorePort } from '../port.js';
import { operationError } from './connect.js';
import { applyPgOp, flushPgOps, Pending, StagedCache, type OwnerCache } from './ops.js';
import { pgReads } from './reads.js';

/** The database's clock in milliseconds (one expression, used by every lease statement). */
export const DB_NOW = '(extract(epoch from clock_timestamp()) * 1000)::bigint';

export interface LeaseOptions {
  /** Who claims (a worker id); shown in status and written on the lease row. */
  owner: string;
  /** How long a claim or renewal holds without a heartbeat (default 15 s). */
  ttlMs?: number;
  /** Heartbeat period (default ttlMs / 3); 0 turns the heartbeat off (tests). */
  heartbeatMs?: number;
}

/** Why a run is let go: runnable (someone else should host it), parked until `wakeAt`, or done. */
export type ReleaseState = { state: 'runnable' } | { state: 'parked'; wakeAt: number | null } | { state: 'done' };

export interface RunLease {
  readonly runId: string;
  readonly owner: string;
  /** The fencing token: every commit of `port` checks it. */
  readonly epoch: number;
  /** The run's store port, fenced by this lease (its `boot` is the epoch). */
  readonly port: StorePort;
  /** The error this lease was lost with (a fenced commit or a renewal found another epoch), if any. */
  readonly lost: TroupeError | null;
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
}

const lostError = (runId: string, epoch: number) =>
  new TroupeError('LEASE_LOST', `run ${runId}: lease epoch ${epoch} is no longer held (another worker claimed the run); this worker stops hosting it`);

/** A claimed lease over `pool`: fenced port, heartbeat, release. */
export function heldLease(pool: pg.Pool, row: { run_id: string; epoch: number }, options: LeaseOptions, redactor: Redactor): RunLease {
  const runId = row.run_id;
  const epoch = row.epoch;
  const owner = options.owner;
  const ttl = options.ttlMs ?? 15_000;
  const listeners: ((err: TroupeError) => void)[] = [];
  let lost: TroupeError | null = null;
  let heartbeat: NodeJS.Timeout | null = null;
  const cache: OwnerCache = { agents: new Map(), sessionLength: new Map() };

  const loseIt = (): TroupeError => {
    if (lost) return lost;
    lost = lostError(runId, epoch);
    stopHeartbeat();
    for (const l of listeners.splice(0)) l(lost);
    return lost;
  };
  const stopHeartbeat = () => {
    if (heartbeat) clearInterval(heartbeat);
    heartbeat = null;
  };

  async function commit(ops: Parameters<StorePort['commit']>[0]): Promise<void> {
    if (lost) throw lost;
    if (ops.length === 0) return;
    let client: pg.PoolClient;
    try {
      client = await pool.connect();
    } catch (err) {
      throw operationError(err, `run ${runId}: a commit`);
    }
    let broken: unknown;
    // A connection the server ends while it is checked out (an idle-in-transaction timeout after
    // this process was stopped, a restart) emits 'error': the query fails, the process must not.
    const onError = (err: unknown) => (broken = err);
    client.on('error', onError);
    try {
      await client.query('BEGIN');
      const fence = await client.query('SELECT 1 FROM run_leases WHERE run_id = $1 AND epoch = $2 AND owner = $3 FOR SHARE', [runId, epoch, owner]);
      if (fence.rowCount === 0) {
        await client.query('ROLLBACK');
        throw loseIt();
      }
      const staged = new StagedCache(cache);
      // Rows are gathered and written a table at a time (multi-row statements), all after the fence.
      const ctx = { client, boot: epoch, redactor, cache: staged, pending: new Pending() };
      for (const op of ops) await applyPgOp(ctx, op);
      await flushPgOps(ctx);
      await client.query('COMMIT');
      staged.keep();
    } catch (err) {
      if (err instanceof TroupeError && err.code === 'LEASE_LOST') throw err;
      await client.query('ROLLBACK').catch((e: unknown) => (broken = e));
      throw operationError(err, `run ${runId}: a commit`);
    } finally {
      client.off('error', onError);
      client.release(broken as Error | undefined);
    }
  }

  async function renew(): Promise<boolean> {
    if (lost) return false;
    try {
      const { rowCount } = await pool.query(`UPDATE run_leases SET lease_until = ${DB_NOW} + $4 WHERE run_id = $1 AND epoch = $2 AND owner = $3`, [runId, epoch, owner, ttl]);
      if (rowCount === 0) {
        loseIt();
        return false;
      }
      return true;
    } catch {
      // The database is unreachable: the lease runs out unless a later beat gets through; the
      // fence keeps every write safe meanwhile.
      return !lost;
    }
  }

  const period = options.heartbeatMs ?? Math.floor(ttl / 3);
  if (period > 0) {
    heartbeat = setInterval(() => void renew(), period);
    heartbeat.unref();
  }

  return {
    runId,
    owner,
    epoch,
    port: { boot: epoch, commit, ...pgReads(pool, { session: (id, n) => cache.sessionLength.set(id, n) }) },
    get lost() {
      return lost;
    },
    onLost(listener) {
      if (lost) listener(lost);
      else listeners.push(listener);
    },
    renew,
    async release(next, ifWakeSeq) {
      stopHeartbeat();
      if (lost) return false;
      const wakeAt = next.state === 'parked' ? next.wakeAt : null;
      const { rowCount } = await pool.query(
        `UPDATE run_leases SET owner = NULL, lease_until = 0, state = $4, wake_at = $5
         WHERE run_id = $1 AND epoch = $2 AND owner = $3 AND ($6::bigint IS NULL OR wake_seq = $6::bigint)`,
        [runId, epoch, owner, next.state, wakeAt, ifWakeSeq ?? null],
      );
      if (rowCount === 0 && ifWakeSeq === undefined) loseIt();
      if (rowCount === 0 && ifWakeSeq !== undefined && period > 0) {
        heartbeat = setInterval(() => void renew(), period);
        heartbeat.unref();
      }
      return rowCount === 1;
    },
    abandon: stopHeartbeat,
  };
}
