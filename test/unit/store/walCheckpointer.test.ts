/**
 * The WAL's checkpoint thread (walCheckpointer.ts): against a real file, an owner connection set up
 * as the store sets it up (autocheckpoint off, journal_size_limit a quarter of the cap).
 */
import { existsSync, mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import Database from 'better-sqlite3';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { TroupeError } from '../../../src/errors.js';
import { openStore } from '../../../src/store/sqliteStore.js';
import { createCheckpointer, type CheckpointResult } from '../../../src/store/walCheckpointer.js';

const CAP = 1 << 20;
const ROW = 4_000;

let clock = 0;

function owner(options: { every: number; minIntervalMs?: number; failFirst?: number }) {
  const path = join(mkdtempSync(join(tmpdir(), 'troupe-ckpt-')), 't.db');
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('wal_autocheckpoint = 0');
  db.pragma(`journal_size_limit = ${CAP / 4}`);
  db.exec('CREATE TABLE t (x BLOB)');
  const logged: { level: number; code?: string; msg: string }[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) logged.push(JSON.parse(line) as (typeof logged)[number]);
      done();
    },
  });
  const checkpointer = createCheckpointer({
    path,
    synchronous: 'NORMAL',
    logger: pino({ level: 'debug' }, sink),
    ownerCheckpoint: () => (db.pragma('wal_checkpoint(PASSIVE)') as CheckpointResult[])[0]!,
    every: options.every,
    minIntervalMs: options.minIntervalMs ?? 0,
    now: () => clock,
    capBytes: CAP,
    ...(options.failFirst === undefined ? {} : { failFirst: options.failFirst }),
  });
  const insert = db.prepare('INSERT INTO t VALUES (randomblob(?))');
  let walMax = 0;
  const commit = () => {
    insert.run(ROW);
    checkpointer.committed();
    walMax = Math.max(walMax, statSync(`${path}-wal`).size);
  };
  const rows = () => db.prepare('SELECT count(*) FROM t').pluck().get() as number;
  return { path, db, checkpointer, commit, rows, logged, walMax: () => walMax };
}

