/**
 * The durable `Store` on better-sqlite3 12: WAL, `synchronous` set explicitly on every open (FULL
 * by default: this build reports FULL on a fresh file and NORMAL on reopen), every write in a
 * `BEGIN IMMEDIATE` transaction, numbered migrations, a checksum on every message and session
 * row verified on read, `quick_check` at open, one owning process per file (`ownerLock.ts`).
 *
 * One process owns the file, so sessions and agent rows are cached in memory after their first
 * (verified) read; appends go to both, and a rolled-back transaction undoes the cache too.
 *
 * I/O errors are crashes (reliability.md §5.4): on SQLITE_IOERR*, FULL, CORRUPT or NOTADB from a
 * write, the store fails closed — that write and every later one throw STORE_IO / STORE_CORRUPT.
 * @module
 */
import type Database from 'better-sqlite3';
import { TroupeError } from '../errors.js';
import { createRedactor, type Redactor } from '../logging/redact.js';
import type { SessionItem } from '../model/types.js';
import {
  checksum,
  messageDigest,
  stateOf,
  toAgent,
  toDelegation,
  toEvent,
  toExecution,
  toInboxRequest,
  toMessage,
  toReentry,
  toRun,
  toSessionItem,
  toToolCall,
  toUsage,
  verifyRows,
} from './decode.js';
import type { AgentDbRow, DelegationDbRow, EventDbRow, ExecutionDbRow, InboxDbRow, MessageDbRow, ReentryDbRow, RunDbRow, SessionDbRow, ToolCallDbRow, UsageDbRow } from './dbRows.js';
import { classify, openDatabase, sqliteCode } from './openFile.js';
import type { InboxRequest, InboxResult } from './inbox.js';
import { acquireOwnerLock, type OwnerLock } from './ownerLock.js';
import { ensureParentDir } from './files.js';
import type { AgentRow, DelegationRow, EventRow, NewMessage, ReentryBudgetRow, Store, UsageRow } from './types.js';

export interface OpenStoreOptions {
  /** A file path, or ':memory:'. */
  path: string;
  /** FULL (default) survives power loss; NORMAL survives process crashes only. */
  synchronous?: 'FULL' | 'NORMAL';
  busyTimeoutMs?: number;
  /** Read without owning: no lock, no writes (for status and tree views of a running process). */
  readonly?: boolean;
  /**
   * Owner only: decode every row of the file before the first write (default true), so a damaged
   * file is refused with STORE_CORRUPT and left untouched. With false, damage is found when the
   * row is read (a damaged session then crashes its agent on resume, and the run goes on).
   */
  verify?: boolean;
  /** Cap the database file's size; a write past it fails with STORE_IO (SQLITE_FULL) and the store stops. */
  maxSizeBytes?: number;
  /**
   * Secret values (an API key) to replace with `[redacted]` in every text written to the file:
   * errors, events, messages, session items. See `createRedactor`.
   */
  redactor?: Redactor;
}

export interface SqliteStore extends Store {
  readonly path: string;
  /** The fencing token of this owner (increases every time a process opens the file for writing). */
  readonly boot: number;
  readonly synchronous: 'FULL' | 'NORMAL';
  /** The fatal error that stopped this store, if any. */
  readonly failure: TroupeError | null;
  integrityCheck(): string;
  /**
   * Decode every row of the file (what an owner's open does before its first write); throws
   * STORE_CORRUPT naming the first damaged row. Works read-only, for a process about to post to
   * another's inbox.
   */
  verify(): void;
  /** Every message and session row whose checksum does not match. */
  verifyChecksums(): { messages: string[]; sessionItems: string[] };
  /** Requests other processes posted to this run (`postToInbox`) and not yet answered, oldest first. */
  openInbox(runId: string): InboxRequest[];
  /** Answer an inbox request; the posting process reads the result. */
  answerInbox(id: number, result: InboxResult, at: number): void;
}

/**
 * Open (or create) a durable store.
 * @example
 * const store = openStore({ path: '.troupe/troupe.db' });
 */
