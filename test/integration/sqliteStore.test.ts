import { chmodSync, mkdirSync, mkdtempSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { SCHEMA_VERSION } from '../../src/store/migrations.js';
import { acquireOwnerLock } from '../../src/store/ownerLock.js';
import { openStore } from '../../src/store/sqliteStore.js';
import { agentRow } from '../unit/store/storeContract.js';
import { team, TERMINAL } from '../helpers/team.js';

const tempDir = () => mkdtempSync(join(tmpdir(), 'troupe-'));
const BUDGET = { limitUsd: null, budgetStopped: false, reserveStopped: false, paused: false, resumeEpoch: 0, reserveNoticeClaimed: false };

/** A closed database file with one run, one agent and one message. */
function seeded(dir = tempDir()) {
  const path = join(dir, 't.db');
  const store = openStore({ path });
  store.insertRun({ id: 'run1', createdAt: 1, interactive: false, rootId: null, budget: BUDGET });
  store.registerAgent(agentRow('a'), [{ role: 'user', content: 'hello' }]);
  store.enqueueMessage({
    id: 'm1',
    runId: 'run1',
    to: 'a',
    from: 'user',
    fromName: 'user',
    type: 'instruction',
    priority: 'normal',
    content: 'PAYLOAD-PAYLOAD-PAYLOAD',
    interrupt: true,
    createdAt: 2,
  });
  store.close();
  return path;
}

/** An owner's open throws STORE_CORRUPT matching `why`, and the file's bytes do not change. */
function expectRefusedUntouched(path: string, why: RegExp): void {
  const before = readFileSync(path);
  let error: unknown;
  try {
    openStore({ path }).close();
  } catch (err) {
    error = err;
  }
  expect(error).toMatchObject({ code: 'STORE_CORRUPT', message: expect.stringMatching(why) });
  expect(readFileSync(path).equals(before)).toBe(true);
}

describe('openStore', () => {
  it('creates the file 0600, in WAL with synchronous set explicitly on every open', () => {
    const path = join(tempDir(), 'new.db');
    const full = openStore({ path });
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(full.synchronous).toBe('FULL');
    full.close();
    const normal = openStore({ path, synchronous: 'NORMAL' });
    normal.close();
    const db = new Database(path);
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(db.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    db.close();
    // FULL is set again on reopen (this build would report NORMAL for a reopened WAL file).
    const reopened = openStore({ path });
    expect(reopened.synchronous).toBe('FULL');
    reopened.close();
  });

  it('bumps the boot (fencing token) on every owning open', () => {
    const path = seeded();
    const a = openStore({ path });
    const boot = a.boot;
    a.close();
    const b = openStore({ path });
    expect(b.boot).toBe(boot + 1);
    b.close();
  });

  it('a second owner gets RUN_LOCKED until the first closes', () => {
    const path = seeded();
    const owner = openStore({ path });
    expect(() => openStore({ path })).toThrow(expect.objectContaining({ code: 'RUN_LOCKED' }));
    // A read-only view needs no lock.
    const viewer = openStore({ path, readonly: true });
    expect(viewer.listRuns().map((r) => r.id)).toEqual(['run1']);
    expect(() => viewer.appendSession('a', [])).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID' }));
    viewer.close();
    owner.close();
    openStore({ path }).close();
  });

  it('refuses a file that is not SQLite, and leaves it untouched', () => {
    const path = join(tempDir(), 'notes.db');
    writeFileSync(path, 'these are my notes, not a database\n'.repeat(200));
    const before = readFileSync(path);
    expect(() => openStore({ path })).toThrow(expect.objectContaining({ code: 'STORE_CORRUPT' }));
    expect(readFileSync(path).equals(before)).toBe(true);
    // The lock was released on the way out.
    acquireOwnerLock(path).release();
  });

  it('refuses a database written by a newer schema version, untouched', () => {
    const path = seeded();
    const db = new Database(path);
    db.pragma(`user_version = ${SCHEMA_VERSION + 1}`);
    db.close();
    const before = readFileSync(path);
    expect(() => openStore({ path })).toThrow(expect.objectContaining({ code: 'STORE_SCHEMA_TOO_NEW' }));
    expect(readFileSync(path).equals(before)).toBe(true);
  });

  it('creates a missing directory (0700); refuses an unwritable one, or a file in the way, with STORE_OPEN_FAILED', () => {
    const fresh = join(tempDir(), 'missing', 'deeper', 'x.db');
    openStore({ path: fresh }).close();
    expect(statSync(join(fresh, '..')).mode & 0o777).toBe(0o700);
    const file = join(tempDir(), 'a-file');
    writeFileSync(file, 'x');
    expect(() => openStore({ path: join(file, 'x.db') })).toThrow(expect.objectContaining({ code: 'STORE_OPEN_FAILED' }));
    const dir = join(tempDir(), 'ro');
    mkdirSync(dir);
    chmodSync(dir, 0o500);
    // root ignores directory permissions: only assert where they apply.
    if (process.getuid?.() !== 0) {
      expect(() => openStore({ path: join(dir, 'x.db') })).toThrow(expect.objectContaining({ code: 'STORE_OPEN_FAILED' }));
    }
    expect(() => openStore({ path: '' })).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID' }));
    expect(() => openStore({ path: ':memory:', synchronous: 'OFF' as never })).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID' }));
  });

  it("tightens an existing .troupe folder (troupe's own) to 0700; any other folder, or a .troupe symlink's target, is left as it is", () => {
    const mode = (p: string) => statSync(p).mode & 0o777;
    const root = tempDir();
    const own = join(root, '.troupe');
    mkdirSync(own);
    chmodSync(own, 0o755);
    openStore({ path: join(own, 'troupe.db') }).close();
    expect(mode(own)).toBe(0o700);
    // The user's own folder, given with --db: not troupe's to change.
    const theirs = join(root, 'data');
    mkdirSync(theirs);
    chmodSync(theirs, 0o755);
    openStore({ path: join(theirs, 'x.db') }).close();
    expect(mode(theirs)).toBe(0o755);
    // A .troupe that is a symlink to a shared folder: the folder is left alone.
    const shared = join(root, 'shared');
    mkdirSync(shared);
    chmodSync(shared, 0o755);
    const project = join(root, 'project');
    mkdirSync(project);
    symlinkSync(shared, join(project, '.troupe'));
    openStore({ path: join(project, '.troupe', 'x.db') }).close();
    expect(mode(shared)).toBe(0o755);
    // A reader (status, tree, ui) changes nothing.
    chmodSync(own, 0o755);
    openStore({ path: join(own, 'troupe.db'), readonly: true }).close();
    expect(mode(own)).toBe(0o755);
  });

  it('detects a flipped byte in a message row on read, and reports it in the checksum scan', () => {
    const path = seeded();
    const bytes = readFileSync(path);
    const at = bytes.indexOf('PAYLOAD-PAYLOAD');
    expect(at).toBeGreaterThan(0);
    bytes[at + 3] = bytes[at + 3]! ^ 0x01;
    writeFileSync(path, bytes);
    expectRefusedUntouched(path, /messages row "m1" is damaged: it failed its checksum/);
    const store = openStore({ path, verify: false });
    expect(store.verifyChecksums().messages).toEqual(['m1']);
    expect(() => store.pendingMessagesOf('run1')).toThrow(expect.objectContaining({ code: 'STORE_CORRUPT' }));
    store.close();
  });

  it('detects a damaged session row when the session is loaded', () => {
    const path = seeded();
    const bytes = readFileSync(path);
    const at = bytes.indexOf('hello');
    bytes[at] = bytes[at]! ^ 0x20;
    writeFileSync(path, bytes);
    expectRefusedUntouched(path, /session_items row "a#0" is damaged: it failed its checksum/);
    const store = openStore({ path, verify: false });
    expect(() => store.loadSession('a')).toThrow(expect.objectContaining({ code: 'STORE_CORRUPT' }));
    expect(store.verifyChecksums().sessionItems).toEqual(['a#0']);
    store.close();
  });
  it('a replaced session survives a reopen with sound checksums and no leftover rows', () => {
    const path = seeded();
    const store = openStore({ path });
    store.appendSession('a', [
      { role: 'assistant', content: 'x' },
      { role: 'user', content: 'y' },
    ]);
    expect(store.replaceSession('a', [{ role: 'user', content: 'summary' }], 3)).toBe(true);
    store.close();
    const reopened = openStore({ path });
    expect(reopened.loadSession('a')).toEqual([{ role: 'user', content: 'summary' }]);
    expect(reopened.verifyChecksums().sessionItems).toEqual([]);
    reopened.close();
  });
});

describe('a team on a real database file', () => {
  it('runs the foundation team end to end; integrity and checksums hold', async () => {
    const path = join(tempDir(), 'team.db');
    const store = openStore({ path });
    const t = team('team-autonomous', { store });
    const rootId = await t.c.start({ name: 'lead', task: 'Review the repository.' });
    expect((await t.c.waitFor(rootId, [...TERMINAL])).status).toBe('completed');
    await t.c.whenIdle();
    await t.c.shutdown();
    expect(store.integrityCheck()).toBe('ok');
    expect(store.verifyChecksums()).toEqual({ messages: [], sessionItems: [] });
    store.close();
    // Everything is on disk: a fresh reader sees the same run.
    const reader = openStore({ path, readonly: true });
    const agents = reader.listAgents(t.c.runId);
    expect(agents.map((a) => [a.name, a.status])).toEqual([
      ['lead', 'completed'],
      ['alice', 'completed'],
      ['bob', 'crashed'],
      ['carol', 'failed'],
    ]);
    expect(agents.find((a) => a.name === 'alice')?.noticeClaimed).toBe(true);
    expect(reader.listMessages(t.c.runId).every((m) => m.deliveredAt !== null)).toBe(true);
    expect(reader.loadSession(rootId).at(-1)).toMatchObject({ role: 'tool', name: 'finish' });
    reader.close();
  });
});

describe('a store that fails mid-run', () => {
  it('a full disk (SQLITE_FULL) stops the coordinator with STORE_IO; the file is sound and the run resumes', async () => {
    const path = join(tempDir(), 'full.db');
    const store = openStore({ path, maxSizeBytes: 256 * 1024 });
    const big = 'x'.repeat(30_000);
    const t = team(
      { agents: { lead: Array.from({ length: 40 }, () => ({ tool: 'view_agent_graph', args: { note: big } })) } },
      { store, limits: { maxTurns: 1_000 } },
    );
    const failed: string[] = [];
    t.c.subscribe((e) => e.type === 'coordinator.failed' && failed.push(e.error.code));
    const rootId = await t.c.start({ name: 'lead', task: 'fill the disk' });
    await expect(t.c.waitFor(rootId, [...TERMINAL])).rejects.toMatchObject({ code: 'STORE_IO' });
    expect(failed).toEqual(['STORE_IO']);
    expect(store.failure?.code).toBe('STORE_IO');
    // Nothing more is accepted.
    await expect(t.c.send(rootId, { content: 'hello?' })).rejects.toMatchObject({ code: 'STORE_IO' });
    await expect(t.c.whenIdle()).rejects.toMatchObject({ code: 'STORE_IO' });
    store.close();
    // Crash-only: the file is intact and a new owner (without the cap) resumes the run.
    const again = openStore({ path });
    expect(again.integrityCheck()).toBe('ok');
    expect(again.verifyChecksums()).toEqual({ messages: [], sessionItems: [] });
    expect(again.getAgent(rootId)?.status).toBe('running');
    again.close();
  });
});
