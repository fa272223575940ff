/**
 * Each agent's last streamed status came with schema 12 (PostgreSQL 17) as a table kept by the
 * stream's append (stream_status), so a resume reads one row per agent instead of the stream.
 * A database of the schema before, holding stream rows, is migrated with the table backfilled: its
 * statuses read the same as the scan of the stream read them; then the append keeps them.
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../../../src/store/migrations.js';
import { PG_MIGRATIONS } from '../../../src/store/postgres/migrations.js';
import { openPostgresStore } from '../../../src/store/postgres/store.js';
import { openStore } from '../../../src/store/sqliteStore.js';
import type { StreamRow } from '../../../src/store/types.js';
import { workdir } from '../../helpers/cli.js';
import { adminQuery, freshSchema, PG_URL, pgAvailable, pgTitle, schemaAt } from '../../helpers/pg.js';

const BUDGET = JSON.stringify({ limitUsd: null, budgetStopped: false, reserveStopped: false, paused: false, resumeEpoch: 0, reserveNoticeClaimed: false });

const status = (seq: number, agentId: string, from: string | null, to: string): [number, string | null, string, string] => [
  seq,
  agentId,
  'agent.status',
  JSON.stringify({ name: agentId, from, to }),
];

/**
 * Two runs' streams as a troupe of the schema before left them: agents whose statuses changed
 * several times (the last by seq must win, whatever order the rows were written in), rows of other
 * types and of no agent between them, and a run whose agent shares an id with none of the other's.
 */
const STREAMS: Record<string, [seq: number, agentId: string | null, type: string, data: string][]> = {
  run_a: [
    status(1, 'lead', null, 'running'),
    status(2, 'w1', null, 'running'),
    status(4, 'w1', 'running', 'waiting'),
    [5, 'w1', 'agent.said', JSON.stringify({ name: 'w1', text: '"to":"completed"' })],
    status(3, 'lead', 'running', 'waiting'),
    [6, null, 'run.deadlock', JSON.stringify({ waits: [] })],
    status(7, 'w2', null, 'running'),
    status(8, 'w1', 'waiting', 'completed'),
    status(9, 'lead', 'waiting', 'running'),
    status(10, 'lead', 'running', 'waiting'),
  ],
  run_b: [status(1, 'x', null, 'running'), status(2, 'x', 'running', 'failed')],
};

const EXPECTED_A = new Map([
  ['lead', 'waiting'],
  ['w1', 'completed'],
  ['w2', 'running'],
]);

/** A file as a troupe of schema `version` left it, holding STREAMS. */
function fileAt(version: number): string {
  const path = join(workdir(), `v${version}.db`);
  const db = new Database(path);
  for (const m of MIGRATIONS.filter((x) => x.version <= version)) db.exec(m.sql);
  db.pragma(`user_version = ${version}`);
  const insert = db.prepare('INSERT INTO stream (run_id, seq, agent_id, type, data, at) VALUES (?, ?, ?, ?, ?, ?)');
  for (const [runId, rows] of Object.entries(STREAMS)) {
    db.prepare('INSERT INTO runs (id, created_at, interactive, root_id, budget) VALUES (?, ?, ?, ?, ?)').run(runId, 1, 0, null, BUDGET);
    for (const [seq, agentId, type, data] of rows) insert.run(runId, seq, agentId, type, data, seq);
  }
  db.close();
  return path;
}

const next = (runId: string, seq: number, agentId: string, from: string, to: string): StreamRow => ({
  runId,
  seq,
  agentId,
  type: 'agent.status',
  data: { name: agentId, from, to },
  at: seq,
});

describe('stream_status on SQLite: schema 11 -> 12', () => {
  it('a file of schema 11 reads the same statuses after the migration as its stream showed before it; then the append keeps them', () => {
    const path = fileAt(11);
    // Before: a reader of the unmigrated file scans the stream (what every resume did).
    const reader = openStore({ path, readonly: true });
    const before = { a: reader.streamedStatuses('run_a'), b: reader.streamedStatuses('run_b') };
    reader.close();
    expect(before.a).toEqual(EXPECTED_A);
    expect(before.b).toEqual(new Map([['x', 'failed']]));

    const store = openStore({ path });
    expect(store.streamedStatuses('run_a')).toEqual(before.a);
    expect(store.streamedStatuses('run_b')).toEqual(before.b);
    expect(store.streamedStatuses('run_c')).toEqual(new Map());
    // After the migration, a resume's status change and another one: the last is read.
    store.appendStream([next('run_a', 11, 'w2', 'running', 'waiting'), next('run_a', 12, 'lead', 'waiting', 'running')]);
    store.appendStream([next('run_a', 13, 'w2', 'waiting', 'completed')]);
    expect(store.streamedStatuses('run_a')).toEqual(
      new Map([
        ['lead', 'running'],
        ['w1', 'completed'],
        ['w2', 'completed'],
      ]),
    );
    expect(store.streamedStatuses('run_b')).toEqual(before.b);
    store.close();
    // And again in a fresh process's open: what the table holds, not a cache.
    const again = openStore({ path });
    expect(again.streamedStatuses('run_a').get('w2')).toBe('completed');
    again.close();
  });

  it('a reader of a schema-11 file names the agents its stream does not show, from a scan of the stream (no stream_status to join)', () => {
    const path = fileAt(11);
    const db = new Database(path);
    const agent = db.prepare(
      'INSERT INTO agents (id, run_id, name, depth, task, skills, status, notice_claimed, stint, state, created_at, updated_at, boot) VALUES (?, ?, ?, 0, ?, ?, ?, 0, 0, ?, 1, 1, 1)',
    );
    // lead and w1 as their streams show them; w2 moved on without its row; w3 never streamed.
    for (const [id, status] of [
      ['lead', 'waiting'],
      ['w1', 'completed'],
      ['w2', 'waiting'],
      ['w3', 'running'],
    ]) {
      agent.run(id, 'run_a', id, 't', '[]', status, '{}');
    }
    db.close();
    const reader = openStore({ path, readonly: true });
    expect(reader.unshownStatuses('run_a')).toEqual(
      new Map([
        ['w2', 'running'],
        ['w3', null],
      ]),
    );
    expect(reader.unshownStatuses('run_c')).toBeNull();
    reader.close();
  });

  it("a status row whose data is not JSON (the open does not parse the stream's data) does not stop the migration: that agent reads as no status", () => {
    const path = fileAt(11);
    const db = new Database(path);
    db.prepare("UPDATE stream SET data = '{' WHERE run_id = 'run_a' AND seq = 10").run();
    db.close();
    const store = openStore({ path });
    const statuses = store.streamedStatuses('run_a');
    // SQL null, read as the text "null" (as the scan read a status row without `to`): no status is.
    expect(statuses.get('lead')).toBe('null');
    expect(statuses.get('w1')).toBe('completed');
    store.close();
  });
});