export function openStore(options: OpenStoreOptions): SqliteStore {
  if (typeof options?.path !== 'string' || options.path === '') {
    throw new TroupeError('CONFIG_INVALID', `Expected path to be a file path or ':memory:', got ${JSON.stringify(options?.path)}`);
  }
  if (options.maxSizeBytes !== undefined && !(Number.isInteger(options.maxSizeBytes) && options.maxSizeBytes > 0)) {
    throw new TroupeError('CONFIG_INVALID', `Expected maxSizeBytes to be an integer > 0, got ${JSON.stringify(options.maxSizeBytes)}`);
  }
  const synchronous = options.synchronous ?? 'FULL';
  if (synchronous !== 'FULL' && synchronous !== 'NORMAL') {
    throw new TroupeError('CONFIG_INVALID', `Expected synchronous to be "FULL" or "NORMAL", got ${JSON.stringify(synchronous)}`);
  }
  const memory = options.path === ':memory:';
  // A new project has no .troupe/ yet: the owner creates the database's folder (0700).
  if (!memory && !options.readonly) ensureParentDir(options.path);
  // The lock comes before anything else touches the database.
  const lock: OwnerLock | null = memory || options.readonly ? null : acquireOwnerLock(options.path);
  let db: Database.Database;
  try {
    db = openDatabase(options, synchronous);
  } catch (err) {
    lock?.release();
    throw err;
  }
  const boot = lock?.boot ?? 1;
  return createSqliteStore(db, options, synchronous, boot, lock);
}

