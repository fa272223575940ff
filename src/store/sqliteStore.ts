/**
 * The durable `Store` on better-sqlite3 12: WAL, `synchronous` set explicitly on every open (FULL
 * by default: this build reports FULL on a fresh file and NORMAL on reopen), every write in a
 * `BEGIN IMMEDIATE` transaction, numbered migrations, a checksum on every message and session
 * row verified on read, `quick_check` at open, one owning process per file (`ownerLock.ts`).
 *
 * This file owns opening a store and the `Store` methods themselves; their parts live apart:
 * the SQL (sqliteStatements.ts), transactions and failing closed (sqliteTransaction.ts), the
 * owner's caches (sqliteCache.ts), and decoding every row read (decode.ts).
 *
 * One process owns the file, so sessions and agent rows are cached in memory after their first
 * (verified) read; appends go to both, and a rolled-back transaction undoes the cache too.
 *
 * I/O errors are crashes (reliability.md §5.4): on SQLITE_IOERR*, FULL, CORRUPT or NOTADB from a
 * write, the store fails closed — that write and every later one throw STORE_IO / STORE_CORRUPT.
 * @module
 */
import { TroupeError } from '../errors.js';
import { createRedactor, type Redactor } from '../logging/redact.js';
import { checksum, messageDigest } from './checksums.js';
import { toAgent, toDelegation, toEvent, toExecution, toMessage, toNote, toReentry, toRun, toStreamRow, toToolCall, toUsage } from './decode.js';
import type {
  AgentDbRow,
  DelegationDbRow,
  EventDbRow,
  StreamDbRow,
  ExecutionDbRow,
  MessageDbRow,
  NoteDbRow,
  ReentryDbRow,
  RunDbRow,
  SessionDbRow,
  ToolCallDbRow,
  UsageDbRow,
} from './dbRows.js';
import type Database from 'better-sqlite3';
import { openDatabase, openWriterConnection, sqliteCode, type OpenedDatabase } from './openFile.js';
import { acquireOwnerLock, type OwnerLock } from './ownerLock.js';
import { ensureParentDir, identityOf } from './files.js';
import { createOwnerCache } from './sqliteCache.js';
import { inboxOf } from './sqliteInbox.js';
import { eventsOfType, prepareStatements } from './sqliteStatements.js';
import { streamStatusesOf } from './sqliteStreamStatus.js';
import { createTransactor } from './sqliteTransaction.js';
import { commitMeter, commitThread, commitThreadMode, type CommitThreadRule } from './sqliteWriter.js';
import { applyOps, type WriteOp } from './port.js';
import type { DelegationRow, EventRow, NewMessage, ReentryBudgetRow, SqliteInbox, Store, StreamRow, UsageRow } from './types.js';
import { verifyRows } from './verifyRows.js';

/** The store's promoted notes, newest promotion first (notes/notes.ts). */
const PROMOTED_NOTES = "SELECT * FROM notes WHERE state = 'promoted' ORDER BY decided_at DESC, id";

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
   * errors, events, messages, session items; a coordinator on this store scrubs every text it
   * sends a model with it too. Default `createRedactor()`: the known keys (`OPENAI_API_KEY`'s
   * value). See `createRedactor`.
   */
  redactor?: Redactor;
  /**
   * Where a coordinator's commits (its port's batches) run on a file this process owns. A worker
   * thread with its own connection (sqliteWriter.ts) keeps SQLite's work and the disk's sync off
   * the event loop; it costs ~10 % more CPU per turn (a second connection, a copy of every batch).
   * - `'auto'` (default): on the main thread until commits outgrow it (a fifth of a second, in
   *   commits of 2 ms on average: `AUTO_COMMIT_THREAD`), then on the thread for good. Measured
   *   (scale.bench.ts, 2 cores, against `false` in the same run): 10,000 agents moved 10-16 s in,
   *   event-loop delay p99 0.22-0.35×, time 0.93-0.98×; 1,000 agents never moved (≥ 98 % of the
   *   ideal either way). Stays off where the thread cannot run (`':memory:'`, read-only, a
   *   redactor not made by `createRedactor`).
   * - `true`: on the thread from the first commit; `false`: never; a `CommitThreadRule`: `'auto'`
   *   with your thresholds.
   * Once on the thread, the main thread caches nothing (it reads the file, which the thread
   * writes), and sessions, agents and messages are written only through the coordinator's port:
   * this store's own methods then refuse them (CONFIG_INVALID); set `false` to write through them
   * while a coordinator runs. The thread needs the compiled package (`sqliteWriterThread.js`).
   */
  commitThread?: boolean | 'auto' | CommitThreadRule;
}

