/** File helpers for the SQLite store. */
import { closeSync, constants, mkdirSync, openSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { TroupeError } from '../errors.js';

/**
 * Create `path` with mode 0600 if it does not exist (SQLite gives its -wal and -shm files the
 * database file's mode). An existing file is left as it is.
 */
export function createFileIfMissing(path: string): void {
  try {
    closeSync(openSync(path, constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY, 0o600));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return;
    throw new TroupeError('STORE_OPEN_FAILED', `Cannot create ${path}: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * Whether a database file exists at `path`: false when nothing is there (ENOENT); true for a
 * regular file. Anything else — a directory, a device, a parent that is a file (ENOTDIR), a
 * directory that may not be searched (EACCES) — is STORE_OPEN_FAILED: the file cannot be used,
 * which is not the same as there being none.
 */
export function fileState(path: string): boolean {
  let isFile: boolean;
  try {
    isFile = statSync(path).isFile();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw new TroupeError('STORE_OPEN_FAILED', `Cannot open ${path}: ${(err as Error).message}`, { cause: err });
  }
  if (!isFile) throw new TroupeError('STORE_OPEN_FAILED', `Cannot open ${path}: it is not a regular file (a directory?)`);
  return true;
}

/**
 * Create the directory `path` lives in (0700 for any directory made here: what troupe keeps is
 * for its owner only); STORE_OPEN_FAILED when it cannot be.
 */
export function ensureParentDir(path: string): void {
  try {
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  } catch (err) {
    throw new TroupeError('STORE_OPEN_FAILED', `Cannot create the directory of ${path}: ${(err as Error).message}`, { cause: err });
  }
}
