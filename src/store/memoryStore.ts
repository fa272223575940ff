/**
 * An in-memory `Store`, for tests, simulations and benchmarks. Nothing survives the process, but
 * the semantics match the SQLite store: transactions roll back on a throw, the mailbox is FIFO
 * with O(1) pending counts, and rows handed out are copies, so callers cannot change stored state
 * behind the store's back. Rows and session items given to the store are kept by reference (the
 * runtime never mutates them after writing) — a deep copy per write cost ~7% of a turn.
 * @module
 */
import type { SessionItem } from '../model/types.js';
import type {
  AgentRow,
  DelegationRow,
  EventRow,
  StreamRow,
  ExecutionRow,
  MessageRow,
  NewMessage,
  ReentryBudgetRow,
  RunRow,
  Store,
  ToolCallRow,
  UsageRow,
} from './types.js';
import { TroupeError } from '../errors.js';
import { RECORDING_EVENTS } from './types.js';

interface Mailbox {
  /** Every message to the agent in order; the in-memory store keeps delivered rows for inspection. */
  queue: MessageRow[];
  /** Index of the first undelivered message: pending counts and drains are O(1) per message. */
  head: number;
}

interface State {
  runs: Map<string, RunRow>;
  agents: Map<string, AgentRow>;
  mailboxes: Map<string, Mailbox>;
  sessions: Map<string, SessionItem[]>;
  usage: UsageRow[];
  events: EventRow[];
  stream: StreamRow[];
  /** Per run, each agent's last streamed status and its row's seq (what streamedStatuses reads). */
  streamStatus: Map<string, Map<string, { status: string; seq: number }>>;
  noticeKeys: Set<string>;
  delegations: Map<string, DelegationRow>;
  reentry: Map<string, ReentryBudgetRow>;
  executions: Map<string, ExecutionRow>;
  /**
   * Each agent's tool calls still `started` (the in-doubt ledger). A finished row is dropped: the
   * store port reads only started rows back, and keeping every row made each turn hash a fresh
   * string key into an ever-growing map (~5 % of an in-memory turn) and made a scan O(all calls).
   */
  toolCalls: Map<string, readonly ToolCallRow[]>;
  seq: number;
}

/** Rows are flat except for small arrays/objects that are never mutated in place. */
const copy = <T extends object>(value: T): T => ({ ...value });

