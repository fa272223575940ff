/**
 * The whole-file check: every row of every table troupe reads goes through its decoder, reading
 * only. An owner runs it before its first write (openFile.ts), so a damaged file is refused with
 * STORE_CORRUPT and left untouched. A table's schema version (`since`) says from which version the
 * file must have it; a table the schema should have and the file lacks is damage too.
 * @module
 */
import type Database from 'better-sqlite3';
import { TroupeError } from '../errors.js';
import { sessionChecksum } from './checksums.js';
import type { AgentDbRow, SessionDbRow } from './dbRows.js';
import type { AgentRow } from './types.js';
import {
  toAgent,
  toDelegation,
  checkEventRow,
  EVENT_CHECK_COLUMNS,
  EVENT_SUSPECT_SQL,
  toExecution,
  toInboxRequest,
  toMessage,
  toNote,
  toReentry,
  toRun,
  checkStreamRow,
  STREAM_SUSPECT_SQL,
  toToolCall,
  toUsage,
} from './decode.js';

/**
 * What the pass decoded and an owner can use instead of reading it again: every agent row, by run,
 * in `listAgents` order (created_at, then rowid). Valid until the owner's first write.
 */
export interface VerifiedRows {
  agentsByRun: Map<string, AgentRow[]>;
}

/** Each table the store reads, the schema version that created it, and how to check its rows. */
const TABLES: readonly {
  table: string;
  since: number;
  order: string;
  columns?: string;
  /** Only the rows that may fail `check` (over `columns`' names); absent: every row. */
  suspect?: string;
  check: (rows: IterableIterator<unknown>, kept: VerifiedRows) => void;
}[] = [
  { table: 'runs', since: 1, order: 'rowid', check: (rows) => each(rows, toRun) },
  {
    table: 'agents',
    since: 1,
    // The agents_by_run index's order, which is listAgents' order within a run.
    order: 'run_id, created_at, rowid',
    check: (rows, kept) => {
      for (const row of rows as IterableIterator<AgentDbRow>) {
        const agent = toAgent(row);
        let list = kept.agentsByRun.get(agent.runId);
        if (!list) kept.agentsByRun.set(agent.runId, (list = []));
        list.push(agent);
      }
    },
  },
  { table: 'messages', since: 1, order: 'seq', check: (rows) => each(rows, toMessage) },
  {
    // The checksum covers the item's whole text, so a matching one means the text is what troupe
    // wrote; parsing every item of every session here would cost ~10× quick_check (measured:
    // 0.8 s for 62 MB). Items are parsed and shape-checked when read (toSessionItem).
    table: 'session_items',
    since: 1,
    order: 'agent_id, seq',
    check: (rows) => {
      let agent: string | undefined;
      let next = 0;
      for (const row of rows as IterableIterator<SessionDbRow>) {
        if (row.agent_id !== agent) [agent, next] = [row.agent_id, 0];
        sessionChecksum(row, next++);
      }
    },
  },
  { table: 'usage', since: 1, order: 'id', check: (rows) => each(rows, toUsage) },
  { table: 'events', since: 1, order: 'id', columns: EVENT_CHECK_COLUMNS, suspect: EVENT_SUSPECT_SQL, check: (rows) => each(rows, checkEventRow) },
  { table: 'delegations', since: 1, order: 'rowid', check: (rows) => each(rows, toDelegation) },
  { table: 'reentry_budgets', since: 1, order: 'rowid', check: (rows) => each(rows, toReentry) },
  { table: 'executions', since: 1, order: 'rowid', check: (rows) => each(rows, toExecution) },
  { table: 'inbox', since: 2, order: 'id', check: (rows) => each(rows, toInboxRequest) },
  { table: 'tool_calls', since: 3, order: 'agent_id, turn, call_id', check: (rows) => each(rows, toToolCall) },
  { table: 'stream', since: 7, order: 'run_id, seq', suspect: STREAM_SUSPECT_SQL, check: (rows) => each(rows, checkStreamRow) },
  { table: 'notes', since: 11, order: 'id', check: (rows) => each(rows, toNote) },
];

function each<R>(rows: IterableIterator<unknown>, decode: (row: R) => unknown): void {
  for (const row of rows) decode(row as R);
}

/**
 * Decode every row of every table troupe reads (schema `version`), reading only: throws
 * STORE_CORRUPT for the first damaged row, or for a table the schema should have and the file
 * lacks. A writer calls this before its first write; it gets back the agent rows decoded.
 */
export function verifyRows(db: Database.Database, version: number): VerifiedRows {
  const present = new Set(db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").pluck().all() as string[]);
  const kept: VerifiedRows = { agentsByRun: new Map() };
  for (const { table, since, order, columns = '*', suspect, check } of TABLES) {
    if (version < since) continue;
    if (!present.has(table)) throw new TroupeError('STORE_CORRUPT', `the table ${table} is missing`);
    const rows = suspect === undefined ? `SELECT ${columns} FROM ${table}` : `SELECT * FROM (SELECT ${columns} FROM ${table}) WHERE ${suspect}`;
    check(db.prepare(`${rows} ORDER BY ${order}`).iterate(), kept);
  }
  return kept;
}