const available = await pgAvailable();

describe.skipIf(!available)(pgTitle(available, 'stream_status on PostgreSQL: schema 16 -> 17'), () => {
  it('a schema of version 16 reads the same statuses after the migration as its stream showed before it; then the append keeps them', async () => {
    const { schema, drop } = freshSchema();
    try {
      await schemaAt(schema, 16);
      for (const [runId, rows] of Object.entries(STREAMS)) {
        for (const [seq, agentId, type, data] of rows) {
          await adminQuery(`INSERT INTO ${schema}.stream (run_id, seq, agent_id, type, data, at) VALUES ($1, $2, $3, $4, $5, $2)`, [
            runId,
            seq,
            agentId,
            type,
            data,
          ]);
        }
      }
      // Before: the scan of the stream every resume ran on schema 16.
      const scan = async (runId: string) =>
        new Map(
          (
            await adminQuery(
              `SELECT DISTINCT ON (agent_id) agent_id, coalesce(data::jsonb->>'to', '') AS status FROM ${schema}.stream
               WHERE run_id = $1 AND type = 'agent.status' AND agent_id IS NOT NULL ORDER BY agent_id, seq DESC`,
              [runId],
            )
          ).rows.map((r: { agent_id: string; status: string }) => [r.agent_id, r.status]),
        );
      const before = { a: await scan('run_a'), b: await scan('run_b') };
      expect(before.a).toEqual(EXPECTED_A);

      const store = await openPostgresStore({ url: PG_URL, schema });
      try {
        expect((await adminQuery(`SELECT version FROM ${schema}.troupe_schema`)).rows).toEqual([{ version: PG_MIGRATIONS.at(-1)!.version }]);
        const lease = await store.claim('run_a', { owner: 'test', heartbeatMs: 0 });
        expect(await lease.port.streamedStatuses('run_a')).toEqual(before.a);
        expect(await lease.port.streamedStatuses('run_b')).toEqual(before.b);
        await lease.port.commit([
          { op: 'appendStream', rows: [next('run_a', 11, 'w2', 'running', 'waiting'), next('run_a', 12, 'lead', 'waiting', 'running')] },
        ]);
        await lease.port.commit([{ op: 'appendStream', rows: [next('run_a', 13, 'w2', 'waiting', 'completed')] }]);
        expect(await lease.port.streamedStatuses('run_a')).toEqual(
          new Map([
            ['lead', 'running'],
            ['w1', 'completed'],
            ['w2', 'completed'],
          ]),
        );
        expect(await lease.port.streamedStatuses('run_b')).toEqual(before.b);
      } finally {
        await store.close();
      }
    } finally {
      await drop();
    }
  });

  it('a status row whose data is not JSON does not stop the migration: that agent is left out (announced again)', async () => {
    const { schema, drop } = freshSchema();
    try {
      await schemaAt(schema, 16);
      for (const [seq, agentId, type, data] of STREAMS.run_a!) {
        await adminQuery(`INSERT INTO ${schema}.stream (run_id, seq, agent_id, type, data, at) VALUES ('run_a', $1, $2, $3, $4, $1)`, [
          seq,
          agentId,
          type,
          seq === 10 ? '{' : data,
        ]);
      }
      const store = await openPostgresStore({ url: PG_URL, schema });
      try {
        const lease = await store.claim('run_a', { owner: 'test', heartbeatMs: 0 });
        expect(await lease.port.streamedStatuses('run_a')).toEqual(
          new Map([
            ['w1', 'completed'],
            ['w2', 'running'],
          ]),
        );
      } finally {
        await store.close();
      }
    } finally {
      await drop();
    }
  });
});
