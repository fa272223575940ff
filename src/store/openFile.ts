/**
 * Opening a database file: refuse what cannot be used before anything is written. Every check
 * that can find damage — quick_check, the schema version, a SQLite file of another program, and
 * (for an owner) every row through its decoder — runs on a read-only connection first: a
 * read-write connection checkpoints the WAL into the main file when it closes, so a refused file
 * would not stay byte for byte as it was. Only a file that passed is opened for writing.
 * @module
 */
import { accessSync, constants } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { TroupeError } from '../errors.js';
import { createFileIfMissing, fileState, identityOf, type FileIdentity } from './files.js';
import { MIGRATIONS, SCHEMA_VERSION } from './migrations.js';
import { verifyRows, type VerifiedRows } from './verifyRows.js';

export interface OpenFileOptions {
  path: string;
  readonly?: boolean;
  verify?: boolean;
  busyTimeoutMs?: number;
  maxSizeBytes?: number;
}

export const sqliteCode = (err: unknown) => (typeof (err as { code?: unknown })?.code === 'string' ? (err as { code: string }).code : '');

/** A SQLite error as STORE_IO / STORE_CORRUPT when it is one (I/O, full disk, damage), else null. */
export function classify(err: unknown, what: string): TroupeError | null {
  const code = sqliteCode(err);
  if (code.startsWith('SQLITE_IOERR') || code === 'SQLITE_FULL') {
    return new TroupeError('STORE_IO', `${what} failed: ${code}: ${(err as Error).message}`, { cause: err });
  }
  if (code.startsWith('SQLITE_CORRUPT') || code === 'SQLITE_NOTADB') {
    return new TroupeError('STORE_CORRUPT', `${what}: the database is damaged (${code}); it is left untouched`, { cause: err });
  }
  return null;
}

