/**
 * Each agent's last streamed status on a SQLite file (migration 12): the `stream_status` table the
 * stream's append keeps, and what a resume reads of it. A file from before the migration (only a
 * reader opens one unmigrated) has no table: its reads scan the stream instead.
 * @module
 */
import type Database from 'better-sqlite3';
import type { StreamStatusDbRow } from './dbRows.js';
import { toStreamStatus } from './decode.js';

/**
 * The newer row by seq wins, so a row older than the one kept never replaces it.
 */
const SQL = {
  upsert: `INSERT INTO stream_status (run_id, agent_id, status, seq) VALUES (?, ?, json_extract(?, '$.to'), ?)
       ON CONFLICT (run_id, agent_id) DO UPDATE SET status = excluded.status, seq = excluded.seq WHERE excluded.seq > stream_status.seq`,
  read: 'SELECT run_id, agent_id, status, seq FROM stream_status WHERE run_id = ?',
  // Each agent of the run with its stream_status row, selected when the row is missing, shows
  // another status, or has a seq the open's check would refuse (the join vouches for run_id and
  // agent_id; a status equal to the agent's is text). A resume of 100,000 agents all shown selects
  // none: building the 100,000-entry map of every row cost more than the join (131-146 against
  // 173-265 ms of CPU, cold, paired, a loaded machine).
  any: 'SELECT 1 FROM stream_status WHERE run_id = ? LIMIT 1',
  unshown: `SELECT a.id, s.run_id, s.agent_id, s.status, s.seq FROM agents a
       LEFT JOIN stream_status s ON s.run_id = a.run_id AND s.agent_id = a.id
       WHERE a.run_id = ? AND (s.agent_id IS NULL OR s.status IS NOT a.status OR NOT (typeof(s.seq) IN ('integer', 'real') AND (abs(s.seq) < 9e999) IS 1))`,
} as const;

/** Without the table: in seq order, the last row of an agent is its status (a scan, no sort; measured 20 % under GROUP BY). */
const UNMIGRATED = {
  scan: "SELECT agent_id, json_extract(data, '$.to') FROM stream WHERE run_id = ? AND type = 'agent.status' AND agent_id IS NOT NULL ORDER BY seq",
  agents: 'SELECT id, status FROM agents WHERE run_id = ?',
} as const;

type Cell = StreamStatusDbRow[keyof StreamStatusDbRow] | null;

export interface StreamStatuses {
  /** Keep `data`'s status as the agent's last if `seq` is newer (inside the append's transaction). */
  upsert(runId: string, agentId: string, data: string, seq: number): void;
  /** Store.streamedStatuses. */
  streamed(runId: string): Map<string, string>;
  /** Store.unshownStatuses. */
  unshown(runId: string): Map<string, string | null> | null;
}

/**
 * The family on `db`. Whether the file has the table is asked of the file, so the migration's
 * version is written in migrations.ts alone.
 */
export function streamStatusesOf(db: Database.Database): StreamStatuses {
  const migrated = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'stream_status'").get() !== undefined;
  if (!migrated) {
    const scan = db.prepare(UNMIGRATED.scan).raw();
    const streamed = (runId: string) => {
      const last = new Map<string, string>();
      for (const [agentId, status] of scan.iterate(runId) as IterableIterator<[string, unknown]>) last.set(agentId, String(status));
      return last;
    };
    return {
      // Never called: the owner's open migrates the file, and a reader's connection is read-only
      // (its insert into the stream fails before this).
      upsert: () => undefined,
      streamed,
      unshown: (runId) => {
        const shown = streamed(runId);
        if (shown.size === 0) return null;
        const unshown = new Map<string, string | null>();
        for (const [id, status] of db.prepare(UNMIGRATED.agents).raw().iterate(runId) as IterableIterator<[string, unknown]>) {
          if (shown.get(id) !== status) unshown.set(id, shown.get(id) ?? null);
        }
        return unshown;
      },
    };
  }
  const upsert = db.prepare(SQL.upsert);
  const read = db.prepare(SQL.read).raw();
  const any = db.prepare(SQL.any);
  const unshownRows = db.prepare(SQL.unshown).raw();
  return {
    upsert: (runId, agentId, data, seq) => void upsert.run(runId, agentId, data, seq),
    streamed: (runId) => {
      // Rows as arrays (a resume reads one per agent), each checked as the open's verify pass checks
      // it: inline, and through the decoder (which names the damage) only when the inline check fails.
      const last = new Map<string, string>();
      for (const [run_id, agent_id, status, seq] of read.iterate(runId) as IterableIterator<Cell[]>) {
        if (typeof agent_id === 'string' && (typeof status === 'string' || status === null) && Number.isFinite(seq)) last.set(agent_id, String(status));
        else last.set(...toStreamStatus({ run_id, agent_id, status, seq } as StreamStatusDbRow));
      }
      return last;
    },
    unshown: (runId) => {
      // A run never streamed (its first resume): not a map of every agent, read through the join.
      if (any.get(runId) === undefined) return null;
      const unshown = new Map<string, string | null>();
      for (const [id, run_id, agent_id, status, seq] of unshownRows.iterate(runId) as IterableIterator<[string, ...Cell[]]>) {
        if (agent_id === null) unshown.set(id, null);
        else if ((typeof status === 'string' || status === null) && Number.isFinite(seq)) unshown.set(id, String(status));
        else unshown.set(id, toStreamStatus({ run_id, agent_id, status, seq } as StreamStatusDbRow)[1]);
      }
      return unshown;
    },
  };
}
