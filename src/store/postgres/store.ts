/**
 * The PostgreSQL store: troupe's rows in a database many workers share (DESIGN §12, issue 17).
 * It implements the async store port natively — but only through a run's lease: every commit is
 * fenced by the epoch of the worker that holds the run (lease.ts). Reads without a lease serve the
 * CLI's views (`status`, `tree`) from any machine.
 * @example
 * const store = await openPostgresStore({ url: 'postgres://app@db/troupe' });
 * const lease = await store.claim(runId, { owner: 'worker-1' });
 * const coordinator = createCoordinator({ store: lease.port, runId, model });
 * @module
 */
import type pg from 'pg';
import { TroupeError } from '../../errors.js';
import { createRedactor, type Redactor } from '../../logging/redact.js';
import { checkOptions, checkReadable, connectError, describeUrl, migrate, poolConfig, type PgConnectOptions } from './connect.js';
import { pgDriver } from './driver.js';
import { DB_NOW, heldLease, type ClaimedRow, type LeaseOptions, type LeaseRow, type RunLease, type StatementMode } from './lease.js';
import { sentNow, type SentAt } from './localExpiry.js';
import { pgReads, type PortReads } from './reads.js';

export interface PostgresStoreOptions extends PgConnectOptions {
  /** Secret values to replace with `[redacted]` in every text written (see `createRedactor`). */
  redactor?: Redactor;
}

export interface PostgresStore {
  readonly url: string;
  readonly schema: string;
  /** Reads of any run, without hosting it (views from any machine). */
  readonly reads: PortReads;
  /**
   * Claim run `runId` (its lease row is created if the run is new): resolves with the lease and
   * its fenced port, or rejects with RUN_LOCKED while another worker's lease on it is live.
   */
  claim(runId: string, options: LeaseOptions): Promise<RunLease>;
  /** Claim the next run that wants a host (runnable, or parked with its wake due), or null. Never blocks on a run another worker is claiming. */
  claimNext(options: LeaseOptions): Promise<RunLease | null>;
  /** The lease rows (status views, tests). */
  leases(): Promise<LeaseRow[]>;
  /** Run `runId`'s lease row, if it has one (one row, not every run's). */
  lease(runId: string): Promise<LeaseRow | undefined>;
  /** Make a run want a host again (a message or a stop was posted to it); NOTIFY wakes listening workers. */
  wake(runId: string, client?: pg.ClientBase): Promise<void>;
  /** The connection pool (the inbox and the worker's LISTEN connection share its settings). */
  readonly pool: pg.Pool;
  /** A dedicated connection outside the pool (LISTEN must not share a pooled connection). */
  connectDedicated(): Promise<pg.Client>;
  close(): Promise<void>;
}

/** The channel workers LISTEN on: a run became runnable. */
const WAKE_CHANNEL = 'troupe_wake';

/**
 * Open the PostgreSQL store: connect, refuse what cannot be used (STORE_UNREACHABLE,
 * STORE_AUTH_FAILED, STORE_FOREIGN, STORE_SCHEMA_TOO_NEW — nothing written), then migrate (once,
 * under an advisory lock, however many workers start together).
 *
 * `store.claim(runId, { owner })` returns a lease whose `port` is the run's store for
 * `createCoordinator` / `resumeCoordinator`. The lease (owner, epoch, lease_until; TTL 15 s,
 * renewed every TTL/3, times on the database's clock) is claimed with `FOR UPDATE SKIP LOCKED`,
 * and every commit checks its epoch: a worker that stalled past its lease writes nothing
 * (`LEASE_LOST`) and stops hosting the run; a second claimer of a live lease gets `RUN_LOCKED`.
 * A commit that fails on a lost connection, a timeout or a restarting server is retried on a new
 * connection while the lease is locally valid (numbered, so a commit is never applied twice); a host
 * whose lease may have expired by its own clock stops before its next model call, tool call, read
 * or commit (see lease.ts).
 * Wakes use `LISTEN`/`NOTIFY` on a dedicated connection (not through a transaction-mode pooler),
 * with a 5 s poll as backstop. `?schema=<name>` in the URL keeps troupe in its own schema.
 * With `readOnly: true` nothing is written (no migration; an empty schema is RUN_NOT_FOUND) and
 * only `reads` and `leases` work.
 */
