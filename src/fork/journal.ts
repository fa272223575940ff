/**
 * The commit journal (issue 37): every group commit of a run on a durable store also writes, in the
 * same transaction (no extra fsync), one `run.commit` event whose data are the commit's writes. The
 * journal is the run's committed history in the order its owner applied it: a prefix of it is the
 * run's state right after any commit, which is what a fork starts from (fork.ts).
 *
 * Left out: the commit's events, which are rows of their own in the order written — the entry is
 * written after them, so a commit's events are the run's events between its entry and the one
 * before (the call log among them: copying it again doubled a run's bytes and made a durable turn
 * ~1.3× and opening a finished run ~1.9× slower); the live stream's rows (what subscribers saw,
 * derived, and the bulk of a commit); the answers of inbox requests (rows of the inbox, which
 * belongs to the run that was asked); and the store-wide drop of stale re-entry budgets (not a
 * write of this run).
 * @module
 */
import type { StorePort, WriteOp } from '../store/port.js';
import { COMMIT_EVENT, type EventRow } from '../store/types.js';

/** What a journal entry's event data hold. */
export interface CommitEntry {
  ops: WriteOp[];
  /**
   * 2: the commit's events are the rows before the entry, not among `ops`. Entries written before
   * (no `v`) hold them among `ops`, and the rows between them are their copies.
   */
  v?: 2;
}

const journaled = (w: WriteOp) => w.op !== 'appendEvent' && w.op !== 'appendStream' && w.op !== 'answerRequest' && w.op !== 'dropReentryBudgets';

/** The journal entry recording `ops` (null when none of them is journaled). */
function journalOp(runId: string, ops: readonly WriteOp[], at: number): WriteOp | null {
  if (!ops.some((w) => w.op !== 'appendStream' && w.op !== 'answerRequest' && w.op !== 'dropReentryBudgets')) return null;
  const data: CommitEntry = { ops: ops.filter(journaled), v: 2 };
  return { op: 'appendEvent', row: { runId, agentId: null, type: COMMIT_EVENT, data: data as unknown as Record<string, unknown>, at } };
}

/**
 * What the group committer of run `runId` adds to each commit on `port`: nothing in memory (nothing
 * outlives the process there, and the journal would only grow its heap).
 */
export function journalFor(port: StorePort, runId: string, now: () => number): ((ops: readonly WriteOp[]) => WriteOp | null) | undefined {
  return port.inMemory === true ? undefined : (ops) => journalOp(runId, ops, now());
}

/** `ops` followed by their journal entry, for a commit made outside the group committer (resume's recovery). */
export function withJournal(port: StorePort, runId: string, ops: readonly WriteOp[], at: number): WriteOp[] {
  const entry = port.inMemory === true ? null : journalOp(runId, ops, at);
  return entry ? [...ops, entry] : [...ops];
}

/** One journal entry with the events its commit wrote. */
export interface Commit {
  entry: EventRow;
  ops: WriteOp[];
  events: EventRow[];
}

/**
 * The run's commits from its history (`historyOf`: every event, oldest first), in order. Events
 * not written by a journaled commit are left out: `skip`'s types (the saved configuration, a
 * fork's origin: written on their own), and any after the last entry (not committed with one).
 */
export function commitsOf(history: readonly EventRow[], skip: ReadonlySet<string>): Commit[] {
  const commits: Commit[] = [];
  let events: EventRow[] = [];
  for (const e of history) {
    if (e.type === COMMIT_EVENT) {
      const data = e.data as unknown as CommitEntry;
      commits.push({ entry: e, ops: data.ops, events: data.v === 2 ? events : [] });
      events = [];
    } else if (!skip.has(e.type)) events.push(e);
  }
  return commits;
}
