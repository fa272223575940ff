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
 *
 * Named, not copied (v3): the session items a commit appends. They are rows of the agent's session
 * in order, so an entry names them by where they stand (`from`, `count`; a registration's first
 * input is items 0…n-1): copies of every tool result made the journal the bulk of a durable run's
 * bytes (1,000 tool turns: 1.13 MB of 3.36). A rewrite (compaction, stripped images) deletes the
 * rows it replaces, so its entry keeps what it removed: the old session's items between the head
 * and the tail it shares with the new one (the same objects in the owner's memory), which is all
 * of them a compaction summarised and the few images a strip replaced. Rewrites are rare; the new
 * session is named like an append (its first `count` rows).
 * @module
 */
import { TroupeError } from '../errors.js';
import type { SessionItem } from '../model/types.js';
import type { StorePort, WriteOp } from '../store/port.js';
import { COMMIT_EVENT, type AgentRow, type EventRow } from '../store/types.js';

/** What a rewrite removed: the old session is the new one's first `head` items, then `items`, then the new one's last `tail`. */
interface Removed {
  head: number;
  items: SessionItem[];
  tail: number;
}

/**
 * A session write as a v3 entry holds it: its items named by where they stand in the agent's
 * session (the rows of its generation: since its registration or the last rewrite).
 */
type SessionRef =
  | { op: 'registerAgent'; agent: AgentRow; inputs: number }
  | { op: 'appendSession'; agentId: string; from: number; count: number }
  | { op: 'replaceSession'; agentId: string; count: number; removed: Removed };

/** One write as an entry holds it: a write op, or (v3) a session write naming its items. */
export type JournalOp = WriteOp | SessionRef;

/** What a journal entry's event data hold. */
export interface CommitEntry {
  ops: JournalOp[];
  /**
   * 2: the commit's events are the rows before the entry, not among `ops`. Entries written before
   * (no `v`) hold them among `ops`, and the rows between them are their copies.
   * 3: as 2, and session writes may name their items (SessionRef) instead of copying them.
   */
  v?: 2 | 3;
}

const journaled = (w: WriteOp) => w.op !== 'appendEvent' && w.op !== 'appendStream' && w.op !== 'answerRequest' && w.op !== 'dropReentryBudgets';

/** What a rewrite of `old` into `now` removed: all but the head and tail they share (by identity). */
function removedBy(old: readonly SessionItem[], now: readonly SessionItem[]): Removed {
  let head = 0;
  while (head < old.length && head < now.length && old[head] === now[head]) head++;
  let tail = 0;
  while (tail < old.length - head && tail < now.length - head && old[old.length - 1 - tail] === now[now.length - 1 - tail]) tail++;
  return { head, items: old.slice(head, old.length - tail), tail };
}

/** `w` as its entry holds it: a session write whose owner said where its items go is named, not copied. */
function entryOp(w: WriteOp): JournalOp {
  switch (w.op) {
    case 'registerAgent':
      return { op: 'registerAgent', agent: w.agent, inputs: w.firstInput.length };
    case 'appendSession':
      return w.from === undefined ? w : { op: 'appendSession', agentId: w.agentId, from: w.from, count: w.items.length };
    case 'replaceSession':
      return w.replaced === undefined ? w : { op: 'replaceSession', agentId: w.agentId, count: w.items.length, removed: removedBy(w.replaced, w.items) };
    default:
      return w;
  }
}

/** The journal entry recording `ops` (null when none of them is journaled). */
function journalOp(runId: string, ops: readonly WriteOp[], at: number): WriteOp | null {
  if (!ops.some((w) => w.op !== 'appendStream' && w.op !== 'answerRequest' && w.op !== 'dropReentryBudgets')) return null;
  const data: CommitEntry = { ops: ops.filter(journaled).map(entryOp), v: 3 };
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
  ops: JournalOp[];
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
      commits.push({ entry: e, ops: data.ops, events: (data.v ?? 1) >= 2 ? events : [] });
      events = [];
    } else if (!skip.has(e.type)) events.push(e);
  }
  return commits;
}

/** The writes of journaled commits in full, or why they cannot be read back. */
export type Writes = { ok: true; writes: WriteOp[][] } | { ok: false; error: TroupeError };

/** A reader of an agent's session rows as stored now. */
type LoadSession = (agentId: string) => Promise<SessionItem[]>;

const isRef = (w: JournalOp): w is SessionRef => 'inputs' in w || 'count' in w;

/**
 * The writes of the first `upTo` of `commits` (a run's journal, oldest first: all of it, for the
 * rewrites after them too) in full: the items a v3 entry names are read back from the generation
 * of the agent's session they were written in — the rows stored now for its last one
 * (`loadSession`, read only for agents some entry names items of), and for each earlier one the
 * session its rewrite removed, rebuilt from the next. Entries that copied their items (v2, no `v`)
 * are taken as written. STORE_CORRUPT when a named item is not there (rows lost, or the session
 * rewritten after `commits` were read: read them again).
 */
