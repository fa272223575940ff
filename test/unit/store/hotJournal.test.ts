/**
 * A process killed inside a rollback-journal write leaves a hot journal (a new file's switch to WAL
 * is the one such write troupe makes). The owner's open rolls it back, as SQLite does on any
 * read-write open, instead of failing on its read-only probe (SQLITE_READONLY_ROLLBACK): the crash
 * harness met it once in 200 kills.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openStore } from '../../../src/store/sqliteStore.js';

const sqlite = createRequire(import.meta.url).resolve('better-sqlite3');

/** A child that starts a big write in rollback-journal mode, spills it to the file, and is killed before it commits. */
function killMidWrite(path: string): void {
  const script = `
    const Database = require(${JSON.stringify(sqlite)});
    const db = new Database(${JSON.stringify(path)});
    db.pragma('journal_mode = DELETE');
    db.pragma('cache_size = 1');
    db.exec('BEGIN; CREATE TABLE half (x BLOB)');
    const insert = db.prepare('INSERT INTO half VALUES (randomblob(4000))');
    for (let i = 0; i < 200; i++) insert.run();
    process.kill(process.pid, 'SIGKILL');
  `;
  try {
    execFileSync(process.execPath, ['-e', script], { stdio: 'ignore' });
  } catch {
    // Killed, as meant.
  }
}

describe('a hot journal left by a killed writer', () => {
  it('the owner rolls it back and opens the file as new; nothing half-written stays', () => {
    const path = join(mkdtempSync(join(tmpdir(), 'troupe-hot-')), 'run.db');
    killMidWrite(path);
    expect(existsSync(`${path}-journal`) && statSync(`${path}-journal`).size > 0).toBe(true);
    // A read-only reader cannot roll it back: it is told so, and the file is left as it was.
    expect(() => openStore({ path, readonly: true })).toThrow();
    const store = openStore({ path });
    expect(store.listRuns()).toEqual([]);
    store.close();
    const again = openStore({ path });
    expect(again.listRuns()).toEqual([]);
    again.close();
  });
});
