/**
 * What a resumed run hands the runtime: its row, its agents and its spend, read back after
 * recovery; and the coordinator records rebuilt from them.
 * @module
 */
import type { AgentRecord } from '../../../machines/coordinatorMachine.js';
import { isActive } from '../../../machines/types.js';
import type { AgentRow, RunRow } from '../../store/types.js';

/** A run read back from the store, after its recovery. */
export interface RestoredRun {
  run: RunRow;
  agents: readonly AgentRow[];
  /**
   * Each of `agents` with its row's status, as the recovery read them (it builds the map anyway):
   * handed to the live stream, which consumes it (views/streamRecorder.ts).
   */
  restoredStatuses: Map<string, string>;
  /** Those of them whose status the live stream does not show (Store.unshownStatuses), read with them. */
  unshown: Map<string, string | null> | null;
  spentUsd: number;
  /** Owners of allowances whose reserve tripped (their `reserve:<id>` notice keys). */
  reservesTripped?: readonly string[];
}

/** The coordinator's records of restored agents: claims, stints and counters survive a restart. */
export function recordsOf(rows: readonly AgentRow[]): AgentRecord[] {
  const alive = new Map<string, number>();
  const spawned = new Map<string, number>();
  for (const row of rows) {
    if (row.parentId === null) continue;
    spawned.set(row.parentId, (spawned.get(row.parentId) ?? 0) + 1);
    if (isActive(row.status)) alive.set(row.parentId, (alive.get(row.parentId) ?? 0) + 1);
  }
  return rows.map((row) => ({
    id: row.id,
    name: row.name,
    parentId: row.parentId,
    depth: row.depth,
    status: row.status,
    waitKind: row.status === 'waiting' ? row.waitKind : null,
    noticeClaimed: row.noticeClaimed,
    stint: row.stint,
    aliveChildren: alive.get(row.id) ?? 0,
    spawnedChildren: spawned.get(row.id) ?? 0,
  }));
}
