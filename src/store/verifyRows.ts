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
import type { AgentDbRow, EventDbRow, SessionDbRow, StreamDbRow } from './dbRows.js';
import {
  EVENT_COLUMNS,
  STREAM_COLUMNS,
  toAgent,
  toDelegation,
  toExecution,
  toInboxRequest,
  toMessage,
  toNote,
  toReentry,
  toRun,
  toStreamStatus,
  toToolCall,
  toUsage,
} from './decode.js';
import { corrupt, expect } from './rowChecks.js';
import { RECORDING_SQL, type AgentRow } from './types.js';

/**
 * What the pass decoded and an owner can use instead of reading it again: every agent row, by run,
 * in `listAgents` order (created_at, then rowid). Valid until the owner's first write.
 */
export interface VerifiedRows {
  agentsByRun: Map<string, AgentRow[]>;
}

// ── what an open checks of the recording and the stream: mostly in SQL ───────────────────────

/**
 * What a writer's open selects of an event row: its data's JSON type as SQLite reads it, not the
 * text. The run's recording — the commit journal and the call log (issue 37), most of a file's
 * bytes — is read only by fork and replay, which decode it (and refuse a damaged row) when they
 * read it; its data is not checked at open, as the stream's is not.
 */
type EventCheckRow = Omit<EventDbRow, 'data'> & { data_type: string | null };
const EVENT_CHECK_COLUMNS = `id, run_id, agent_id, type, at, boot,
  CASE WHEN type IN (${RECORDING_SQL}) THEN 'object' WHEN typeof(data) = 'text' AND json_valid(data) THEN json_type(data) END AS data_type`;

/**
 * The event rows a writer's open checks in JavaScript: only those SQLite cannot vouch for. A row
 * whose columns have the types EVENT_COLUMNS asks (numbers finite: 9e999 is SQLite's infinity) and
 * whose data is an object passes {@link checkEventRow}; every other row is selected and checked
 * there, in id order, so the first damaged one is named as before. An undamaged file builds no
 * JavaScript row per event (a finished 1,000-agent team holds 17,026; iterating them was ~28 ms of
 * each open). `IS`, not `=`: a comparison with a NULL must select the row, not drop it.
 */
const EVENT_SUSPECT_SQL = `NOT (typeof(run_id) IS 'text' AND (agent_id IS NULL OR typeof(agent_id) IS 'text') AND typeof(type) IS 'text'
  AND typeof(at) IN ('integer', 'real') AND (abs(at) < 9e999) IS 1 AND typeof(boot) IN ('integer', 'real') AND (abs(boot) < 9e999) IS 1 AND data_type IS 'object')`;

/**
 * An event row's columns, its data checked by SQLite instead of parsed here: what a writer's open
 * checks (verifyRows). Parsing every event in JavaScript made opening a finished 1,000-agent run
 * ~1.9× slower once the recording was in the table; a reader's decode (decode.ts `toEvent`) still
 * parses and refuses a damaged row.
 */
function checkEventRow(r: EventCheckRow): void {
  expect('events', r.id, 'row', r, EVENT_COLUMNS);
  if (r.data_type === null) throw corrupt('events', r.id, 'data is not valid JSON');
  if (r.data_type !== 'object') throw corrupt('events', r.id, 'data is not an object');
}

/** The stream rows a writer's open checks in JavaScript: as {@link EVENT_SUSPECT_SQL}, for STREAM_COLUMNS (8,007 rows for the 1,000-agent team). */
const STREAM_SUSPECT_SQL = `NOT (typeof(run_id) IS 'text' AND typeof(seq) IN ('integer', 'real') AND (abs(seq) < 9e999) IS 1
  AND (agent_id IS NULL OR typeof(agent_id) IS 'text') AND typeof(type) IS 'text' AND typeof(data) IS 'text'
  AND typeof(at) IN ('integer', 'real') AND (abs(at) < 9e999) IS 1)`;

/**
 * A stream row's columns, without parsing its data: what a writer's open checks (verifyRows). The
 * stream is what views read, never what a run resumes from, and parsing every piece of every
 * answer at each open cost a finished 1,000-agent run 1.34× its resume time; a reader's decode
 * (decode.ts `toStreamRow`) still refuses a damaged row.
 */