function createSqliteStore(
  db: Database.Database,
  options: OpenStoreOptions,
  synchronous: 'FULL' | 'NORMAL',
  boot: number,
  lock: OwnerLock | null,
): SqliteStore {
  const readonly = options.readonly === true;
  // Caches are safe only for the owner; a read-only viewer always reads the file.
  const sessions = new Map<string, SessionItem[]>();
  const agents = new Map<string, AgentRow>();
  // Undelivered messages per agent: read once, then kept (a count query per turn is a read transaction).
  const pendingCounts = new Map<string, number>();
  let undo: (() => void)[] | null = null;
  let failure: TroupeError | null = null;
  let depth = 0;
  // The boot is recorded with this owner's first write, not at open: a command that is refused
  // (a message over the limit, an unknown agent) leaves the file exactly as it found it.
  let booted = false;

  const q = {
    insertBoot: db.prepare('INSERT OR IGNORE INTO boots (id, started_at, pid) VALUES (?, ?, ?)'),
    insertRun: db.prepare('INSERT INTO runs (id, created_at, interactive, root_id, budget) VALUES (?, ?, ?, ?, ?)'),
    getRun: db.prepare('SELECT * FROM runs WHERE id = ?'),
    listRuns: db.prepare('SELECT * FROM runs ORDER BY created_at, rowid'),
    updateRun: db.prepare('UPDATE runs SET created_at = ?, interactive = ?, root_id = ?, budget = ? WHERE id = ?'),
    insertAgent: db.prepare(
      `INSERT INTO agents (id, run_id, name, parent_id, depth, task, skills, status, notice_claimed, stint, state, created_at, updated_at, boot)
       VALUES (@id, @run_id, @name, @parent_id, @depth, @task, @skills, @status, @notice_claimed, @stint, @state, @created_at, @updated_at, @boot)`,
    ),
    updateAgent: db.prepare(
      `UPDATE agents SET status = @status, notice_claimed = @notice_claimed, stint = @stint, state = @state,
       updated_at = @updated_at, boot = @boot WHERE id = @id`,
    ),
    getAgent: db.prepare('SELECT * FROM agents WHERE id = ?'),
    listAgents: db.prepare('SELECT * FROM agents WHERE run_id = ? ORDER BY created_at, rowid'),
    insertMessage: db.prepare(
      `INSERT INTO messages (id, run_id, to_agent, from_id, from_name, type, priority, content, interrupt, created_at, notice_key, boot, checksum)
       VALUES (@id, @run_id, @to_agent, @from_id, @from_name, @type, @priority, @content, @interrupt, @created_at, @notice_key, @boot, @checksum)
       ON CONFLICT (notice_key) DO NOTHING`,
    ),
    messageBySeq: db.prepare('SELECT * FROM messages WHERE seq = ?'),
    pending: db.prepare('SELECT * FROM messages WHERE to_agent = ? AND delivered_at IS NULL ORDER BY seq'),
    pendingCount: db.prepare('SELECT count(*) FROM messages WHERE to_agent = ? AND delivered_at IS NULL').pluck(),
    pendingByAgent: db.prepare('SELECT to_agent, count(*) AS n FROM messages WHERE run_id = ? AND delivered_at IS NULL GROUP BY to_agent'),
    markDelivered: db.prepare('UPDATE messages SET delivered_at = ? WHERE to_agent = ? AND delivered_at IS NULL AND seq <= ?'),
    markDeliveredUpTo: db.prepare(
      'UPDATE messages SET delivered_at = ? WHERE to_agent = ? AND delivered_at IS NULL AND seq <= (SELECT seq FROM messages WHERE id = ? AND to_agent = ?)',
    ),
    pendingOfRun: db.prepare('SELECT * FROM messages WHERE run_id = ? AND delivered_at IS NULL ORDER BY seq'),
    noticeKeysOf: db.prepare('SELECT notice_key FROM messages WHERE run_id = ? AND notice_key IS NOT NULL').pluck(),
    spendOf: db.prepare('SELECT agent_id, purpose, sum(cost_usd) AS cost FROM usage WHERE run_id = ? GROUP BY agent_id, purpose'),
    listMessages: db.prepare('SELECT * FROM messages WHERE run_id = ? ORDER BY seq'),
    insertItem: db.prepare('INSERT INTO session_items (agent_id, seq, item, checksum) VALUES (?, ?, ?, ?)'),
    loadItems: db.prepare('SELECT agent_id, seq, item, checksum FROM session_items WHERE agent_id = ? ORDER BY seq'),
    deleteItems: db.prepare('DELETE FROM session_items WHERE agent_id = ?'),
    insertUsage: db.prepare(
      `INSERT INTO usage (run_id, agent_id, purpose, model, input_tokens, output_tokens, cached_input_tokens, cost_usd, at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    listUsage: db.prepare('SELECT * FROM usage WHERE run_id = ? ORDER BY id'),
    insertEvent: db.prepare('INSERT INTO events (run_id, agent_id, type, data, at, boot) VALUES (?, ?, ?, ?, ?, ?)'),
    listEvents: db.prepare('SELECT * FROM events WHERE run_id = ? ORDER BY id'),
    openInbox: db.prepare('SELECT * FROM inbox WHERE run_id = ? AND done_at IS NULL ORDER BY id'),
    answerInbox: db.prepare('UPDATE inbox SET done_at = ?, result = ? WHERE id = ? AND done_at IS NULL'),
    insertDelegation: db.prepare(
      `INSERT INTO delegations (session_id, delegation_id, run_id, goal, status, dispatched_at, completed_at, result_text, started_boot)
       VALUES (@sessionId, @delegationId, @runId, @goal, @status, @dispatchedAt, @completedAt, @resultText, @startedBoot)`,
    ),
    finishDelegation: db.prepare(
      `UPDATE delegations SET status = ?, completed_at = ?, result_text = ? WHERE session_id = ? AND delegation_id = ? AND status = 'running'`,
    ),
    listDelegations: db.prepare('SELECT * FROM delegations WHERE run_id = ? ORDER BY dispatched_at, rowid'),
    getReentry: db.prepare('SELECT * FROM reentry_budgets WHERE session_id = ?'),
    linkExecution: db.prepare("INSERT OR IGNORE INTO executions (id, agent_id, status, linked_at) VALUES (?, ?, 'running', ?)"),
    finishExecution: db.prepare("UPDATE executions SET status = ?, result = ?, finished_at = ? WHERE id = ? AND status = 'running'"),
    continueExecution: db.prepare('UPDATE executions SET continued_at = ? WHERE id = ? AND continued_at IS NULL'),
    getExecution: db.prepare('SELECT * FROM executions WHERE id = ?'),
    uncontinued: db.prepare('SELECT * FROM executions WHERE finished_at IS NOT NULL AND continued_at IS NULL ORDER BY finished_at, id'),
    runningExecutions: db.prepare("SELECT * FROM executions WHERE status = 'running' ORDER BY linked_at, id"),
    allExecutions: db.prepare('SELECT * FROM executions ORDER BY linked_at, id'),
    allReentry: db.prepare('SELECT * FROM reentry_budgets'),
    eventsOf: db.prepare('SELECT * FROM events WHERE run_id = ? AND type = ? ORDER BY id'),
    startToolCall: db.prepare(
      `INSERT INTO tool_calls (agent_id, turn, call_id, tool, args_hash, status, started_at, boot) VALUES (?, ?, ?, ?, ?, 'started', ?, ?)
       ON CONFLICT (agent_id, turn, call_id) DO UPDATE SET status = 'started', started_at = excluded.started_at, finished_at = NULL, boot = excluded.boot`,
    ),
    finishToolCall: db.prepare("UPDATE tool_calls SET status = 'finished', finished_at = ? WHERE agent_id = ? AND turn = ? AND call_id = ? AND status = 'started'"),
    startedToolCalls: db.prepare("SELECT * FROM tool_calls WHERE agent_id = ? AND status = 'started' ORDER BY turn, started_at"),
    putReentry: db.prepare(
      `INSERT INTO reentry_budgets (session_id, count, last_wake_at) VALUES (?, ?, ?)
       ON CONFLICT (session_id) DO UPDATE SET count = excluded.count, last_wake_at = excluded.last_wake_at`,
    ),
    dropReentry: db.prepare('DELETE FROM reentry_budgets WHERE last_wake_at < ?'),
  };
  const immediate = db.transaction((fn: () => unknown) => fn());

  // Secrets never reach the file: every text column is scrubbed on its way in (JSON columns as
  // values, so a replacement cannot cut through JSON syntax). Checksums cover the scrubbed text.
  const redactor = options.redactor ?? createRedactor();
  const text = redactor.scrub;
  const json = redactor.scrubJson;

  /** Run `fn` in a BEGIN IMMEDIATE transaction (joining an open one), failing closed on I/O errors. */
  function transaction<T>(fn: () => T): T {
    if (failure) throw failure;
    if (readonly) throw new TroupeError('CONFIG_INVALID', `${options.path} was opened read-only`);
    if (depth > 0) return fn();
    const log: (() => void)[] = [];
    undo = log;
    depth = 1;
    try {
      return immediate.immediate(() => {
        if (!booted) {
          q.insertBoot.run(boot, Date.now(), process.pid);
          booted = true;
          onRollback(() => (booted = false));
        }
        return fn();
      }) as T;
    } catch (err) {
      for (let i = log.length - 1; i >= 0; i--) log[i]!();
      const fatal = classify(err, 'a write');
      if (fatal) {
        failure = fatal;
        throw fatal;
      }
      throw err;
    } finally {
      depth = 0;
      undo = null;
    }
  }
  const onRollback = (fn: () => void) => undo?.push(fn);

  function agentRow(id: string): AgentRow | undefined {
    const cached = readonly ? undefined : agents.get(id);
    if (cached) return cached;
    const row = q.getAgent.get(id) as AgentDbRow | undefined;
    if (!row) return undefined;
    const agent = toAgent(row);
    if (!readonly) agents.set(id, agent);
    return agent;
  }

  function pendingCount(agentId: string): number {
    if (readonly) return q.pendingCount.get(agentId) as number;
    let n = pendingCounts.get(agentId);
    if (n === undefined) {
      n = q.pendingCount.get(agentId) as number;
      pendingCounts.set(agentId, n);
    }
    return n;
  }

  function setPending(agentId: string, n: number): void {
    const before = pendingCount(agentId);
    pendingCounts.set(agentId, n);
    onRollback(() => pendingCounts.set(agentId, before));
  }

  function session(agentId: string): SessionItem[] {
    const cached = readonly ? undefined : sessions.get(agentId);
    if (cached) return cached;
    const rows = q.loadItems.all(agentId) as SessionDbRow[];
    const items = rows.map((r, i) => toSessionItem(r, i));
    if (!readonly) sessions.set(agentId, items);
    return items;
  }

  function append(agentId: string, items: SessionItem[]): void {
    if (items.length === 0) return;
    const list = session(agentId);
    const before = list.length;
    for (let i = 0; i < items.length; i++) {
      const item = json(items[i]);
      q.insertItem.run(agentId, before + i, item, checksum(item));
    }
    list.push(...items);
    onRollback(() => (list.length = before));
  }

  function writeAgent(next: AgentRow, insert: boolean): void {
    const params = {
      id: next.id,
      run_id: next.runId,
      name: text(next.name),
      parent_id: next.parentId,
      depth: next.depth,
      task: text(next.task),
      skills: json(next.skills),
      status: next.status,
      notice_claimed: next.noticeClaimed ? 1 : 0,
      stint: next.stint,
      state: json(stateOf(next)),
      created_at: next.createdAt,
      updated_at: next.updatedAt,
      boot,
    };
    if (insert) q.insertAgent.run(params);
    else q.updateAgent.run(params);
    const prev = agents.get(next.id);
    agents.set(next.id, next);
    onRollback(() => (prev ? agents.set(next.id, prev) : agents.delete(next.id)));
  }

  return {
    path: options.path,
    boot,
    synchronous,
    get failure() {
      return failure;
    },
    transaction,

    insertRun: (run) =>
      transaction(() => {
        if (q.getRun.get(run.id)) throw new TroupeError('CONFIG_INVALID', `store: run ${run.id} exists`);
        q.insertRun.run(run.id, run.createdAt, run.interactive ? 1 : 0, run.rootId, JSON.stringify(run.budget));
      }),
    getRun: (id) => {
      const row = q.getRun.get(id) as RunDbRow | undefined;
      return row && toRun(row);
    },
    listRuns: () => (q.listRuns.all() as RunDbRow[]).map(toRun),
    updateRun: (id, patch) =>
      transaction(() => {
        const row = q.getRun.get(id) as RunDbRow | undefined;
        if (!row) throw new TroupeError('RUN_NOT_FOUND', `store: no run ${id}`);
        const run = { ...toRun(row), ...patch };
        q.updateRun.run(run.createdAt, run.interactive ? 1 : 0, run.rootId, JSON.stringify(run.budget), id);
      }),

    registerAgent: (agent, firstInput) =>
      transaction(() => {
        if (agentRow(agent.id)) throw new TroupeError('AGENT_EXISTS', `store: agent ${agent.id} exists`);
        writeAgent({ ...agent }, true);
        sessions.set(agent.id, []);
        onRollback(() => sessions.delete(agent.id));
        append(agent.id, firstInput);
      }),
    updateAgent: (id, patch) =>
      transaction(() => {
        const row = agentRow(id);
        if (!row) throw new TroupeError('AGENT_NOT_FOUND', `store: no agent ${id}`);
        writeAgent({ ...row, ...patch }, false);
      }),
    getAgent: (id) => {
      const row = agentRow(id);
      return row && { ...row };
    },
    listAgents: (runId) => {
      // One query for the rows and one for every mailbox's pending count (resume reads both for
      // thousands of agents). Listed rows are not cached: the owner caches what it updates.
      const rows = (q.listAgents.all(runId) as AgentDbRow[]).map((r) => {
        const cached = readonly ? undefined : agents.get(r.id);
        return cached ? { ...cached } : toAgent(r);
      });
      if (!readonly) {
        const counts = new Map((q.pendingByAgent.all(runId) as { to_agent: string; n: number }[]).map((c) => [c.to_agent, c.n]));
        for (const row of rows) if (!pendingCounts.has(row.id)) pendingCounts.set(row.id, counts.get(row.id) ?? 0);
      }
      return rows;
    },

    enqueueMessage: (message: NewMessage) =>
      transaction(() => {
        if (!agentRow(message.to)) throw new TroupeError('AGENT_NOT_FOUND', `store: no agent ${message.to}`);
        const pending = pendingCount(message.to); // before the insert, or a first read would count it
        const scrubbed = { ...message, fromName: text(message.fromName), content: text(message.content) };
        const digest = messageDigest(scrubbed);
        const result = q.insertMessage.run({
          id: message.id,
          run_id: message.runId,
          to_agent: message.to,
          from_id: message.from,
          from_name: scrubbed.fromName,
          type: message.type,
          priority: message.priority,
          content: scrubbed.content,
          interrupt: message.interrupt ? 1 : 0,
          created_at: message.createdAt,
          notice_key: message.noticeKey ?? null,
          boot,
          checksum: digest,
        });
        if (result.changes === 0) return null;
        setPending(message.to, pending + 1);
        return { ...scrubbed, noticeKey: message.noticeKey ?? null, seq: Number(result.lastInsertRowid), deliveredAt: null };
      }),
    pendingMessages: (agentId) => (q.pending.all(agentId) as MessageDbRow[]).map(toMessage),
    pendingCount,
    listMessages: (runId) => (q.listMessages.all(runId) as MessageDbRow[]).map(toMessage),
    drainMailbox: (agentId, toItem, at) =>
      transaction(() => {
        const taken = (q.pending.all(agentId) as MessageDbRow[]).map(toMessage);
        if (taken.length === 0) return [];
        append(agentId, taken.map(toItem));
        q.markDelivered.run(at, agentId, taken.at(-1)!.seq);
        setPending(agentId, 0);
        return taken.map((m) => ({ ...m, deliveredAt: at }));
      }),

    markDelivered: (agentId, upToId, at) =>
      transaction(() => {
        const before = pendingCount(agentId);
        const { changes } = q.markDeliveredUpTo.run(at, agentId, upToId, agentId);
        if (changes > 0) setPending(agentId, Math.max(0, before - changes));
      }),
    pendingMessagesOf: (runId) => (q.pendingOfRun.all(runId) as MessageDbRow[]).map(toMessage),
    noticeKeysOf: (runId) => q.noticeKeysOf.all(runId) as string[],

    appendSession: (agentId, items) => transaction(() => append(agentId, items)),
    loadSession: (agentId) => session(agentId).slice(),
    replaceSession: (agentId, items, expectedLength) =>
      transaction(() => {
        const list = session(agentId);
        if (expectedLength !== undefined && list.length !== expectedLength) return false;
        const old = list.slice();
        q.deleteItems.run(agentId);
        list.length = 0;
        onRollback(() => list.splice(0, list.length, ...old));
        append(agentId, items);
        return true;
      }),

    recordUsage: (u: UsageRow) =>
      transaction(() => {
        q.insertUsage.run(u.runId, u.agentId, u.purpose, text(u.model), u.inputTokens, u.outputTokens, u.cachedInputTokens, u.costUsd, u.at);
      }),
    listUsage: (runId) => (q.listUsage.all(runId) as UsageDbRow[]).map(toUsage),
    spendOf: (runId) =>
      (q.spendOf.all(runId) as { agent_id: string; purpose: UsageRow['purpose']; cost: number }[]).map((r) => ({ agentId: r.agent_id, purpose: r.purpose, costUsd: r.cost })),

    appendEvent: (e: EventRow) =>
      transaction(() => {
        q.insertEvent.run(e.runId, e.agentId, e.type, json(e.data), e.at, boot);
      }),
    listEvents: (runId) => (q.listEvents.all(runId) as EventDbRow[]).map(toEvent),

    insertDelegation: (row: DelegationRow) =>
      transaction(() => {
        try {
          q.insertDelegation.run({ ...row, goal: text(row.goal), resultText: row.resultText === null ? null : text(row.resultText) });
        } catch (err) {
          if (sqliteCode(err) === 'SQLITE_CONSTRAINT_PRIMARYKEY') {
            throw new TroupeError('AGENT_EXISTS', `store: delegation ${row.delegationId} exists`, { cause: err });
          }
          throw err;
        }
      }),
    finishDelegation: (sessionId, delegationId, end) =>
      transaction(() => q.finishDelegation.run(end.status, end.at, text(end.resultText), sessionId, delegationId).changes === 1),
    listDelegations: (runId) => (q.listDelegations.all(runId) as DelegationDbRow[]).map(toDelegation),

    linkExecution: (row) => transaction(() => q.linkExecution.run(row.id, row.agentId, row.linkedAt).changes === 1),
    finishExecution: (id, end) => transaction(() => q.finishExecution.run(end.status, text(end.result), end.at, id).changes === 1),
    markExecutionContinued: (id, at) => transaction(() => q.continueExecution.run(at, id).changes === 1),
    getExecution: (id) => {
      const r = q.getExecution.get(id) as ExecutionDbRow | undefined;
      return r && toExecution(r);
    },
    uncontinuedExecutions: () => (q.uncontinued.all() as ExecutionDbRow[]).map(toExecution),
    runningExecutions: () => (q.runningExecutions.all() as ExecutionDbRow[]).map(toExecution),
    executionsOf(agentIds) {
      const ids = new Set(agentIds);
      // Executions are few next to agents: one scan of the table, filtered here.
      return (q.allExecutions.all() as ExecutionDbRow[]).map(toExecution).filter((e) => ids.has(e.agentId));
    },
    reentryBudgetsOf(agentIds) {
      const ids = new Set(agentIds);
      return (q.allReentry.all() as ReentryDbRow[]).map(toReentry).filter((r) => ids.has(r.sessionId));
    },
    eventsOf: (runId, type) => (q.eventsOf.all(runId, type) as EventDbRow[]).map(toEvent),
    startToolCall: (row) => transaction(() => void q.startToolCall.run(row.agentId, row.turn, row.callId, row.tool, row.argsHash, row.startedAt, boot)),
    finishToolCalls: (agentId, turn, callIds, at) =>
      transaction(() => {
        for (const callId of callIds) q.finishToolCall.run(at, agentId, turn, callId);
      }),
    startedToolCalls: (agentId) => (q.startedToolCalls.all(agentId) as ToolCallDbRow[]).map(toToolCall),
    getReentryBudget: (sessionId) => {
      const r = q.getReentry.get(sessionId) as ReentryDbRow | undefined;
      return r && toReentry(r);
    },
    putReentryBudget: (row: ReentryBudgetRow) => transaction(() => void q.putReentry.run(row.sessionId, row.count, row.lastWakeAt)),
    dropReentryBudgets: (before) => transaction(() => q.dropReentry.run(before).changes),

    integrityCheck: () => db.pragma('integrity_check', { simple: true }) as string,
    verify: () => verifyRows(db, db.pragma('user_version', { simple: true }) as number),
    openInbox: (runId) => (q.openInbox.all(runId) as InboxDbRow[]).map(toInboxRequest),
    answerInbox: (id, result, at) =>
      transaction(() => {
        q.answerInbox.run(at, json(result), id);
      }),
    verifyChecksums() {
      const bad = { messages: [] as string[], sessionItems: [] as string[] };
      for (const row of db.prepare('SELECT * FROM messages').iterate() as IterableIterator<MessageDbRow>) {
        try {
          toMessage(row);
        } catch {
          bad.messages.push(row.id);
        }
      }
      for (const row of db.prepare('SELECT agent_id, seq, item, checksum FROM session_items').iterate() as IterableIterator<SessionDbRow>) {
        if (checksum(row.item) !== row.checksum) bad.sessionItems.push(`${row.agent_id}#${row.seq}`);
      }
      return bad;
    },

    close() {
      if (db.open) db.close();
      lock?.release();
    },
  };
}
