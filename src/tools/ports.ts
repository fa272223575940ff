/**
 * What the built-in tools need of the host: the graph actions (spawn, message, stop), the wait and
 * finish rules, and a few facts. Narrow on purpose: built-ins act through this, never on the host.
 * @module
 */
import type { AgentStatus } from '../../machines/types.js';
import type { AgentTerms, MessagePriority } from '../store/types.js';

/** The calling agent, as the built-ins see it. */
export interface BuiltinAgent {
  readonly id: string;
  readonly name: string;
  readonly parentId: string | null;
  /** Levels below the root (root = 0). */
  readonly depth: number;
}

/** Another agent, as a result describes it. */
export interface AgentSummary {
  agent_id: string;
  name: string;
  status: AgentStatus;
}

/** A child to spawn, as the spawn tools ask for it. */
export interface SpawnRequest {
  name: string;
  task: string;
  skills: string[];
  inheritContext: boolean;
  terms: AgentTerms | null;
}

export interface BuiltinHost {
  readonly interactive: boolean;
  now(): number;
  /**
   * Register and start children, in order, all or none: every request and the limits and budget
   * for the whole batch are checked before the first is registered; throws a TroupeError when refused.
   */
  spawnChildren(parent: BuiltinAgent, reqs: readonly SpawnRequest[]): { id: string; name: string }[];
  /** Queue a message from an agent (recipient rules checked); throws a TroupeError when refused. */
  sendFromAgent(
    from: BuiltinAgent,
    to: string,
    content: string,
    opts: { type: string; priority: MessagePriority },
  ): { messageId: string; target: { id: string; name: string; status: AgentStatus } };
  /** Stop a descendant (and with cascade its subtree) after its current turn; the ids stopping. */
  stopFromAgent(caller: BuiltinAgent, ref: string, cascade: boolean): string[];
  /** The agent said something to the user (respond_to_user). */
  said(agent: BuiltinAgent, text: string): void;
  /** The run's budget flags; with `agent`, `reserveStopped` also when an allowance above it (not its own) tripped its reserve. */
  budgetFlags(agent?: BuiltinAgent): { budgetStopped: boolean; reserveStopped: boolean };
  isStopRequested(agent: BuiltinAgent): boolean;
  pendingCount(agent: BuiltinAgent): number;
  pendingFromUser(agent: BuiltinAgent): boolean;
  /** Nothing could answer a wait of the agent: no active child or parent, none of its executions or delegations running. */
  nobodyToAnswer(agent: BuiltinAgent): boolean;
  /** A wait for all the agent's children parks on its waiting mail: reports only, and another child still active. */
  gathers(agent: BuiltinAgent): boolean;
  /** Throws FINISH_REFUSED while the agent's work still runs (agents below it, its own executions and delegations). */
  assertNothingOutstanding(agent: BuiltinAgent): void;
  childrenSummary(agent: BuiltinAgent): AgentSummary[];
  graphView(agent: BuiltinAgent): unknown;
  /** Record the user's assent to the agent's stated plan (quoted): it opens the agent's approval window. */
  assent(agent: BuiltinAgent, quote: string): { windowMs: number };
}

/**
 * What a read took: how many waiting messages, and whether they are the last any agent could send
 * (`last`: nothing else could still answer the reader's wait — `nobodyToAnswer` — when it read).
 * A wait woken or answered with mail says so (`no_active_agents: true`), so a parent can finish on
 * its last reports instead of paying a call to be told that nobody is left.
 */
export interface Read {
  count: number;
  last: boolean;
}
