/**
 * The reads of the store port on PostgreSQL. Every row goes through the shared decoders
 * (decode.ts): checksums and shapes are verified exactly as on SQLite, so a damaged row is
 * STORE_CORRUPT naming the table, the row and the column.
 * @module
 */
import type pg from 'pg';
import { BY_TYPE, BY_TYPE_EVENTS, NOT_RECORDING } from '../types.js';
import type { SessionItem } from '../../model/types.js';
import {
  toAgent,
  toDelegation,
  toEvent,
  toExecution,
  toMessage,
  toNote,
  toReentry,
  toRun,
  toSessionItem,
  toStreamRow,
  toStreamStatus,
  toToolCall,
  toUsage,
} from '../decode.js';
import type {
  AgentDbRow,
  DelegationDbRow,
  EventDbRow,
  StreamDbRow,
  StreamStatusDbRow,
  ExecutionDbRow,
  MessageDbRow,
  NoteDbRow,
  ReentryDbRow,
  RunDbRow,
  SessionDbRow,
  ToolCallDbRow,
  UsageDbRow,
} from '../dbRows.js';
import type { StorePort } from '../port.js';
import type { UsageRow } from '../types.js';
import { operationError } from './connect.js';

export type PortReads = Omit<StorePort, 'boot' | 'commit'>;

type Queryable = Pick<pg.Pool, 'query'>;

/** A run's events of one type: a type of BY_TYPE_EVENTS names the partial index's predicate, so a generic plan may use it too (types.ts). */
const EVENTS_BY_TYPE = `SELECT * FROM events WHERE run_id = $1 AND type = $2 AND ${BY_TYPE} ORDER BY id`;
const EVENTS_OF = 'SELECT * FROM events WHERE run_id = $1 AND type = $2 ORDER BY id';

