/**
 * The write operations of the store port (port.ts `WriteOp`) in PostgreSQL, as statements of the
 * caller's batch (batch.ts: sent in one round trip, applied as one transaction). The owner of a run
 * is its only writer (fenced by its lease), so the rows it merges patches into and its sessions'
 * lengths are cached, and read (before the batch is sent) only when the cache does not know them;
 * a batch stages its cache changes and they are kept only once it committed.
 * @module
 */
import type pg from 'pg';
import { TroupeError } from '../../errors.js';
import type { Redactor } from '../../logging/redact.js';
import type { SessionItem } from '../../model/types.js';
import { checksum, messageDigest } from '../checksums.js';
import { stateOf, toAgent } from '../decode.js';
import type { AgentDbRow } from '../dbRows.js';
import type { WriteOp } from '../port.js';
import type { AgentRow, RunRow } from '../types.js';
import type { StatementBatch } from './batch.js';

/** What the owner knows of its run's rows (valid because nobody else writes them). */
export interface OwnerCache {
  agents: Map<string, AgentRow>;
  /** Items in each agent's session. */
  sessionLength: Map<string, number>;
}

/** One batch's view of the cache: reads fall through to the cache, writes stay here until commit. */
export class StagedCache {
  readonly agents = new Map<string, AgentRow>();
  readonly sessionLength = new Map<string, number>();
  constructor(readonly base: OwnerCache) {}
  keep(): void {
    for (const [k, v] of this.agents) this.base.agents.set(k, v);
    for (const [k, v] of this.sessionLength) this.base.sessionLength.set(k, v);
  }
}

export interface OpContext {
  /** The commit's statements (sent together after every op was applied). */
  sql: StatementBatch;
  /** A read on the committing connection, outside the batch: what the owner's cache does not know yet. */
  read: <R extends pg.QueryResultRow>(text: string, values: unknown[]) => Promise<pg.QueryResult<R>>;
  boot: number;
  redactor: Redactor;
  cache: StagedCache;
  /** Rows of this group commit not written yet: written together, by `flushPgOps`, before COMMIT. */
  pending: Pending;
}

/**
 * A group commit's inserts and agent updates, gathered so that each table takes one multi-row
 * statement (arrays through unnest) instead of one statement per row. Only rows nothing in the
 * batch reads back are deferred; an op that reads or rewrites one of these tables flushes first,
 * so the batch means exactly what its ops in order mean.
 */
export class Pending {
  readonly session = { agent: [] as string[], seq: [] as number[], item: [] as string[], checksum: [] as string[] };
  readonly messages: unknown[][] = Array.from({ length: 13 }, () => []);
  readonly usage: unknown[][] = Array.from({ length: 9 }, () => []);
  readonly events: unknown[][] = Array.from({ length: 5 }, () => []);
  readonly stream: unknown[][] = Array.from({ length: 6 }, () => []);
  /** The last state of each agent updated (an agent updated three times is written once). */
  readonly agents = new Map<string, unknown[]>();
}

const push = (columns: unknown[][], row: readonly unknown[]) => row.forEach((v, i) => columns[i]!.push(v));

