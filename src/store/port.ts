/**
 * The store port the runtime depends on (DESIGN §12): asynchronous, so that a networked database
 * can implement it, and batch-shaped, so that one transaction carries every agent's writes of a
 * tick (group commit).
 *
 * The owner of a run is its single writer: it decides in memory and hands the store a batch of
 * write operations to apply atomically, in order. The store decides nothing: conditions (a notice
 * told once, a delegation finished once…) are decided by the owner, and the store's own
 * constraints remain only as backstops. Reads are what boot, resume and lazy loads need.
 *
 * `portOf(store)` adapts the embedded stores (memory, SQLite: synchronous inside) to the port.
 * @module
 */
import type { TroupeError } from '../errors.js';
import type { Redactor } from '../logging/redact.js';
import type { SessionItem } from '../model/types.js';
import type {
  AgentRow,
  DelegationRow,
  EventRow,
  ExecutionRow,
  InboxResult,
  MessageRow,
  NewMessage,
  NoteRow,
  ReentryBudgetRow,
  RunRow,
  Store,
  StreamRow,
  ToolCallRow,
  UsageRow,
} from './types.js';

/** One write of a batch. Applied in order, all or nothing. */
export type WriteOp =
  | { op: 'insertRun'; run: RunRow }
  | { op: 'updateRun'; id: string; patch: Partial<Omit<RunRow, 'id'>> }
  | { op: 'registerAgent'; agent: AgentRow; firstInput: SessionItem[] }
  | { op: 'updateAgent'; id: string; patch: Partial<Omit<AgentRow, 'id' | 'runId'>> }
  | { op: 'enqueueMessage'; message: NewMessage }
  /** The agent's pending messages up to and including `upToId` (FIFO) were read into its session. */
  | { op: 'markDelivered'; agentId: string; upToId: string; at: number }
  /**
   * `from`: how many items the owner held in the agent's session before these (where the first
   * goes). The commit journal names the items by it instead of copying them (fork/journal.ts);
   * stores place items by their own count.
   */
  | { op: 'appendSession'; agentId: string; items: SessionItem[]; from?: number }
  /** `replaced`: the session it rewrites, as the owner held it; the commit journal keeps what a fork needs of it (fork/journal.ts). */
  | { op: 'replaceSession'; agentId: string; items: SessionItem[]; replaced?: readonly SessionItem[] }
  | { op: 'recordUsage'; row: UsageRow }
  | { op: 'appendEvent'; row: EventRow }
  | { op: 'appendStream'; rows: readonly StreamRow[] }
  | { op: 'insertDelegation'; row: DelegationRow }
  | { op: 'finishDelegation'; sessionId: string; delegationId: string; end: { status: 'completed' | 'failed' | 'interrupted'; at: number; resultText: string } }
  | { op: 'putReentryBudget'; row: ReentryBudgetRow }
  | { op: 'dropReentryBudgets'; before: number }
  | { op: 'linkExecution'; row: { id: string; agentId: string; linkedAt: number } }
  | { op: 'finishExecution'; id: string; end: { status: 'completed' | 'failed'; result: string; at: number } }
  | { op: 'markExecutionContinued'; id: string; at: number }
  | { op: 'startToolCall'; row: Omit<ToolCallRow, 'status' | 'finishedAt' | 'boot'> }
  | { op: 'finishToolCalls'; agentId: string; turn: number; callIds: readonly string[]; at: number }
  /** An inbox request answered in the commit of its effect (a store without an inbox has nothing to answer). */
  | { op: 'answerRequest'; id: number; result: InboxResult; at: number };

/**
 * What a host asks of its lease before anything that leaves the process (DESIGN §13: a host refuses
 * to start a model or tool call once its lease may have expired locally).
 */
export interface LeaseGuard {
  /**
   * Null while the lease is surely held: renewed within its time-to-live by this process's own
   * monotonic clock and by its wall clock (the database's clock is a wall clock: a step forward of
   * it expires the lease early). Otherwise the error; from then on the lease counts as lost (told once to
   * `onLost`), even if no other host has claimed the run yet.
   */
  check(): TroupeError | null;
  /** Told once, when the lease is lost or may have expired (at once if it already is). */
  onLost(listener: (err: TroupeError) => void): void;
}

/** Spend of one agent, by call purpose. */
export interface AgentSpend {
  agentId: string;
  purpose: UsageRow['purpose'];
  costUsd: number;
}

