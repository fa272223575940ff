/**
 * The persistence boundary. Everything the coordinator must not lose goes through a `Store`:
 * registrations with their first input, statuses and lifecycle counters, notice claims, the
 * mailbox, the conversation, the usage ledger and the event journal.
 *
 * Every method is synchronous (better-sqlite3 is) and `transaction(fn)` groups writes so that a
 * status change commits together with its notice rows. `memoryStore()` implements it for tests and
 * simulations; the SQLite store implements the same interface and passes the same contract suite.
 * @module
 */
import type { AgentLifecycleState } from '../../machines/agentMachine.js';
import type { BudgetFlags } from '../../machines/coordinatorMachine.js';
import type { AgentStatus, TurnUsage } from '../../machines/types.js';
import type { SessionItem, UsagePurpose } from '../model/types.js';
import type { Redactor } from '../logging/redact.js';

export interface RunRow {
  id: string;
  createdAt: number;
  interactive: boolean;
  rootId: string | null;
  budget: BudgetFlags;
}

export interface AgentRow extends AgentLifecycleState {
  id: string;
  runId: string;
  name: string;
  parentId: string | null;
  depth: number;
  task: string;
  skills: string[];
  status: AgentStatus;
  noticeClaimed: boolean;
  /** Stints so far: bumped each time the agent runs again after a terminal state. */
  stint: number;
  createdAt: number;
  updatedAt: number;
  /** What its parent set at spawn (null: nothing); fixed for the agent's life. */
  terms: AgentTerms | null;
}

/**
 * What a parent sets for a child at spawn (issue 35), persisted with its registration: the budget
 * allowance its subtree may spend and the JSON Schema its finish value must match.
 */
export interface AgentTerms {
  /** USD this agent and every agent below it may spend together, set aside from its parent's allowance (the run's limit at the top). */
  allowanceUsd?: number;
  /** JSON Schema the value it finishes with must match. */
  output?: Record<string, unknown>;
  /** The profile it was spawned with (the run's `profiles`, looked up by name again at resume). */
  profile?: string;
  /** A root's: what it read of the store's promoted notes at its start (notes/notes.ts), kept so that a replay reads the same. */
  notes?: string;
}

export type MessagePriority = 'low' | 'normal' | 'high' | 'urgent';

export interface MessageRow {
  /** Store-wide delivery order. */
  seq: number;
  id: string;
  runId: string;
  to: string;
  /** An agent id, `user` or `system` (stamped by the coordinator, never taken from content). */
  from: string;
  fromName: string;
  type: string;
  priority: MessagePriority;
  content: string;
  /** Whether it may cut a running turn short (notices never do). */
  interrupt: boolean;
  createdAt: number;
  deliveredAt: number | null;
  /**
   * Set on terminal notices: `notice:<child>:<stint>`. A store accepts a key once, so even a
   * buggy caller cannot tell a parent twice about the same stint.
   */
  noticeKey: string | null;
  /** What a notice says as data (its `NoticeData`): null for other messages. Covered by the checksum when set. */
  data: Record<string, unknown> | null;
}

export type NewMessage = Omit<MessageRow, 'seq' | 'deliveredAt' | 'noticeKey' | 'data'> & { noticeKey?: string | null; data?: Record<string, unknown> | null };

export type { UsagePurpose };

export interface UsageRow extends TurnUsage {
  runId: string;
  agentId: string;
  purpose: UsagePurpose;
  model: string;
  at: number;
}

/** The type of a run's commit journal entries (fork/journal.ts). */
export const COMMIT_EVENT = 'run.commit';
/** The call log's entries (host/calls/callLog.ts): one per model call, one per outside input, one per user tool's end or failure, one per mailbox read that took messages. */
export const CALL_EVENT = 'replay.call';
export const INPUT_EVENT = 'replay.input';
/** A user tool's failure's class (turn/fingerprint.ts `errorClassOf`), which its result does not say. */
export const TOOL_EVENT = 'replay.tool';
/** A mailbox read that took messages: how many (a replay takes as many, however its timings fell). */
export const READ_EVENT = 'replay.read';
/**
 * The run's recording (issue 37): read by fork and replay (`historyOf`, `eventsOf`), left out of
 * `listEvents` (the views' events), whose readers would otherwise decode it again — it is most of
 * a run's event bytes.
 */
export const RECORDING_EVENTS: readonly string[] = [COMMIT_EVENT, CALL_EVENT, INPUT_EVENT, TOOL_EVENT, READ_EVENT];
/** The recording's types as an SQL list. */
export const RECORDING_SQL = RECORDING_EVENTS.map((t) => `'${t}'`).join(', ');
/** The SQL condition (both adapters) that leaves the recording out. */
export const NOT_RECORDING = `type NOT IN (${RECORDING_SQL})`;

