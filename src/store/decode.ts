/**
 * Rows read from a database file are untrusted: a flipped bit, a torn page or another program can
 * leave text that is not JSON, JSON of the wrong shape, or a value of the wrong type in any column.
 * Every row the SQLite store hands out goes through a decoder here, which checks it completely
 * and throws `STORE_CORRUPT` naming the table, the row and the column — never a SyntaxError, and
 * never a half-built row. The checks are written with rowChecks.ts; checksums.ts says what a
 * checksum covers; verifyRows.ts runs every decoder over every row of a file (the event and
 * stream rows checked there mostly in SQL).
 * @module
 */
import type { AgentLifecycleState } from '../../machines/agentMachine.js';
import type { BudgetFlags } from '../../machines/coordinatorMachine.js';
import { AGENT_STATUSES } from '../../machines/types.js';
import type { SessionItem } from '../model/types.js';
import { messageDigest, sessionChecksum } from './checksums.js';
import type {
  AgentDbRow,
  DelegationDbRow,
  EventDbRow,
  ExecutionDbRow,
  InboxDbRow,
  MessageDbRow,
  NoteDbRow,
  ReentryDbRow,
  RunDbRow,
  SessionDbRow,
  StreamDbRow,
  StreamStatusDbRow,
  ToolCallDbRow,
  UsageDbRow,
} from './dbRows.js';
import { INBOX_KINDS, type AgentTerms, type InboxRequest } from './types.js';
import {
  arrayOf,
  corrupt,
  expect,
  isBoolean,
  isCount,
  isFlag,
  isNumber,
  isRecord,
  isString,
  nullable,
  oneOf,
  optional,
  parseJson,
  shape,
  type Check,
} from './rowChecks.js';
import type { AgentRow, DelegationRow, EventRow, ExecutionRow, MessageRow, NoteRow, RunRow, StreamRow, ToolCallRow, UsageRow } from './types.js';

// ── runs ──────────────────────────────────────────────────────────────────────────────────────

const BUDGET_FLAGS: Record<keyof BudgetFlags, Check> = {
  limitUsd: nullable(isNumber),
  budgetStopped: isBoolean,
  reserveStopped: isBoolean,
  paused: isBoolean,
  resumeEpoch: isCount,
  reserveNoticeClaimed: isBoolean,
};

export function toRun(row: RunDbRow): RunRow {
  expect('runs', row.id, 'row', row, { id: isString, created_at: isNumber, interactive: isFlag, root_id: nullable(isString), budget: isString });
  const budget = parseJson('runs', row.id, 'budget', row.budget);
  expect('runs', row.id, 'budget', budget, BUDGET_FLAGS);
  return { id: row.id, createdAt: row.created_at, interactive: row.interactive === 1, rootId: row.root_id, budget: budget as BudgetFlags };
}

// ── agents ────────────────────────────────────────────────────────────────────────────────────

const AGENT_COLUMNS: Record<string, Check> = {
  id: isString,
  run_id: isString,
  name: isString,
  parent_id: nullable(isString),
  depth: isCount,
  task: isString,
  skills: isString,
  status: oneOf(...AGENT_STATUSES),
  notice_claimed: isFlag,
  stint: isCount,
  state: isString,
  created_at: isNumber,
  updated_at: isNumber,
  terms: optional(nullable(isString)),
};

/** The state column was parsed from JSON text: whatever a report's `value` holds is JSON (or absent). */
const isJsonOrAbsent: Check = () => true;

const AGENT_STATE: Record<keyof AgentLifecycleState, Check> = {
  turns: isCount,
  stintTurns: isCount,
  recoveries: isCount,
  idleResumes: isCount,
  waitKind: nullable(oneOf('user', 'agents', 'timer')),
  waitTimeoutMs: nullable(isNumber),
  waitingSince: nullable(isNumber),
  pendingWait: nullable(shape({ callId: isString, tool: oneOf('wait_for_agents', 'respond_to_user', 'sleep_until'), until: optional(oneOf('all')) })),
  stopReason: nullable(oneOf('requested', 'maxTurns', 'budget', 'reserve', 'reentry', 'allowance')),
  error: nullable(shape({ code: isString, message: isString, retryable: isBoolean })),
  // `value` is any JSON (an agent with an output schema); absent otherwise.
  report: nullable(shape({ summary: isString, findings: arrayOf(isString), openItems: arrayOf(isString), success: isBoolean, value: isJsonOrAbsent })),
  lastTool: nullable(isString),
  budgetEpoch: isCount,
  // Written since issue 16; older rows lack it.
  attempts: optional(nullable(shape({ turn: isCount, retries: isCount, compactions: isCount, imageStrips: isCount, retryAt: optional(isNumber) }))),
};

