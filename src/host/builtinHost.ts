/**
 * The built-in tools' port onto the runtime (tools/ports.ts BuiltinHost): what spawn_agent,
 * send_message, stop_agent, wait_for_agents and the graph views may see and do.
 * @module
 */
import type { BudgetFlags } from '../../machines/coordinatorMachine.js';
import type { Clock } from '../clock.js';
import type { BuiltinHost } from '../tools/ports.js';
import type { CommitPort } from './commit.js';
import type { Agents } from './agents/agents.js';
import { assertNothingOutstanding, childrenSummary, gathers, graphView, nobodyToAnswer, stopFromAgent, type GraphHost } from './waits/graph.js';
import type { Mailboxes } from './mail/mailbox.js';
import type { Messaging } from './mail/messaging.js';
import type { ResolvedOptions } from './options.js';
import type { Registrar } from './lifecycle/registration.js';
import type { Views } from './views/views.js';
import type { Sessions } from './mail/sessions.js';
import type { DurableApprovals } from './async/approvals.js';
import type { SessionItem } from '../model/types.js';
import { TroupeError } from '../errors.js';

/** What the built-ins' port is made of: the parts it uses, built. */
export interface BuiltinParts {
  readonly options: Pick<ResolvedOptions, 'interactive'>;
  readonly clock: Clock;
  readonly agents: Agents;
  readonly mailboxes: Mailboxes;
  readonly registrar: Pick<Registrar, 'spawnChildren'>;
  readonly messaging: Pick<Messaging, 'sendFromAgent'>;
  readonly runId: string;
  readonly views: Pick<Views, 'emit'>;
  readonly commit: Pick<CommitPort, 'stage' | 'after'>;
  budgetFlags(): BudgetFlags;
  readonly budget: { allowanceReserveStopped(agentId: string): boolean };
  readonly sessions: Pick<Sessions, 'items'>;
  readonly approvals: Pick<DurableApprovals, 'assent'>;
}

export function builtinHost(parts: BuiltinParts, g: GraphHost): BuiltinHost {
  const h = (a: { id: string }) => parts.agents.get(a.id);
  return {
    interactive: parts.options.interactive,
    now: () => parts.clock.now(),
    spawnChildren: (parent, reqs) => parts.registrar.spawnChildren(h(parent), reqs),
    sendFromAgent: (from, to, content, opts) => {
      const { mail, target } = parts.messaging.sendFromAgent(h(from), to, content, opts);
      return { messageId: mail.id, target: { id: target.id, name: target.name, status: parts.agents.status(target) } };
    },
    stopFromAgent: (caller, ref, cascade) => stopFromAgent(g, h(caller), ref, cascade),
    // The agent said something to the user (respond_to_user): an event row, and the event once committed.
    said: (agent, text) => {
      const at = parts.clock.now();
      parts.commit.stage({ op: 'appendEvent', row: { runId: parts.runId, agentId: agent.id, type: 'agent.said', data: { text }, at } });
      parts.commit.after(() => parts.views.emit({ type: 'agent.said', agentId: agent.id, name: agent.name, text, at }));
    },
    // An allowance's tripped reserve reads as the run's for the agents under its owner.
    budgetFlags: (agent) => {
      const flags = parts.budgetFlags();
      return agent && !flags.reserveStopped && parts.budget.allowanceReserveStopped(agent.id) ? { ...flags, reserveStopped: true } : flags;
    },
    isStopRequested: (agent) => parts.agents.stopRequested(h(agent)),
    pendingCount: (agent) => parts.mailboxes.count(agent.id),
    pendingFromUser: (agent) => parts.mailboxes.fromUser(agent.id),
    nobodyToAnswer: (agent) => nobodyToAnswer(g, h(agent)),
    gathers: (agent) => gathers(g, h(agent), parts.mailboxes.list(agent.id)),
    assertNothingOutstanding: (agent) => assertNothingOutstanding(g, h(agent)),
    childrenSummary: (agent) => childrenSummary(g, h(agent)),
    graphView: (agent) => graphView(g, h(agent)),
    assent: (agent, quote) => {
      if (!userWroteSinceSpoken(parts.sessions.items(agent), quote)) {
        throw new TroupeError(
          'TOOL_INPUT_INVALID',
          'The quote is not in what the user wrote since you last spoke to them (respond_to_user): quote their words of assent exactly, or ask them first.',
        );
      }
      return parts.approvals.assent(agent.id, quote);
    },
  };
}

/** Whether the user's messages since the agent's last `respond_to_user` contain `quote`. */
function userWroteSinceSpoken(items: readonly SessionItem[], quote: string): boolean {
  const wanted = quote.trim();
  for (let i = items.length - 1; i >= 0; i--) {
    const item = items[i]!;
    if (item.role === 'assistant' && item.toolCalls?.some((c) => c.name === 'respond_to_user')) return false;
    // The user's own words come as they wrote them (texts.ts); everything else carries a header.
    if (item.role === 'user' && typeof item.content === 'string' && !item.content.startsWith('[Message from') && item.content.includes(wanted)) return true;
  }
  return false;
}
