/**
 * PostgreSQL for tests: `TROUPE_PG_URL` names the server (CI sets it, with TROUPE_REQUIRE_PG=1).
 * Without a reachable server the PostgreSQL suites skip, under one clear line, unless
 * TROUPE_REQUIRE_PG=1, when they fail. Each test gets a fresh schema, dropped afterwards, so test
 * files running in parallel never see each other's rows.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll } from 'vitest';
import { PG_MIGRATIONS } from '../../src/store/postgres/migrations.js';
import { openPostgresStore, type PostgresStore } from '../../src/store/postgres/store.js';

export const PG_URL = process.env.TROUPE_PG_URL ?? 'postgres://root@127.0.0.1:5432/test';
const REQUIRED = process.env.TROUPE_REQUIRE_PG === '1';

/** Whether the server answers; throws under TROUPE_REQUIRE_PG=1 when it does not. */
export async function pgAvailable(): Promise<boolean> {
  const client = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 2_000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch (err) {
    if (REQUIRED) throw new Error(`TROUPE_REQUIRE_PG=1 but PostgreSQL at ${PG_URL} cannot be reached: ${(err as Error).message}`, { cause: err });
    process.stderr.write(`PostgreSQL suites skipped: no server at ${PG_URL} (set TROUPE_PG_URL, or TROUPE_REQUIRE_PG=1 to fail instead)\n`);
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** The title of a suite: says plainly why it is skipped. */
export const pgTitle = (available: boolean, name: string) => (available ? name : `SKIPPED (no PostgreSQL at ${PG_URL}; set TROUPE_PG_URL): ${name}`);

/** A fresh schema name, and how to drop it. */
export function freshSchema(): { schema: string; drop: () => Promise<void> } {
  const schema = `t_${randomBytes(6).toString('hex')}`;
  return {
    schema,
    drop: async () => {
      const client = new pg.Client({ connectionString: PG_URL });
      client.on('error', () => undefined);
      await client.connect();
      try {
        await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      } finally {
        await client.end();
      }
    },
  };
}

/** Run SQL as an administrator of the test database (arranging bad input). */
export async function adminQuery(sql: string, params: unknown[] = []): Promise<pg.QueryResult> {
  const client = new pg.Client({ connectionString: PG_URL });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return await client.query(sql, params);
  } finally {
    await client.end();
  }
}

/** Create `schema` as a troupe of schema `version` left it: its migrations up to that one, and its version row. */
export async function schemaAt(schema: string, version: number): Promise<void> {
  const older = PG_MIGRATIONS.filter((m) => m.version <= version);
  if (older.at(-1)?.version !== version) throw new Error(`there is no PostgreSQL migration ${version}`);
  await adminQuery(
    `CREATE SCHEMA ${schema}; SET search_path TO ${schema}; ${older.map((m) => m.sql).join(';\n')}; INSERT INTO ${schema}.troupe_schema (only_row, version) VALUES (TRUE, ${version})`,
  );
}

/**
 * Two stores on one fresh schema, as two hosts of one cluster see it: opened before the suite
 * (handed to `opened`), closed after it, and the schema dropped.
 */
export function twoHostsOnOneSchema(opened: (a: PostgresStore, b: PostgresStore) => void): { schema: string } {
  const { schema, drop } = freshSchema();
  let a: PostgresStore | undefined;
  let b: PostgresStore | undefined;
  beforeAll(async () => {
    a = await openPostgresStore({ url: PG_URL, schema });
    b = await openPostgresStore({ url: PG_URL, schema });
    opened(a, b);
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await drop();
  });
  return { schema };
}
