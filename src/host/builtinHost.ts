/**
 * The built-in tools' port onto the runtime (tools/ports.ts BuiltinHost): what spawn_agent,
 * send_message, stop_agent, wait_for_agents and the graph views may see and do.
 * @module
 */
import type { BuiltinHost } from '../tools/ports.js';
import { assertNothingOutstanding, childrenSummary, graphView, stopFromAgent, waitsOn, type GraphHost } from './graph.js';
import type { Runtime } from './runtime.js';

export function builtinHost(rt: Runtime, g: GraphHost): BuiltinHost {
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
    said: (agent, text) => rt.said(h(agent), text),
    budgetFlags: () => rt.budgetFlags(),
    isStopRequested: (agent) => rt.agents.stopRequested(h(agent)),
    pendingCount: (agent) => rt.mailboxes.count(agent.id),
    pendingFromUser: (agent) => rt.mailboxes.fromUser(agent.id),
    waitsOn: (agent) => waitsOn(g, h(agent)),
    assertNothingOutstanding: (agent) => assertNothingOutstanding(g, h(agent)),
    childrenSummary: (agent) => childrenSummary(g, h(agent)),
    graphView: (agent) => graphView(g, h(agent)),
  };
}
