/**
 * Graph queries and actions behind the built-in tools: what a wait can park on, the finish gate,
 * stops from agents, the tree view.
 * @module
 */
import type { Actor } from 'xstate';
import { activeAgentsExcept, activeChildren, type BudgetFlags, type coordinatorMachine } from '../../../machines/coordinatorMachine.js';
import { isReport } from '../../../machines/notices.js';
import { isActive } from '../../../machines/types.js';
import { TroupeError } from '../../errors.js';
import type { AgentSummary } from '../../tools/ports.js';
import type { AgentHandle, Agents } from '../agents/agents.js';
import type { TreeNode } from '../views/registry.js';

export interface GraphHost {
  readonly agents: Agents;
  readonly coordinator: Actor<typeof coordinatorMachine>;
  budgetFlags(): BudgetFlags;
  runningExecutions(agentId: string): string[];
  runningDelegations(agentId: string): string[];
  tree(): TreeNode[];
  /** Ask `target` (and with cascade its subtree, leaves first) to stop after the current turn. */
  requestStop(target: AgentHandle, cascade: boolean): string[];
}

const summary = (g: GraphHost, h: AgentHandle): AgentSummary => ({ agent_id: h.id, name: h.name, status: g.agents.status(h) });

/**
 * Nothing could still answer a wait of `agent`: no active agent that could message it (its
 * children, its parent) and none of its own work running (whose end would wake it). Its children
 * are the coordinator's count of active ones (the one a wait for all gathers by), not a scan: a
 * parent of 10,000 children asks it on every wait.
 */
export function nobodyToAnswer(g: GraphHost, agent: AgentHandle): boolean {
  if (activeChildren(g.coordinator.getSnapshot().context, agent.id) > 0) return false;
  const parent = agent.parentId === null ? undefined : g.agents.find(agent.parentId);
  if (parent && isActive(g.agents.status(parent))) return false;
  return g.runningExecutions(agent.id).length === 0 && g.runningDelegations(agent.id).length === 0;
}

/**
 * A wait for all of the agent's children parks on the mail waiting for it: it is all reports, and
 * another child is still active (its report, or a word that none is coming, will follow).
 */
export function gathers(g: GraphHost, agent: AgentHandle, mail: readonly { type: string; noticeKey: string | null }[]): boolean {
  return activeChildren(g.coordinator.getSnapshot().context, agent.id) > 0 && mail.every(isReport);
}

export function childrenSummary(g: GraphHost, agent: AgentHandle): AgentSummary[] {
  return agent.children.map((id) => summary(g, g.agents.get(id)));
}

/**
 * finish / agent_finish are refused while the caller's work is still running: agents below it (every
 * other agent, for the root), and its own executions and delegations — finishing would drop their
 * results, which nobody would read. A tripped reserve or budget stop lifts the gate.
 */
export function assertNothingOutstanding(g: GraphHost, agent: AgentHandle): void {
  const flags = g.budgetFlags();
  if (flags.reserveStopped || flags.budgetStopped) return;
  const active =
    agent.parentId === null
      ? activeAgentsExcept(g.coordinator.getSnapshot().context, agent.id).map((a) => ({ id: a.id, name: a.name, status: a.status }))
      : agent.children
          .map((id) => g.agents.get(id))
          .filter((c) => isActive(g.agents.status(c)))
          .map((c) => ({ id: c.id, name: c.name, status: g.agents.status(c) }));
  const executions = g.runningExecutions(agent.id);
  const delegations = g.runningDelegations(agent.id);
  if (active.length === 0 && executions.length === 0 && delegations.length === 0) return;
  const parts: string[] = [];
  if (active.length > 0) parts.push(`Other agents are still active: ${active.map((a) => `${a.name} (${a.id}) [${a.status}]`).join(', ')}.`);
  if (executions.length > 0) parts.push(`Your executions are still running: ${executions.join(', ')}.`);
  if (delegations.length > 0) parts.push(`Your delegations are still running: ${delegations.join(', ')}.`);
  parts.push('Wait for them with wait_for_agents (you are woken when one ends), message stalled agents, or stop them first.');
  throw new TroupeError('FINISH_REFUSED', parts.join(' '), {
    details: {
      active_agents: active.map((a) => ({ agent_id: a.id, name: a.name, status: a.status })),
      running_executions: executions,
      running_delegations: delegations,
    },
  });
}

export function stopFromAgent(g: GraphHost, caller: AgentHandle, ref: string, cascade: boolean): string[] {
  const target = g.agents.resolve(ref);
  if (target.id === caller.id) throw new TroupeError('TOOL_NOT_ALLOWED', 'You cannot stop yourself; call your finish tool instead.');
  if (caller.parentId !== null && !isDescendant(g, target, caller)) {
    throw new TroupeError('TOOL_NOT_ALLOWED', `You may stop only your own sub-agents; ${target.name} (${target.id}) is not one of them.`);
  }
  const status = g.agents.status(target);
  if (!isActive(status)) {
    throw new TroupeError('TOOL_NOT_ALLOWED', `${target.name} (${target.id}) is already ${status}.`, { details: { current_status: status } });
  }
  return g.requestStop(target, cascade);
}

function isDescendant(g: GraphHost, agent: AgentHandle, ancestor: AgentHandle): boolean {
  for (let p = agent.parentId; p !== null; p = g.agents.find(p)?.parentId ?? null) if (p === ancestor.id) return true;
  return false;
}

export function graphView(g: GraphHost, caller: AgentHandle) {
  const lines: string[] = [];
  const counts: Record<string, number> = { total: 0 };
  const walk = (nodes: TreeNode[], indent: string) => {
    for (const n of nodes) {
      counts.total = (counts.total ?? 0) + 1;
      counts[n.status] = (counts[n.status] ?? 0) + 1;
      const wait = n.status === 'waiting' && n.waitKind ? `/${n.waitKind}` : '';
      lines.push(`${indent}- ${n.name} (${n.id}) [${n.status}${wait}]${n.id === caller.id ? ' ← you' : ''}`);
      walk(n.children, `${indent}  `);
    }
  };
  walk(g.tree(), '');
  return { success: true, graph_structure: lines.join('\n'), summary: counts };
}