/** Create an in-memory store. */
export function memoryStore(options: { groupAsOnDisk?: boolean } = {}): Store {
  const state: State = {
    runs: new Map(),
    agents: new Map(),
    mailboxes: new Map(),
    sessions: new Map(),
    usage: [],
    events: [],
    stream: [],
    streamStatus: new Map(),
    noticeKeys: new Set(),
    delegations: new Map(),
    reentry: new Map(),
    executions: new Map(),
    toolCalls: new Map(),
    seq: 0,
  };
  const lastSeq = (runId: string): number => state.stream.findLast((r) => r.runId === runId)?.seq ?? 0;
  /** Keep `status` as the agent's last streamed one unless a newer row's is kept (undone on rollback). */
  const setStreamStatus = (runId: string, agentId: string, status: string, seq: number) => {
    let run = state.streamStatus.get(runId);
    if (!run) state.streamStatus.set(runId, (run = new Map()));
    const before = run.get(agentId);
    if (before && before.seq >= seq) return;
    run.set(agentId, { status, seq });
    const kept = run;
    onRollback(() => (before ? kept.set(agentId, before) : kept.delete(agentId)));
  };
  /** Replace an agent's started calls (arrays are never changed in place: the old one is the undo). */
  const setStarted = (agentId: string, rows: readonly ToolCallRow[]) => {
    const before = state.toolCalls.get(agentId);
    if (rows.length > 0) state.toolCalls.set(agentId, rows);
    else state.toolCalls.delete(agentId);
    onRollback(() => (before ? state.toolCalls.set(agentId, before) : state.toolCalls.delete(agentId)));
  };
  /** Undo log of the current transaction (null outside one). */
  let undo: (() => void)[] | null = null;
  const onRollback = (fn: () => void) => undo?.push(fn);

  const mailbox = (agentId: string): Mailbox => {
    let box = state.mailboxes.get(agentId);
    if (!box) {
      box = { queue: [], head: 0 };
      state.mailboxes.set(agentId, box);
    }
    return box;
  };
  const session = (agentId: string): SessionItem[] => {
    let items = state.sessions.get(agentId);
    if (!items) {
      items = [];
      state.sessions.set(agentId, items);
    }
    return items;
  };
  const requireAgent = (id: string): AgentRow => {
    const row = state.agents.get(id);
    if (!row) throw new TroupeError('AGENT_NOT_FOUND', `store: no agent ${id}`);
    return row;
  };
  const append = (agentId: string, items: SessionItem[]) => {
    const list = session(agentId);
    const before = list.length;
    for (const item of items) list.push(item);
    onRollback(() => (list.length = before));
  };

  const delegationKey = (sessionId: string, delegationId: string) => `${sessionId}\u0000${delegationId}`;

  return {
    // Nothing survives the process, so every memory store is the first boot of its data.
    boot: 1,
    // groupAsOnDisk: commits grouped per event-loop turn, as a file's (a replay of a durable run).
    inMemory: options.groupAsOnDisk !== true,
    transaction<T>(fn: () => T): T {
      if (undo) return fn();
      const log: (() => void)[] = [];
      undo = log;
      try {
        return fn();
      } catch (err) {
        for (let i = log.length - 1; i >= 0; i--) log[i]!();
        throw err;
      } finally {
        undo = null;
      }
    },

    insertRun(run) {
      if (state.runs.has(run.id)) throw new TroupeError('CONFIG_INVALID', `store: run ${run.id} exists`);
      state.runs.set(run.id, copy(run));
      onRollback(() => state.runs.delete(run.id));
    },
    getRun: (id) => {
      const run = state.runs.get(id);
      return run && copy(run);
    },
    listRuns: () => [...state.runs.values()].map(copy),
    updateRun(id, patch) {
      const run = state.runs.get(id);
      if (!run) throw new TroupeError('CONFIG_INVALID', `store: no run ${id}`);
      state.runs.set(id, { ...run, ...patch });
      onRollback(() => state.runs.set(id, run));
    },

    registerAgent(agent, firstInput) {
      if (state.agents.has(agent.id)) throw new TroupeError('AGENT_EXISTS', `store: agent ${agent.id} exists`);
      state.agents.set(agent.id, copy(agent));
      onRollback(() => state.agents.delete(agent.id));
      append(agent.id, firstInput);
    },
    updateAgent(id, patch) {
      const row = requireAgent(id);
      // In place: the stored row is the store's own (registerAgent copies, reads hand out copies),
      // so nobody else sees it change. The undo puts back the fields the patch replaced. A copy per
      // update (~270 bytes each turn) was the in-memory turn's largest allocation outside XState.
      const fields = row as unknown as Record<string, unknown>;
      const before: Record<string, unknown> = {};
      for (const key in patch) {
        before[key] = fields[key];
        fields[key] = (patch as Record<string, unknown>)[key];
      }
      onRollback(() => Object.assign(row, before));
    },
    getAgent: (id) => {
      const row = state.agents.get(id);
      return row && copy(row);
    },
    listAgents: (runId) => [...state.agents.values()].filter((a) => a.runId === runId).map(copy),

    enqueueMessage(message: NewMessage): MessageRow | null {
      requireAgent(message.to);
      const noticeKey = message.noticeKey ?? null;
      if (noticeKey !== null) {
        if (state.noticeKeys.has(noticeKey)) return null;
        state.noticeKeys.add(noticeKey);
        onRollback(() => state.noticeKeys.delete(noticeKey));
      }
      const row: MessageRow = { ...message, noticeKey, data: message.data ?? null, seq: ++state.seq, deliveredAt: null };
      const box = mailbox(message.to);
      box.queue.push(row);
      onRollback(() => box.queue.pop());
      return copy(row);
    },
    pendingCount: (agentId) => {
      const box = state.mailboxes.get(agentId);
      return box ? box.queue.length - box.head : 0;
    },
    listMessages: (runId) =>
      [...state.mailboxes.values()]
        .flatMap((box) => box.queue)
        .filter((m) => m.runId === runId)
        .sort((a, b) => a.seq - b.seq)
        .map(copy),

    markDelivered(agentId, upToId, at) {
      const box = state.mailboxes.get(agentId);
      if (!box) return;
      const end = box.queue.findIndex((m, i) => i >= box.head && m.id === upToId);
      if (end < 0) return;
      const head = box.head;
      const taken = box.queue.slice(head, end + 1);
      box.head = end + 1;
      for (const m of taken) m.deliveredAt = at;
      onRollback(() => {
        box.head = head;
        for (const m of taken) m.deliveredAt = null;
      });
    },
    pendingMessagesOf(runId) {
      const out: MessageRow[] = [];
      for (const box of state.mailboxes.values())
        for (let i = box.head; i < box.queue.length; i++) if (box.queue[i]!.runId === runId) out.push(copy(box.queue[i]!));
      return out.sort((a, b) => a.seq - b.seq);
    },
    noticeKeysOf(runId) {
      const out: string[] = [];
      for (const box of state.mailboxes.values()) for (const m of box.queue) if (m.runId === runId && m.noticeKey !== null) out.push(m.noticeKey);
      return out;
    },

    appendSession: append,
    // A snapshot: a model may keep the request it was given while the session grows.
    loadSession: (agentId) => state.sessions.get(agentId)?.slice() ?? [],
    replaceSession(agentId, items, expectedLength) {
      const list = session(agentId);
      if (expectedLength !== undefined && list.length !== expectedLength) return false;
      const old = list.slice();
      list.splice(0, list.length, ...items);
      onRollback(() => list.splice(0, list.length, ...old));
      return true;
    },

    recordUsage(row) {
      state.usage.push(copy(row));
      onRollback(() => state.usage.pop());
    },
    listUsage: (runId) => state.usage.filter((u) => u.runId === runId).map(copy),
    spendOf(runId) {
      const sums = new Map<string, { agentId: string; purpose: UsageRow['purpose']; costUsd: number }>();
      for (const u of state.usage) {
        if (u.runId !== runId) continue;
        const key = `${u.agentId}\u0000${u.purpose}`;
        const sum = sums.get(key);
        if (sum) sum.costUsd += u.costUsd;
        else sums.set(key, { agentId: u.agentId, purpose: u.purpose, costUsd: u.costUsd });
      }
      return [...sums.values()];
    },

    appendEvent(row) {
      state.events.push(row);
      onRollback(() => state.events.pop());
    },
    listEvents: (runId) => state.events.filter((e) => e.runId === runId && !RECORDING_EVENTS.includes(e.type)).map(copy),
    historyOf: (runId) => state.events.filter((e) => e.runId === runId).map(copy),

    appendStream(rows) {
      for (const row of rows) {
        if (row.seq !== lastSeq(row.runId) + 1) throw new TroupeError('INTERNAL', `store: stream ${row.runId} seq ${row.seq} does not follow its last`);
        state.stream.push(copy(row));
        onRollback(() => state.stream.pop());
        if (row.type === 'agent.status' && row.agentId !== null) setStreamStatus(row.runId, row.agentId, String(row.data.to), row.seq);
      }
    },
    readStream: (runId, afterSeq, limit) =>
      state.stream
        .filter((r) => r.runId === runId && r.seq > afterSeq)
        .slice(0, limit)
        .map(copy),
    lastStreamSeq: (runId) => lastSeq(runId),
    streamedStatuses(runId) {
      const last = new Map<string, string>();
      for (const [agentId, { status }] of state.streamStatus.get(runId) ?? []) last.set(agentId, status);
      return last;
    },
    unshownStatuses(runId) {
      const shown = state.streamStatus.get(runId);
      if (!shown?.size) return null;
      const unshown = new Map<string, string | null>();
      for (const agent of state.agents.values()) {
        if (agent.runId !== runId) continue;
        const last = shown?.get(agent.id);
        if (last?.status !== agent.status) unshown.set(agent.id, last ? last.status : null);
      }
      return unshown;
    },

    insertDelegation(row) {
      const key = delegationKey(row.sessionId, row.delegationId);
      if (state.delegations.has(key)) throw new TroupeError('AGENT_EXISTS', `store: delegation ${row.delegationId} exists`);
      state.delegations.set(key, copy(row));
      onRollback(() => state.delegations.delete(key));
    },
    finishDelegation(sessionId, delegationId, end) {
      const key = delegationKey(sessionId, delegationId);
      const row = state.delegations.get(key);
      if (!row || row.status !== 'running') return false;
      state.delegations.set(key, { ...row, status: end.status, completedAt: end.at, resultText: end.resultText });
      onRollback(() => state.delegations.set(key, row));
      return true;
    },
    listDelegations: (runId) => [...state.delegations.values()].filter((d) => d.runId === runId).map(copy),

    linkExecution(row) {
      if (state.executions.has(row.id)) return false;
      state.executions.set(row.id, {
        id: row.id,
        agentId: row.agentId,
        status: 'running',
        result: null,
        linkedAt: row.linkedAt,
        finishedAt: null,
        continuedAt: null,
      });
      onRollback(() => state.executions.delete(row.id));
      return true;
    },
    finishExecution(id, end) {
      const row = state.executions.get(id);
      if (!row || row.status !== 'running') return false;
      const before = { ...row };
      Object.assign(row, { status: end.status, result: end.result, finishedAt: end.at });
      onRollback(() => Object.assign(row, before));
      return true;
    },
    markExecutionContinued(id, at) {
      const row = state.executions.get(id);
      if (!row || row.continuedAt !== null) return false;
      row.continuedAt = at;
      onRollback(() => (row.continuedAt = null));
      return true;
    },
    getExecution: (id) => {
      const row = state.executions.get(id);
      return row && { ...row };
    },
    executionsOf(agentIds) {
      const ids = new Set(agentIds);
      return [...state.executions.values()].filter((r) => ids.has(r.agentId)).map((r) => ({ ...r }));
    },
    reentryBudgetsOf(agentIds) {
      const ids = new Set(agentIds);
      return [...state.reentry.values()].filter((r) => ids.has(r.sessionId)).map((r) => ({ ...r }));
    },
    eventsOf: (runId, type) => state.events.filter((e) => e.runId === runId && e.type === type).map(copy),

    startToolCall(row) {
      // Written out field by field (not a spread plus fields: see updateAgent).
      const started: ToolCallRow = {
        agentId: row.agentId,
        turn: row.turn,
        callId: row.callId,
        tool: row.tool,
        argsHash: row.argsHash,
        status: 'started',
        startedAt: row.startedAt,
        finishedAt: null,
        boot: 0,
      };
      const rows = state.toolCalls.get(row.agentId) ?? [];
      const same = (r: ToolCallRow) => r.turn === row.turn && r.callId === row.callId;
      // Started again (a re-run after a crash): the row keeps its place.
      setStarted(row.agentId, rows.some(same) ? rows.map((r) => (same(r) ? started : r)) : [...rows, started]);
    },
    finishToolCalls(agentId, turn, callIds) {
      const rows = state.toolCalls.get(agentId);
      if (!rows) return;
      const open = rows.filter((r) => r.turn !== turn || !callIds.includes(r.callId));
      if (open.length !== rows.length) setStarted(agentId, open);
    },
    startedToolCalls: (agentId) => (state.toolCalls.get(agentId) ?? []).map(copy),
    putReentryBudget(row) {
      const prev = state.reentry.get(row.sessionId);
      state.reentry.set(row.sessionId, copy(row));
      onRollback(() => (prev ? state.reentry.set(row.sessionId, prev) : state.reentry.delete(row.sessionId)));
    },
    dropReentryBudgets(before) {
      let dropped = 0;
      for (const [id, row] of state.reentry) {
        if (row.lastWakeAt < before) {
          state.reentry.delete(id);
          onRollback(() => state.reentry.set(id, row));
          dropped++;
        }
      }
      return dropped;
    },

    close() {},
  };
}
