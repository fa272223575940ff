/**
 * Graph queries and actions behind the built-in tools: who can still answer a wait, the finish
 * gate, stops from agents, the tree view.
 * @module
 */
import { activeAgentsExcept } from '../../machines/coordinatorMachine.js';
import { isActive } from '../../machines/types.js';
import { TroupeError } from '../errors.js';
import type { TreeNode } from './registry.js';
import type { AgentHandle, Runtime } from './runtime.js';

/** Active agents that could still message `agent`: its active children, and its parent. */
export function agentsThatCanAnswer(rt: Runtime, agent: AgentHandle): AgentHandle[] {
  const out = agent.children.map((id) => rt.handle(id)).filter((c) => isActive(c.status));
  const parent = agent.parentId === null ? undefined : rt.find(agent.parentId);
  if (parent && isActive(parent.status)) out.push(parent);
  return out;
}

/** The agent's own work still running: async executions it started and delegations it dispatched. */
export function ownWorkRunning(rt: Runtime, agent: AgentHandle): { executions: string[]; delegations: string[] } {
  return {
    executions: rt.executions.runningFor(agent.id),
    delegations: rt.delegations
      .list(agent.id)
      .filter((d) => d.status === 'running')
      .map((d) => d.delegationId),
  };
}

/**
 * What a wait of `agent` points at in the wait-for graph: the active agents that could message it
 * and its own work still running (whose end wakes it).
 */
export function waitsOn(rt: Runtime, agent: AgentHandle) {
  return { agents: agentsThatCanAnswer(rt, agent), ...ownWorkRunning(rt, agent) };
}

export function childrenSummary(rt: Runtime, agent: AgentHandle) {
  return agent.children.map((id) => {
    const c = rt.handle(id);
    return { agent_id: c.id, name: c.name, status: c.status };
  });
}

/**
 * finish / agent_finish are refused while the caller's work is still running: agents below it (every
 * other agent, for the root), and its own executions and delegations — finishing would drop their
 * results, which nobody would read. A tripped reserve or budget stop lifts the gate.
 */
export function assertNothingOutstanding(rt: Runtime, agent: AgentHandle): void {
  const flags = rt.budgetFlags();
  if (flags.reserveStopped || flags.budgetStopped) return;
  const active =
    agent.parentId === null
      ? activeAgentsExcept(rt.coordinator.getSnapshot().context, agent.id)
      : agent.children.map((id) => rt.handle(id)).filter((c) => isActive(c.status));
  const own = ownWorkRunning(rt, agent);
  if (active.length === 0 && own.executions.length === 0 && own.delegations.length === 0) return;
  const parts: string[] = [];
  if (active.length > 0) parts.push(`Other agents are still active: ${active.map((a) => `${a.name} (${a.id}) [${a.status}]`).join(', ')}.`);
  if (own.executions.length > 0) parts.push(`Your executions are still running: ${own.executions.join(', ')}.`);
  if (own.delegations.length > 0) parts.push(`Your delegations are still running: ${own.delegations.join(', ')}.`);
  parts.push('Wait for them with wait_for_agents (you are woken when one ends), message stalled agents, or stop them first.');
  throw new TroupeError('FINISH_REFUSED', parts.join(' '), {
    details: {
      active_agents: active.map((a) => ({ agent_id: a.id, name: a.name, status: a.status })),
      running_executions: own.executions,
      running_delegations: own.delegations,
    },
  });
}

export function stopFromAgent(rt: Runtime, caller: AgentHandle, ref: string, cascade: boolean): string[] {
  const target = rt.resolve(ref);
  if (target.id === caller.id) throw new TroupeError('TOOL_NOT_ALLOWED', 'You cannot stop yourself; call your finish tool instead.');
  if (caller.parentId !== null && !isDescendant(rt, target, caller)) {
    throw new TroupeError('TOOL_NOT_ALLOWED', `You may stop only your own sub-agents; ${target.name} (${target.id}) is not one of them.`);
  }
  if (!isActive(target.status)) {
    throw new TroupeError('TOOL_NOT_ALLOWED', `${target.name} (${target.id}) is already ${target.status}.`, {
      details: { current_status: target.status },
    });
  }
  return rt.requestStop(target, cascade);
}

function isDescendant(rt: Runtime, agent: AgentHandle, ancestor: AgentHandle): boolean {
  for (let p = agent.parentId; p !== null; p = rt.find(p)?.parentId ?? null) if (p === ancestor.id) return true;
  return false;
}

export function graphView(rt: Runtime, caller: AgentHandle) {
  const lines: string[] = [];
  const summary: Record<string, number> = { total: 0 };
  const walk = (nodes: TreeNode[], indent: string) => {
    for (const n of nodes) {
      summary.total = (summary.total ?? 0) + 1;
      summary[n.status] = (summary[n.status] ?? 0) + 1;
      const wait = n.status === 'waiting' && n.waitKind ? `/${n.waitKind}` : '';
      lines.push(`${indent}- ${n.name} (${n.id}) [${n.status}${wait}]${n.id === caller.id ? ' ← you' : ''}`);
      walk(n.children, `${indent}  `);
    }
  };
  walk(rt.tree(), '');
  return { success: true, graph_structure: lines.join('\n'), summary };
}