export interface StorePort {
  /** The fencing token of this owner: it increases each time a process opens the store to write. */
  readonly boot: number;
  /**
   * Commits cost no I/O (the in-memory store): the group committer then commits at the end of the
   * microtask drain instead of waiting for the end of the event-loop turn (commit.ts). Absent or
   * false: writes wait for the end of the loop turn, so every agent that moved in it shares one
   * transaction (one fsync).
   */
  readonly inMemory?: boolean;
  /**
   * The secrets this store scrubs from what it writes: the coordinator scrubs every text bound for
   * a model with it too (absent: the known keys, `createRedactor()`).
   */
  readonly redactor?: Redactor;
  /** Apply `ops` in one transaction. Resolves once durable; a rejection means nothing of it is known to be applied. */
  commit(ops: readonly WriteOp[]): Promise<void>;
  /**
   * The lease this port is fenced by, when its owner holds the run only for a while (PostgreSQL):
   * the host asks it before every model and tool call, and stops hosting once it may be lost.
   * Absent: the owner holds the run for as long as the port is open (SQLite's owner lock, memory).
   */
  readonly guard?: LeaseGuard;

  listRuns(): Promise<RunRow[]>;
  getRun(id: string): Promise<RunRow | undefined>;
  listAgents(runId: string): Promise<AgentRow[]>;
  /** Spend per agent and purpose (what resume needs of the usage ledger). */
  spendOf(runId: string): Promise<AgentSpend[]>;
  /** Undelivered messages of a run, in delivery order. */
  pendingMessagesOf(runId: string): Promise<MessageRow[]>;
  /** Notice keys a run's messages already used (a notice is told once, across restarts). */
  noticeKeysOf(runId: string): Promise<string[]>;
  loadSession(agentId: string): Promise<SessionItem[]>;
  listDelegations(runId: string): Promise<DelegationRow[]>;
  /** Every execution linked to these agents. */
  executionsOf(agentIds: readonly string[]): Promise<ExecutionRow[]>;
  /** Re-entry budgets of these agents. */
  reentryBudgetsOf(agentIds: readonly string[]): Promise<ReentryBudgetRow[]>;
  /** The run's event rows of one type (review notes, …), oldest first. */
  eventsOf(runId: string, type: string): Promise<EventRow[]>;
  /** The store's promoted notes, newest promotion first (absent: the store keeps none); a new run's root reads them. */
  promotedNotes?(): Promise<NoteRow[]>;
  getExecution(id: string): Promise<ExecutionRow | undefined>;
  startedToolCalls(agentId: string): Promise<ToolCallRow[]>;
  /** Views and tools (status, tree, dashboards, invariants). */
  listMessages(runId: string): Promise<MessageRow[]>;
  listEvents(runId: string): Promise<EventRow[]>;
  /** Every event of the run, oldest first, its recording included (fork, replay). */
  historyOf(runId: string): Promise<EventRow[]>;
  listUsage(runId: string): Promise<UsageRow[]>;
  /** The run's live-stream rows after `afterSeq`, oldest first, at most `limit` (types.ts StreamRow). */
  readStream(runId: string, afterSeq: number, limit: number): Promise<StreamRow[]>;
  /** The run's last live-stream `seq` (0 when it has none). */
  lastStreamSeq(runId: string): Promise<number>;
  /** Each agent's status as the run's stream last showed it (types.ts Store.streamedStatuses). */
  streamedStatuses(runId: string): Promise<Map<string, string>>;
  /** The run's agents whose status its stream does not show as their last (types.ts Store.unshownStatuses). */
  unshownStatuses(runId: string): Promise<Map<string, string | null> | null>;
}

/** Whether a value already is a port (a networked store) rather than an embedded `Store`. */
export const isStorePort = (value: unknown): value is StorePort =>
  typeof value === 'object' && value !== null && typeof (value as { commit?: unknown }).commit === 'function';

/**
 * An embedded store that commits batches itself, asynchronously (a SQLite file whose commits run
 * on a worker thread: sqliteWriter.ts); its port's `commit` is this.
 */
interface BatchCommitter {
  commitBatch(ops: readonly WriteOp[]): Promise<void>;
}

const batchCommitterOf = (store: Store): BatchCommitter | null =>
  typeof (store as Partial<BatchCommitter>).commitBatch === 'function' ? (store as Store & BatchCommitter) : null;

/** Apply `ops` to an embedded store in one of its transactions. */
export function applyOps(store: Store, ops: readonly WriteOp[]): void {
  if (ops.length === 0) return;
  store.transaction(() => {
    for (const w of ops) applyOp(store, w);
  });
}