/** Add what `ctx.pending` holds to the batch: one statement per table, rows in the order their ops came. */
export function flushPgOps(ctx: OpContext): void {
  const { sql, pending: p, boot } = ctx;
  if (p.session.agent.length > 0) {
    sql.add('INSERT INTO session_items (agent_id, seq, item, checksum) SELECT * FROM unnest($1::text[], $2::int[], $3::text[], $4::text[])', [
      p.session.agent.splice(0),
      p.session.seq.splice(0),
      p.session.item.splice(0),
      p.session.checksum.splice(0),
    ]);
  }
  if (p.messages[0]!.length > 0) {
    sql.add(
      `INSERT INTO messages (id, run_id, to_agent, from_id, from_name, type, priority, content, interrupt, created_at, notice_key, checksum, data, boot)
       SELECT m.id, m.run_id, m.to_agent, m.from_id, m.from_name, m.type, m.priority, m.content, m.interrupt, m.created_at, m.notice_key, m.checksum, m.data, $14::bigint FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::int[], $10::bigint[], $11::text[], $12::text[], $13::text[])
         WITH ORDINALITY AS m(id, run_id, to_agent, from_id, from_name, type, priority, content, interrupt, created_at, notice_key, checksum, data, o)
       ORDER BY m.o ON CONFLICT (notice_key) DO NOTHING`,
      [...p.messages.map((c) => c.splice(0)), boot],
    );
  }
  if (p.usage[0]!.length > 0) {
    sql.add(
      `INSERT INTO usage (run_id, agent_id, purpose, model, input_tokens, output_tokens, cached_input_tokens, cost_usd, at)
       SELECT u.run_id, u.agent_id, u.purpose, u.model, u.i, u.o, u.c, u.cost, u.at
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bigint[], $7::bigint[], $8::float8[], $9::bigint[])
         WITH ORDINALITY AS u(run_id, agent_id, purpose, model, i, o, c, cost, at, n) ORDER BY u.n`,
      p.usage.map((c) => c.splice(0)),
    );
  }
  if (p.events[0]!.length > 0) {
    sql.add(
      `INSERT INTO events (run_id, agent_id, type, data, at, boot) SELECT e.run_id, e.agent_id, e.type, e.data, e.at, $6::bigint
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[]) WITH ORDINALITY AS e(run_id, agent_id, type, data, at, n) ORDER BY e.n`,
      [...p.events.map((c) => c.splice(0)), boot],
    );
  }
  if (p.stream[0]!.length > 0) {
    // One statement: the rows, and each agent's last status among them kept in stream_status (the
    // newer row by seq wins), read from the text as stored, scrubbed.
    sql.add(
      `WITH s AS (
         INSERT INTO stream (run_id, seq, agent_id, type, data, at)
         SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::bigint[])
         RETURNING run_id, seq, agent_id, type, data)
       INSERT INTO stream_status (run_id, agent_id, status, seq)
       SELECT DISTINCT ON (run_id, agent_id) run_id, agent_id, coalesce(data::jsonb->>'to', ''), seq FROM s
       WHERE type = 'agent.status' AND agent_id IS NOT NULL ORDER BY run_id, agent_id, seq DESC
       ON CONFLICT (run_id, agent_id) DO UPDATE SET status = excluded.status, seq = excluded.seq WHERE excluded.seq > stream_status.seq`,
      p.stream.map((c) => c.splice(0)),
    );
  }
  if (p.agents.size > 0) {
    const columns: unknown[][] = Array.from({ length: 6 }, () => []);
    for (const row of p.agents.values()) push(columns, row);
    p.agents.clear();
    sql.add(
      `UPDATE agents AS a SET status = u.status, notice_claimed = u.notice_claimed, stint = u.stint, state = u.state, updated_at = u.updated_at, boot = $7
       FROM unnest($1::text[], $2::text[], $3::int[], $4::int[], $5::text[], $6::bigint[]) AS u(id, status, notice_claimed, stint, state, updated_at) WHERE a.id = u.id`,
      [...columns, boot],
    );
  }
}

async function agentRow(ctx: OpContext, id: string): Promise<AgentRow | undefined> {
  const known = ctx.cache.agents.get(id) ?? ctx.cache.base.agents.get(id);
  if (known) return known;
  const { rows } = await ctx.read<AgentDbRow>('SELECT * FROM agents WHERE id = $1', [id]);
  if (!rows[0]) return undefined;
  const row = toAgent(rows[0]);
  ctx.cache.base.agents.set(id, row);
  return row;
}

async function sessionLength(ctx: OpContext, agentId: string): Promise<number> {
  const known = ctx.cache.sessionLength.get(agentId) ?? ctx.cache.base.sessionLength.get(agentId);
  if (known !== undefined) return known;
  const { rows } = await ctx.read<{ n: number }>('SELECT count(*) AS n FROM session_items WHERE agent_id = $1', [agentId]);
  return Number(rows[0]!.n);
}

async function append(ctx: OpContext, agentId: string, items: readonly SessionItem[]): Promise<void> {
  if (items.length === 0) return;
  const before = await sessionLength(ctx, agentId);
  items.forEach((item, i) => {
    const text = ctx.redactor.scrubJson(item);
    push(
      [ctx.pending.session.agent, ctx.pending.session.seq, ctx.pending.session.item, ctx.pending.session.checksum],
      [agentId, before + i, text, checksum(text)],
    );
  });
  ctx.cache.sessionLength.set(agentId, before + items.length);
}

