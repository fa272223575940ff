/**
 * Damaged or unusable database files through the built CLI, for every command: a file that
 * cannot be opened is STORE_OPEN_FAILED and a damaged row STORE_CORRUPT — exit 5, one line on
 * stderr, no stack — and a command that would write refuses before its first write, so the file
 * (and its -wal) hash the same afterwards.
 */
import { chmodSync, chownSync, copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { beforeAll, describe, expect, it } from 'vitest';
import { expectOneLine, fileHashes, seedRun, troupe, workdir, type RunAs } from '../helpers/cli.js';

/** Model flags that get run and serve as far as the database (no request is ever made). */
const MODEL = ['--model', 'm', '--base-url', 'http://127.0.0.1:9/v1'];

/** Every command, pointed at `db`. */
const commands = (db: string): string[][] => [
  ['status', '--db', db],
  ['status', '--json', '--db', db],
  ['tree', '--db', db],
  ['send', 'lead', 'hello', '--db', db],
  ['stop', 'worker', '--db', db],
  ['resume', '--db', db, ...MODEL],
  ['run', 'a task', '--db', db, ...MODEL],
  ['serve', 'a task', '--db', db, ...MODEL],
  ['serve', '--resume', '--db', db, ...MODEL],
  ['demo', '--db', db],
];

const isRoot = process.getuid?.() === 0;
/** chmod does not stop root: as root, the CLI runs as nobody, on files nobody owns. */
const NOBODY: RunAs = { uid: 65534, gid: 65534 };

function chownTree(paths: string[], as: RunAs | undefined): void {
  if (as) for (const p of paths) chownSync(p, as.uid, as.gid);
}

describe('a database that cannot be opened: STORE_OPEN_FAILED, exit 5, one line, for every command', () => {
  it.each(commands('<plain file>/troupe.db').map((c) => [c.join(' '), c]))('a parent that is a regular file: %s', async (_label, template) => {
    const cwd = workdir();
    writeFileSync(join(cwd, 'plain'), 'not a directory\n');
    const db = join(cwd, 'plain', 'troupe.db');
    const r = await troupe(template.map((a) => (a === '<plain file>/troupe.db' ? db : a)), cwd);
    expect(r.code, r.stderr).toBe(5);
    expectOneLine(r, 'STORE_OPEN_FAILED');
  });

  it.each(commands('<dir>').map((c) => [c.join(' '), c]))('a directory where the file should be: %s', async (_label, template) => {
    const cwd = workdir();
    const db = join(cwd, 'adir');
    mkdirSync(db);
    const r = await troupe(template.map((a) => (a === '<dir>' ? db : a)), cwd);
    expect(r.code, r.stderr).toBe(5);
    expectOneLine(r, 'STORE_OPEN_FAILED');
    expect(r.stderr).toContain(db);
  });

  describe(`chmod 000, run as the file's owner${isRoot ? ' (nobody: the tests run as root)' : ''}`, () => {
    const as = isRoot ? NOBODY : undefined;
    let seeded: string;
    beforeAll(async () => {
      seeded = join(workdir(), 'seed.db');
      await seedRun(seeded, { interactive: true });
    });

    /** cwd (for the log) and dir/t.db, owned by the user the CLI runs as. */
    function setUp() {
      const cwd = workdir();
      const dir = join(cwd, 'data');
      mkdirSync(dir);
      const db = join(dir, 't.db');
      copyFileSync(seeded, db);
      chownTree([cwd, dir, db], as);
      return { cwd, dir, db };
    }

    // demo replaces its database by design (it deletes the file first), so only the directory case applies to it.
    it.each(commands('<db>').filter((c) => c[0] !== 'demo').map((c) => [c.join(' '), c]))('the file is 000: %s', async (_label, template) => {
      const { cwd, db } = setUp();
      chmodSync(db, 0o000);
      const r = await troupe(template.map((a) => (a === '<db>' ? db : a)), cwd, {}, as);
      expect(r.code, r.stderr).toBe(5);
      expectOneLine(r, 'STORE_OPEN_FAILED');
    });

    it.each(commands('<db>').map((c) => [c.join(' '), c]))('its directory is 000: %s', async (_label, template) => {
      const { cwd, dir, db } = setUp();
      chmodSync(dir, 0o000);
      try {
        const r = await troupe(template.map((a) => (a === '<db>' ? db : a)), cwd, {}, as);
        expect(r.code, r.stderr).toBe(5);
        expectOneLine(r, 'STORE_OPEN_FAILED');
      } finally {
        chmodSync(dir, 0o700);
      }
    });
  });
});

/** Flip one bit of the first byte of `column` in the row `id` of `table` (a raw write, as a bad disk would). */
function flipBit(path: string, table: string, column: string, id: string): void {
  const db = new Database(path);
  const text = db.prepare(`SELECT ${column} FROM ${table} WHERE id = ?`).pluck().get(id) as string;
  const bytes = Buffer.from(text);
  bytes[0] = bytes[0]! ^ 0x01;
  db.prepare(`UPDATE ${table} SET ${column} = ? WHERE id = ?`).run(bytes.toString(), id);
  db.close(); // checkpoints: the damage is in the main file, the -wal is gone
}

describe('a flipped bit in agents.state: STORE_CORRUPT, exit 5, one line, and the file is left untouched', () => {
  let seeded: string;
  let rootId: string;
  beforeAll(async () => {
    seeded = join(workdir(), 'seed.db');
    ({ rootId } = await seedRun(seeded, { interactive: true }));
    flipBit(seeded, 'agents', 'state', rootId);
  });

  // demo starts from a fresh file; every other command reads (and all but status/tree would write).
  it.each(commands('<db>').filter((c) => c[0] !== 'demo').map((c) => [c.join(' '), c]))('%s', async (_label, template) => {
    const cwd = workdir();
    const db = join(cwd, 't.db');
    copyFileSync(seeded, db);
    const before = fileHashes(db);
    const r = await troupe(template.map((a) => (a === '<db>' ? db : a)), cwd);
    expect(r.code, r.stderr).toBe(5);
    expectOneLine(r, 'STORE_CORRUPT');
    expect(r.stderr).toContain(`agents row "${rootId}" is damaged: state is not valid JSON`);
    expect(r.stderr).not.toContain('SyntaxError');
    expect(fileHashes(db)).toEqual(before);
  });
});
