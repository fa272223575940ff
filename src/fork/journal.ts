/**
 * The commit journal (issue 37): every group commit of a run on a durable store also writes, in the
 * same transaction (no extra fsync), one `run.commit` event whose data are the commit's writes. The
 * journal is the run's committed history in the order its owner applied it: a prefix of it is the
 * run's state right after any commit, which is what a fork starts from (fork.ts).
 *
 * Left out: the live stream's rows (what subscribers saw, derived, and the bulk of a commit), the
 * answers of inbox requests (rows of the inbox, which belongs to the run that was asked), and the
 * store-wide drop of stale re-entry budgets (not a write of this run).
 * @module
 */
import type { StorePort, WriteOp } from '../store/port.js';
import { COMMIT_EVENT } from '../store/types.js';

/** What a journal entry's event data hold. */
export interface CommitEntry {
  ops: WriteOp[];
}

const journaled = (w: WriteOp) => w.op !== 'appendStream' && w.op !== 'answerRequest' && w.op !== 'dropReentryBudgets';

/** The journal entry recording `ops` (null when none of them is journaled). */
function journalOp(runId: string, ops: readonly WriteOp[], at: number): WriteOp | null {
  const kept = ops.filter(journaled);
  if (kept.length === 0) return null;
  const data: CommitEntry = { ops: kept };
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
