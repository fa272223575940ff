/**
 * Fork a run from a committed point (issue 37): a new run whose rows are the original's as they
 * were right after an agent's turn committed — every agent, session, message and its delivery,
 * notice claim, usage entry, delegation, execution, approval and re-entry budget — which continues
 * when it is hosted, like a run resumed after a crash. The original's rows are only read.
 *
 * The point is a prefix of the run's commit journal (journal.ts): turn N of agent A is the commit
 * that recorded it (the turn's session items, its tool results and A's counter going to N are one
 * group, turn/turn.ts), and everything any agent committed in that same group. Turn 0 is the
 * commit that registered A. The fork re-applies that prefix, renamed (remap.ts), in one
 * transaction: a crash while forking leaves no fork.
 *
 * A run in flight can be forked: only committed journal entries are read, and each holds a whole
 * commit. The session items they name (journal.ts, v3) are read from the rows after them: appends
 * since leave them in place; a rewrite in between (a run hosted by another process, PostgreSQL)
 * would leave rows that are not the ones named, so the journal is asked again after the rows are
 * read, and a rewrite committed meanwhile makes the fork read everything again (RUN_LOCKED after
 * three tries). Whoever writes the fork must be allowed to write the store (on SQLite the file's owner
 * lock: the CLI takes it, so it waits for no host but refuses while one holds the file).
 * @module
 */
import { TroupeError } from '../errors.js';
import { isStorePort, portOf, type StorePort, type WriteOp } from '../store/port.js';
import type { ReleaseState } from '../store/postgres/lease.js';
import { COMMIT_EVENT, type AgentRow, type EventRow, type Store } from '../store/types.js';
import { commitsOf, READ_TRIES, rewrittenSince, sessionLengthAfter, writesOf, type Commit, type CommitEntry } from './journal.js';
import { freshRunId, rename, renames } from './remap.js';

/** Where to fork: an agent (id or name) and one of its turns (0: right after it was registered). */
export interface ForkPoint {
  agent: string;
  turn: number;
}

export interface ForkOptions {
  at: ForkPoint;
  /** The new run's id (default: a fresh `run_…`). */
  runId?: string;
  /** When the fork is made (the origin's `at`; default: now). */
  now?: number;
}

/** Where a fork came from, recorded with it. */
export interface ForkOrigin {
  /** The run it was forked from. */
  run: string;
  /** The agent whose turn it was forked at, in the original (its id, its name). */
  agentId: string;
  agent: string;
  turn: number;
  /** How many of the original's commits the fork took. */
  commits: number;
  at: number;
}

export type ForkResult = { ok: true; runId: string; origin: ForkOrigin } | { ok: false; error: TroupeError };

/** The event a fork records its origin with. */
const ORIGIN_EVENT = 'fork.origin';
/** The saved configuration of a run the CLI started (cli/runs.ts): a fork is resumed with it. */
const CONFIG_EVENT = 'cli.run';
/** Events a run writes on their own, outside its journaled commits: never part of a commit. */
const NOT_COMMITTED: ReadonlySet<string> = new Set([CONFIG_EVENT, ORIGIN_EVENT]);

const failed = (error: TroupeError): { ok: false; error: TroupeError } => ({ ok: false, error });

/** Agent `ref` of a run: by id, else by name (the first registered of that name). */
const agentOf = (agents: readonly AgentRow[], ref: string) => agents.find((a) => a.id === ref) ?? agents.find((a) => a.name === ref);

/**
 * How many journal entries make up the run's state right after `agentId`'s turn `turn` committed:
 * the entry whose writes set its turn counter to `turn` (registered it, for turn 0), counted from 1.
 * Null if there is none. Also the agent's last committed turn, for the error.
 */
function forkPointOf(entries: readonly Pick<CommitEntry, 'ops'>[], agentId: string, turn: number): { commits: number | null; lastTurn: number | null } {
  let lastTurn: number | null = null;
  for (const [i, entry] of entries.entries()) {
    for (const w of entry.ops) {
      const turns = w.op === 'registerAgent' && w.agent.id === agentId ? w.agent.turns : w.op === 'updateAgent' && w.id === agentId ? w.patch.turns : undefined;
      if (turns === undefined || turns === lastTurn) continue;
      lastTurn = turns;
      if (turns === turn) return { commits: i + 1, lastTurn };
    }
  }
  return { commits: null, lastTurn };
}

