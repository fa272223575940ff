/**
 * Fewer pages per commit (SQLite schema 13, PostgreSQL 18): the index `events_by_type` holds only
 * the types read by type through it (types.ts BY_TYPE_EVENTS), not the journal, call-log and
 * tool.call rows every turn writes; the in-doubt ledger's started calls are read by the primary
 * key's agent prefix, without an index of their own. Reads return what they returned before.
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { APPROVAL_EVENT } from '../../../src/host/async/approvals.js';
import { NOTE_EVENT } from '../../../src/notes/notes.js';
import { MIGRATIONS, SCHEMA_VERSION } from '../../../src/store/migrations.js';
import { openPostgresStore } from '../../../src/store/postgres/store.js';
import { prepareStatements } from '../../../src/store/sqliteStatements.js';
import { openStore } from '../../../src/store/sqliteStore.js';
import { BY_TYPE_EVENTS, COMMIT_EVENT, CALL_EVENT, type RunRow } from '../../../src/store/types.js';
import { STINT_EVENT } from '../../../src/trace/attributes.js';
import { workdir } from '../../helpers/cli.js';
import { adminQuery, freshSchema, PG_URL, pgAvailable, pgTitle, schemaAt } from '../../helpers/pg.js';

const BUDGET = { limitUsd: null, budgetStopped: false, reserveStopped: false, paused: false, resumeEpoch: 0, reserveNoticeClaimed: false };
const RUN: RunRow = { id: 'run_a', createdAt: 1, interactive: false, rootId: null, budget: BUDGET };

/** A run's events of both kinds, in order: what a turn writes, and the rare types read by type. */
const EVENTS: [type: string, data: object][] = [
  ['cli.run', { budget: {} }],
  [CALL_EVENT, { turn: 1 }],
  ['tool.call', { tool: 'work' }],
  [COMMIT_EVENT, { ops: [], v: 3 }],
  [APPROVAL_EVENT, { id: 'ap1', state: 'pending' }],
  [CALL_EVENT, { turn: 2 }],
  [COMMIT_EVENT, { ops: [], v: 3 }],
  [APPROVAL_EVENT, { id: 'ap1', state: 'approved' }],
  ['review.note', { title: 'n' }],
];
const TYPES = [...new Set(EVENTS.map(([type]) => type)), 'never.written'];

/** The types an index's SQL lists in its predicate (SQLite: `type IN ('a', …)`; PostgreSQL: `type = ANY (ARRAY['a'::text, …])`). */
const predicateTypes = (sql: string) => [...(sql.split(/ WHERE /i)[1] ?? '').matchAll(/'([^']+)'/g)].map((m) => m[1]).sort();