describe('WAL checkpointer', () => {
  it('bounds the WAL under a writer that never pauses: the owner checkpoints past the cap', () => {
    const o = owner({ every: 4 });
    // 2,000 commits of 4 KB (~8 MB of WAL unchecked) without yielding: the thread's answers wait.
    for (let i = 0; i < 2_000; i++) o.commit();
    expect(o.checkpointer.stats.owner).toBeGreaterThan(0);
    // Each owner checkpoint lets the next write restart the WAL, truncated to a quarter of the cap:
    // one per ~0.75 MB written (~25 MB of frames here: 20-35), not one per commit once past the cap.
    expect(o.checkpointer.stats.owner).toBeLessThanOrEqual(60);
    // Over the cap by at most one commit's frames (a 4 KB row: two pages and their headers).
    expect(o.walMax()).toBeLessThanOrEqual(CAP + 3 * 4_120);
    expect(o.rows()).toBe(2_000);
    o.checkpointer.close();
    o.db.close();
    const reopened = new Database(o.path, { readonly: true });
    expect(reopened.pragma('integrity_check', { simple: true })).toBe('ok');
    expect(reopened.prepare('SELECT count(*) FROM t').pluck().get()).toBe(2_000);
    reopened.close();
  });

  it('keeps the WAL small alone when the writer pauses: no owner checkpoint', async () => {
    const o = owner({ every: 8 });
    for (let i = 0; i < 800; i++) {
      o.commit();
      await o.checkpointer.settled();
    }
    expect(o.checkpointer.stats).toMatchObject({ started: 1, failed: 0, owner: 0 });
    expect(o.checkpointer.stats.done).toBe(100);
    // ~3.3 MB written; the WAL restarts after each checkpoint, so it holds about one round (8 rows).
    expect(o.walMax()).toBeLessThan(CAP / 4);
    o.checkpointer.close();
    o.db.close();
  });

  it('asks the thread at most once per minIntervalMs, however many commits', async () => {
    const o = owner({ every: 2, minIntervalMs: 1_000 });
    clock = 0;
    for (let i = 0; i < 40; i++) {
      o.commit();
      await o.checkpointer.settled();
      clock += 100; // 40 commits over 4 s
    }
    expect(o.checkpointer.stats.done).toBe(4);
    o.checkpointer.close();
    o.db.close();
  });

  it('logs a failed checkpoint, retries it at the next request, and loses nothing', async () => {
    const o = owner({ every: 1, failFirst: 2 });
    for (let i = 0; i < 5; i++) {
      o.commit();
      await o.checkpointer.settled();
    }
    const warnings = o.logged.filter((l) => l.level === 40);
    expect(warnings).toHaveLength(2);
    expect(warnings[0]).toMatchObject({ code: 'SQLITE_IOERR', msg: 'WAL checkpoint failed; retried later' });
    expect(o.checkpointer.stats).toMatchObject({ started: 1, failed: 2, done: 3, owner: 0 });
    expect(o.rows()).toBe(5);
    // The retries copied every frame: nothing is left for the next checkpoint.
    expect((o.db.pragma('wal_checkpoint(PASSIVE)') as CheckpointResult[])[0]).toMatchObject({ busy: 0 });
    expect(o.db.pragma('integrity_check', { simple: true })).toBe('ok');
    o.checkpointer.close();
    o.db.close();
  });

  it('close stops the thread and waits for it: the owner closes last and removes the WAL', async () => {
    const o = owner({ every: 1 });
    for (let i = 0; i < 3; i++) o.commit();
    await o.checkpointer.settled();
    o.commit(); // a request in flight at close
    o.checkpointer.close();
    o.checkpointer.close();
    o.commit(); // after close: no thread is started again
    expect(o.checkpointer.stats.started).toBe(1);
    o.db.close();
    // A closing connection checkpoints and deletes the WAL only when it is the last one.
    expect(existsSync(`${o.path}-wal`)).toBe(false);
  });
});

describe("openStore's checkpoint option", () => {
  const budget = { limitUsd: null, budgetStopped: false, reserveStopped: false, paused: false, resumeEpoch: 0, reserveNoticeClaimed: false };
  let next = 0;
  const runs = (store: ReturnType<typeof openStore>, n: number) => {
    for (let i = 0; i < n; i++, next++) store.insertRun({ id: `r${next}`, createdAt: next, interactive: false, rootId: 'a', budget });
  };

  it('starts no thread for a reader, :memory:, the default, or a few commits; the thread at the 16th', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'troupe-ckpt-')), 't.db');
    const memory = openStore({ path: ':memory:', checkpoint: 'thread' });
    expect(memory.checkpoints).toBeNull();
    memory.close();
    const inline = openStore({ path });
    expect(inline.checkpoints).toBeNull();
    expect(inline.transaction(() => 1)).toBe(1);
    inline.close();
    const store = openStore({ path, checkpoint: 'thread' });
    const reader = openStore({ path, readonly: true, checkpoint: 'thread' });
    expect(reader.checkpoints).toBeNull();
    runs(store, 15);
    expect(store.checkpoints?.stats.started).toBe(0);
    runs(store, 1);
    expect(store.checkpoints?.stats.started).toBe(1);
    await store.checkpoints?.settled();
    expect(store.checkpoints?.stats).toMatchObject({ done: 1, failed: 0 });
    expect(reader.listRuns()).toHaveLength(16);
    reader.close();
    store.close();
    expect(existsSync(`${path}-wal`)).toBe(false);
    const reopened = openStore({ path, readonly: true });
    expect(reopened.listRuns()).toHaveLength(16);
    reopened.close();
  });

  it('refuses an unknown checkpoint mode', () => {
    expect(() => openStore({ path: ':memory:', checkpoint: 'later' as 'thread' })).toThrow(TroupeError);
  });
});