/**
 * Fork run `runId` at `options.at`: resolves with the new run's id (or the typed error: RUN_NOT_FOUND,
 * AGENT_NOT_FOUND, FORK_POINT_NOT_FOUND). Host or resume the new run to continue it.
 * @example
 * const forked = await forkRun(store, runId, { at: { agent: 'worker', turn: 2 } });
 * if (forked.ok) await resumeCoordinator({ store, runId: forked.runId, model });
 */
export async function forkRun(store: Store | StorePort, runId: string, options: ForkOptions): Promise<ForkResult> {
  const port = isStorePort(store) ? store : portOf(store);
  const { agent: ref, turn } = options.at;
  if (!Number.isInteger(turn) || turn < 0)
    return failed(new TroupeError('CONFIG_INVALID', `Expected the turn to fork at to be an integer ≥ 0, got ${String(turn)}`));
  const run = await port.getRun(runId);
  if (!run) return failed(new TroupeError('RUN_NOT_FOUND', `The store holds no run ${runId}`));
  const agent = agentOf(await port.listAgents(runId), ref);
  if (!agent) return failed(new TroupeError('AGENT_NOT_FOUND', `Run ${runId} has no agent ${ref}`));
  const newRunId = options.runId ?? freshRunId();
  if (await port.getRun(newRunId)) return failed(new TroupeError('CONFIG_INVALID', `The store already holds a run ${newRunId}`));
  const read = await readPrefix(port, runId, agent, turn);
  if (!read.ok) return read;
  const { history, commits, taken } = read;
  const map = renames(
    runId,
    newRunId,
    taken.flatMap((c) => c.ops),
  );
  const renamed = rename(taken, runId, map);
  const origin: ForkOrigin = { run: runId, agentId: agent.id, agent: agent.name, turn, commits, at: options.now ?? Date.now() };
  const ops: WriteOp[] = [];
  // Each commit again — its writes, its events, its journal entry last — so the fork's history is
  // the original's prefix, and a fork of a fork works.
  for (const c of renamed)
    ops.push(...c.ops, ...c.events.map((e): WriteOp => ({ op: 'appendEvent', row: withoutBoot(e) })), { op: 'appendEvent', row: withoutBoot(c.entry) });
  for (const e of history) if (e.type === CONFIG_EVENT) ops.push({ op: 'appendEvent', row: { ...withoutBoot(e), runId: newRunId } });
  ops.push({ op: 'appendEvent', row: { runId: newRunId, agentId: null, type: ORIGIN_EVENT, data: { ...origin }, at: origin.at } });
  await port.commit(ops);
  return { ok: true, runId: newRunId, origin };
}

type Prefix = { ok: true; history: EventRow[]; commits: number; taken: (Omit<Commit, 'ops'> & { ops: WriteOp[] })[] } | { ok: false; error: TroupeError };

/**
 * The run's history and the commits up to `agent`'s turn `turn` with their writes in full: the
 * session items the entries name read back from the rows. The rows are the ones named unless a
 * session was rewritten after the journal was read (a run hosted by another process): a journal
 * entry committed since with a rewrite says so, and everything is read again.
 */
async function readPrefix(port: StorePort, runId: string, agent: AgentRow, turn: number): Promise<Prefix> {
  for (let attempt = 1; ; attempt++) {
    const history = await port.historyOf(runId);
    const journal = commitsOf(history, NOT_COMMITTED);
    const { commits, lastTurn } = forkPointOf(journal, agent.id, turn);
    if (commits === null) {
      const why =
        journal.length === 0
          ? 'the run has no commit journal (it was recorded in memory, or by a troupe before forks)'
          : `its committed turns go up to ${lastTurn ?? 0}`;
      return failed(new TroupeError('FORK_POINT_NOT_FOUND', `${agent.name} has no committed turn ${turn} in run ${runId}: ${why}`, { details: { lastTurn } }));
    }
    const read = await writesOf(journal, (id) => port.loadSession(id), commits);
    if (!(await rewrittenSince(port, runId, journal.length))) {
      if (!read.ok) return failed(read.error);
      return { ok: true, history, commits, taken: journal.slice(0, commits).map((c, i) => ({ ...c, ops: read.writes[i]! })) };
    }
    if (attempt === READ_TRIES)
      return failed(new TroupeError('RUN_LOCKED', `The sessions of run ${runId} were rewritten while the fork read them, ${READ_TRIES} times: fork again`));
  }
}