export interface SqliteStore extends Omit<Store, 'answerInbox'>, SqliteInbox {
  readonly path: string;
  /** The fencing token of this owner (increases every time a process opens the file for writing). */
  readonly boot: number;
  readonly synchronous: 'FULL' | 'NORMAL';
  /** Whether a coordinator's commits run on the commit thread now (`commitThread`). */
  readonly commitsOnThread: boolean;
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
}

/**
 * Open (or create) a durable store: the folder (0700) and file (0600), WAL, `synchronous=FULL`.
 *
 * - Writes every agent staged in one tick commit in one transaction; nothing leaves the process
 *   (a resolved `send`, an event, a notice, the next call) before its commit.
 * - A lock file beside the database (`<path>.lock`) makes a second owner fail with `RUN_LOCKED`;
 *   after kill -9 the next process takes over.
 * - Every row is decoded and checked when read; message and session rows carry checksums. An
 *   owner's open runs `quick_check` and decodes the whole file read-only first (`verify`), so a
 *   damaged, foreign or newer-schema file is refused byte for byte as it was.
 * - An I/O error, a full disk or corruption on write stops the coordinator (`STORE_IO` /
 *   `STORE_CORRUPT`); restart and resume.
 * - A tool call with effects commits a `started` row first; after a crash a call with no result
 *   is re-run if read-only or idempotent (same `idempotencyKey`), else answered `TOOL_IN_DOUBT`
 *   (started) or `TOOL_NOT_RUN` (never started).
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
  commitThreadMode(options);
  // A new project has no .troupe/ yet: the owner creates the database's folder (0700).
  if (!memory && !options.readonly) ensureParentDir(options.path);
  // The lock comes before anything else touches the database.
  const lock: OwnerLock | null = memory || options.readonly ? null : acquireOwnerLock(options.path);
  let opened: OpenedDatabase;
  try {
    opened = openDatabase(options, synchronous);
  } catch (err) {
    lock?.release();
    throw err;
  }
  const boot = lock?.boot ?? 1;
  return createSqliteStore(opened, options, synchronous, boot, lock);
}

/** The commit thread's store (sqliteWriterThread.ts): an owner's, over a connection of its own, under the main thread's lock. */
export function writerStore(
  options: Pick<OpenStoreOptions, 'path' | 'redactor' | 'busyTimeoutMs' | 'maxSizeBytes'>,
  synchronous: 'FULL' | 'NORMAL',
  boot: number,
  identity: { dev: string; ino: string },
): SqliteStore {
  const db = openWriterConnection(options, synchronous, identity);
  return createSqliteStore({ db, verified: null }, { ...options, commitThread: false }, synchronous, boot, null);
}