/**
 * The event types read by type (`eventsOf`) through the index `events_by_type` (SQLite schema 13,
 * PostgreSQL 18): rare ones — a run's saved configuration, approvals, notes, reviews, trace stints,
 * a fork's origin. A run's other types are read by type over its events in order, journal included
 * (fork and replay read it all). The index held every type until then, and a turn writes 3-4 events
 * of the types read that way (the journal, the call log, tool.call): 3.4 of the ~14 pages a SQLite
 * commit wrote, 24 % of the bytes a turn sent to the disk (measured at 120 agents on NORMAL). The
 * migrations' index predicate lists these same types (storeSchemaPages.test.ts checks it).
 */
export const BY_TYPE_EVENTS: readonly string[] = ['cli.run', 'approval', 'review.note', 'review.turn', 'trace.stint', 'fork.origin'];
/** The index's predicate (both adapters): a query names it so the planner may use the partial index. */
export const BY_TYPE = `type IN (${BY_TYPE_EVENTS.map((t) => `'${t}'`).join(', ')})`;

export interface EventRow {
  runId: string;
  agentId: string | null;
  type: string;
  data: Record<string, unknown>;
  at: number;
  /**
   * The owner that wrote it (SQLite's boot number, PostgreSQL's lease epoch), as the store hands it
   * back: one value per hosting of the run. Absent on writes (the store fills it) and in memory.
   */
  boot?: number;
}

/**
 * One entry of a run's live stream (DESIGN §13, issue 38): what its subscribers saw (status
 * changes, what agents said, tool activity, streamed pieces of answers merged per flush), numbered
 * by the run's owner so that any process can follow it and resume after `seq` without a gap or a
 * repeat. Written in batches by the owner's group commit, never per token.
 */
export interface StreamRow {
  runId: string;
  /** 1, 2, 3, … within the run, in the order the owner committed them. */
  seq: number;
  agentId: string | null;
  type: string;
  data: Record<string, unknown>;
  at: number;
}

/** Background work an agent dispatched whose result must come back to it (seeds/001). */
export interface DelegationRow {
  /** The originating agent. */
  sessionId: string;
  /** `deleg_NNNN`, never reissued within a session. */
  delegationId: string;
  runId: string;
  goal: string;
  status: 'running' | 'completed' | 'failed' | 'interrupted';
  dispatchedAt: number;
  completedAt: number | null;
  /** Capped at 4,000 characters. */
  resultText: string | null;
  /** The boot (owner) under which it was dispatched: recovery interrupts rows of earlier boots. */
  startedBoot: number;
}

/** Self-wake budget of one agent: how many wakes, and the last one. */
export interface ReentryBudgetRow {
  sessionId: string;
  count: number;
  lastWakeAt: number;
}

export interface Store {
  /** The fencing token of this owner: it increases each time a process opens the store to write. */
  readonly boot: number;
  /** Commits stay in this process's memory (no I/O): nothing is saved by holding them for a group (port.ts). */
  readonly inMemory?: boolean;
  /**
   * The secrets this store scrubs from what it writes. The coordinator scrubs every text bound
   * for a model with the same redactor (absent: the known keys, `createRedactor()`).
   */
  readonly redactor?: Redactor;

  /** Run `fn` atomically; nested calls join the outer transaction. */
  transaction<T>(fn: () => T): T;
  /** Answer an inbox request (a store other processes can post to; a memory store has no inbox). */
  answerInbox?(id: number, result: InboxResult, at: number): void;

  insertRun(run: RunRow): void;
  getRun(id: string): RunRow | undefined;
  /** Every run, oldest first. */
  listRuns(): RunRow[];
  updateRun(id: string, patch: Partial<Omit<RunRow, 'id'>>): void;

  /** Register an agent and seed its first input in one transaction. */
  registerAgent(agent: AgentRow, firstInput: SessionItem[]): void;
  updateAgent(id: string, patch: Partial<Omit<AgentRow, 'id' | 'runId'>>): void;
  getAgent(id: string): AgentRow | undefined;
  listAgents(runId: string): AgentRow[];

  /**
   * Queue a message; it is acknowledged once this returns (committed with the transaction).
   * Returns null when a message with the same `noticeKey` was already accepted.
   */
  enqueueMessage(message: NewMessage): MessageRow | null;
  pendingCount(agentId: string): number;
  /** Every message of a run, delivered or not, in delivery order. */
  listMessages(runId: string): MessageRow[];
  /** Mark the agent's pending messages up to and including `upToId` delivered (FIFO; the owner put them in the session). */
  markDelivered(agentId: string, upToId: string, at: number): void;
  /** Undelivered messages of a run, in delivery order. */
  pendingMessagesOf(runId: string): MessageRow[];
  /** Notice keys the run's messages used. */
  noticeKeysOf(runId: string): string[];

