/** Row constructors shared by the runtime and the stores. */
import type { AgentRow } from './types.js';

export type AgentRegistration = Pick<AgentRow, 'id' | 'runId' | 'name' | 'parentId' | 'depth' | 'task' | 'skills'> & { terms?: AgentRow['terms'] };

/** The row of a newly registered agent: running, no turns, no claims, no error. */
export function newAgentRow(reg: AgentRegistration, at: number): AgentRow {
  // Field by field, not `{ ...reg, status, … }`: a spread followed by more properties takes V8's
  // slow path on Node 20 (~7 µs per spawned agent, measured in the fan-out profile).
  return {
    id: reg.id,
    runId: reg.runId,
    name: reg.name,
    parentId: reg.parentId,
    depth: reg.depth,
    task: reg.task,
    skills: reg.skills,
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
    terms: reg.terms ?? null,
  };
}
