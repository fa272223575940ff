/**
 * The notes of a SQLite file (notes.ts), from any process: like an inbox posting (store/inbox.ts),
 * a decision is one row any process may write while another owns the file, so notes are promoted
 * while a run is live. A file from before migration 11 has no decisions; the first one migrates it,
 * which needs the owner lock (RUN_LOCKED while an older troupe owns the file).
 * @module
 */
import Database from 'better-sqlite3';
import { isTroupeError, TroupeError } from '../errors.js';
import { toEvent, toNote } from '../store/decode.js';
import type { EventDbRow, NoteDbRow } from '../store/dbRows.js';
import { classify } from '../store/openFile.js';
import { openStore } from '../store/sqliteStore.js';
import { SCHEMA_VERSION } from '../store/migrations.js';
import { NOTE_EVENT, notesOver, type Notes } from './notes.js';

/** The schema version that has the notes table. */
const NOTES_SINCE = 11;

function connect(path: string, readonly: boolean): Database.Database {
  let db: Database.Database;
  try {
    db = new Database(path, { fileMustExist: true, readonly, timeout: 5_000 });
  } catch (err) {
    throw new TroupeError('STORE_OPEN_FAILED', `Cannot open ${path}: ${(err as Error).message}`, { cause: err });
  }
  const version = db.pragma('user_version', { simple: true }) as number;
  if (version > SCHEMA_VERSION) {
    db.close();
    throw new TroupeError('STORE_SCHEMA_TOO_NEW', `${path} has schema version ${version}; this troupe knows up to ${SCHEMA_VERSION}. Upgrade troupe.`);
  }
  return db;
}

/** Run `fn` on a fresh connection, closed after; SQLite failures become typed errors. */
function using<T>(path: string, readonly: boolean, fn: (db: Database.Database, version: number) => T): T {
  const db = connect(path, readonly);
  try {
    return fn(db, db.pragma('user_version', { simple: true }) as number);
  } catch (err) {
    throw isTroupeError(err) ? err : (classify(err, `the notes of ${path}`) ?? err);
  } finally {
    db.close();
  }
}

/** Migrate a file from before the notes table: as its owner, for a moment. */
function migrate(path: string): void {
  try {
    openStore({ path }).close();
  } catch (err) {
    if (isTroupeError(err) && err.code === 'RUN_LOCKED') {
      throw new TroupeError(
        'RUN_LOCKED',
        `${path} is owned by an older troupe (schema before ${NOTES_SINCE}), which has no notes: stop it or resume its run with this troupe, then decide`,
        {
          cause: err,
        },
      );
    }
    throw err;
  }
}

/**
 * The notes of the SQLite file at `path`.
 * @example
 * const notes = sqliteNotes('.troupe/troupe.db');
 * const [first] = (await notes.list()).filter((n) => n.state === 'quarantined');
 * if (first) await notes.promote(first.id); // every later run's root reads it
 */
export function sqliteNotes(path: string, now: () => number = Date.now): Notes {
  return notesOver(
    {
      proposals: () =>
        Promise.resolve(
          using(path, true, (db) => (db.prepare('SELECT * FROM events WHERE type = ? ORDER BY id').all(NOTE_EVENT) as EventDbRow[]).map(toEvent)),
        ),
      decisions: () =>
        Promise.resolve(
          using(path, true, (db, version) =>
            version < NOTES_SINCE ? [] : (db.prepare('SELECT * FROM notes ORDER BY decided_at, id').all() as NoteDbRow[]).map(toNote),
          ),
        ),
      decide(row) {
        try {
          if (using(path, true, (_db, version) => version) < NOTES_SINCE) migrate(path);
          const inserted = using(path, false, (db) =>
            db
              .prepare(
                `INSERT INTO notes (id, state, run_id, agent_name, title, content, proposed_at, decided_at, reason)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
              )
              .run(row.id, row.state, row.runId, row.agentName, row.title, row.content, row.proposedAt, row.decidedAt, row.reason),
          );
          return Promise.resolve(inserted.changes === 1);
        } catch (err) {
          return Promise.reject(err as Error);
        }
      },
      close: () => Promise.resolve(),
    },
    now,
  );
}
