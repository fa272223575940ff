/**
 * The PostgreSQL store: the port contract every store passes, and refusals of what cannot be used
 * (unreachable server, wrong password, another application's schema, a newer schema) — typed
 * errors with nothing written.
 */
import { describe, expect, it } from 'vitest';
import { openPostgresStore } from '../../../src/store/postgres/store.js';
import { PG_SCHEMA_VERSION } from '../../../src/store/postgres/migrations.js';
import { adminQuery, freshSchema, PG_URL, pgAvailable, pgTitle } from '../../helpers/pg.js';
import { describePortContract } from './portContract.js';

const available = await pgAvailable();

describe.skipIf(!available)(pgTitle(available, 'PostgreSQL store'), () => {
  describePortContract('PostgreSQL', async () => {
    const { schema, drop } = freshSchema();
    const store = await openPostgresStore({ url: PG_URL, schema });
    const lease = await store.claim('run1', { owner: 'test', heartbeatMs: 0 });
    return {
      port: lease.port,
      close: async () => {
        await store.close();
        await drop();
      },
    };
  });

  const tablesIn = async (schema: string) =>
    (await adminQuery('SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1', [schema])).rows.map(
      (r: { table_name: string }) => r.table_name,
    );

  it('refuses an unreachable server with STORE_UNREACHABLE', async () => {
    await expect(openPostgresStore({ url: 'postgres://root@127.0.0.1:1/test', connectTimeoutMs: 1_000 })).rejects.toMatchObject({ code: 'STORE_UNREACHABLE' });
  });

  it('refuses a wrong password with STORE_AUTH_FAILED, and writes nothing', async () => {
    const { schema, drop } = freshSchema();
    const role = `troupe_pw_${schema}`;
    await adminQuery(`CREATE ROLE ${role} LOGIN PASSWORD 'right-password'`);
    // Trust auth accepts any password locally; a role that may not log in stands for a refused one.
    await adminQuery(`ALTER ROLE ${role} NOLOGIN`);
    try {
      const url = new URL(PG_URL);
      url.username = role;
      url.password = 'wrong';
      await expect(openPostgresStore({ url: url.toString(), schema })).rejects.toMatchObject({ code: 'STORE_AUTH_FAILED' });
      expect(await tablesIn(schema)).toEqual([]);
    } finally {
      await adminQuery(`DROP ROLE ${role}`);
      await drop();
    }
  });

  it("refuses a schema holding another application's tables with STORE_FOREIGN, untouched", async () => {
    const { schema, drop } = freshSchema();
    await adminQuery(`CREATE SCHEMA ${schema}; CREATE TABLE ${schema}.invoices (id int); INSERT INTO ${schema}.invoices VALUES (1)`);
    try {
      await expect(openPostgresStore({ url: PG_URL, schema })).rejects.toMatchObject({ code: 'STORE_FOREIGN' });
      expect(await tablesIn(schema)).toEqual(['invoices']);
    } finally {
      await drop();
    }
  });

  it('refuses a newer schema with STORE_SCHEMA_TOO_NEW, untouched; opens its own version again', async () => {
    const { schema, drop } = freshSchema();
    try {
      const first = await openPostgresStore({ url: PG_URL, schema });
      await first.close();
      const before = await tablesIn(schema);
      await adminQuery(`UPDATE ${schema}.troupe_schema SET version = $1`, [PG_SCHEMA_VERSION + 1]);
      await expect(openPostgresStore({ url: PG_URL, schema })).rejects.toMatchObject({ code: 'STORE_SCHEMA_TOO_NEW' });
      expect(await tablesIn(schema)).toEqual(before);
      expect((await adminQuery(`SELECT version FROM ${schema}.troupe_schema`)).rows).toEqual([{ version: PG_SCHEMA_VERSION + 1 }]);
      await adminQuery(`UPDATE ${schema}.troupe_schema SET version = $1`, [PG_SCHEMA_VERSION]);
      const again = await openPostgresStore({ url: PG_URL, schema });
      await again.close();
    } finally {
      await drop();
    }
  });

  it('migrates once when workers open a fresh schema together', async () => {
    const { schema, drop } = freshSchema();
    try {
      const stores = await Promise.all([1, 2, 3, 4].map(() => openPostgresStore({ url: PG_URL, schema })));
      await Promise.all(stores.map((s) => s.close()));
      expect((await adminQuery(`SELECT version FROM ${schema}.troupe_schema`)).rows).toEqual([{ version: PG_SCHEMA_VERSION }]);
    } finally {
      await drop();
    }
  });

  it('readOnly never writes: an empty or missing schema is RUN_NOT_FOUND and stays so; an older one is read unmigrated; its sessions refuse writes', async () => {
    const empty = freshSchema();
    const missing = freshSchema();
    const older = freshSchema();
    try {
      await adminQuery(`CREATE SCHEMA ${empty.schema}`);
      for (const schema of [empty.schema, missing.schema]) {
        await expect(openPostgresStore({ url: PG_URL, schema, readOnly: true })).rejects.toMatchObject({
          code: 'RUN_NOT_FOUND',
          message: expect.stringContaining('holds no troupe tables'),
        });
      }
      expect(await tablesIn(empty.schema)).toEqual([]);
      expect((await adminQuery('SELECT 1 FROM information_schema.schemata WHERE schema_name = $1', [missing.schema])).rowCount).toBe(0);
      // Foreign and newer schemas: the same refusals as a writer's.
      await adminQuery(`CREATE TABLE ${empty.schema}.invoices (id int)`);
      await expect(openPostgresStore({ url: PG_URL, schema: empty.schema, readOnly: true })).rejects.toMatchObject({ code: 'STORE_FOREIGN' });

      const writer = await openPostgresStore({ url: PG_URL, schema: older.schema });
      await writer.close();
      await adminQuery(`UPDATE ${older.schema}.troupe_schema SET version = 1`);
      const reader = await openPostgresStore({ url: PG_URL, schema: older.schema, readOnly: true });
      try {
        expect(await reader.reads.listRuns()).toEqual([]);
        expect(await reader.leases()).toEqual([]);
        await expect(reader.pool.query('CREATE TABLE sneaky (id int)')).rejects.toMatchObject({ code: '25006' });
        await expect(reader.claim('run1', { owner: 'reader', heartbeatMs: 0 })).rejects.toThrow(/read-only transaction/);
      } finally {
        await reader.close();
      }
      expect((await adminQuery(`SELECT version FROM ${older.schema}.troupe_schema`)).rows).toEqual([{ version: 1 }]);
      await adminQuery(`UPDATE ${older.schema}.troupe_schema SET version = $1`, [PG_SCHEMA_VERSION + 1]);
      await expect(openPostgresStore({ url: PG_URL, schema: older.schema, readOnly: true })).rejects.toMatchObject({ code: 'STORE_SCHEMA_TOO_NEW' });
    } finally {
      await Promise.all([empty.drop(), missing.drop(), older.drop()]);
    }
  });

  it('refuses an invalid URL or schema name with CONFIG_INVALID', async () => {
    await expect(openPostgresStore({ url: 'mysql://x' })).rejects.toMatchObject({ code: 'CONFIG_INVALID' });
    await expect(openPostgresStore({ url: PG_URL, schema: 'x; DROP TABLE y' })).rejects.toMatchObject({ code: 'CONFIG_INVALID' });
  });
});
