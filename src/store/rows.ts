/** Row constructors shared by the runtime and the stores. */
import type { AgentRow } from './types.js';

export type AgentRegistration = Pick<AgentRow, 'id' | 'runId' | 'name' | 'parentId' | 'depth' | 'task' | 'skills'>;

/** The row of a newly registered agent: running, no turns, no claims, no error. */
export function newAgentRow(reg: AgentRegistration, at: number): AgentRow {
  return {
    ...reg,
    status: 'running',
    noticeClaimed: false,
    stint: 0,
    createdAt: at,
    updatedAt: at,
    turns: 0,
    stintTurns: 0,
    recoveries: 0,
    idleResumes: 0,
    waitKind: null,
    waitTimeoutMs: null,
    waitingSince: null,
    pendingWait: null,
    stopReason: null,
    error: null,
    report: null,
    lastTool: null,
    budgetEpoch: 0,
    attempts: null,
  };
}
