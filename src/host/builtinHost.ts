/**
 * The built-in tools' port onto the runtime (tools/ports.ts BuiltinHost): what spawn_agent,
 * send_message, stop_agent, wait_for_agents and the graph views may see and do.
 * @module
 */
import type { BudgetFlags } from '../../machines/coordinatorMachine.js';
import type { Clock } from '../clock.js';
import type { BuiltinHost } from '../tools/ports.js';
import type { WriteOp } from '../store/port.js';
import type { Agents } from './agents/agents.js';
import { assertNothingOutstanding, childrenSummary, graphView, stopFromAgent, waitsOn, type GraphHost } from './waits/graph.js';
import type { Mailboxes } from './mail/mailbox.js';
import type { Messaging } from './mail/messaging.js';
import type { ResolvedOptions } from './options.js';
import type { Registrar } from './lifecycle/registration.js';
import type { Views } from './views/views.js';

/** What the built-ins' port is made of (the runtime provides it). */
export interface BuiltinParts {
  readonly options: Pick<ResolvedOptions, 'interactive'>;
  readonly clock: Clock;
  readonly agents: Agents;
  readonly mailboxes: Mailboxes;
  readonly registrar: Pick<Registrar, 'spawnChild'>;
  readonly messaging: Pick<Messaging, 'sendFromAgent'>;
  readonly runId: string;
  readonly views: Pick<Views, 'emit'>;
  stage(op: WriteOp): void;
  after(effect: () => void): void;
  budgetFlags(): BudgetFlags;
  readonly budget: { allowanceReserveStopped(agentId: string): boolean };
}

export function builtinHost(rt: BuiltinParts, g: GraphHost): BuiltinHost {
  const h = (a: { id: string }) => rt.agents.get(a.id);
  return {
    interactive: rt.options.interactive,
    now: () => rt.clock.now(),
    spawnChild: (parent, req) => rt.registrar.spawnChild(h(parent), req),
    sendFromAgent: (from, to, content, opts) => {
      const { mail, target } = rt.messaging.sendFromAgent(h(from), to, content, opts);
      return { messageId: mail.id, target: { id: target.id, name: target.name, status: rt.agents.status(target) } };
    },
    stopFromAgent: (caller, ref, cascade) => stopFromAgent(g, h(caller), ref, cascade),
    // The agent said something to the user (respond_to_user): an event row, and the event once committed.
    said: (agent, text) => {
      const at = rt.clock.now();
      rt.stage({ op: 'appendEvent', row: { runId: rt.runId, agentId: agent.id, type: 'agent.said', data: { text }, at } });
      rt.after(() => rt.views.emit({ type: 'agent.said', agentId: agent.id, name: agent.name, text, at }));
    },
    // An allowance's tripped reserve reads as the run's for the agents under its owner.
    budgetFlags: (agent) => {
      const flags = rt.budgetFlags();
      return agent && !flags.reserveStopped && rt.budget.allowanceReserveStopped(agent.id) ? { ...flags, reserveStopped: true } : flags;
    },
    isStopRequested: (agent) => rt.agents.stopRequested(h(agent)),
    pendingCount: (agent) => rt.mailboxes.count(agent.id),
    pendingFromUser: (agent) => rt.mailboxes.fromUser(agent.id),
    waitsOn: (agent) => waitsOn(g, h(agent)),
    assertNothingOutstanding: (agent) => assertNothingOutstanding(g, h(agent)),
    childrenSummary: (agent) => childrenSummary(g, h(agent)),
    graphView: (agent) => graphView(g, h(agent)),
  };
}
