/**
 * Connecting to PostgreSQL and opening the troupe schema: refuse what cannot be used before
 * anything is written. An unreachable server, a rejected login, a schema that holds another
 * application's tables, or a schema written by a newer troupe are typed errors, and the database is
 * left exactly as it was. Only then are pending migrations applied, in one transaction under an
 * advisory lock (so workers opening a fresh database together migrate it once).
 * @module
 */
import type pg from 'pg';
import { TroupeError } from '../../errors.js';
import { pgDriver } from './driver.js';
import { PG_MIGRATIONS, PG_SCHEMA_VERSION } from './migrations.js';

/** BIGINT columns hold times and counters well inside 2^53: read them as numbers. */
const parseInt8 = (value: string) => Number(value);
const PG_TYPES = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === 20 ? parseInt8 : pgDriver().types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
};

const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

export interface PgConnectOptions {
  /** `postgres://user:password@host:port/database`, optionally with `?schema=<name>`. */
  url: string;
  /** The PostgreSQL schema (namespace) troupe's tables live in; `public` by default. */
  schema?: string;
  /** Connections in the pool (default 10). */
  maxConnections?: number;
  connectTimeoutMs?: number;
  /**
   * The server ends a transaction left open this long (default 30 s): a worker stopped mid-commit
   * (SIGSTOP, a long GC pause) must not hold its run's lease row locked against the next claimer.
   */
  idleInTransactionTimeoutMs?: number;
  /**
   * Open for reading only (the CLI's `status`, `tree` and `ui`): nothing is ever written — no
   * migration, no schema created, and every session is `default_transaction_read_only`. An empty
   * (or missing) schema is RUN_NOT_FOUND; a schema of an older troupe is read as it is.
   */
  readOnly?: boolean;
}

/** Where a URL points, with the password left out (for messages). */
export function describeUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.username ? `${decodeURIComponent(u.username)}@` : ''}${u.host}${u.pathname}`;
  } catch {
    return '(an invalid URL)';
  }
}

/** The URL without troupe's own `schema` parameter, and that parameter. */
function splitSchema(url: string): { url: string; schema: string | undefined } {
  try {
    const u = new URL(url);
    const schema = u.searchParams.get('schema') ?? undefined;
    if (schema === undefined) return { url, schema };
    u.searchParams.delete('schema');
    return { url: u.toString(), schema };
  } catch {
    return { url, schema: undefined };
  }
}

/** Checked options: the schema (option, else the URL's `?schema=`, else `public`) and the URL to connect to. */
export function checkOptions(options: PgConnectOptions): { schema: string; url: string } {
  if (typeof options?.url !== 'string' || !/^postgres(ql)?:\/\//.test(options.url)) {
    throw new TroupeError(
      'CONFIG_INVALID',
      `Expected url to be a postgres://… URL, got ${JSON.stringify(options?.url === undefined ? undefined : describeUrl(String(options.url)))}`,
    );
  }
  const split = splitSchema(options.url);
  const schema = options.schema ?? split.schema ?? 'public';
  if (!SCHEMA_NAME.test(schema)) {
    throw new TroupeError('CONFIG_INVALID', `Expected schema to be a lower-case identifier, got ${JSON.stringify(schema)}`);
  }
  return { schema, url: split.url };
}

export function poolConfig(options: PgConnectOptions, schema: string, max: number): pg.PoolConfig {
  return {
    connectionString: options.url,
    max,
    connectionTimeoutMillis: options.connectTimeoutMs ?? 5_000,
    // Every statement is unqualified: the schema is the connection's search path.
    options: `-c search_path=${schema} -c idle_in_transaction_session_timeout=${Math.max(1, Math.floor(options.idleInTransactionTimeoutMs ?? 30_000))}${options.readOnly ? ' -c default_transaction_read_only=on' : ''}`,
    types: PG_TYPES,
  };
}

const sqlState = (err: unknown) => (typeof (err as { code?: unknown })?.code === 'string' ? (err as { code: string }).code : '');

/** A connection-level failure as a typed error: unreachable, login refused, no such database. */
export function connectError(err: unknown, url: string): TroupeError {
  const where = describeUrl(url);
  const code = sqlState(err);
  const message = (err as Error)?.message ?? String(err);
  if (code === '28P01' || code === '28000') {
    return new TroupeError('STORE_AUTH_FAILED', `PostgreSQL at ${where} refused the login: ${message}`, { cause: err });
  }
  if (code === '3D000') return new TroupeError('STORE_OPEN_FAILED', `PostgreSQL at ${where}: ${message}`, { cause: err });
  // Not an SQLSTATE (ECONNREFUSED, ETIMEDOUT, a connect timeout): the server was never reached.
  if (!/^[0-9A-Z]{5}$/.test(code) || code.startsWith('08') || code === '57P03' || code === '57P01') {
    return new TroupeError('STORE_UNREACHABLE', `PostgreSQL at ${where} cannot be reached: ${message}`, { cause: err });
  }
  return new TroupeError('STORE_OPEN_FAILED', `PostgreSQL at ${where}: ${message}`, { cause: err });
}

/**
 * An error from a commit or read once connected: a lost connection is indeterminate (STORE_IO: the
 * commit may or may not have been applied; the caller stops hosting and resumes from what
 * committed); a damaged page is STORE_CORRUPT; a unique violation of a registration is AGENT_EXISTS.
 */
