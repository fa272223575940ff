/**
 * Operator controls and the coordinator's emitted events, as the runtime applies them: a stop
 * (with cascade, leaves first), pausing and resuming the budget, and what the coordinator actor
 * asks the host to do once the commit that recorded its decision is durable.
 * @module
 */
import { isActive } from '../../machines/types.js';
import { positiveLimit } from './options.js';
import { EVENT_BUDGET_STOP, EVENT_RESERVE_TRIP } from '../trace/attributes.js';
import { STOP_REQUESTED } from '../turn/turn.js';
import type { AgentHandle, Agents } from './agents.js';
import type { Runtime } from './runtime.js';

/** Ask `target` (and with cascade its subtree, leaves first) to stop after the current turn; returns who was asked. */
export function requestStop(agents: Agents, target: AgentHandle, cascade: boolean): string[] {
  const order: AgentHandle[] = [];
  const visit = (h: AgentHandle) => {
    if (cascade) for (const id of h.children) visit(agents.get(id));
    order.push(h);
  };
  visit(target);
  const stopping = order.filter((h) => isActive(agents.status(h)));
  for (const h of stopping) {
    agents.send(h, { type: 'agent.stop', reason: 'requested' });
    // A model call in flight is cancelled; tools already running finish and are recorded.
    h.inFlight?.abort(STOP_REQUESTED);
  }
  return stopping.map((h) => h.id);
}

/** Resolves once the pause is durable. */
export function pauseBudget(rt: Runtime): Promise<void> {
  rt.assertUsable();
  rt.coordinator.send({ type: 'budget.pause' });
  rt.stage({ op: 'updateRun', id: rt.runId, patch: { budget: rt.budgetFlags() } });
  return rt.durable();
}

/** Resolves, once the resume is durable, with the agents it un-parks. */
export async function resumeBudget(rt: Runtime, limitUsd?: number): Promise<string[]> {
  if (limitUsd !== undefined) positiveLimit('resumeBudget limitUsd', limitUsd);
  rt.assertUsable();
  const parked = [...rt.agents.values()].filter((h) => rt.agents.status(h) === 'budgetPaused').map((h) => h.id);
  rt.coordinator.send({ type: 'budget.resume', ...(limitUsd === undefined ? {} : { limitUsd }) });
  rt.stage({ op: 'updateRun', id: rt.runId, patch: { budget: rt.budgetFlags() } });
  await rt.durable();
  return parked;
}

/** Trip the reserve or the budget stop; a trip that happened is an event on the stint whose call caused it. */
export function tripBudget(rt: Runtime, event: 'budget.stop' | 'budget.reserveTrip', agentId: string): void {
  const before = rt.budgetFlags();
  rt.coordinator.send({ type: event });
  const after = rt.budgetFlags();
  if (after.reserveStopped && !before.reserveStopped) rt.trace.event(agentId, EVENT_RESERVE_TRIP);
  if (after.budgetStopped && !before.budgetStopped) rt.trace.event(agentId, EVENT_BUDGET_STOP);
  rt.stage({ op: 'updateRun', id: rt.runId, patch: { budget: after } });
}

export function wireCoordinatorEvents(rt: Runtime): void {
  rt.coordinator.on('notice', (e) => {
    rt.trace.notice(e);
    rt.messaging.deliverNotice(e);
  });
  rt.coordinator.on('agents.stop', (e) =>
    rt.after(() => {
      for (const id of e.ids) {
        const h = rt.agents.find(id);
        if (h) rt.agents.send(h, { type: 'agent.stop', reason: e.reason });
      }
    }),
  );
  rt.coordinator.on('budget.resumed', (e) =>
    rt.after(() => {
      for (const h of rt.agents.values()) if (rt.agents.status(h) === 'budgetPaused') rt.agents.send(h, { type: 'budget.resume', epoch: e.epoch });
    }),
  );
}