/**
 * An agent's committed turns and how many items its session held right after each (turn 0: its
 * registration): where a transcript can offer "fork here". Sessions rewritten since (compaction)
 * are counted as rewritten.
 */
export async function turnPointsOf(reads: Pick<StorePort, 'eventsOf'>, runId: string, agentId: string): Promise<{ turn: number; sessionLength: number }[]> {
  const points: { turn: number; sessionLength: number }[] = [];
  let length = 0;
  let turn: number | null = null;
  for (const e of await reads.eventsOf(runId, COMMIT_EVENT)) {
    let next: number | null = turn;
    for (const w of (e.data as unknown as CommitEntry).ops) {
      if (w.op === 'registerAgent' && w.agent.id === agentId) [length, next] = [sessionLengthAfter(w, 0), w.agent.turns];
      else if ((w.op === 'appendSession' || w.op === 'replaceSession') && w.agentId === agentId) length = sessionLengthAfter(w, length);
      else if (w.op === 'updateAgent' && w.id === agentId && w.patch.turns !== undefined) next = w.patch.turns;
    }
    if (next !== null && next !== turn) points.push({ turn: next, sessionLength: length });
    turn = next;
  }
  return points;
}

/** What may write a fork: a store's runs, claimed one at a time (hosting/runStore.ts). */
export interface ForkWriter {
  readonly label: string;
  claim(runId: string): Promise<{ port: StorePort; release(state: ReleaseState): Promise<void> } | null>;
}

/**
 * Fork under a claim of the new run (the CLI and the dashboard): on SQLite the file's owner lock
 * (RUN_LOCKED while a process hosts a run of it), on PostgreSQL the new run's lease, let go parked
 * so that a resume decides when the fork continues (a worker would take a runnable one at once).
 */
export async function forkClaimed(runs: ForkWriter, runId: string, at: ForkPoint): Promise<ForkResult> {
  const newRunId = freshRunId();
  const claim = await runs.claim(newRunId);
  if (!claim) return failed(new TroupeError('RUN_LOCKED', `${runs.label} is hosted by another process: fork once it lets the file go`));
  let forked: ForkResult = failed(new TroupeError('INTERNAL', 'the fork did not finish'));
  try {
    forked = await forkRun(claim.port, runId, { at, runId: newRunId });
  } finally {
    // A refusal wrote nothing: its claim ends there.
    await claim.release(forked.ok ? { state: 'parked', wakeAt: null } : { state: 'done' });
  }
  return forked;
}

function withoutBoot(e: EventRow): EventRow {
  const { boot: _boot, ...row } = e;
  return row;
}

/** Reads of any store's runs (a port, or the dashboard's reads). */
type Reads = Pick<StorePort, 'listRuns' | 'eventsOf'>;

/** Where run `runId` was forked from (null: it is no fork). */
export async function originOf(reads: Reads, runId: string): Promise<ForkOrigin | null> {
  const [event] = await reads.eventsOf(runId, ORIGIN_EVENT);
  return event ? (event.data as unknown as ForkOrigin) : null;
}

/** The forks of run `runId`, oldest first (each run's origin is read: the cost grows with the runs of the store). */
export async function forksOf(port: Reads, runId: string): Promise<{ runId: string; origin: ForkOrigin }[]> {
  const forks: { runId: string; origin: ForkOrigin }[] = [];
  for (const run of await port.listRuns()) {
    const origin = await originOf(port, run.id);
    if (origin?.run === runId) forks.push({ runId: run.id, origin });
  }
  return forks;
}