describe('the by-type index and the ledger on SQLite', () => {
  it('the partial index lists exactly BY_TYPE_EVENTS, which holds every type the code reads by type through it', () => {
    const db = new Database(':memory:');
    for (const m of MIGRATIONS) db.exec(m.sql);
    const sql = (db.prepare("SELECT sql FROM sqlite_master WHERE name = 'events_by_type'").get() as { sql: string }).sql;
    expect(predicateTypes(sql)).toEqual([...BY_TYPE_EVENTS].sort());
    for (const type of [APPROVAL_EVENT, STINT_EVENT, NOTE_EVENT, 'cli.run', 'review.turn', 'fork.origin']) expect(BY_TYPE_EVENTS).toContain(type);
    expect(db.prepare("SELECT name FROM sqlite_master WHERE name = 'tool_calls_started'").all()).toEqual([]);
    // The planner uses the partial index only where the query names its predicate.
    const q = prepareStatements(db);
    const plan = (name: keyof typeof q, ...args: unknown[]) =>
      (db.prepare(`EXPLAIN QUERY PLAN ${q[name].source}`).all(...args) as { detail: string }[]).map((r) => r.detail).join('; ');
    expect(plan('eventsByType', 'run_a', APPROVAL_EVENT)).toContain('USING INDEX events_by_type');
    expect(plan('eventsOf', 'run_a', COMMIT_EVENT)).toContain('USING INDEX events_by_run');
    expect(plan('startedToolCalls', 'a')).toContain('USING PRIMARY KEY (agent_id=?)');
    db.close();
  });

  it("a turn's events leave the by-type index as it was, and every type reads back in order", () => {
    const path = join(workdir(), 'pages.db');
    const store = openStore({ path, synchronous: 'NORMAL' });
    store.insertRun(RUN);
    for (let i = 0; i < 1_000; i++) for (const [type, data] of EVENTS) store.appendEvent({ runId: 'run_a', agentId: null, type, data: { ...data, i }, at: i });
    for (const type of TYPES) {
      const read = store.eventsOf('run_a', type);
      expect(read).toHaveLength(type === 'never.written' ? 0 : 1_000 * EVENTS.filter(([t]) => t === type).length);
      expect(read.map((e) => e.data.i)).toEqual([...read.map((e) => e.data.i as number)].sort((a, b) => a - b));
    }
    store.close();
    // 9,000 events, 4,000 of them of indexed types: the index holds those and no other (an index
    // b-tree keeps entries in its interior pages too, so every page's cells are counted).
    const db = new Database(path, { readonly: true });
    const entries = db.prepare('SELECT count(*) FROM events INDEXED BY events_by_run WHERE type IN (SELECT value FROM json_each(?))').pluck();
    expect(entries.get(JSON.stringify(BY_TYPE_EVENTS))).toBe(4_000);
    const cells = db.prepare("SELECT sum(ncell) FROM dbstat WHERE name = 'events_by_type'").pluck().get();
    expect(cells).toBe(4_000);
    db.close();
  });

  it('a file of schema 12 reads the same events by type and the same started calls after the migration', () => {
    const path = join(workdir(), 'v12.db');
    const db = new Database(path);
    for (const m of MIGRATIONS.filter((x) => x.version <= 12)) db.exec(m.sql);
    db.pragma('user_version = 12');
    db.prepare('INSERT INTO runs (id, created_at, interactive, root_id, budget) VALUES (?, ?, ?, ?, ?)').run('run_a', 1, 0, null, JSON.stringify(BUDGET));
    const event = db.prepare('INSERT INTO events (run_id, agent_id, type, data, at, boot) VALUES (?, NULL, ?, ?, ?, 1)');
    EVENTS.forEach(([type, data], i) => event.run('run_a', type, JSON.stringify(data), i));
    const call = db.prepare('INSERT INTO tool_calls (agent_id, turn, call_id, tool, args_hash, status, started_at, boot) VALUES (?, ?, ?, ?, ?, ?, ?, 1)');
    call.run('a', 1, 'c1', 'work', 'h', 'finished', 1);
    call.run('a', 2, 'c2', 'work', 'h', 'started', 3);
    call.run('a', 2, 'c3', 'work', 'h', 'started', 2);
    call.run('b', 2, 'c4', 'work', 'h', 'started', 2);
    db.close();
    const read = (store: ReturnType<typeof openStore>) => ({
      events: TYPES.map((type) => store.eventsOf('run_a', type)),
      started: ['a', 'b', 'c'].map((agent) => store.startedToolCalls(agent)),
    });
    const reader = openStore({ path, readonly: true });
    const before = read(reader);
    reader.close();
    expect(before.started[0]!.map((r) => r.callId)).toEqual(['c3', 'c2']);

    const store = openStore({ path });
    expect(read(store)).toEqual(before);
    store.close();
    const after = new Database(path, { readonly: true });
    expect(after.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    expect(after.prepare("SELECT name FROM sqlite_master WHERE name = 'tool_calls_started'").all()).toEqual([]);
    after.close();
  });
});

const available = await pgAvailable();

describe.skipIf(!available)(pgTitle(available, 'the by-type index and the ledger on PostgreSQL: schema 17 -> 18'), () => {
  it('a schema of version 17 reads the same events by type after the migration, and its index lists BY_TYPE_EVENTS only', async () => {
    const { schema, drop } = freshSchema();
    try {
      await schemaAt(schema, 17);
      for (const [i, [type, data]] of EVENTS.entries()) {
        await adminQuery(`INSERT INTO ${schema}.events (run_id, agent_id, type, data, at, boot) VALUES ('run_a', NULL, $1, $2, $3, 1)`, [
          type,
          JSON.stringify(data),
          i,
        ]);
      }
      const byType = async () =>
        Promise.all(
          TYPES.map(async (type) => (await adminQuery(`SELECT data FROM ${schema}.events WHERE run_id = 'run_a' AND type = $1 ORDER BY id`, [type])).rows),
        );
      const before = await byType();

      const store = await openPostgresStore({ url: PG_URL, schema });
      try {
        const lease = await store.claim('run_a', { owner: 'test', heartbeatMs: 0 });
        const read = await Promise.all(TYPES.map(async (type) => (await lease.port.eventsOf('run_a', type)).map((e) => ({ data: e.data }))));
        expect(read).toEqual(before.map((rows) => rows.map((r: { data: string }) => ({ data: JSON.parse(r.data) as unknown }))));
        expect(read.flat()).toHaveLength(EVENTS.length);
      } finally {
        await store.close();
      }
      const indexes = (await adminQuery(`SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = $1`, [schema])).rows as {
        indexname: string;
        indexdef: string;
      }[];
      expect(indexes.map((i) => i.indexname)).not.toContain('tool_calls_started');
      expect(predicateTypes(indexes.find((i) => i.indexname === 'events_by_type')!.indexdef)).toEqual([...BY_TYPE_EVENTS].sort());
    } finally {
      await drop();
    }
  });
});
