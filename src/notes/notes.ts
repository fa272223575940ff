/**
 * Notes (seeds/001, issue 34 item 8): what background review learnt, kept for a person to judge.
 *
 * - **Quarantined.** A proposal is its run's `review.note` event (turn/review.ts): it changes
 *   nothing by itself.
 * - **One decision.** A person promotes or rejects it (`troupe notes promote|reject`, or
 *   {@link Notes}): a row of the store's `notes` table, written once; a second decision is
 *   NOTE_ALREADY_DECIDED (the primary key backstops two at once), an unknown id NOTE_NOT_FOUND.
 * - **Read by later runs.** Every run started after a promotion gives its root the promoted notes
 *   in its first input ({@link notesText}): newest promotion first, whole notes only, within
 *   `notes.maxChars`. A run already started is not changed (its first input is committed), so a
 *   resume reads what its start read.
 * - **Stable ids.** A note's id is set when it is proposed (a digest of its time, title and text;
 *   rows from before ids were kept get the same digest), so the same proposal has the same id in
 *   every process and in a fork's copy of the run.
 * @module
 */
import { createHash } from 'node:crypto';
import { TroupeError } from '../errors.js';
import type { EventRow, NoteRow } from '../store/types.js';

/** The event type of a proposal. */
export const NOTE_EVENT = 'review.note';

/** A note's id: a digest of what was proposed. */
export const noteId = (proposal: { at: number; title: string; content: string }): string =>
  `n${createHash('sha256')
    .update(JSON.stringify([proposal.at, proposal.title, proposal.content]))
    .digest('hex')
    .slice(0, 12)}`;

/** A proposed note and what became of it. */
export interface Note {
  id: string;
  /** `quarantined` until a person decides. */
  state: 'quarantined' | NoteRow['state'];
  /** The run it was proposed in, and by whose review. */
  runId: string;
  agentId: string | null;
  agentName: string;
  title: string;
  content: string;
  proposedAt: number;
  decidedAt: number | null;
  reason: string | null;
}

/** A proposal as its event row holds it. */
export function proposalOf(e: EventRow): Note {
  const data = e.data as { id?: unknown; agentName?: unknown; title?: unknown; content?: unknown };
  const title = typeof data.title === 'string' ? data.title : '';
  const content = typeof data.content === 'string' ? data.content : '';
  return {
    id: typeof data.id === 'string' ? data.id : noteId({ at: e.at, title, content }),
    state: 'quarantined',
    runId: e.runId,
    agentId: e.agentId,
    agentName: typeof data.agentName === 'string' ? data.agentName : '',
    title,
    content,
    proposedAt: e.at,
    decidedAt: null,
    reason: null,
  };
}

/**
 * Every note of the store: each proposal once (the first run that holds it: a fork copies its
 * source's events) with its decision, and decided notes whose proposal is no longer readable.
 * Quarantined first, then by proposal time.
 */
function notesOf(proposals: readonly EventRow[], decisions: readonly NoteRow[]): Note[] {
  const decided = new Map(decisions.map((d) => [d.id, d]));
  const seen = new Map<string, Note>();
  for (const e of proposals) {
    const note = proposalOf(e);
    if (!seen.has(note.id)) seen.set(note.id, note);
  }
  for (const d of decisions) {
    if (!seen.has(d.id)) seen.set(d.id, { ...d, agentId: null, state: d.state });
  }
  const all = [...seen.values()].map((n): Note => {
    const d = decided.get(n.id);
    return d ? { ...n, state: d.state, title: d.title, content: d.content, decidedAt: d.decidedAt, reason: d.reason } : n;
  });
  const rank = (n: Note) => (n.state === 'quarantined' ? 0 : 1);
  return all.sort((a, b) => rank(a) - rank(b) || a.proposedAt - b.proposedAt || a.id.localeCompare(b.id));
}

/** Default bound on what a root reads of the promoted notes (characters of note text). */
export const DEFAULT_NOTES_MAX_CHARS = 4_000;

/**
 * What a new run's root reads of the promoted notes (given newest promotion first): whole notes
 * while their titles and texts fit in `maxChars`, a line saying how many were left out, or null
 * when there are none to read.
 */
export function notesText(promoted: readonly Pick<NoteRow, 'id' | 'title' | 'content'>[], maxChars: number): string | null {
  const kept: string[] = [];
  let used = 0;
  for (const n of promoted) {
    const size = n.title.length + n.content.length;
    if (used + size > maxChars) break;
    used += size;
    kept.push(`### ${n.title} (${n.id})\n${n.content}`);
  }
  if (kept.length === 0) return null;
  const left = promoted.length - kept.length;
  return [
    'Notes from earlier runs (lessons a person reviewed and promoted; use them where they fit, they are not instructions about this task):',
    ...kept,
    ...(left > 0 ? [`(${left} older promoted note${left === 1 ? '' : 's'} left out: they did not fit.)`] : []),
  ].join('\n\n');
}

/** Where notes are kept: a store's proposals and decisions (sqliteNotes.ts, postgresNotes.ts). */
export interface NotesBackend {
  /** Every `review.note` event of the store, oldest first. */
  proposals(): Promise<EventRow[]>;
  decisions(): Promise<NoteRow[]>;
  /** Record `row` unless its note has a decision already; whether it was recorded. */
  decide(row: NoteRow): Promise<boolean>;
  close(): Promise<void>;
}

/** A decision, or why none was recorded (NOTE_NOT_FOUND, NOTE_ALREADY_DECIDED). */
export type NoteResult = { ok: true; note: Note } | { ok: false; error: TroupeError };

/** The notes of one store: list them, promote or reject one. */
export interface Notes {
  /** Every note: quarantined ones first, then the decided ones, by proposal time. */
  list(): Promise<Note[]>;
  /** Every later run's root reads it. */
  promote(id: string, options?: { at?: number }): Promise<NoteResult>;
  /** Kept as rejected (listed, never read by a run). */
  reject(id: string, options?: { reason?: string; at?: number }): Promise<NoteResult>;
  close(): Promise<void>;
}

/** The {@link Notes} of a backend; `now` stamps decisions given no `at`. */
export function notesOver(backend: NotesBackend, now: () => number = Date.now): Notes {
  const list = async () => notesOf(await backend.proposals(), await backend.decisions());
  async function decide(id: string, state: NoteRow['state'], at: number | undefined, reason: string | null): Promise<NoteResult> {
    const note = (await list()).find((n) => n.id === id);
    if (!note) return { ok: false, error: new TroupeError('NOTE_NOT_FOUND', `no note ${JSON.stringify(id)} in this store (troupe notes lists them)`) };
    const already = () => new TroupeError('NOTE_ALREADY_DECIDED', `note ${id} was ${note.state} already; a note is decided once`);
    if (note.state !== 'quarantined') return { ok: false, error: already() };
    const row: NoteRow = { ...note, state, decidedAt: at ?? now(), reason };
    if (!(await backend.decide(row))) {
      const now = (await list()).find((n) => n.id === id);
      return { ok: false, error: new TroupeError('NOTE_ALREADY_DECIDED', `note ${id} was ${now?.state ?? 'decided'} meanwhile; a note is decided once`) };
    }
    return { ok: true, note: { ...note, state, decidedAt: row.decidedAt, reason } };
  }
  return {
    list,
    promote: (id, options = {}) => decide(id, 'promoted', options.at, null),
    reject: (id, options = {}) => decide(id, 'rejected', options.at, options.reason?.trim() || null),
    close: () => backend.close(),
  };
}
