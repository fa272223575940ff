/**
 * The inbox's pause, resume and stop-without-subtree requests came with schema 4 (PostgreSQL 2):
 * this troupe migrates an older file and reads it; a file of schema 3 (driven by an older troupe)
 * is never posted a request it would misread; the kinds are part of the schema; a file this troupe
 * wrote is newer than an older troupe accepts.
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { inboxSince, postToInbox } from '../../../src/store/inbox.js';
import { MIGRATIONS, SCHEMA_VERSION } from '../../../src/store/migrations.js';
import { PG_MIGRATIONS } from '../../../src/store/postgres/migrations.js';
import { openPostgresStore } from '../../../src/store/postgres/store.js';
import { openStore } from '../../../src/store/sqliteStore.js';
import { workdir } from '../../helpers/cli.js';
import { adminQuery, freshSchema, PG_URL, pgAvailable, pgTitle, schemaAt } from '../../helpers/pg.js';

/** A file as a troupe of schema `version` left it, with one run. */
function fileAt(version: number): string {
  const path = join(workdir(), `v${version}.db`);
  const db = new Database(path);
  for (const m of MIGRATIONS.filter((x) => x.version <= version)) db.exec(m.sql);
  db.pragma(`user_version = ${version}`);
  db.prepare('INSERT INTO runs (id, created_at, interactive, root_id, budget) VALUES (?, ?, ?, ?, ?)').run(
    'run_old',
    1,
    0,
    null,
    JSON.stringify({ limitUsd: null, budgetStopped: false, reserveStopped: false, paused: false, resumeEpoch: 0, reserveNoticeClaimed: false }),
  );
  db.close();
  return path;
}

const inboxRows = (path: string) => {
  const db = new Database(path, { readonly: true });
  try {
    return db.prepare('SELECT kind FROM inbox').pluck().all();
  } finally {
    db.close();
  }
};

describe('the inbox kinds and the schema version', () => {
  it('a file of schema 3 takes send and stop, but not pause, resume or a stop without the subtree: nothing posted', () => {
    const path = fileAt(3);
    expect(postToInbox(path, { runId: 'run_old', kind: 'send', payload: { agent: 'lead', content: 'hi' }, at: 1 })).toBeGreaterThan(0);
    expect(postToInbox(path, { runId: 'run_old', kind: 'stop', payload: { agent: 'lead', cascade: true }, at: 1 })).toBeGreaterThan(0);
    for (const [kind, payload] of [
      ['pause', {}],
      ['resume', {}],
      ['stop', { agent: 'lead', cascade: false }],
    ] as const) {
      expect(() => postToInbox(path, { runId: 'run_old', kind, payload, at: 1 })).toThrow(expect.objectContaining({ code: 'RUN_NOT_LIVE' }));
    }
    expect(inboxRows(path)).toEqual(['send', 'stop']);
  });

  it('this troupe migrates a file of schema 3 to the current version, keeps its rows, and then takes every kind', () => {
    const path = fileAt(3);
    postToInbox(path, { runId: 'run_old', kind: 'send', payload: { agent: 'lead', content: 'hi' }, at: 1 });
    const store = openStore({ path });
    expect(store.listRuns().map((r) => r.id)).toEqual(['run_old']);
    expect(store.openInbox('run_old').map((r) => r.kind)).toEqual(['send']);
    store.close();
    const db = new Database(path, { readonly: true });
    expect(db.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    db.close();
    postToInbox(path, { runId: 'run_old', kind: 'pause', payload: {}, at: 2 });
    expect(inboxRows(path)).toEqual(['send', 'pause']);
  });

  it('the kinds are part of the schema: an unknown kind is refused by the file itself', () => {
    const path = fileAt(SCHEMA_VERSION);
    const db = new Database(path);
    try {
      expect(() => db.prepare("INSERT INTO inbox (run_id, kind, payload, created_at) VALUES ('run_old', 'restart', '{}', 1)").run()).toThrow(/inbox kind/);
    } finally {
      db.close();
    }
  });

  it('every kind a poster sends is one the current schema takes; a file written now is refused by a troupe of schema 3', () => {
    expect(Math.max(inboxSince('pause', {}), inboxSince('resume', {}), inboxSince('stop', { cascade: false }))).toBeLessThanOrEqual(SCHEMA_VERSION);
    expect(inboxSince('pause', {})).toBeGreaterThan(3);
    // An older troupe's rule (openFile.ts): a file of a version above the one it knows is refused.
    expect(SCHEMA_VERSION).toBeGreaterThan(3);
  });
});

const available = await pgAvailable();

describe.skipIf(!available)(pgTitle(available, 'the PostgreSQL inbox kinds'), () => {
  it('a schema of version 1 is migrated; then the kinds are checked by the database', async () => {
    const { schema, drop } = freshSchema();
    try {
      await schemaAt(schema, 1);
      await adminQuery(`INSERT INTO ${schema}.inbox (run_id, kind, payload, created_at) VALUES ('r', 'send', '{}', 1)`);
      const store = await openPostgresStore({ url: PG_URL, schema });
      await store.close();
      expect((await adminQuery(`SELECT version FROM ${schema}.troupe_schema`)).rows).toEqual([{ version: PG_MIGRATIONS.at(-1)!.version }]);
      expect((await adminQuery(`SELECT kind FROM ${schema}.inbox`)).rows).toEqual([{ kind: 'send' }]);
      await adminQuery(`INSERT INTO ${schema}.inbox (run_id, kind, payload, created_at) VALUES ('r', 'pause', '{}', 1)`);
      await expect(adminQuery(`INSERT INTO ${schema}.inbox (run_id, kind, payload, created_at) VALUES ('r', 'restart', '{}', 1)`)).rejects.toThrow(
        /inbox_kind/,
      );
    } finally {
      await drop();
    }
  });
});