  appendSession(agentId: string, items: SessionItem[]): void;
  loadSession(agentId: string): readonly SessionItem[];
  /**
   * Overwrite an agent's whole session in one transaction (compaction, image placeholders). With
   * `expectedLength`, nothing is written and false is returned if the session has changed length
   * since it was read, so a slow rewrite never drops newer items.
   */
  replaceSession(agentId: string, items: SessionItem[], expectedLength?: number): boolean;

  recordUsage(row: UsageRow): void;
  listUsage(runId: string): UsageRow[];
  /** Spend per agent and purpose. */
  spendOf(runId: string): { agentId: string; purpose: UsagePurpose; costUsd: number }[];

  appendEvent(row: EventRow): void;
  /** The store's promoted notes, newest promotion first (absent: a store that keeps none, e.g. in memory). */
  promotedNotes?(): NoteRow[];
  /** The run's events, oldest first, without its recording (RECORDING_EVENTS). */
  listEvents(runId: string): EventRow[];
  /** Every event of the run, oldest first, its recording included: what fork and replay read. */
  historyOf(runId: string): EventRow[];

  /** Append live-stream rows (their `seq` follow the run's last one). */
  appendStream(rows: readonly StreamRow[]): void;
  /** The run's stream rows after `afterSeq`, oldest first, at most `limit`. */
  readStream(runId: string, afterSeq: number, limit: number): StreamRow[];
  /** The run's last stream `seq` (0 when it has none). */
  lastStreamSeq(runId: string): number;
  /**
   * Each agent's status as the run's stream last showed it, by agent id (the `to` of its last
   * `agent.status` row): a resume re-announces only agents whose status the stream does not show.
   */
  streamedStatuses(runId: string): Map<string, string>;
  /**
   * The run's agents whose status (their row's) the stream's last status row for them does not
   * show, each with what that row shows (as streamedStatuses: `"null"` for none), or null when the
   * stream has no status row for it; null when the run's stream has no status row at all (every
   * agent is unshown). Compared by the store: a resume whose stream shows every agent reads no row
   * per agent (it announces these only; every other agent is shown as its row stands).
   */
  unshownStatuses(runId: string): Map<string, string | null> | null;

  /** Record a dispatched delegation (status `running`). */
  insertDelegation(row: DelegationRow): void;
  /** Move a delegation out of `running`; false (and nothing written) if it was not running. */
  finishDelegation(sessionId: string, delegationId: string, end: { status: 'completed' | 'failed' | 'interrupted'; at: number; resultText: string }): boolean;
  listDelegations(runId: string): DelegationRow[];

  putReentryBudget(row: ReentryBudgetRow): void;
  /** Drop budgets whose last wake is older than `before` (stale rows must not space a new process). */
  dropReentryBudgets(before: number): number;

  /** Link an async execution a tool result announced to the agent (ignored if already linked). */
  linkExecution(row: { id: string; agentId: string; linkedAt: number }): boolean;
  /** Record an execution's terminal state once; false if unknown or already finished. */
  finishExecution(id: string, end: { status: 'completed' | 'failed'; result: string; at: number }): boolean;
  /** Mark a finished execution as continued; false if it already was (so a continuation runs once). */
  markExecutionContinued(id: string, at: number): boolean;
  getExecution(id: string): ExecutionRow | undefined;
  /** Every execution linked to these agents. */
  executionsOf(agentIds: readonly string[]): ExecutionRow[];
  /** Re-entry budgets of these agents. */
  reentryBudgetsOf(agentIds: readonly string[]): ReentryBudgetRow[];
  /** The run's event rows of one type, oldest first. */
  eventsOf(runId: string, type: string): EventRow[];

  /** Mark a tool call started (before it runs); a re-run of the same call marks it started again. */
  startToolCall(row: Omit<ToolCallRow, 'status' | 'finishedAt' | 'boot'>): void;
  /** Mark calls of one turn finished (in the transaction that records their results). */
  finishToolCalls(agentId: string, turn: number, callIds: readonly string[], at: number): void;
  /** The agent's calls marked started and never finished: in doubt after a crash. */
  startedToolCalls(agentId: string): ToolCallRow[];

  close(): void;
}

/**
 * One call of a tool that may have effects (risk other than read_only), in the in-doubt ledger:
 * `started` is committed before the tool runs, `finished` with its result.
 */