export function operationError(err: unknown, what: string): unknown {
  if (err instanceof TroupeError) return err;
  const code = sqlState(err);
  const message = (err as Error)?.message ?? String(err);
  if (code === '23505') return new TroupeError('AGENT_EXISTS', `${what}: ${message}`, { cause: err });
  if (code === '23503') return new TroupeError('AGENT_NOT_FOUND', `${what}: ${message}`, { cause: err });
  if (code === 'XX001' || code === 'XX002') return new TroupeError('STORE_CORRUPT', `${what}: the database is damaged (${code}): ${message}`, { cause: err });
  return new TroupeError('STORE_IO', `${what} failed${code ? ` (${code})` : ''}: ${message}`, { cause: err });
}

/**
 * Whether repeating a failed operation on a new connection may succeed: the connection was lost or
 * timed out (no SQLSTATE, class 08), the server is shutting down, restarting or out of resources
 * (57, 53), a lock or serialization conflict (40, 55P03), or the server ended an idle transaction
 * (25P03). A constraint, data or schema error would fail the same way again.
 */
export function transientStoreError(err: unknown): boolean {
  if (err instanceof TroupeError) {
    if (err.code !== 'STORE_IO' && err.code !== 'STORE_UNREACHABLE') return false;
    if (err.cause === undefined) return false;
    err = err.cause;
  }
  const code = sqlState(err);
  if (!/^[0-9A-Z]{5}$/.test(code)) return true;
  return /^(08|53|57|40)/.test(code) || code === '25P03' || code === '55P03';
}

/** The schema's troupe version: 0 when empty; throws when it holds another application's tables or a newer troupe's. */
async function schemaVersion(client: pg.PoolClient, schema: string, where: string): Promise<number> {
  const { rows } = await client.query<{ table_name: string }>('SELECT table_name FROM information_schema.tables WHERE table_schema = $1', [schema]);
  const tables = rows.map((r) => r.table_name);
  if (tables.length === 0) return 0;
  if (!tables.includes('troupe_schema')) {
    throw new TroupeError(
      'STORE_FOREIGN',
      `Schema ${schema} of ${where} holds tables of another application (${tables.slice(0, 5).join(', ')}); it is left untouched. Give troupe its own database or schema.`,
    );
  }
  const version = (await client.query<{ version: number }>('SELECT version FROM troupe_schema')).rows[0]?.version ?? 0;
  if (version > PG_SCHEMA_VERSION) {
    throw new TroupeError(
      'STORE_SCHEMA_TOO_NEW',
      `Schema ${schema} of ${where} has troupe schema version ${version}; this troupe knows up to ${PG_SCHEMA_VERSION}. Upgrade troupe; the database is left untouched.`,
    );
  }
  return version;
}

/**
 * Check the schema for a reader, writing nothing: STORE_FOREIGN and STORE_SCHEMA_TOO_NEW as for a
 * writer, RUN_NOT_FOUND when it holds no troupe tables (or does not exist). Migrating is left to
 * the next writer (a worker, run, demo, serve): an older schema is read as it is.
 */
export async function checkReadable(pool: pg.Pool, options: PgConnectOptions, schema: string): Promise<void> {
  await onSchema(pool, options, schema, async (_client, version, where) => {
    if (version === 0) throw new TroupeError('RUN_NOT_FOUND', `No troupe database at ${where} (schema ${schema} holds no troupe tables; nothing was created)`);
  });
}

/**
 * `work` on a connection of the pool, given the schema's troupe version (checked: foreign tables
 * and a newer troupe's schema are refused first); a driver error is a typed connect error.
 */
async function onSchema(
  pool: pg.Pool,
  options: PgConnectOptions,
  schema: string,
  work: (client: pg.PoolClient, version: number, where: string) => Promise<void>,
): Promise<void> {
  const where = describeUrl(options.url);
  let client: pg.PoolClient;
  try {
    client = await pool.connect();
  } catch (err) {
    throw connectError(err, options.url);
  }
  let broken: Error | undefined;
  const onError = (err: Error) => (broken = err);
  client.on('error', onError);
  try {
    await work(client, await schemaVersion(client, schema, where), where);
  } catch (err) {
    if (err instanceof TroupeError) throw err;
    throw connectError(err, options.url);
  } finally {
    client.off('error', onError);
    client.release(broken);
  }
}

/** Check the schema and apply pending migrations (nothing is written unless every check passed). */
export async function migrate(pool: pg.Pool, options: PgConnectOptions, schema: string): Promise<void> {
  await onSchema(pool, options, schema, async (client, version, where) => {
    if (version === PG_SCHEMA_VERSION) return;
    await client.query('BEGIN');
    try {
      // One migrator at a time; the version is read again under the lock.
      await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`troupe.migrate.${schema}`]);
      await client.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
      const current = await schemaVersion(client, schema, where);
      for (const m of PG_MIGRATIONS) if (m.version > current) await client.query(m.sql);
      await client.query('INSERT INTO troupe_schema (only_row, version) VALUES (TRUE, $1) ON CONFLICT (only_row) DO UPDATE SET version = excluded.version', [
        PG_SCHEMA_VERSION,
      ]);
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    }
  });
}