export async function openPostgresStore(options: PostgresStoreOptions): Promise<PostgresStore> {
  const checked = checkOptions(options);
  const schema = checked.schema;
  options = { ...options, url: checked.url };
  const pool = new (pgDriver().Pool)(poolConfig(options, schema, options.maxConnections ?? 10));
  // An idle pooled connection that drops must not crash the process; the next query reconnects.
  pool.on('error', () => undefined);
  try {
    // readOnly (status, tree, ui): check only, never migrate; its sessions are read-only too.
    await (options.readOnly ? checkReadable(pool, options, schema) : migrate(pool, options, schema));
  } catch (err) {
    await pool.end().catch(() => undefined);
    throw err;
  }
  const redactor = options.redactor ?? createRedactor();
  const channel = schema === 'public' ? WAKE_CHANNEL : `${WAKE_CHANNEL}_${schema}`;

  const statements: StatementMode = { prepare: true };
  const claimed = (rows: ClaimedRow[], lease: LeaseOptions, sentAt: SentAt) => heldLease(pool, rows[0]!, lease, redactor, sentAt, statements);

  return {
    url: describeUrl(options.url),
    schema,
    pool,
    reads: pgReads(pool),
    async claim(runId, lease) {
      const ttl = lease.ttlMs ?? 15_000;
      const sentAt = sentNow(lease);
      let rows: ClaimedRow[];
      try {
        ({ rows } = await pool.query({
          // A claim slower than the lease it takes is no claim: never wait longer (a partition).
          query_timeout: ttl,
          text: `INSERT INTO run_leases (run_id, owner, epoch, lease_until, state) VALUES ($1, $2, 1, ${DB_NOW} + $3, 'runnable')
           ON CONFLICT (run_id) DO UPDATE SET owner = excluded.owner, epoch = run_leases.epoch + 1, lease_until = excluded.lease_until, state = 'runnable'
           WHERE run_leases.owner IS NULL OR run_leases.lease_until < ${DB_NOW}
           RETURNING run_id, epoch, commit_seq`,
          values: [runId, lease.owner, ttl],
        } as pg.QueryConfig));
      } catch (err) {
        throw connectError(err, options.url);
      }
      if (rows.length === 0) throw new TroupeError('RUN_LOCKED', `run ${runId} is hosted by another worker (its lease is live)`);
      return claimed(rows, lease, sentAt);
    },
    async claimNext(lease) {
      const ttl = lease.ttlMs ?? 15_000;
      const sentAt = sentNow(lease);
      const { rows } = await pool.query<ClaimedRow>({
        query_timeout: ttl,
        text: `UPDATE run_leases SET owner = $1, epoch = epoch + 1, lease_until = ${DB_NOW} + $2, state = 'runnable', wake_at = NULL
         WHERE run_id = (
           SELECT run_id FROM run_leases
           WHERE (state = 'runnable' OR (state = 'parked' AND wake_at <= ${DB_NOW}))
             AND (owner IS NULL OR lease_until < ${DB_NOW})
           ORDER BY lease_until, run_id
           FOR UPDATE SKIP LOCKED LIMIT 1)
         RETURNING run_id, epoch, commit_seq`,
        values: [lease.owner, ttl],
      } as pg.QueryConfig);
      return rows.length === 0 ? null : claimed(rows, lease, sentAt);
    },
    leases: async () => (await pool.query<LeaseRow>('SELECT * FROM run_leases ORDER BY run_id')).rows,
    lease: async (runId) => (await pool.query<LeaseRow>('SELECT * FROM run_leases WHERE run_id = $1', [runId])).rows[0],
    async wake(runId, client) {
      const db = client ?? pool;
      await db.query("UPDATE run_leases SET state = 'runnable', wake_seq = wake_seq + 1 WHERE run_id = $1", [runId]);
      await db.query('SELECT pg_notify($1, $2)', [channel, runId]);
    },
    async connectDedicated() {
      const client = new (pgDriver().Client)(poolConfig(options, schema, 1));
      client.on('error', () => undefined);
      try {
        await client.connect();
      } catch (err) {
        throw connectError(err, options.url);
      }
      return client;
    },
    close: () => pool.end(),
  };
}

/** The NOTIFY channel of a store's schema. */
export const wakeChannel = (store: Pick<PostgresStore, 'schema'>) => (store.schema === 'public' ? WAKE_CHANNEL : `${WAKE_CHANNEL}_${store.schema}`);
