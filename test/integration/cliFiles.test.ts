/**
 * Damaged or unusable database files through the built CLI, for every command: a file that
 * cannot be opened is STORE_OPEN_FAILED and a damaged row STORE_CORRUPT — exit 5, one line on
 * stderr, no stack — and a command that would write refuses before its first write, so the file
 * (and its -wal) hash the same afterwards.
 */
import { execFile } from 'node:child_process';
import { chmodSync, chownSync, copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { beforeAll, describe, expect, it } from 'vitest';
import { BIN, expectOneLine, fileHashes, seedRun, troupe, workdir, type RunAs } from '../helpers/cli.js';

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
const NOBODY: RunAs = { uid: 65534, gid: 65534 };
/** Root without the capabilities that let it ignore file modes: chmod binds it as it binds any owner. */
const ROOT_BOUND: RunAs = { prefix: ['setpriv', '--bounding-set=-dac_override,-dac_read_search', '--'] };

/** Exit code of `node -e <code> <arg>` run as `as` (null: it could not be started). */
function nodeAs(as: RunAs, code: string, arg: string): Promise<number | null> {
  const { prefix = [], ...ids } = as;
  const [file, ...argv] = [...prefix, process.execPath, '-e', code, arg];
  return new Promise((resolve) =>
    execFile(file!, argv, { cwd: '/', timeout: 30_000, ...ids }, (err) => resolve(err ? (typeof err.code === 'number' ? err.code : null) : 0)),
  );
}

/**
 * Who runs the CLI in the chmod tests. chmod does not stop root, so as root: nobody, on files
 * nobody owns — when nobody can read the CLI (a clone under a 0700 folder such as /root is out of
 * its reach); else root itself with CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH dropped (setpriv);
 * else the group is skipped, and its title says why.
 */
async function chmodRunner(): Promise<{ as: RunAs | undefined; skip?: string }> {
  if (!isRoot) return { as: undefined };
  const canRead = "require('fs').accessSync(process.argv[1], require('fs').constants.R_OK)";
  if ((await nodeAs(NOBODY, canRead, BIN)) === 0) return { as: NOBODY };
  const probe = join(workdir(), 'probe');
  writeFileSync(probe, '');
  chmodSync(probe, 0o000);
  // Bound by file modes: reading a 000 file is refused (exit 42, which no failing setpriv gives) where plain root would read it.
  if ((await nodeAs(ROOT_BOUND, `try { ${canRead} } catch (err) { if (err.code === 'EACCES') process.exit(42) }`, probe)) === 42) return { as: ROOT_BOUND };
  return { as: undefined, skip: `as root, nobody cannot read ${BIN} (a clone under a 0700 folder?) and setpriv cannot drop CAP_DAC_OVERRIDE` };
}

const runner = await chmodRunner();
const runnerName =
  runner.as === NOBODY
    ? ' (nobody: the tests run as root)'
    : runner.as === ROOT_BOUND
      ? ' (root without CAP_DAC_OVERRIDE: nobody cannot reach this clone)'
      : '';
if (runner.skip) process.stderr.write(`cliFiles: chmod tests skipped: ${runner.skip}\n`);

function chownTree(paths: string[], as: RunAs | undefined): void {
  if (as?.uid !== undefined) for (const p of paths) chownSync(p, as.uid, as.gid ?? as.uid);
}

/** A copy of `seeded` as t.db in a fresh folder (in its subfolder `sub` if given), all of it owned by `as`. */
function ownedCopy(seeded: string, as: RunAs | undefined, sub?: string): { cwd: string; dir: string; db: string } {
  const cwd = workdir();
  const dir = sub === undefined ? cwd : join(cwd, sub);
  if (sub !== undefined) mkdirSync(dir);
  const db = join(dir, 't.db');
  copyFileSync(seeded, db);
  chownTree(sub === undefined ? [cwd, db] : [cwd, dir, db], as);
  return { cwd, dir, db };
}

describe('a database that cannot be opened: STORE_OPEN_FAILED, exit 5, one line, for every command', () => {
  it.each(commands('<plain file>/troupe.db').map((c) => [c.join(' '), c]))('a parent that is a regular file: %s', async (_label, template) => {
    const cwd = workdir();
    writeFileSync(join(cwd, 'plain'), 'not a directory\n');
    const db = join(cwd, 'plain', 'troupe.db');
    const r = await troupe(
      template.map((a) => (a === '<plain file>/troupe.db' ? db : a)),
      cwd,
    );
    expect(r.code, r.stderr).toBe(5);
    expectOneLine(r, 'STORE_OPEN_FAILED');
  });

  it.each(commands('<dir>').map((c) => [c.join(' '), c]))('a directory where the file should be: %s', async (_label, template) => {
    const cwd = workdir();
    const db = join(cwd, 'adir');
    mkdirSync(db);
    const r = await troupe(
      template.map((a) => (a === '<dir>' ? db : a)),
      cwd,
    );
    expect(r.code, r.stderr).toBe(5);
    expectOneLine(r, 'STORE_OPEN_FAILED');
    expect(r.stderr).toContain(db);
  });

  describe.skipIf(runner.skip !== undefined)(`${runner.skip ? `SKIPPED (${runner.skip}): ` : ''}chmod 000, run as the file's owner${runnerName}`, () => {
    const as = runner.as;
    let seeded: string;
    beforeAll(async () => {
      seeded = join(workdir(), 'seed.db');
      await seedRun(seeded, { interactive: true });
    });

    /** cwd (for the log) and dir/t.db, owned by the user the CLI runs as. */
    const setUp = () => ownedCopy(seeded, as, 'data');

    // demo replaces its database by design (it deletes the file first), so only the directory case applies to it.
    it.each(
      commands('<db>')
        .filter((c) => c[0] !== 'demo')
        .map((c) => [c.join(' '), c]),
    )('the file is 000: %s', async (_label, template) => {
      const { cwd, db } = setUp();
      chmodSync(db, 0o000);
      const r = await troupe(
        template.map((a) => (a === '<db>' ? db : a)),
        cwd,
        {},
        as,
      );
      expect(r.code, r.stderr).toBe(5);
      expectOneLine(r, 'STORE_OPEN_FAILED');
    });

    it.each(commands('<db>').map((c) => [c.join(' '), c]))('its directory is 000: %s', async (_label, template) => {
      const { cwd, dir, db } = setUp();
      chmodSync(dir, 0o000);
      try {
        const r = await troupe(
          template.map((a) => (a === '<db>' ? db : a)),
          cwd,
          {},
          as,
        );
        expect(r.code, r.stderr).toBe(5);
        expectOneLine(r, 'STORE_OPEN_FAILED');
      } finally {
        chmodSync(dir, 0o700);
      }
    });
  });
});

describe.skipIf(runner.skip !== undefined)(
  `${runner.skip ? `SKIPPED (${runner.skip}): ` : ''}a read-only database (0444): every command that writes refuses before writing, status and tree read it${runnerName}`,
  () => {
    const as = runner.as;
    let seeded: string;
    beforeAll(async () => {
      seeded = join(workdir(), 'seed.db');
      await seedRun(seeded, { interactive: true });
    });

    function setUp() {
      const { cwd, db } = ownedCopy(seeded, as);
      chmodSync(db, 0o444);
      return { cwd, db, before: fileHashes(db) };
    }

    it.each(
      commands('<db>')
        .filter((c) => !['status', 'tree', 'demo'].includes(c[0]!))
        .map((c) => [c.join(' '), c]),
    )('%s: STORE_OPEN_FAILED, exit 5, one line', async (_label, template) => {
      const { cwd, db, before } = setUp();
      const r = await troupe(
        template.map((a) => (a === '<db>' ? db : a)),
        cwd,
        {},
        as,
      );
      expect(r.code, r.stderr).toBe(5);
      expectOneLine(r, 'STORE_OPEN_FAILED');
      expect(r.stderr).toContain(`Cannot write to ${db}`);
      expect(fileHashes(db)).toEqual(before);
    });

    it.each(
      commands('<db>')
        .filter((c) => ['status', 'tree'].includes(c[0]!))
        .map((c) => [c.join(' '), c]),
    )('%s reads it, exit 0', async (_label, template) => {
      const { cwd, db, before } = setUp();
      const r = await troupe(
        template.map((a) => (a === '<db>' ? db : a)),
        cwd,
        {},
        as,
      );
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/lead/);
      expect(fileHashes(db)).toEqual(before);
    });
  },
);

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
  it.each(
    commands('<db>')
      .filter((c) => c[0] !== 'demo')
      .map((c) => [c.join(' '), c]),
  )('%s', async (_label, template) => {
    const cwd = workdir();
    const db = join(cwd, 't.db');
    copyFileSync(seeded, db);
    const before = fileHashes(db);
    const r = await troupe(
      template.map((a) => (a === '<db>' ? db : a)),
      cwd,
    );
    expect(r.code, r.stderr).toBe(5);
    expectOneLine(r, 'STORE_CORRUPT');
    expect(r.stderr).toContain(`agents row "${rootId}" is damaged: state is not valid JSON`);
    expect(r.stderr).not.toContain('SyntaxError');
    expect(fileHashes(db)).toEqual(before);
  });
});
