/**
 * The wait-for graph and its one question: can anything still answer the agents that wait?
 *
 * A waiting agent points at what can answer it: its active children and parent, its own running
 * executions and delegations, the user (interactive mode), a running tool. The run is quiescent
 * when nothing can move by itself: no agent running (so no model or tool call in flight),
 * budget-paused or asleep on its own timer (`sleep_until`), no execution or delegation running,
 * and — in interactive mode — nobody waiting on the user (who may answer at any time). In a quiescent run every wait on agents is dead: each agent
 * it points at is parked too, and parked agents only move when messaged. Such waits are reported at
 * once instead of after three idle timeouts.
 * @module
 */
import type { AgentStatus, WaitKind } from '../../machines/types.js';

/** An agent as the wait-for graph sees it. */
interface GraphAgent {
  readonly id: string;
  readonly name: string;
  readonly parentId: string | null;
  readonly children: readonly string[];
}

/** One dead wait: who waits, and on whom (the active agents that could have answered). */
export interface DeadWait {
  agent_id: string;
  name: string;
  waits_on: { agent_id: string; name: string; status: string; wait?: string }[];
}

/** What the check reads of a run: a narrow view, so it can be tested against any team. */
export interface WaitGraphSource {
  readonly interactive: boolean;
  /** Agents with status `running` (the runtime's counter). */
  readonly runningAgents: number;
  agents(): Iterable<GraphAgent>;
  find(id: string): GraphAgent | undefined;
  status(agent: GraphAgent): AgentStatus;
  waitKind(agent: GraphAgent): WaitKind | null;
  anyExecutionRunning(): boolean;
  anyDelegationRunning(): boolean;
}

/** The dead waits of a quiescent run (oldest agent first), or [] when something can still move. */
export function deadWaits(run: WaitGraphSource): DeadWait[] {
  if (run.runningAgents > 0) return [];
  const waiting: GraphAgent[] = [];
  for (const h of run.agents()) {
    const status = run.status(h);
    if (status === 'running' || status === 'budgetPaused') return [];
    if (status !== 'waiting') continue;
    const kind = run.waitKind(h);
    // An agent asleep until a time moves by itself when its timer fires: the run is not quiescent.
    if (kind === 'timer') return [];
    if (kind === 'user') {
      if (run.interactive) return [];
      continue;
    }
    waiting.push(h);
  }
  if (waiting.length === 0 || run.anyExecutionRunning() || run.anyDelegationRunning()) return [];
  return waiting.map((h) => ({ agent_id: h.id, name: h.name, waits_on: family(run, h) }));
}

/** The active agents a waiting agent points at: its parent and children. */
function family(run: WaitGraphSource, h: GraphAgent): DeadWait['waits_on'] {
  const ids = h.parentId === null ? [...h.children] : [h.parentId, ...h.children];
  const out: DeadWait['waits_on'] = [];
  for (const id of ids) {
    const other = run.find(id);
    if (!other) continue;
    const status = run.status(other);
    if (status === 'completed' || status === 'stopped' || status === 'failed' || status === 'crashed') continue;
    const wait = run.waitKind(other);
    out.push({ agent_id: other.id, name: other.name, status, ...(wait ? { wait } : {}) });
  }
  return out;
}

/** The wait's result when a dead wait woke the agent. */
export function deadlockResult(waits: readonly DeadWait[]): string {
  return JSON.stringify({
    wait_outcome: 'deadlock',
    note: 'Nothing in this run can answer your wait: every agent you wait on is parked too, and no execution or delegation is running. Do not wait again for the same thing: unblock an agent with send_message, stop it, do the work yourself, or finish.',
    waits,
  });
}