/** The port's reads over `db`; `seen` is told what the owner may cache (agent rows, session lengths). */
export function pgReads(db: Queryable, seen?: { session(agentId: string, length: number): void }): PortReads {
  const all = async <R extends pg.QueryResultRow>(sql: string, params: unknown[]): Promise<R[]> => {
    try {
      return (await db.query<R>(sql, params)).rows;
    } catch (err) {
      throw operationError(err, 'a read');
    }
  };
  return {
    listRuns: async () => (await all<RunDbRow>('SELECT * FROM runs ORDER BY created_at, ord', [])).map(toRun),
    getRun: async (id) => {
      const [row] = await all<RunDbRow>('SELECT * FROM runs WHERE id = $1', [id]);
      return row && toRun(row);
    },
    listAgents: async (runId) => (await all<AgentDbRow>('SELECT * FROM agents WHERE run_id = $1 ORDER BY created_at, ord', [runId])).map(toAgent),
    spendOf: async (runId) =>
      (
        await all<{ agent_id: string; purpose: UsageRow['purpose']; cost: number }>(
          'SELECT agent_id, purpose, sum(cost_usd) AS cost FROM usage WHERE run_id = $1 GROUP BY agent_id, purpose ORDER BY agent_id, purpose',
          [runId],
        )
      ).map((r) => ({ agentId: r.agent_id, purpose: r.purpose, costUsd: r.cost })),
    pendingMessagesOf: async (runId) =>
      (await all<MessageDbRow>('SELECT * FROM messages WHERE run_id = $1 AND delivered_at IS NULL ORDER BY seq', [runId])).map(toMessage),
    noticeKeysOf: async (runId) =>
      (await all<{ notice_key: string }>('SELECT notice_key FROM messages WHERE run_id = $1 AND notice_key IS NOT NULL ORDER BY seq', [runId])).map(
        (r) => r.notice_key,
      ),
    loadSession: async (agentId) => {
      const rows = await all<SessionDbRow>('SELECT agent_id, seq, item, checksum FROM session_items WHERE agent_id = $1 ORDER BY seq', [agentId]);
      const items: SessionItem[] = rows.map((r, i) => toSessionItem(r, i));
      seen?.session(agentId, items.length);
      return items;
    },
    listDelegations: async (runId) =>
      (await all<DelegationDbRow>('SELECT * FROM delegations WHERE run_id = $1 ORDER BY dispatched_at, ord', [runId])).map(toDelegation),
    executionsOf: async (agentIds) =>
      (await all<ExecutionDbRow>('SELECT * FROM executions WHERE agent_id = ANY($1::text[]) ORDER BY linked_at, id', [[...agentIds]])).map(toExecution),
    reentryBudgetsOf: async (agentIds) =>
      (await all<ReentryDbRow>('SELECT * FROM reentry_budgets WHERE session_id = ANY($1::text[]) ORDER BY session_id', [[...agentIds]])).map(toReentry),
    eventsOf: async (runId, type) => (await all<EventDbRow>(BY_TYPE_EVENTS.includes(type) ? EVENTS_BY_TYPE : EVENTS_OF, [runId, type])).map(toEvent),
    promotedNotes: async () => (await all<NoteDbRow>("SELECT * FROM notes WHERE state = 'promoted' ORDER BY decided_at DESC, id", [])).map(toNote),
    getExecution: async (id) => {
      const [row] = await all<ExecutionDbRow>('SELECT * FROM executions WHERE id = $1', [id]);
      return row && toExecution(row);
    },
    startedToolCalls: async (agentId) =>
      (await all<ToolCallDbRow>("SELECT * FROM tool_calls WHERE agent_id = $1 AND status = 'started' ORDER BY turn, started_at", [agentId])).map(toToolCall),
    listMessages: async (runId) => (await all<MessageDbRow>('SELECT * FROM messages WHERE run_id = $1 ORDER BY seq', [runId])).map(toMessage),
    listEvents: async (runId) => (await all<EventDbRow>(`SELECT * FROM events WHERE run_id = $1 AND ${NOT_RECORDING} ORDER BY id`, [runId])).map(toEvent),
    historyOf: async (runId) => (await all<EventDbRow>('SELECT * FROM events WHERE run_id = $1 ORDER BY id', [runId])).map(toEvent),
    listUsage: async (runId) => (await all<UsageDbRow>('SELECT * FROM usage WHERE run_id = $1 ORDER BY id', [runId])).map(toUsage),
    readStream: async (runId, afterSeq, limit) =>
      (await all<StreamDbRow>('SELECT * FROM stream WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3', [runId, afterSeq, limit])).map(toStreamRow),
    lastStreamSeq: async (runId) => (await all<{ n: number }>('SELECT coalesce(max(seq), 0)::bigint AS n FROM stream WHERE run_id = $1', [runId]))[0]!.n,
    streamedStatuses: async (runId) => {
      const rows = await all<StreamStatusDbRow>('SELECT run_id, agent_id, status, seq FROM stream_status WHERE run_id = $1', [runId]);
      return new Map(rows.map(toStreamStatus));
    },
    // As SQLite's (sqliteStatements.ts `unshown`): only the agents whose stream_status row is
    // missing or shows another status, each row that is there decoded.
    unshownStatuses: async (runId) => {
      if ((await all('SELECT 1 FROM stream_status WHERE run_id = $1 LIMIT 1', [runId])).length === 0) return null;
      const rows = await all<{ id: string } & { [K in keyof StreamStatusDbRow]: StreamStatusDbRow[K] | null }>(
        `SELECT a.id, s.run_id, s.agent_id, s.status, s.seq FROM agents a
         LEFT JOIN stream_status s ON s.run_id = a.run_id AND s.agent_id = a.id
         WHERE a.run_id = $1 AND (s.agent_id IS NULL OR s.status IS DISTINCT FROM a.status)`,
        [runId],
      );
      return new Map(rows.map((r) => [r.id, r.agent_id === null ? null : toStreamStatus(r as StreamStatusDbRow)[1]]));
    },
  };
}
