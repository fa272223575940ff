/**
 * FULL durability with the WAL synced off the main thread (walSync.ts, issue 36 item 2): the
 * port's commit resolves only after the sync, a failed sync stops the store, the synchronous
 * `Store` API syncs before it returns, and the file synced is the live `-wal` through reopen,
 * checkpoints and restarts. The syncs are watched (and held, or failed) through a `node:fs`
 * whose fdatasync and fdatasyncSync pass through to the real ones unless a test says otherwise.
 */
import { fstatSync, mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { GroupCommitter } from '../../../src/host/commit.js';
import { portOf, type WriteOp } from '../../../src/store/port.js';
import { newAgentRow } from '../../../src/store/rows.js';
import { openStore, type SqliteStore } from '../../../src/store/sqliteStore.js';

const io = vi.hoisted(() => ({
  /** Off-thread syncs waiting to go (while `hold`). */
  held: [] as (() => void)[],
  hold: false,
  failAsync: null as NodeJS.ErrnoException | null,
  failSync: null as NodeJS.ErrnoException | null,
  asyncFds: [] as number[],
  syncFds: [] as number[],
}));

vi.mock('node:fs', async (importOriginal) => {
  const real = await importOriginal<typeof import('node:fs')>();
  return {
    ...real,
    fdatasync(fd: number, cb: (err: NodeJS.ErrnoException | null) => void) {
      io.asyncFds.push(fd);
      const failure = io.failAsync;
      const go = () => (failure ? setImmediate(() => cb(failure)) : real.fdatasync(fd, cb));
      if (io.hold) io.held.push(go);
      else go();
    },
    fdatasyncSync(fd: number) {
      io.syncFds.push(fd);
      if (io.failSync) throw io.failSync;
      real.fdatasyncSync(fd);
    },
  };
});

afterEach(() => {
  for (const go of io.held.splice(0)) go();
  Object.assign(io, { hold: false, failAsync: null, failSync: null, asyncFds: [], syncFds: [] });
});

const budget = { limitUsd: null, budgetStopped: false, reserveStopped: false, paused: false, resumeEpoch: 0, reserveNoticeClaimed: false };
const tempDb = () => join(mkdtempSync(join(tmpdir(), 'troupe-wal-')), 't.db');
const eio = () => Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO', errno: -5 });
/** Every callback, immediate and microtask queued so far has run. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

/** A FULL store on a file holding run `r` and agent `a` (written through the synchronous API). */
function seeded(path = tempDb(), synchronous: 'FULL' | 'NORMAL' = 'FULL'): SqliteStore {
  const store = openStore({ path, synchronous });
  store.transaction(() => {
    store.insertRun({ id: 'r', createdAt: 0, interactive: false, rootId: 'a', budget });
    store.registerAgent(newAgentRow({ id: 'a', runId: 'r', name: 'solo', parentId: null, depth: 0, task: 'work', skills: [] }, 1), []);
  });
  return store;
}

const say = (text: string): WriteOp => ({ op: 'appendSession', agentId: 'a', items: [{ role: 'user', content: text }] });
const texts = (store: SqliteStore) => store.loadSession('a').map((i) => (i as { content: string }).content);
/** Whether `fd` is the file now at `<path>-wal` (same inode, not unlinked). */
const isLiveWal = (fd: number, path: string) => fstatSync(fd).ino === statSync(`${path}-wal`).ino && fstatSync(fd).nlink === 1;

describe('FULL: commits through the port wait for the WAL sync off the main thread', () => {
  it('the commit promise resolves only after the sync of the -wal completed', async () => {
    const path = tempDb();
    const store = seeded(path);
    io.hold = true;
    let resolved = false;
    const commit = portOf(store)
      .commit([say('one')])
      .then(() => (resolved = true));
    await settle();
    // Applied (the connection committed it), but not yet durable: the promise waits.
    expect(texts(store)).toEqual(['one']);
    expect(io.held).toHaveLength(1);
    expect(io.syncFds).toEqual([io.syncFds[0]]); // only the seed's sync ran on this thread
    expect(resolved).toBe(false);
    io.held.shift()!();
    await commit;
    expect(resolved).toBe(true);
    expect(isLiveWal(io.asyncFds[0]!, path)).toBe(true);
    store.close();
  });

  it("the group committer's effects (acks) run only after the sync", async () => {
    const store = seeded();
    const committer = new GroupCommitter(portOf(store), (err) => err);
    io.hold = true;
    const acked: string[] = [];
    committer.stage(say('hello'));
    committer.after(() => acked.push('hello'));
    await settle();
    await settle();
    expect(io.held).toHaveLength(1);
    expect(acked).toEqual([]);
    io.held.shift()!();
    await committer.durable();
    expect(acked).toEqual(['hello']);
    store.close();
  });

  it('a failed sync is fatal: STORE_IO, and every later write is refused', async () => {
    const path = tempDb();
    const store = seeded(path);
    io.failAsync = eio();
    await expect(portOf(store).commit([say('lost?')])).rejects.toMatchObject({ code: 'STORE_IO', message: expect.stringContaining('EIO') });
    expect(store.failure?.code).toBe('STORE_IO');
    io.failAsync = null;
    await expect(portOf(store).commit([say('after')])).rejects.toMatchObject({ code: 'STORE_IO' });
    expect(() => store.appendSession('a', [{ role: 'user', content: 'direct' }])).toThrow(expect.objectContaining({ code: 'STORE_IO' }));
    store.close();
    // Indeterminate, as after a failed fsync inside SQLite: here the commit is on the file.
    const again = openStore({ path });
    expect(texts(again)).toEqual(['lost?']);
    again.close();
  });

  it('a failed sync under a direct write throws STORE_IO and stops the store', () => {
    const store = seeded();
    io.failSync = eio();
    expect(() => store.appendSession('a', [{ role: 'user', content: 'x' }])).toThrow(expect.objectContaining({ code: 'STORE_IO' }));
    io.failSync = null;
    expect(store.failure?.code).toBe('STORE_IO');
    expect(() => store.appendSession('a', [{ role: 'user', content: 'y' }])).toThrow(expect.objectContaining({ code: 'STORE_IO' }));
    store.close();
  });
});

describe('FULL: the synchronous Store API is durable when it returns', () => {
  it('a direct write syncs the -wal on this thread before returning, once per outermost transaction', () => {
    const path = tempDb();
    const store = seeded(path);
    expect(io.syncFds).toHaveLength(1); // the seed: one transaction, one sync
    store.appendSession('a', [{ role: 'user', content: 'direct' }]);
    expect(io.syncFds).toHaveLength(2);
    store.transaction(() => {
      store.appendSession('a', [{ role: 'user', content: 'b' }]);
      store.appendSession('a', [{ role: 'user', content: 'c' }]);
    });
    expect(io.syncFds).toHaveLength(3);
    expect(isLiveWal(io.syncFds[2]!, path)).toBe(true);
    expect(io.asyncFds).toEqual([]);
    // Reads and refused writes sync nothing.
    store.loadSession('a');
    expect(() => store.updateAgent('nobody', { turns: 1 })).toThrow(expect.objectContaining({ code: 'AGENT_NOT_FOUND' }));
    expect(io.syncFds).toHaveLength(3);
    store.close();
  });

  it('NORMAL and :memory: leave syncing to SQLite (no WAL sync of their own)', async () => {
    const normal = seeded(tempDb(), 'NORMAL');
    await portOf(normal).commit([say('n')]);
    normal.close();
    const memory = openStore({ path: ':memory:' });
    memory.transaction(() => memory.insertRun({ id: 'r', createdAt: 0, interactive: false, rootId: 'a', budget }));
    memory.close();
    expect([...io.syncFds, ...io.asyncFds]).toEqual([]);
  });
});

describe('FULL: the file synced is the live -wal', () => {
  it('across reopen: a new owner syncs its own WAL, and reads what the last one committed', async () => {
    const path = tempDb();
    const first = seeded(path);
    await portOf(first).commit([say('before')]);
    first.close(); // the last connection: SQLite checkpoints and deletes the WAL
    const second = openStore({ path });
    expect(texts(second)).toEqual(['before']);
    await portOf(second).commit([say('after')]);
    expect(isLiveWal(io.asyncFds.at(-1)!, path)).toBe(true);
    second.close();
    const third = openStore({ path, readonly: true });
    expect(texts(third)).toEqual(['before', 'after']);
    third.close();
  });

  it('closing with a sync under way keeps its descriptor until the sync is done', async () => {
    const store = seeded();
    io.hold = true;
    const commit = portOf(store).commit([say('x')]);
    await settle();
    store.close();
    io.held.shift()!();
    await expect(commit).resolves.toBeUndefined(); // not EBADF
  });

  it('after a truncating checkpoint, an automatic checkpoint and restart, and another connection closing', async () => {
    const path = tempDb();
    const store = seeded(path);
    const port = portOf(store);
    await port.commit([say('a')]);
    const ino = statSync(`${path}-wal`).ino;
    // Another connection (another process would do the same) checkpoints and truncates the WAL, then closes.
    const other = new Database(path);
    other.pragma('wal_checkpoint(TRUNCATE)');
    other.close();
    expect(statSync(`${path}-wal`).ino).toBe(ino);
    await port.commit([say('b')]);
    expect(isLiveWal(io.asyncFds.at(-1)!, path)).toBe(true);
    // Past the automatic checkpoint (1,000 pages): SQLite checkpoints and restarts the WAL in place.
    const big = 'z'.repeat(60_000);
    for (let i = 0; i < 80; i++) await port.commit([say(`${i}${big}`)]);
    expect(statSync(`${path}-wal`).size).toBeLessThan(80 * 60_000);
    expect(statSync(`${path}-wal`).ino).toBe(ino);
    expect(new Set(io.asyncFds).size).toBe(1);
    expect(isLiveWal(io.asyncFds.at(-1)!, path)).toBe(true);
    store.close();
    const again = openStore({ path, readonly: true });
    expect(texts(again)).toHaveLength(82);
    again.close();
  });
});