function createSqliteStore(
  { db, verified }: OpenedDatabase,
  options: OpenStoreOptions,
  synchronous: 'FULL' | 'NORMAL',
  boot: number,
  lock: OwnerLock | null,
): SqliteStore {
  const readonly = options.readonly === true;
  // Secrets never reach the file: every text column is scrubbed on its way in (JSON columns as
  // values, so a replacement cannot cut through JSON syntax). Checksums cover the scrubbed text.
  const redactor = options.redactor ?? createRedactor();
  const mode = commitThreadMode(options);
  const writer =
    mode.kind === 'off'
      ? null
      : commitThread({
          path: options.path,
          identity: identityOf(options.path),
          synchronous,
          busyTimeoutMs: options.busyTimeoutMs,
          maxSizeBytes: options.maxSizeBytes,
          boot,
          redactor,
        });
  const meter = mode.kind === 'auto' ? commitMeter(mode.rule) : null;
  // Once commits run on the thread, another connection writes the file: caches here would go stale.
  let onThread = mode.kind === 'on';
  const q = prepareStatements(db);
  const tx = createTransactor(db, { path: options.path, readonly, boot, insertBoot: q.insertBoot });
  const { onRollback } = tx;
  // The agent rows the open's verify pass decoded are what the file holds until this owner's first
  // write (it holds the lock): a resume lists them instead of reading and decoding every agent
  // again (measured: ~30 % of resuming 10,000 agents). Each run's list is handed out once.
  let handoff = verified?.agentsByRun ?? null;
  const transaction: typeof tx.transaction = (fn) => {
    handoff = null;
    return tx.transaction(fn);
  };

  const text = redactor.scrub;
  const json = redactor.scrubJson;

  // Caches are safe only for the owner; a read-only viewer always reads the file.
  const owned = createOwnerCache({
    q,
    cache: !readonly && !onThread,
    // ...and the thread's would, if this connection wrote what they hold once it runs.
    beforeWrite: () => {
      if (writer?.started)
        throw new TroupeError(
          'CONFIG_INVALID',
          `${options.path} commits on a thread: sessions, agents and messages are written through the coordinator's port (commitThread: false writes through the store)`,
        );
    },
    boot,
    redactor,
    onRollback,
  });
  const { sessions, agents, pendingCounts, agentRow, pendingCount, setPending, session, append, writeAgent } = owned;

  let promoted: Database.Statement | null | undefined;
  // Each agent's last streamed status (migration 12): O(agents) to read at resume, not O(stream rows).
  const statuses = streamStatusesOf(db);

  /** A port's batch: on the thread once there; else here, in one transaction, timed for `'auto'`. */
  function commitBatch(ops: readonly WriteOp[]): Promise<void> {
    if (onThread) {
      // The thread's first write ends what the open's verify pass decoded, as this connection's would.
      if (ops.length > 0) handoff = null;
      return writer!.commit(ops);
    }
    const start = performance.now();
    try {
      applyOps(store, ops);
    } catch (err) {
      return Promise.reject(err as Error);
    }
    if (ops.length > 0 && meter?.record(start, performance.now())) {
      // Every commit so far ran here, synchronously: none is in flight when the thread takes over.
      onThread = true;
      owned.stopCaching();
    }
    return Promise.resolve();
  }

  const store: SqliteStore = {
    path: options.path,
    redactor,
    boot,
    synchronous,
    get commitsOnThread() {
      return onThread;
    },
    get failure() {
      return tx.failure ?? writer?.failure ?? null;
    },
    transaction,
    ...(writer ? { commitBatch } : {}),

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
      const handed = handoff?.get(runId);
      handoff?.delete(runId);
      const rows =
        handed ??
        (q.listAgents.all(runId) as AgentDbRow[]).map((r) => {
          const known = owned.caching ? agents.get(r.id) : undefined;
          return known ? { ...known } : toAgent(r);
        });
      if (owned.caching) {
        const counts = new Map((q.pendingByAgent.all(runId) as { to_agent: string; n: number }[]).map((c) => [c.to_agent, c.n]));
        for (const row of rows) if (!pendingCounts.has(row.id)) pendingCounts.set(row.id, counts.get(row.id) ?? 0);
      }
      return rows;
    },

    enqueueMessage: (message: NewMessage) =>
      transaction(() => {
        if (!agentRow(message.to)) throw new TroupeError('AGENT_NOT_FOUND', `store: no agent ${message.to}`);
        const pending = pendingCount(message.to); // before the insert, or a first read would count it
        const dataText = message.data === undefined || message.data === null ? null : json(message.data);
        const data = dataText === null ? null : (JSON.parse(dataText) as Record<string, unknown>);
        const scrubbed = { ...message, fromName: text(message.fromName), content: text(message.content), data };
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
          data: dataText,
        });
        if (result.changes === 0) return null;
        setPending(message.to, pending + 1);
        return { ...scrubbed, noticeKey: message.noticeKey ?? null, seq: Number(result.lastInsertRowid), deliveredAt: null };
      }),
    pendingCount,
    listMessages: (runId) => (q.listMessages.all(runId) as MessageDbRow[]).map(toMessage),

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
      (q.spendOf.all(runId) as { agent_id: string; purpose: UsageRow['purpose']; cost: number }[]).map((r) => ({
        agentId: r.agent_id,
        purpose: r.purpose,
        costUsd: r.cost,
      })),

    appendEvent: (e: EventRow) =>
      transaction(() => {
        q.insertEvent.run(e.runId, e.agentId, e.type, json(e.data), e.at, boot);
      }),
    listEvents: (runId) => (q.listEvents.all(runId) as EventDbRow[]).map(toEvent),
    historyOf: (runId) => (q.historyOf.all(runId) as EventDbRow[]).map(toEvent),

    appendStream: (rows: readonly StreamRow[]) =>
      transaction(() => {
        for (const r of rows) {
          const data = json(r.data);
          q.insertStream.run(r.runId, r.seq, r.agentId, r.type, data, r.at);
          if (r.type === 'agent.status' && r.agentId !== null) statuses.upsert(r.runId, r.agentId, data, r.seq);
        }
      }),
    readStream: (runId, afterSeq, limit) => (q.readStream.all(runId, afterSeq, limit) as StreamDbRow[]).map(toStreamRow),
    lastStreamSeq: (runId) => q.lastStreamSeq.pluck().get(runId) as number,
    streamedStatuses: statuses.streamed,
    unshownStatuses: statuses.unshown,

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
    executionsOf(agentIds) {
      // Executions are few next to agents: one scan of the table, filtered here (the set of ids only
      // when there is a row to filter: 100,000 ids for an empty table were 2 % of a resume).
      const rows = (q.allExecutions.all() as ExecutionDbRow[]).map(toExecution);
      if (rows.length === 0) return rows;
      const ids = new Set(agentIds);
      return rows.filter((e) => ids.has(e.agentId));
    },
    reentryBudgetsOf(agentIds) {
      const rows = (q.allReentry.all() as ReentryDbRow[]).map(toReentry);
      if (rows.length === 0) return rows;
      const ids = new Set(agentIds);
      return rows.filter((r) => ids.has(r.sessionId));
    },
    eventsOf: (runId, type) => (eventsOfType(q, type).all(runId, type) as EventDbRow[]).map(toEvent),
    promotedNotes() {
      // Prepared at first use, not at open: a reader of a file from before migration 11 has no notes table (and no notes).
      promoted ??= (db.pragma('user_version', { simple: true }) as number) >= 11 ? db.prepare(PROMOTED_NOTES) : null;
      return promoted ? (promoted.all() as NoteDbRow[]).map(toNote) : [];
    },
    startToolCall: (row) => transaction(() => void q.startToolCall.run(row.agentId, row.turn, row.callId, row.tool, row.argsHash, row.startedAt, boot)),
    finishToolCalls: (agentId, turn, callIds, at) =>
      transaction(() => {
        for (const callId of callIds) q.finishToolCall.run(at, agentId, turn, callId);
      }),
    startedToolCalls: (agentId) => (q.startedToolCalls.all(agentId) as ToolCallDbRow[]).map(toToolCall),
    putReentryBudget: (row: ReentryBudgetRow) => transaction(() => void q.putReentry.run(row.sessionId, row.count, row.lastWakeAt)),
    dropReentryBudgets: (before) => transaction(() => q.dropReentry.run(before).changes),

    integrityCheck: () => db.pragma('integrity_check', { simple: true }) as string,
    verify: () => verifyRows(db, db.pragma('user_version', { simple: true }) as number),
    ...inboxOf(q, transaction, json),
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
      writer?.close();
      if (db.open) db.close();
      lock?.release();
    },
  };
  return store;
}
