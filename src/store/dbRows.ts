/**
 * Rows as better-sqlite3 returns them, column by column (what the file says, before any check:
 * decode.ts turns them into the store's rows).
 * @module
 */
import type { AgentRow, DelegationRow, ExecutionRow, MessageRow, NoteRow, UsageRow } from './types.js';
import type { InboxRequest } from './types.js';

export interface RunDbRow {
  id: string;
  created_at: number;
  interactive: number;
  root_id: string | null;
  budget: string;
}

export interface AgentDbRow {
  id: string;
  run_id: string;
  name: string;
  parent_id: string | null;
  depth: number;
  task: string;
  skills: string;
  status: AgentRow['status'];
  notice_claimed: number;
  stint: number;
  state: string;
  created_at: number;
  updated_at: number;
  /** Since schema 8 (null: none, or a row written before). */
  terms?: string | null;
}

export interface MessageDbRow {
  seq: number;
  id: string;
  run_id: string;
  to_agent: string;
  from_id: string;
  from_name: string;
  type: string;
  priority: MessageRow['priority'];
  content: string;
  interrupt: number;
  created_at: number;
  delivered_at: number | null;
  notice_key: string | null;
  checksum: string;
  /** Since schema 8 (null: none, or a row written before). */
  data?: string | null;
}

export interface SessionDbRow {
  agent_id: string;
  seq: number;
  item: string;
  checksum: string;
}

export interface EventDbRow {
  id: number;
  run_id: string;
  agent_id: string | null;
  type: string;
  data: string;
  at: number;
  boot: number;
}

export interface StreamDbRow {
  run_id: string;
  seq: number;
  agent_id: string | null;
  type: string;
  data: string;
  at: number;
}

/** Each agent's last streamed status (migration 12); status is null where that row's data was not JSON. */
export interface StreamStatusDbRow {
  run_id: string;
  agent_id: string;
  status: string | null;
  seq: number;
}

export interface UsageDbRow {
  id: number;
  run_id: string;
  agent_id: string;
  purpose: UsageRow['purpose'];
  model: string;
  input_tokens: number;
  output_tokens: number;
  cached_input_tokens: number;
  cost_usd: number;
  at: number;
}

export interface DelegationDbRow {
  session_id: string;
  delegation_id: string;
  run_id: string;
  goal: string;
  status: DelegationRow['status'];
  dispatched_at: number;
  completed_at: number | null;
  result_text: string | null;
  started_boot: number;
}

export interface ExecutionDbRow {
  id: string;
  agent_id: string;
  status: ExecutionRow['status'];
  result: string | null;
  linked_at: number;
  finished_at: number | null;
  continued_at: number | null;
}

export interface NoteDbRow {
  id: string;
  state: NoteRow['state'];
  run_id: string;
  agent_name: string;
  title: string;
  content: string;
  proposed_at: number;
  decided_at: number;
  reason: string | null;
}

export interface ToolCallDbRow {
  agent_id: string;
  turn: number;
  call_id: string;
  tool: string;
  args_hash: string;
  status: 'started' | 'finished';
  started_at: number;
  finished_at: number | null;
  boot: number;
}

export interface ReentryDbRow {
  session_id: string;
  count: number;
  last_wake_at: number;
}

export interface InboxDbRow {
  id: number;
  run_id: string;
  kind: InboxRequest['kind'];
  payload: string;
  created_at: number;
  done_at: number | null;
  result: string | null;
}
