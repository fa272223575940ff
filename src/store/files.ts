/** File helpers for the SQLite store. */
import { closeSync, constants, openSync } from 'node:fs';
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