/** Apply one op to an embedded store (inside its transaction). */
function applyOp(store: Store, w: WriteOp): void {
  switch (w.op) {
    case 'insertRun':
      return store.insertRun(w.run);
    case 'updateRun':
      return store.updateRun(w.id, w.patch);
    case 'registerAgent':
      return store.registerAgent(w.agent, w.firstInput);
    case 'updateAgent':
      return store.updateAgent(w.id, w.patch);
    case 'enqueueMessage':
      store.enqueueMessage(w.message);
      return;
    case 'markDelivered':
      return store.markDelivered(w.agentId, w.upToId, w.at);
    case 'appendSession':
      return store.appendSession(w.agentId, w.items);
    case 'replaceSession':
      store.replaceSession(w.agentId, w.items);
      return;
    case 'recordUsage':
      return store.recordUsage(w.row);
    case 'appendEvent':
      return store.appendEvent(w.row);
    case 'appendStream':
      return store.appendStream(w.rows);
    case 'insertDelegation':
      return store.insertDelegation(w.row);
    case 'finishDelegation':
      store.finishDelegation(w.sessionId, w.delegationId, w.end);
      return;
    case 'putReentryBudget':
      return store.putReentryBudget(w.row);
    case 'dropReentryBudgets':
      store.dropReentryBudgets(w.before);
      return;
    case 'linkExecution':
      store.linkExecution(w.row);
      return;
    case 'finishExecution':
      store.finishExecution(w.id, w.end);
      return;
    case 'markExecutionContinued':
      store.markExecutionContinued(w.id, w.at);
      return;
    case 'startToolCall':
      return store.startToolCall(w.row);
    case 'finishToolCalls':
      return store.finishToolCalls(w.agentId, w.turn, w.callIds, w.at);
    case 'answerRequest':
      return store.answerInbox?.(w.id, w.result, w.at);
  }
}

const ports = new WeakMap<Store, StorePort>();

/**
 * The port over an embedded store (memory or SQLite). Its work is synchronous: a commit runs one
 * transaction at once and resolves (or, for a store with its own `commitBatch`, is handed to it),
 * reads resolve with what the store returned. One port per store.
 */
export function portOf(store: Store): StorePort {
  const known = ports.get(store);
  if (known) return known;
  const batches = batchCommitterOf(store);
  const port: StorePort = {
    get boot() {
      return store.boot;
    },
    inMemory: store.inMemory === true,
    ...(store.redactor ? { redactor: store.redactor } : {}),
    commit(ops) {
      if (batches) return batches.commitBatch(ops);
      try {
        applyOps(store, ops);
        return Promise.resolve();
      } catch (err) {
        return Promise.reject(err as Error);
      }
    },
    listRuns: () => settle(() => store.listRuns()),
    getRun: (id) => settle(() => store.getRun(id)),
    listAgents: (runId) => settle(() => store.listAgents(runId)),
    spendOf: (runId) => settle(() => store.spendOf(runId)),
    pendingMessagesOf: (runId) => settle(() => store.pendingMessagesOf(runId)),
    noticeKeysOf: (runId) => settle(() => store.noticeKeysOf(runId)),
    loadSession: (agentId) => settle(() => [...store.loadSession(agentId)]),
    listDelegations: (runId) => settle(() => store.listDelegations(runId)),
    executionsOf: (agentIds) => settle(() => store.executionsOf(agentIds)),
    reentryBudgetsOf: (agentIds) => settle(() => store.reentryBudgetsOf(agentIds)),
    eventsOf: (runId, type) => settle(() => store.eventsOf(runId, type)),
    ...(store.promotedNotes ? { promotedNotes: () => settle(() => store.promotedNotes!()) } : {}),
    getExecution: (id) => settle(() => store.getExecution(id)),
    startedToolCalls: (agentId) => settle(() => store.startedToolCalls(agentId)),
    listMessages: (runId) => settle(() => store.listMessages(runId)),
    listEvents: (runId) => settle(() => store.listEvents(runId)),
    historyOf: (runId) => settle(() => store.historyOf(runId)),
    listUsage: (runId) => settle(() => store.listUsage(runId)),
    readStream: (runId, afterSeq, limit) => settle(() => store.readStream(runId, afterSeq, limit)),
    lastStreamSeq: (runId) => settle(() => store.lastStreamSeq(runId)),
    streamedStatuses: (runId) => settle(() => store.streamedStatuses(runId)),
    unshownStatuses: (runId) => settle(() => store.unshownStatuses(runId)),
  };
  ports.set(store, port);
  return port;
}

function settle<T>(fn: () => T): Promise<T> {
  try {
    return Promise.resolve(fn());
  } catch (err) {
    return Promise.reject(err as Error);
  }
}