async function writeAgent(ctx: OpContext, next: AgentRow, insert: boolean): Promise<void> {
  const { scrub, scrubJson } = ctx.redactor;
  const state = scrubJson(stateOf(next));
  if (insert) {
    ctx.sql.add(
      `INSERT INTO agents (id, run_id, name, parent_id, depth, task, skills, status, notice_claimed, stint, state, created_at, updated_at, boot, terms)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`,
      [
        next.id,
        next.runId,
        scrub(next.name),
        next.parentId,
        next.depth,
        scrub(next.task),
        scrubJson(next.skills),
        next.status,
        next.noticeClaimed ? 1 : 0,
        next.stint,
        state,
        next.createdAt,
        next.updatedAt,
        ctx.boot,
        next.terms === null ? null : scrubJson(next.terms),
      ],
    );
  } else {
    ctx.pending.agents.set(next.id, [next.id, next.status, next.noticeClaimed ? 1 : 0, next.stint, state, next.updatedAt]);
  }
  ctx.cache.agents.set(next.id, next);
}

const runParams = (run: RunRow) => [run.id, run.createdAt, run.interactive ? 1 : 0, run.rootId, JSON.stringify(run.budget)];

/** Apply one op inside the open transaction. */
export async function applyPgOp(ctx: OpContext, w: WriteOp): Promise<void> {
  const { sql, redactor } = ctx;
  const { scrub, scrubJson } = redactor;
  switch (w.op) {
    case 'insertRun':
      sql.require(
        'INSERT INTO runs (id, created_at, interactive, root_id, budget) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING',
        runParams(w.run),
        'CONFIG_INVALID',
        `store: run ${w.run.id} exists`,
      );
      return;
    case 'updateRun': {
      // The patch's columns only: a pure UPDATE (no read), required to find the run.
      const set: string[] = [];
      const values: unknown[] = [w.id];
      const column = (name: string, value: unknown) => (values.push(value), set.push(`${name} = $${values.length}`));
      if (w.patch.createdAt !== undefined) column('created_at', w.patch.createdAt);
      if (w.patch.interactive !== undefined) column('interactive', w.patch.interactive ? 1 : 0);
      if (w.patch.rootId !== undefined) column('root_id', w.patch.rootId);
      if (w.patch.budget !== undefined) column('budget', JSON.stringify(w.patch.budget));
      sql.require(`UPDATE runs SET ${set.length > 0 ? set.join(', ') : 'id = id'} WHERE id = $1`, values, 'RUN_NOT_FOUND', `store: no run ${w.id}`);
      return;
    }
    case 'registerAgent': {
      if (await agentRow(ctx, w.agent.id)) throw new TroupeError('AGENT_EXISTS', `store: agent ${w.agent.id} exists`);
      await writeAgent(ctx, { ...w.agent }, true);
      ctx.cache.sessionLength.set(w.agent.id, 0);
      return append(ctx, w.agent.id, w.firstInput);
    }
    case 'updateAgent': {
      const row = await agentRow(ctx, w.id);
      if (!row) throw new TroupeError('AGENT_NOT_FOUND', `store: no agent ${w.id}`);
      return writeAgent(ctx, { ...row, ...w.patch }, false);
    }
    case 'enqueueMessage': {
      const m = w.message;
      const dataText = m.data === undefined || m.data === null ? null : scrubJson(m.data);
      const scrubbed = {
        ...m,
        fromName: scrub(m.fromName),
        content: scrub(m.content),
        data: dataText === null ? null : (JSON.parse(dataText) as Record<string, unknown>),
      };
      push(ctx.pending.messages, [
        m.id,
        m.runId,
        m.to,
        m.from,
        scrubbed.fromName,
        m.type,
        m.priority,
        scrubbed.content,
        m.interrupt ? 1 : 0,
        m.createdAt,
        m.noticeKey ?? null,
        messageDigest(scrubbed),
        dataText,
      ]);
      return;
    }
    case 'markDelivered':
      flushPgOps(ctx);
      sql.add(
        'UPDATE messages SET delivered_at = $1 WHERE to_agent = $2 AND delivered_at IS NULL AND seq <= (SELECT seq FROM messages WHERE id = $3 AND to_agent = $2)',
        [w.at, w.agentId, w.upToId],
      );
      return;
    case 'appendSession':
      return append(ctx, w.agentId, w.items);
    case 'replaceSession':
      flushPgOps(ctx);
      sql.add('DELETE FROM session_items WHERE agent_id = $1', [w.agentId]);
      ctx.cache.sessionLength.set(w.agentId, 0);
      return append(ctx, w.agentId, w.items);
    case 'recordUsage': {
      const u = w.row;
      push(ctx.pending.usage, [u.runId, u.agentId, u.purpose, scrub(u.model), u.inputTokens, u.outputTokens, u.cachedInputTokens, u.costUsd, u.at]);
      return;
    }
    case 'appendEvent': {
      const e = w.row;
      push(ctx.pending.events, [e.runId, e.agentId, e.type, scrubJson(e.data), e.at]);
      return;
    }
    case 'appendStream':
      for (const r of w.rows) push(ctx.pending.stream, [r.runId, r.seq, r.agentId, r.type, scrubJson(r.data), r.at]);
      return;
    case 'insertDelegation': {
      const r = w.row;
      sql.add(
        `INSERT INTO delegations (session_id, delegation_id, run_id, goal, status, dispatched_at, completed_at, result_text, started_boot)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
        [
          r.sessionId,
          r.delegationId,
          r.runId,
          scrub(r.goal),
          r.status,
          r.dispatchedAt,
          r.completedAt,
          r.resultText === null ? null : scrub(r.resultText),
          r.startedBoot,
        ],
      );
      return;
    }
    case 'finishDelegation':
      sql.add("UPDATE delegations SET status = $1, completed_at = $2, result_text = $3 WHERE session_id = $4 AND delegation_id = $5 AND status = 'running'", [
        w.end.status,
        w.end.at,
        scrub(w.end.resultText),
        w.sessionId,
        w.delegationId,
      ]);
      return;
    case 'putReentryBudget':
      sql.add(
        `INSERT INTO reentry_budgets (session_id, count, last_wake_at) VALUES ($1, $2, $3)
         ON CONFLICT (session_id) DO UPDATE SET count = excluded.count, last_wake_at = excluded.last_wake_at`,
        [w.row.sessionId, w.row.count, w.row.lastWakeAt],
      );
      return;
    case 'dropReentryBudgets':
      sql.add('DELETE FROM reentry_budgets WHERE last_wake_at < $1', [w.before]);
      return;
    case 'linkExecution':
      sql.add("INSERT INTO executions (id, agent_id, status, linked_at) VALUES ($1, $2, 'running', $3) ON CONFLICT (id) DO NOTHING", [
        w.row.id,
        w.row.agentId,
        w.row.linkedAt,
      ]);
      return;
    case 'finishExecution':
      sql.add("UPDATE executions SET status = $1, result = $2, finished_at = $3 WHERE id = $4 AND status = 'running'", [
        w.end.status,
        scrub(w.end.result),
        w.end.at,
        w.id,
      ]);
      return;
    case 'markExecutionContinued':
      sql.add('UPDATE executions SET continued_at = $1 WHERE id = $2 AND continued_at IS NULL', [w.at, w.id]);
      return;
    case 'startToolCall': {
      const r = w.row;
      sql.add(
        `INSERT INTO tool_calls (agent_id, turn, call_id, tool, args_hash, status, started_at, boot) VALUES ($1, $2, $3, $4, $5, 'started', $6, $7)
         ON CONFLICT (agent_id, turn, call_id) DO UPDATE SET status = 'started', started_at = excluded.started_at, finished_at = NULL, boot = excluded.boot`,
        [r.agentId, r.turn, r.callId, r.tool, r.argsHash, r.startedAt, ctx.boot],
      );
      return;
    }
    case 'answerRequest':
      // Fenced with the rest of the batch: only the lease's holder answers.
      sql.add('UPDATE inbox SET done_at = $1, result = $2 WHERE id = $3 AND done_at IS NULL', [w.at, JSON.stringify(w.result), w.id]);
      return;
    case 'finishToolCalls':
      sql.add(
        "UPDATE tool_calls SET status = 'finished', finished_at = $1 WHERE agent_id = $2 AND turn = $3 AND call_id = ANY($4::text[]) AND status = 'started'",
        [w.at, w.agentId, w.turn, [...w.callIds]],
      );
      return;
  }
}
