/**
 * The owner's in-memory caches over the SQLite file: agent rows, sessions (each a list of items) and
 * every mailbox's count of undelivered messages. One process owns the file, so each is read (and
 * verified) once, then kept; the writes that change a cached value go through here, write the file
 * and the cache together, and register with `onRollback` how to put the cache back, so a rolled-back
 * transaction leaves cache and file agreeing. A read-only viewer never caches: another process
 * writes the file under it, so it always reads the file.
 * @module
 */
import type { Redactor } from '../logging/redact.js';
import type { SessionItem } from '../model/types.js';
import { checksum } from './checksums.js';
import type { AgentDbRow, SessionDbRow } from './dbRows.js';
import { stateOf, toAgent, toSessionItem } from './decode.js';
import type { Statements } from './sqliteStatements.js';
import type { AgentRow } from './types.js';

export interface OwnerCacheOptions {
  q: Statements;
  /** Keep what is read: only while this connection is the sole writer of these tables (an owner whose commits are not on a thread). */
  cache: boolean;
  /** Told before every write of a cached table; it throws to refuse it (the commit thread owns them: sqliteStore.ts). */
  beforeWrite?: () => void;
  /** This owner's fencing token, written on every agent row it writes. */
  boot: number;
  redactor: Redactor;
  onRollback: (fn: () => void) => void;
}

export interface OwnerCache {
  /** Sessions by agent id (owner only). */
  readonly sessions: Map<string, SessionItem[]>;
  /** Agent rows by id (owner only). */
  readonly agents: Map<string, AgentRow>;
  /** Undelivered messages per agent (owner only). */
  readonly pendingCounts: Map<string, number>;
  agentRow(id: string): AgentRow | undefined;
  pendingCount(agentId: string): number;
  /** Set an agent's undelivered count inside a transaction. */
  setPending(agentId: string, n: number): void;
  /** The cached list itself (not a copy): callers that change it register an undo. */
  session(agentId: string): SessionItem[];
  /** Insert items at the end of a session, scrubbed and checksummed, inside a transaction. */
  append(agentId: string, items: SessionItem[]): void;
  /** Insert or update an agent row inside a transaction. */
  writeAgent(next: AgentRow, insert: boolean): void;
  /** Whether what is read is kept. */
  readonly caching: boolean;
  /** Forget everything kept and read the file from now on (another connection writes it: sqliteWriter.ts). */
  stopCaching(): void;
}

export function createOwnerCache({ q, cache: cacheAtFirst, beforeWrite, boot, redactor, onRollback }: OwnerCacheOptions): OwnerCache {
  let cache = cacheAtFirst;
  const text = redactor.scrub;
  const json = redactor.scrubJson;
  const sessions = new Map<string, SessionItem[]>();
  const agents = new Map<string, AgentRow>();
  // Undelivered messages per agent: read once, then kept (a count query per turn is a read transaction).
  const pendingCounts = new Map<string, number>();

  function agentRow(id: string): AgentRow | undefined {
    const cached = cache ? agents.get(id) : undefined;
    if (cached) return cached;
    const row = q.getAgent.get(id) as AgentDbRow | undefined;
    if (!row) return undefined;
    const agent = toAgent(row);
    if (cache) agents.set(id, agent);
    return agent;
  }

  function pendingCount(agentId: string): number {
    if (!cache) return q.pendingCount.get(agentId) as number;
    let n = pendingCounts.get(agentId);
    if (n === undefined) {
      n = q.pendingCount.get(agentId) as number;
      pendingCounts.set(agentId, n);
    }
    return n;
  }

  function setPending(agentId: string, n: number): void {
    beforeWrite?.();
    const before = pendingCount(agentId);
    pendingCounts.set(agentId, n);
    onRollback(() => pendingCounts.set(agentId, before));
  }

  function session(agentId: string): SessionItem[] {
    const cached = cache ? sessions.get(agentId) : undefined;
    if (cached) return cached;
    const rows = q.loadItems.all(agentId) as SessionDbRow[];
    const items = rows.map((r, i) => toSessionItem(r, i));
    if (cache) sessions.set(agentId, items);
    return items;
  }

  function append(agentId: string, items: SessionItem[]): void {
    beforeWrite?.(); // even with no items: a rewrite to an empty session writes through here
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
    beforeWrite?.();
    if (insert) insertAgent(next);
    // An update writes the columns that change after registration (positional: it runs every turn).
    else q.updateAgent.run(next.status, next.noticeClaimed ? 1 : 0, next.stint, json(stateOf(next)), next.updatedAt, boot, next.id);
    const prev = agents.get(next.id);
    agents.set(next.id, next);
    onRollback(() => (prev ? agents.set(next.id, prev) : agents.delete(next.id)));
  }

  function insertAgent(next: AgentRow): void {
    q.insertAgent.run({
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
      terms: next.terms === null ? null : json(next.terms),
    });
  }

  return {
    sessions,
    agents,
    pendingCounts,
    agentRow,
    pendingCount,
    setPending,
    session,
    append,
    writeAgent,
    get caching() {
      return cache;
    },
    stopCaching() {
      cache = false;
      sessions.clear();
      agents.clear();
      pendingCounts.clear();
    },
  };
}