function checkStreamRow(r: StreamDbRow): void {
  expect('stream', `${String(r.run_id)}:${String(r.seq)}`, 'row', r, STREAM_COLUMNS);
}

/** The stream_status rows a writer's open checks in JavaScript (one row per agent that ever streamed a status). */
const STREAM_STATUS_SUSPECT_SQL = `NOT (typeof(run_id) IS 'text' AND typeof(agent_id) IS 'text' AND (status IS NULL OR typeof(status) IS 'text')
  AND typeof(seq) IN ('integer', 'real') AND (abs(seq) < 9e999) IS 1)`;

/** Each table the store reads, the schema version that created it, and how to check its rows. */
const TABLES: readonly {
  table: string;
  since: number;
  order: string;
  columns?: string;
  /** Only the rows that may fail `check` (over `columns`' names); absent: every row. */
  suspect?: string;
  /** Rows as arrays of column values (`check` gets the column names, in the same order). */
  raw?: true;
  check: (rows: IterableIterator<unknown>, kept: VerifiedRows, columns: readonly string[]) => void;
}[] = [
  { table: 'runs', since: 1, order: 'rowid', check: (rows) => each(rows, toRun) },
  {
    table: 'agents',
    since: 1,
    // The agents_by_run index's order, which is listAgents' order within a run.
    order: 'run_id, created_at, rowid',
    // Rows as arrays, each made into a plain row by column position: reading 100,000 agent rows as
    // better-sqlite3's objects took 1.9× as long as as arrays (573 against 297 ms); with this, a
    // 100,000-agent resume took 0.95× the time (issue 36 item 5).
    raw: true,
    check: (rows, kept, columns) => {
      const [id, runId, name, parentId, depth, task, skills, status, noticeClaimed, stint, state, createdAt, updatedAt, terms] = positions(columns, [
        'id',
        'run_id',
        'name',
        'parent_id',
        'depth',
        'task',
        'skills',
        'status',
        'notice_claimed',
        'stint',
        'state',
        'created_at',
        'updated_at',
        'terms',
      ]);
      for (const c of rows as IterableIterator<unknown[]>) {
        const agent = toAgent({
          id: c[id],
          run_id: c[runId],
          name: c[name],
          parent_id: c[parentId],
          depth: c[depth],
          task: c[task],
          skills: c[skills],
          status: c[status],
          notice_claimed: c[noticeClaimed],
          stint: c[stint],
          state: c[state],
          created_at: c[createdAt],
          updated_at: c[updatedAt],
          terms: c[terms],
        } as AgentDbRow);
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
    raw: true,
    check: (rows, _kept, columns) => {
      const [agentId, seq, item, sum] = positions(columns, ['agent_id', 'seq', 'item', 'checksum']);
      let agent: unknown;
      let next = 0;
      for (const c of rows as IterableIterator<unknown[]>) {
        if (c[agentId] !== agent) [agent, next] = [c[agentId], 0];
        sessionChecksum({ agent_id: c[agentId], seq: c[seq], item: c[item], checksum: c[sum] } as SessionDbRow, next++);
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
  { table: 'stream_status', since: 12, order: 'run_id, agent_id', suspect: STREAM_STATUS_SUSPECT_SQL, check: (rows) => each(rows, toStreamStatus) },
];

/**
 * Where each named column is in a raw row. A column the table lacks is at -1, which reads as
 * undefined: its decoder calls it missing, as it did an object row's absent key.
 */
function positions<const N extends readonly string[]>(columns: readonly string[], names: N): { [K in keyof N]: number } {
  return names.map((name) => columns.indexOf(name)) as { [K in keyof N]: number };
}

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
  for (const { table, since, order, columns = '*', suspect, raw, check } of TABLES) {
    if (version < since) continue;
    if (!present.has(table)) throw new TroupeError('STORE_CORRUPT', `the table ${table} is missing`);
    const rows = suspect === undefined ? `SELECT ${columns} FROM ${table}` : `SELECT * FROM (SELECT ${columns} FROM ${table}) WHERE ${suspect}`;
    const statement = db.prepare(`${rows} ORDER BY ${order}`);
    const names = raw ? statement.columns().map((c) => c.name) : [];
    check(raw ? statement.raw().iterate() : statement.iterate(), kept, names);
  }
  return kept;
}
