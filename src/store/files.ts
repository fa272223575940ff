/** File helpers for the SQLite store. */
import { chmodSync, closeSync, constants, lstatSync, mkdirSync, openSync, statSync } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
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
 * for its owner only); STORE_OPEN_FAILED when it cannot be. An existing directory is tightened
 * only when it is troupe's own (`tightenTroupeDir`).
 */
export function ensureParentDir(path: string): void {
  const dir = dirname(path);
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  } catch (err) {
    throw new TroupeError('STORE_OPEN_FAILED', `Cannot create the directory of ${path}: ${(err as Error).message}`, { cause: err });
  }
  tightenTroupeDir(dir);
}

/**
 * A directory named `.troupe` (the default `.troupe/`, or any `<dir>/.troupe/` a `--db` points
 * into) is troupe's own: one that already exists with permissions for group or others (made by
 * hand, by an older troupe, under a loose umask) loses them, so it is 0700 like a new one. Only a
 * real directory this user owns is changed (not a symlink, not another user's); any other folder
 * a database is put in (`--db /srv/data/x.db`) is the user's and is left as it is.
 */
function tightenTroupeDir(dir: string): void {
  if (basename(resolve(dir)) !== '.troupe') return;
  try {
    const stat = lstatSync(dir);
    if (!stat.isDirectory() || (stat.mode & 0o077) === 0) return;
    if (process.getuid !== undefined && stat.uid !== process.getuid()) return;
    chmodSync(dir, stat.mode & 0o700);
  } catch {
    // Not ours to change (a read-only mount, a race with its removal): leave it as it is.
  }
}

/** Which file a path names (device and inode, as decimal strings: an inode may exceed 2^53). */
export interface FileIdentity {
  dev: string;
  ino: string;
}

export function identityOf(path: string): FileIdentity {
  const st = statSync(path, { bigint: true });
  return { dev: String(st.dev), ino: String(st.ino) };
}