export interface ToolCallRow {
  agentId: string;
  /** The agent's turn (lifetime count) whose model answer asked for the call. */
  turn: number;
  callId: string;
  tool: string;
  /** sha256 of the canonical arguments. */
  argsHash: string;
  status: 'started' | 'finished';
  startedAt: number;
  finishedAt: number | null;
  /** The boot (owner) under which it started. */
  boot: number;
}

/**
 * A person's decision on a note a background review proposed (notes/notes.ts; the proposal is its
 * run's `review.note` event). Store-wide: every later run's root reads the promoted ones.
 */
export interface NoteRow {
  /** The proposal's id (notes/notes.ts noteId). */
  id: string;
  state: 'promoted' | 'rejected';
  /** The run the note was proposed in. */
  runId: string;
  agentName: string;
  /** The note as it was promoted (or rejected). */
  title: string;
  content: string;
  proposedAt: number;
  decidedAt: number;
  /** Why it was rejected, if a reason was given. */
  reason: string | null;
}

/** An async execution started by a tool and linked to the agent that started it (auto-continuation). */
export interface ExecutionRow {
  id: string;
  agentId: string;
  status: 'running' | 'completed' | 'failed';
  result: string | null;
  linkedAt: number;
  finishedAt: number | null;
  continuedAt: number | null;
}

/* The inbox (inbox.ts): requests from outside the run to its owner, and their answers. */

/**
 * `send` (payload: agent, content), `stop` (agent, cascade?: false to stop it alone), `pause` /
 * `resume` the budget, `execution` (execution, status: completed | failed, result): an async
 * execution a tool started has ended, and the agent that started it continues with its result;
 * `delegation` (agent, delegation, status: completed | failed, result): background work an agent
 * dispatched has ended, and the agent is messaged its result.
 */
export const INBOX_KINDS = ['send', 'stop', 'pause', 'resume', 'execution', 'delegation', 'approval'] as const;
export type InboxKind = (typeof INBOX_KINDS)[number];

export interface InboxResult {
  ok: boolean;
  message: string;
  /** The error code of a refusal (the poster's exit code follows it). */
  code?: string;
  /** For an accepted `send`: the id of the message it queued. */
  messageId?: string;
}

export interface InboxRequest {
  id: number;
  runId: string;
  kind: InboxKind;
  payload: Record<string, unknown>;
  createdAt: number;
  doneAt: number | null;
  result: InboxResult | null;
}

/** A proactive fire's claim (issue 33 item 6): one row per (scope, trigger, tick), whoever inserts it first fires. */
export interface FireClaim {
  /** The run the fire goes to (`proactive-<trigger>`, or the main run of an `agent` target). */
  scope: string;
  trigger: string;
  /** A schedule's scheduled time (ms, decimal), or `event:<id>` for an event with an id. */
  tick: string;
  at: number;
}

/** A request to post to a run's inbox. */
export interface InboxPost {
  runId: string;
  kind: InboxKind;
  payload: Record<string, unknown>;
  at: number;
}

/** What claiming a fire did: claimed here (and the request it posted in the same transaction), or taken already. */
/** Which claim (a fire's key, without its time). */
export type FireKey = Omit<FireClaim, 'at'>;

export type FireClaimed = { claimed: true; requestId: number | null } | { claimed: false };

/** A SQLite file's inbox and fire claims (sqliteInbox.ts), part of its store. */
export interface SqliteInbox {
  /** Requests other processes posted to this run (`postToInbox`) and not yet answered, oldest first. */
  openInbox(runId: string): InboxRequest[];
  /** Answer an inbox request; the posting process reads the result. */
  answerInbox(id: number, result: InboxResult, at: number): void;
  /** The runs with requests not yet answered (what the owner of the file must host to apply them). */
  inboxRuns(): string[];
  /** Post a request to a run of this file from its owner (another process uses `postToInbox`); its id. */
  postInbox(request: { runId: string; kind: InboxKind; payload: Record<string, unknown>; at: number }): number;
  /** Claim a proactive fire (insert-or-ignore) and, claimed, post `request` in the same transaction. */
  claimFire(claim: FireClaim, request?: InboxPost): FireClaimed;
  /** Forget the fire claims made before `before`; how many. */
  pruneFires(before: number): number;
  /** When the fire's claim was made (or taken over); null: unclaimed. */
  fireClaimedAt(key: FireKey): number | null;
  /** Move the fire's claim made at `from` to `to` (or release it: null), if it still stands so; whether it moved. */
  moveFireClaim(key: FireKey, from: number, to: number | null): boolean;
}