function connect(path: string, readonly: boolean, timeout: number): Database.Database {
  try {
    return new Database(path, readonly ? { readonly: true, fileMustExist: true, timeout } : { timeout });
  } catch (err) {
    throw new TroupeError('STORE_OPEN_FAILED', `Cannot open ${path}: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * STORE_OPEN_FAILED unless this process may write the file and the -wal/-shm beside it (when they
 * exist): SQLite would open a read-only file (0444, a read-only mount) for writing without a word
 * and fail at the first write, after recovery had begun. Root passes (it may write anyway).
 */
function requireWritable(path: string): void {
  for (const file of [path, `${path}-wal`, `${path}-shm`]) {
    try {
      accessSync(file, constants.W_OK);
    } catch (err) {
      if (file !== path && (err as NodeJS.ErrnoException).code === 'ENOENT') continue;
      throw new TroupeError(
        'STORE_OPEN_FAILED',
        `Cannot write to ${file}: ${(err as Error).message} (a read-only database can be read with troupe status, tree and ui; it is left untouched)`,
        { cause: err },
      );
    }
  }
}

/** Names of the tables a file holds (a file troupe has not initialised holds none). */
const tablesOf = (db: Database.Database) => db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").pluck().all() as string[];

/** Check an opened file, reading only; returns its schema version and, for an owner, what it decoded. */
function checkFile(db: Database.Database, options: OpenFileOptions): { version: number; verified: VerifiedRows | null } {
  const { path } = options;
  try {
    const version = db.pragma('user_version', { simple: true }) as number;
    const check = db.pragma('quick_check', { simple: true }) as string;
    if (check !== 'ok') throw new TroupeError('STORE_CORRUPT', `${path} failed quick_check (${check}); it is left untouched`);
    if (version > SCHEMA_VERSION) {
      throw new TroupeError(
        'STORE_SCHEMA_TOO_NEW',
        `${path} has schema version ${version}; this troupe knows up to ${SCHEMA_VERSION}. Upgrade troupe; the file is left untouched.`,
      );
    }
    if (version === 0) {
      const tables = tablesOf(db);
      if (tables.length > 0) {
        throw new TroupeError('STORE_CORRUPT', `${path} is not a troupe database (it holds tables ${tables.slice(0, 5).join(', ')}); it is left untouched`);
      }
      if (options.readonly) throw new TroupeError('RUN_NOT_FOUND', `${path} holds no troupe data`);
    }
    const verified = !options.readonly && options.verify !== false ? verifyRows(db, version) : null;
    return { version, verified };
  } catch (err) {
    if (err instanceof TroupeError) {
      if (err.code !== 'STORE_CORRUPT' || err.message.includes(path)) throw err;
      throw new TroupeError('STORE_CORRUPT', `${path}: ${err.message}; it is left untouched`, { cause: err });
    }
    throw classify(err, `opening ${path}`) ?? new TroupeError('STORE_OPEN_FAILED', `Cannot read ${path}: ${(err as Error).message}`, { cause: err });
  }
}

/** The owner's connection: WAL, `synchronous` set explicitly, foreign keys, the size cap, pending migrations. */
function setUp(db: Database.Database, options: OpenFileOptions, synchronous: 'FULL' | 'NORMAL', version: number): void {
  db.pragma('journal_mode = WAL');
  // Explicitly, on every open: this build reports FULL on a fresh file and NORMAL on reopen.
  db.pragma(`synchronous = ${synchronous}`);
  db.pragma('foreign_keys = ON');
  if (options.maxSizeBytes !== undefined) {
    const pageSize = db.pragma('page_size', { simple: true }) as number;
    db.pragma(`max_page_count = ${Math.max(1, Math.ceil(options.maxSizeBytes / pageSize))}`);
  }
  const pending = MIGRATIONS.filter((m) => m.version > version);
  if (pending.length > 0) {
    db.transaction(() => {
      for (const m of pending) db.exec(m.sql);
      db.pragma(`user_version = ${SCHEMA_VERSION}`);
    }).immediate();
  }
}

/** Whether opening failed on a hot rollback journal that a read-only connection may not roll back. */
const hotJournal = (err: unknown): boolean => {
  for (let e: unknown = err; e instanceof Error; e = e.cause) if ((e as { code?: unknown }).code === 'SQLITE_READONLY_ROLLBACK') return true;
  return false;
};

/** Run `fn` on `db`, closing it if `fn` throws. */
function closingOnThrow<T>(db: Database.Database, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    db.close();
    throw err;
  }
}

/** An opened database, and the agent rows its owner's verify pass decoded (null when there was none, or a migration ran since). */
export interface OpenedDatabase {
  db: Database.Database;
  verified: VerifiedRows | null;
}

/**
 * Open `options.path` (or ':memory:') checked: a reader's connection after the read-only checks,
 * an owner's after every check passed on a read-only probe, then set up and migrated.
 */
export function openDatabase(options: OpenFileOptions, synchronous: 'FULL' | 'NORMAL'): OpenedDatabase {
  const { path } = options;
  const timeout = options.busyTimeoutMs ?? 5_000;
  if (path === ':memory:') {
    const db = new Database(':memory:');
    return closingOnThrow(db, () => (setUp(db, options, synchronous, db.pragma('user_version', { simple: true }) as number), { db, verified: null }));
  }
  if (options.readonly) {
    if (!fileState(path)) throw new TroupeError('STORE_OPEN_FAILED', `${path} does not exist`);
    const db = connect(path, true, timeout);
    return closingOnThrow(db, () => (checkFile(db, options), { db, verified: null }));
  }
  try {
    accessSync(dirname(path), constants.W_OK);
  } catch (err) {
    throw new TroupeError('STORE_OPEN_FAILED', `Cannot write to the directory of ${path}: ${(err as Error).message}`, { cause: err });
  }
  createFileIfMissing(path);
  fileState(path); // a directory (or anything but a file) where the database should be
  requireWritable(path);
  const probed = () => {
    const probe = connect(path, true, timeout);
    try {
      return checkFile(probe, options);
    } finally {
      probe.close(); // a read-only connection never checkpoints: a refused file is left as it was
    }
  };
  let checked: ReturnType<typeof checkFile>;
  try {
    checked = probed();
  } catch (err) {
    if (!hotJournal(err)) throw err;
    // A process killed inside a rollback-journal write (a new file's switch to WAL is the one such
    // write) left a hot journal, which a read-only connection cannot roll back. The owner's
    // read-write connection rolls it back, as SQLite always does on its first read; then the checks.
    const recovering = connect(path, false, timeout);
    try {
      recovering.pragma('user_version', { simple: true });
    } finally {
      recovering.close();
    }
    checked = probed();
  }
  const db = connect(path, false, timeout);
  // A migration may rewrite rows: what was decoded before it is not what the file holds.
  const verified = checked.version === SCHEMA_VERSION ? checked.verified : null;
  return closingOnThrow(db, () => (setUp(db, options, synchronous, checked.version), { db, verified }));
}

/**
 * A second read-write connection to a file its owner opened (checked, migrated, locked) in this
 * process: the commit thread's (sqliteWriter.ts). Set up as the owner's, nothing checked again but
 * that `path` still names the file the owner opened (`identity`): never a new file, nor one moved
 * into its place.
 */
export function openWriterConnection(options: OpenFileOptions, synchronous: 'FULL' | 'NORMAL', identity: FileIdentity): Database.Database {
  let db: Database.Database;
  try {
    db = new Database(options.path, { timeout: options.busyTimeoutMs ?? 5_000, fileMustExist: true });
  } catch (err) {
    throw new TroupeError('STORE_OPEN_FAILED', `Cannot open ${options.path}: ${(err as Error).message}`, { cause: err });
  }
  return closingOnThrow(db, () => {
    const now = identityOf(options.path);
    if (now.dev !== identity.dev || now.ino !== identity.ino) {
      throw new TroupeError('STORE_OPEN_FAILED', `${options.path} is no longer the file this process opened (it was moved or replaced)`);
    }
    setUp(db, options, synchronous, SCHEMA_VERSION);
    return db;
  });
}