const AGENT_TERMS: Record<keyof AgentTerms, Check> = {
  allowanceUsd: optional((v) => typeof v === 'number' && Number.isFinite(v) && v > 0),
  output: optional(isRecord),
  profile: optional(isString),
  notes: optional(isString),
};

export function toAgent(row: AgentDbRow): AgentRow {
  expect('agents', row.id, 'row', row, AGENT_COLUMNS);
  const state = parseJson('agents', row.id, 'state', row.state);
  expect('agents', row.id, 'state', state, AGENT_STATE);
  // Most agents have no skills: '[]' needs no parse (a resume decodes every agent row).
  const skills = row.skills === '[]' ? [] : parseJson('agents', row.id, 'skills', row.skills);
  if (!arrayOf(isString)(skills)) throw corrupt('agents', row.id, 'skills is not a list of strings');
  const s = state as AgentLifecycleState;
  let terms: AgentTerms | null = null;
  if (row.terms !== null && row.terms !== undefined) {
    const parsed = parseJson('agents', row.id, 'terms', row.terms);
    expect('agents', row.id, 'terms', parsed, AGENT_TERMS);
    terms = parsed as AgentTerms;
  }
  return {
    terms,
    turns: s.turns,
    stintTurns: s.stintTurns,
    recoveries: s.recoveries,
    idleResumes: s.idleResumes,
    waitKind: s.waitKind,
    waitTimeoutMs: s.waitTimeoutMs,
    waitingSince: s.waitingSince,
    pendingWait: s.pendingWait,
    stopReason: s.stopReason,
    error: s.error,
    report: s.report,
    lastTool: s.lastTool,
    budgetEpoch: s.budgetEpoch,
    attempts: s.attempts ?? null,
    id: row.id,
    runId: row.run_id,
    name: row.name,
    parentId: row.parent_id,
    depth: row.depth,
    task: row.task,
    skills: skills as string[],
    status: row.status,
    noticeClaimed: row.notice_claimed === 1,
    stint: row.stint,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/** The lifecycle part of an agent row, kept as one JSON column. */
export function stateOf(a: AgentRow): AgentLifecycleState {
  return {
    turns: a.turns,
    stintTurns: a.stintTurns,
    recoveries: a.recoveries,
    idleResumes: a.idleResumes,
    waitKind: a.waitKind,
    waitTimeoutMs: a.waitTimeoutMs,
    waitingSince: a.waitingSince,
    pendingWait: a.pendingWait,
    stopReason: a.stopReason,
    error: a.error,
    report: a.report,
    lastTool: a.lastTool,
    budgetEpoch: a.budgetEpoch,
    attempts: a.attempts,
  };
}

// ── messages and sessions (checksummed) ──────────────────────────────────────────────────────

const MESSAGE_COLUMNS: Record<string, Check> = {
  seq: isCount,
  id: isString,
  run_id: isString,
  to_agent: isString,
  from_id: isString,
  from_name: isString,
  type: isString,
  priority: oneOf('low', 'normal', 'high', 'urgent'),
  content: isString,
  interrupt: isFlag,
  created_at: isNumber,
  delivered_at: nullable(isNumber),
  notice_key: nullable(isString),
  checksum: isString,
  data: optional(nullable(isString)),
};

export function toMessage(row: MessageDbRow): MessageRow {
  expect('messages', row.id ?? row.seq, 'row', row, MESSAGE_COLUMNS);
  const m: MessageRow = {
    seq: row.seq,
    id: row.id,
    runId: row.run_id,
    to: row.to_agent,
    from: row.from_id,
    fromName: row.from_name,
    type: row.type,
    priority: row.priority,
    content: row.content,
    interrupt: row.interrupt === 1,
    createdAt: row.created_at,
    deliveredAt: row.delivered_at,
    noticeKey: row.notice_key,
    data: null,
  };
  if (row.data !== null && row.data !== undefined) {
    const data = parseJson('messages', row.id, 'data', row.data);
    if (!isRecord(data)) throw corrupt('messages', row.id, 'data is not an object');
    m.data = data;
  }
  if (messageDigest(m) !== row.checksum) throw corrupt('messages', row.id, `it failed its checksum (seq ${row.seq})`);
  return m;
}

const isToolCall = shape({ id: isString, name: isString, arguments: isString });
const isPart: Check = (v) => isRecord(v) && ((v.type === 'text' && isString(v.text)) || (v.type === 'image' && isString(v.url)));
const SESSION_ITEM: Record<SessionItem['role'], Record<string, Check>> = {
  user: { content: (v) => isString(v) || arrayOf(isPart)(v) },
  assistant: { content: nullable(isString), toolCalls: optional(arrayOf(isToolCall)), refusal: optional(isString) },
  tool: { toolCallId: isString, name: isString, content: isString, isError: optional(isBoolean) },
};

/** One session item, checked: position, checksum, JSON, shape. */
export function toSessionItem(row: SessionDbRow, expectedSeq: number): SessionItem {
  const id = sessionChecksum(row, expectedSeq);
  const item = parseJson('session_items', id, 'item', row.item);
  if (!isRecord(item) || !Object.prototype.hasOwnProperty.call(SESSION_ITEM, item.role as string)) {
    throw corrupt('session_items', id, 'item has no known role');
  }
  expect('session_items', id, 'item', item, SESSION_ITEM[item.role as SessionItem['role']]);
  return item as unknown as SessionItem;
}

// ── the journal tables ─────────────────────────────────────────────────────────────────────────

/** An event row's columns and their checks (verifyRows.ts checks them at open, mostly in SQL). */
export const EVENT_COLUMNS: Record<string, Check> = { run_id: isString, agent_id: nullable(isString), type: isString, at: isNumber, boot: isNumber };

export function toEvent(r: EventDbRow): EventRow {
  expect('events', r.id, 'row', r, EVENT_COLUMNS);
  const data = parseJson('events', r.id, 'data', r.data);
  if (!isRecord(data)) throw corrupt('events', r.id, 'data is not an object');
  return { runId: r.run_id, agentId: r.agent_id, type: r.type, data, at: r.at, boot: r.boot };
}

/** A stream row's columns and their checks (as EVENT_COLUMNS). */
export const STREAM_COLUMNS: Record<string, Check> = {
  run_id: isString,
  seq: isNumber,
  agent_id: nullable(isString),
  type: isString,
  data: isString,
  at: isNumber,
};

export function toStreamRow(r: StreamDbRow): StreamRow {
  const id = `${String(r.run_id)}:${String(r.seq)}`;
  expect('stream', id, 'row', r, STREAM_COLUMNS);
  const data = parseJson('stream', id, 'data', r.data);
  if (!isRecord(data)) throw corrupt('stream', id, 'data is not an object');
  return { runId: r.run_id, seq: r.seq, agentId: r.agent_id, type: r.type, data, at: r.at };
}

const STREAM_STATUS_COLUMNS: Record<string, Check> = {
  run_id: isString,
  agent_id: isString,
  status: nullable(isString),
  seq: isNumber,
};

/** A stream_status row as streamedStatuses hands it out: the agent and its status's text (`"null"` for none). */
export function toStreamStatus(r: StreamStatusDbRow): [agentId: string, status: string] {
  expect('stream_status', `${String(r.run_id)}:${String(r.agent_id)}`, 'row', r, STREAM_STATUS_COLUMNS);
  return [r.agent_id, String(r.status)];
}

const USAGE_COLUMNS: Record<string, Check> = {
  run_id: isString,
  agent_id: isString,
  purpose: isString,
  model: isString,
  input_tokens: isNumber,
  output_tokens: isNumber,
  cached_input_tokens: isNumber,
  cost_usd: isNumber,
  at: isNumber,
};

export function toUsage(r: UsageDbRow): UsageRow {
  expect('usage', r.id, 'row', r, USAGE_COLUMNS);
  return {
    runId: r.run_id,
    agentId: r.agent_id,
    purpose: r.purpose,
    model: r.model,
    inputTokens: r.input_tokens,
    outputTokens: r.output_tokens,
    cachedInputTokens: r.cached_input_tokens,
    costUsd: r.cost_usd,
    at: r.at,
  };
}

export function toDelegation(r: DelegationDbRow): DelegationRow {
  expect('delegations', `${String(r.session_id)}/${String(r.delegation_id)}`, 'row', r, {
    session_id: isString,
    delegation_id: isString,
    run_id: isString,
    goal: isString,
    status: oneOf('running', 'completed', 'failed', 'interrupted'),
    dispatched_at: isNumber,
    completed_at: nullable(isNumber),
    result_text: nullable(isString),
    started_boot: isCount,
  });
  return {
    sessionId: r.session_id,
    delegationId: r.delegation_id,
    runId: r.run_id,
    goal: r.goal,
    status: r.status,
    dispatchedAt: r.dispatched_at,
    completedAt: r.completed_at,
    resultText: r.result_text,
    startedBoot: r.started_boot,
  };
}

export function toNote(r: NoteDbRow): NoteRow {
  expect('notes', r.id, 'row', r, {
    id: isString,
    state: oneOf('promoted', 'rejected'),
    run_id: isString,
    agent_name: isString,
    title: isString,
    content: isString,
    proposed_at: isNumber,
    decided_at: isNumber,
    reason: nullable(isString),
  });
  return {
    id: r.id,
    state: r.state,
    runId: r.run_id,
    agentName: r.agent_name,
    title: r.title,
    content: r.content,
    proposedAt: r.proposed_at,
    decidedAt: r.decided_at,
    reason: r.reason,
  };
}

export function toExecution(r: ExecutionDbRow): ExecutionRow {
  expect('executions', r.id, 'row', r, {
    id: isString,
    agent_id: isString,
    status: oneOf('running', 'completed', 'failed'),
    result: nullable(isString),
    linked_at: isNumber,
    finished_at: nullable(isNumber),
    continued_at: nullable(isNumber),
  });
  return { id: r.id, agentId: r.agent_id, status: r.status, result: r.result, linkedAt: r.linked_at, finishedAt: r.finished_at, continuedAt: r.continued_at };
}

export function toToolCall(r: ToolCallDbRow): ToolCallRow {
  expect('tool_calls', `${String(r.agent_id)}/${String(r.turn)}/${String(r.call_id)}`, 'row', r, {
    agent_id: isString,
    turn: isCount,
    call_id: isString,
    tool: isString,
    args_hash: isString,
    status: oneOf('started', 'finished'),
    started_at: isNumber,
    finished_at: nullable(isNumber),
    boot: isCount,
  });
  return {
    agentId: r.agent_id,
    turn: r.turn,
    callId: r.call_id,
    tool: r.tool,
    argsHash: r.args_hash,
    status: r.status,
    startedAt: r.started_at,
    finishedAt: r.finished_at,
    boot: r.boot,
  };
}

export function toReentry(r: ReentryDbRow): { sessionId: string; count: number; lastWakeAt: number } {
  expect('reentry_budgets', r.session_id, 'row', r, { session_id: isString, count: isCount, last_wake_at: isNumber });
  return { sessionId: r.session_id, count: r.count, lastWakeAt: r.last_wake_at };
}

export function toInboxRequest(r: InboxDbRow): InboxRequest {
  expect('inbox', r.id, 'row', r, {
    id: isCount,
    run_id: isString,
    kind: oneOf(...INBOX_KINDS),
    created_at: isNumber,
    done_at: nullable(isNumber),
  });
  const payload = parseJson('inbox', r.id, 'payload', r.payload);
  if (!isRecord(payload)) throw corrupt('inbox', r.id, 'payload is not an object');
  let result: InboxRequest['result'] = null;
  if (r.result !== null) {
    const parsed = parseJson('inbox', r.id, 'result', r.result);
    expect('inbox', r.id, 'result', parsed, { ok: isBoolean, message: isString, code: optional(isString), messageId: optional(isString) });
    result = parsed as InboxRequest['result'];
  }
  return { id: r.id, runId: r.run_id, kind: r.kind, payload, createdAt: r.created_at, doneAt: r.done_at, result };
}
