/**
 * Every SQL statement the SQLite store runs, prepared once per connection (better-sqlite3 compiles
 * a statement at `prepare`, so a statement that does not match the schema fails at open, not in
 * the middle of a run). The statements are the store's whole vocabulary of reads and writes;
 * transactions, caches and row decoding live in sqliteTransaction.ts, sqliteCache.ts and decode.ts.
 * @module
 */
import type Database from 'better-sqlite3';
import { BY_TYPE, BY_TYPE_EVENTS, NOT_RECORDING } from './types.js';

/** The SQL of every statement, by name. */
const SQL = {
  insertBoot: 'INSERT OR IGNORE INTO boots (id, started_at, pid) VALUES (?, ?, ?)',
  insertRun: 'INSERT INTO runs (id, created_at, interactive, root_id, budget) VALUES (?, ?, ?, ?, ?)',
  getRun: 'SELECT * FROM runs WHERE id = ?',
  listRuns: 'SELECT * FROM runs ORDER BY created_at, rowid',
  updateRun: 'UPDATE runs SET created_at = ?, interactive = ?, root_id = ?, budget = ? WHERE id = ?',
  insertAgent: `INSERT INTO agents (id, run_id, name, parent_id, depth, task, skills, status, notice_claimed, stint, state, created_at, updated_at, boot, terms)
       VALUES (@id, @run_id, @name, @parent_id, @depth, @task, @skills, @status, @notice_claimed, @stint, @state, @created_at, @updated_at, @boot, @terms)`,
  // Positional: it runs on every turn, and only these columns change after registration.
  updateAgent: 'UPDATE agents SET status = ?, notice_claimed = ?, stint = ?, state = ?, updated_at = ?, boot = ? WHERE id = ?',
  getAgent: 'SELECT * FROM agents WHERE id = ?',
  listAgents: 'SELECT * FROM agents WHERE run_id = ? ORDER BY created_at, rowid',
  insertMessage: `INSERT INTO messages (id, run_id, to_agent, from_id, from_name, type, priority, content, interrupt, created_at, notice_key, boot, checksum, data)
       VALUES (@id, @run_id, @to_agent, @from_id, @from_name, @type, @priority, @content, @interrupt, @created_at, @notice_key, @boot, @checksum, @data)
       ON CONFLICT (notice_key) DO NOTHING`,
  pendingCount: 'SELECT count(*) FROM messages WHERE to_agent = ? AND delivered_at IS NULL',
  pendingByAgent: 'SELECT to_agent, count(*) AS n FROM messages WHERE run_id = ? AND delivered_at IS NULL GROUP BY to_agent',
  markDeliveredUpTo:
    'UPDATE messages SET delivered_at = ? WHERE to_agent = ? AND delivered_at IS NULL AND seq <= (SELECT seq FROM messages WHERE id = ? AND to_agent = ?)',
  pendingOfRun: 'SELECT * FROM messages WHERE run_id = ? AND delivered_at IS NULL ORDER BY seq',
  noticeKeysOf: 'SELECT notice_key FROM messages WHERE run_id = ? AND notice_key IS NOT NULL',
  spendOf: 'SELECT agent_id, purpose, sum(cost_usd) AS cost FROM usage WHERE run_id = ? GROUP BY agent_id, purpose',
  listMessages: 'SELECT * FROM messages WHERE run_id = ? ORDER BY seq',
  insertItem: 'INSERT INTO session_items (agent_id, seq, item, checksum) VALUES (?, ?, ?, ?)',
  loadItems: 'SELECT agent_id, seq, item, checksum FROM session_items WHERE agent_id = ? ORDER BY seq',
  deleteItems: 'DELETE FROM session_items WHERE agent_id = ?',
  insertUsage: `INSERT INTO usage (run_id, agent_id, purpose, model, input_tokens, output_tokens, cached_input_tokens, cost_usd, at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  listUsage: 'SELECT * FROM usage WHERE run_id = ? ORDER BY id',
  insertEvent: 'INSERT INTO events (run_id, agent_id, type, data, at, boot) VALUES (?, ?, ?, ?, ?, ?)',
  listEvents: `SELECT * FROM events WHERE run_id = ? AND ${NOT_RECORDING} ORDER BY id`,
  historyOf: 'SELECT * FROM events WHERE run_id = ? ORDER BY id',
  insertStream: 'INSERT INTO stream (run_id, seq, agent_id, type, data, at) VALUES (?, ?, ?, ?, ?, ?)',
  readStream: 'SELECT * FROM stream WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?',
  lastStreamSeq: 'SELECT coalesce(max(seq), 0) FROM stream WHERE run_id = ?',
  openInbox: 'SELECT * FROM inbox WHERE run_id = ? AND done_at IS NULL ORDER BY id',
  answerInbox: 'UPDATE inbox SET done_at = ?, result = ? WHERE id = ? AND done_at IS NULL',
  inboxRuns: 'SELECT DISTINCT run_id FROM inbox WHERE done_at IS NULL ORDER BY run_id',
  postInbox: 'INSERT INTO inbox (run_id, kind, payload, created_at) VALUES (?, ?, ?, ?)',
  claimFire: 'INSERT OR IGNORE INTO proactive_fires (scope, trigger_name, tick, claimed_at) VALUES (?, ?, ?, ?)',
  fireRequest: 'UPDATE proactive_fires SET request_id = ? WHERE scope = ? AND trigger_name = ? AND tick = ?',
  pruneFires: 'DELETE FROM proactive_fires WHERE claimed_at < ?',
  fireClaimedAt: 'SELECT claimed_at FROM proactive_fires WHERE scope = ? AND trigger_name = ? AND tick = ?',
  retakeFire: 'UPDATE proactive_fires SET claimed_at = ? WHERE scope = ? AND trigger_name = ? AND tick = ? AND claimed_at = ?',
  releaseFire: 'DELETE FROM proactive_fires WHERE scope = ? AND trigger_name = ? AND tick = ? AND claimed_at = ?',
  insertDelegation: `INSERT INTO delegations (session_id, delegation_id, run_id, goal, status, dispatched_at, completed_at, result_text, started_boot)
       VALUES (@sessionId, @delegationId, @runId, @goal, @status, @dispatchedAt, @completedAt, @resultText, @startedBoot)`,
  finishDelegation: `UPDATE delegations SET status = ?, completed_at = ?, result_text = ? WHERE session_id = ? AND delegation_id = ? AND status = 'running'`,
  listDelegations: 'SELECT * FROM delegations WHERE run_id = ? ORDER BY dispatched_at, rowid',
  linkExecution: "INSERT OR IGNORE INTO executions (id, agent_id, status, linked_at) VALUES (?, ?, 'running', ?)",
  finishExecution: "UPDATE executions SET status = ?, result = ?, finished_at = ? WHERE id = ? AND status = 'running'",
  continueExecution: 'UPDATE executions SET continued_at = ? WHERE id = ? AND continued_at IS NULL',
  getExecution: 'SELECT * FROM executions WHERE id = ?',
  allExecutions: 'SELECT * FROM executions ORDER BY linked_at, id',
  allReentry: 'SELECT * FROM reentry_budgets',
  // eventsOfType picks one of these two.
  eventsByType: `SELECT * FROM events WHERE run_id = ? AND type = ? AND ${BY_TYPE} ORDER BY id`,
  eventsOf: 'SELECT * FROM events WHERE run_id = ? AND type = ? ORDER BY id',
  startToolCall: `INSERT INTO tool_calls (agent_id, turn, call_id, tool, args_hash, status, started_at, boot) VALUES (?, ?, ?, ?, ?, 'started', ?, ?)
       ON CONFLICT (agent_id, turn, call_id) DO UPDATE SET status = 'started', started_at = excluded.started_at, finished_at = NULL, boot = excluded.boot`,
  finishToolCall: "UPDATE tool_calls SET status = 'finished', finished_at = ? WHERE agent_id = ? AND turn = ? AND call_id = ? AND status = 'started'",
  startedToolCalls: "SELECT * FROM tool_calls WHERE agent_id = ? AND status = 'started' ORDER BY turn, started_at",
  putReentry: `INSERT INTO reentry_budgets (session_id, count, last_wake_at) VALUES (?, ?, ?)
       ON CONFLICT (session_id) DO UPDATE SET count = excluded.count, last_wake_at = excluded.last_wake_at`,
  dropReentry: 'DELETE FROM reentry_budgets WHERE last_wake_at < ?',
} as const;

type StatementName = keyof typeof SQL;

/** Statements that return their first column's value rather than a row object (better-sqlite3 `pluck`). */
const PLUCKED: ReadonlySet<StatementName> = new Set<StatementName>(['pendingCount', 'noticeKeysOf']);

export type Statements = Readonly<Record<StatementName, Database.Statement>>;

/** Every statement of {@link SQL}, prepared on `db`. */
export function prepareStatements(db: Database.Database): Statements {
  const out = {} as Record<StatementName, Database.Statement>;
  for (const name of Object.keys(SQL) as StatementName[]) {
    const statement = db.prepare(SQL[name]);
    out[name] = PLUCKED.has(name) ? statement.pluck() : statement;
  }
  return out;
}

/** The statement that reads a run's events of `type`: a type of BY_TYPE_EVENTS through the partial index that holds them, any other over the run's events in order (types.ts). */
export const eventsOfType = (q: Statements, type: string): Database.Statement => (BY_TYPE_EVENTS.includes(type) ? q.eventsByType : q.eventsOf);