export async function writesOf(commits: readonly Pick<Commit, 'ops'>[], loadSession: LoadSession, upTo = commits.length): Promise<Writes> {
  // Each agent's rewrites, in order (null: one that copied its items and kept nothing).
  const rewrites = new Map<string, ({ count: number; removed: Removed } | null)[]>();
  const named = new Set<string>();
  for (const c of commits) {
    for (const w of c.ops) {
      if (w.op === 'replaceSession') rewrites.set(w.agentId, [...(rewrites.get(w.agentId) ?? []), 'removed' in w ? w : null]);
      if (isRef(w)) named.add(w.op === 'registerAgent' ? w.agent.id : w.agentId);
    }
  }
  const generations = new Map<string, (SessionItem[] | null)[]>();
  for (const agentId of named) generations.set(agentId, generationsOf(await loadSession(agentId), rewrites.get(agentId) ?? []));
  const seen = new Map<string, number>();
  /** Each agent's session length as the entries read so far left it (known from its registration on). */
  const lengths = new Map<string, number>();
  const writes: WriteOp[][] = [];
  for (const c of commits.slice(0, upTo)) {
    const ops: WriteOp[] = [];
    for (const w of c.ops) {
      const agentId = w.op === 'registerAgent' ? w.agent.id : w.op === 'appendSession' || w.op === 'replaceSession' ? w.agentId : null;
      if (agentId === null) {
        ops.push(w as WriteOp);
        continue;
      }
      if (w.op === 'replaceSession') seen.set(agentId, (seen.get(agentId) ?? 0) + 1);
      const before = lengths.get(agentId);
      // An append names the items after the ones the session held: any other place is a journal
      // out of step with its rows, which would read the wrong items without an error.
      if (w.op === 'appendSession' && 'from' in w && before !== undefined && w.from !== before)
        return corrupt(`The commit journal appends to the session of ${agentId} at item ${w.from}, where it held ${before}`);
      if (w.op === 'registerAgent' || before !== undefined) lengths.set(agentId, sessionLengthAfter(w, before ?? 0));
      if (!isRef(w)) {
        ops.push(w);
        continue;
      }
      const generation = generations.get(agentId)![seen.get(agentId) ?? 0] ?? null;
      const [from, count] = w.op === 'registerAgent' ? [0, w.inputs] : w.op === 'appendSession' ? [w.from, w.count] : [0, w.count];
      const items = generation?.slice(from, from + count) ?? [];
      if (items.length !== count) {
        const held = generation === null ? 'no longer kept' : `${generation.length} items`;
        return corrupt(`The commit journal names items ${from}…${from + count - 1} of the session of ${agentId}, which holds ${held}`);
      }
      if (w.op === 'registerAgent') ops.push({ op: 'registerAgent', agent: w.agent, firstInput: items });
      else if (w.op === 'appendSession') ops.push({ op: 'appendSession', agentId, items });
      else ops.push({ op: 'replaceSession', agentId, items });
    }
    writes.push(ops);
  }
  return { ok: true, writes };
}

const corrupt = (message: string): Writes => ({ ok: false, error: new TroupeError('STORE_CORRUPT', message) });

/**
 * An agent's session in each of its generations, as it stood when the next began: the last is
 * `rows`; each earlier one is rebuilt from the one after it and what its rewrite removed (null
 * once a rewrite kept nothing: its items were copied into the journal, v2).
 */
function generationsOf(rows: SessionItem[], rewrites: readonly ({ count: number; removed: Removed } | null)[]): (SessionItem[] | null)[] {
  const generations: (SessionItem[] | null)[] = [rows];
  for (let i = rewrites.length - 1; i >= 0; i--) {
    const rewrite = rewrites[i]!;
    const next = generations[0]!;
    // The rewrite wrote the first `count` items of the generation after it.
    const written = next?.slice(0, rewrite?.count ?? 0) ?? null;
    generations.unshift(
      rewrite === null || written === null || written.length !== rewrite.count
        ? null
        : [...written.slice(0, rewrite.removed.head), ...rewrite.removed.items, ...written.slice(written.length - rewrite.removed.tail)],
    );
  }
  return generations;
}

/**
 * Whether a commit after the first `known` entries of a run's journal rewrote a session (compaction,
 * stripped images): a reader that read the journal, then the session rows, read rows that entry
 * rewrote — by another process hosting the run — and must read both again. Items are named by
 * position, so a same-length rewrite would otherwise be read silently as what the journal names.
 */
export async function rewrittenSince(reads: Pick<StorePort, 'eventsOf'>, runId: string, known: number): Promise<boolean> {
  const since = (await reads.eventsOf(runId, COMMIT_EVENT)).slice(known);
  return since.some((e) => (e.data as unknown as CommitEntry).ops.some((w) => w.op === 'replaceSession'));
}

/** How often a reader of a run's journal and rows reads them again when a session was rewritten in between. */
export const READ_TRIES = 3;

/** How many items an agent's session held after `w` (given how many before): for "fork here" points, without reading the items. */
export function sessionLengthAfter(w: JournalOp, before: number): number {
  if (w.op === 'registerAgent') return 'inputs' in w ? w.inputs : w.firstInput.length;
  if (w.op === 'appendSession') return 'count' in w ? w.from + w.count : before + w.items.length;
  if (w.op === 'replaceSession') return 'count' in w ? w.count : w.items.length;
  return before;
}
