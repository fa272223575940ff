/**
 * The inbox: how another process (`troupe send`, `troupe stop`) reaches the process that owns a
 * live run. Only one process may own the database (its lock), but SQLite lets any process append
 * a row: the poster inserts a request, the owner applies it through its coordinator and writes the
 * result back, which the poster reads.
 * @module
 */
import Database from 'better-sqlite3';
import { TroupeError } from '../errors.js';
import type { InboxDbRow } from './dbRows.js';
import type { InboxKind, InboxRequest } from './types.js';
import { toInboxRequest } from './decode.js';

function connect(path: string): Database.Database {
  try {
    return new Database(path, { fileMustExist: true, timeout: 5_000 });
  } catch (err) {
    throw new TroupeError('STORE_OPEN_FAILED', `Cannot open ${path}: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * The schema version from which a file's owner applies a request (migrations.ts): schema 3 knew
 * only send and stop, and stopped the subtree always; schema 5 takes an execution's end, 6 a
 * delegation's, 9 an approval's answer.
 */
export function inboxSince(kind: InboxKind, payload: Record<string, unknown>): number {
  if (kind === 'approval') return 9;
  if (kind === 'delegation') return 6;
  if (kind === 'execution') return 5;
  return kind === 'pause' || kind === 'resume' || (kind === 'stop' && payload.cascade === false) ? 4 : 2;
}

/**
 * From any process, without owning the database: post a request to the run's owner. RUN_NOT_LIVE
 * (nothing posted) when the file is of an older schema than the request needs: its owner is an
 * older troupe, which would misread it.
 */
export function postToInbox(path: string, request: { runId: string; kind: InboxKind; payload: Record<string, unknown>; at: number }): number {
  const db = connect(path);
  try {
    const version = db.pragma('user_version', { simple: true }) as number;
    const since = inboxSince(request.kind, request.payload);
    if (version < since) {
      const what =
        request.kind === 'stop'
          ? 'a stop without the subtree'
          : request.kind === 'execution'
            ? "an execution's end"
            : request.kind === 'delegation'
              ? "a delegation's end"
              : request.kind === 'approval'
                ? "an approval's answer"
                : `a budget ${request.kind}`;
      throw new TroupeError(
        'RUN_NOT_LIVE',
        `${path} has schema version ${version}: the process driving it is an older troupe, which cannot take ${what} (schema ${since}); nothing was posted. Resume the run with this troupe first.`,
      );
    }
    const info = db
      .prepare('INSERT INTO inbox (run_id, kind, payload, created_at) VALUES (?, ?, ?, ?)')
      .run(request.runId, request.kind, JSON.stringify(request.payload), request.at);
    return Number(info.lastInsertRowid);
  } finally {
    db.close();
  }
}

/** From any process: the request as it stands (answered or not). */
export function readInbox(path: string, id: number): InboxRequest | undefined {
  const db = connect(path);
  try {
    const row = db.prepare('SELECT * FROM inbox WHERE id = ?').get(id) as InboxDbRow | undefined;
    return row && toInboxRequest(row);
  } finally {
    db.close();
  }
}

/** Where a queued message stands: delivered into its recipient's session yet, and the recipient's status. */
export interface Delivery {
  deliveredAt: number | null;
  agentName: string;
  agentStatus: string;
}

/** From any process: whether message `id` has been delivered (undefined if there is no such message). */
export function readDelivery(path: string, id: string): Delivery | undefined {
  const db = connect(path);
  try {
    const row = db
      .prepare(
        'SELECT m.delivered_at AS deliveredAt, a.name AS agentName, a.status AS agentStatus FROM messages m JOIN agents a ON a.id = m.to_agent WHERE m.id = ?',
      )
      .get(id) as Delivery | undefined;
    return row;
  } finally {
    db.close();
  }
}
