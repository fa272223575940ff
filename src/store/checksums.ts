/**
 * What troupe's checksums cover, in one place: the writer computes them with these functions and
 * the readers verify with the same ones, so the two cannot drift apart. A message's digest covers
 * id, to, from, type, priority, createdAt, content and data when set (not seq, run_id, from_name, interrupt,
 * delivered_at or notice_key); a session item's covers its whole stored JSON text, and an item is
 * also checked for its position (a gap in a session is damage). Checksums are taken over the text
 * as written, after secrets were scrubbed.
 * @module
 */
import * as crypto from 'node:crypto';
import type { SessionDbRow } from './dbRows.js';
import { corrupt } from './rowChecks.js';
import type { MessageRow } from './types.js';

/**
 * First 16 hex digits of SHA-256. The one-shot crypto.hash (Node ≥ 20.12) costs ~0.4 µs against
 * ~1.3 µs for createHash, which older Node 20 releases fall back to.
 */
export const checksum: (text: string) => string =
  typeof crypto.hash === 'function'
    ? (text) => crypto.hash('sha256', text, 'hex').slice(0, 16)
    : (text) => crypto.createHash('sha256').update(text).digest('hex').slice(0, 16);

export const messageDigest = (m: Pick<MessageRow, 'id' | 'to' | 'from' | 'type' | 'priority' | 'content' | 'createdAt'> & { data?: MessageRow['data'] }) =>
  checksum(
    `${m.id}\u0000${m.to}\u0000${m.from}\u0000${m.type}\u0000${m.priority}\u0000${m.createdAt}\u0000${m.content}${
      // A notice's data (schema 8) is covered when set; rows without it keep their old digest.
      m.data === null || m.data === undefined ? '' : `\u0000${JSON.stringify(m.data)}`
    }`,
  );

/** Throws unless the row is item `expectedSeq` (a gap is damage too) and its text matches its checksum. */
export function sessionChecksum(row: SessionDbRow, expectedSeq: number): string {
  const id = `${String(row.agent_id)}#${String(row.seq)}`;
  if (row.seq !== expectedSeq) throw corrupt('session_items', id, `expected item ${expectedSeq} here`);
  if (typeof row.item !== 'string' || checksum(row.item) !== row.checksum) throw corrupt('session_items', id, 'it failed its checksum');
  return id;
}
