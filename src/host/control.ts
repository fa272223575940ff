/**
 * Operator controls and the coordinator's emitted events, as the runtime applies them: a stop
 * (with cascade, leaves first), pausing and resuming the budget, and what the coordinator actor
 * asks the host to do once the commit that recorded its decision is durable.
 * @module
 */
import { isActive } from '../../machines/types.js';
import { positiveLimit } from './options.js';
import { STOP_REQUESTED } from '../turn/turn.js';
import type PQueue from 'p-queue';
import type { Logger } from 'pino';
import type { Actor } from 'xstate';
import type { BudgetFlags, coordinatorMachine } from '../../machines/coordinatorMachine.js';
import type { WriteOp } from '../store/port.js';
import type { AgentHandle, Agents } from './agents.js';
import type { Messaging } from './messaging.js';
import { TroupeError } from '../errors.js';
import type { CoordinatorHealth } from './views.js';

/** What the controls act on (the runtime provides it). */
export interface ControlParts {
  readonly runId: string;
  readonly coordinator: Actor<typeof coordinatorMachine>;
  readonly agents: Agents;
  readonly logger: Logger;
  readonly messaging: Pick<Messaging, 'deliverNotice'>;
  assertUsable(): void;
  stage(op: WriteOp): void;
  after(effect: () => void): void;
  durable(): Promise<void>;
  budgetFlags(): BudgetFlags;
}

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
export function pauseBudget(rt: ControlParts): Promise<void> {
  rt.assertUsable();
  rt.coordinator.send({ type: 'budget.pause' });
  rt.stage({ op: 'updateRun', id: rt.runId, patch: { budget: rt.budgetFlags() } });
  return rt.durable();
}

/** Resolves, once the resume is durable, with the agents it un-parks. */
export async function resumeBudget(rt: ControlParts, limitUsd?: number): Promise<string[]> {
  if (limitUsd !== undefined) positiveLimit('resumeBudget limitUsd', limitUsd);
  rt.assertUsable();
  const parked = [...rt.agents.values()].filter((h) => rt.agents.status(h) === 'budgetPaused').map((h) => h.id);
  rt.coordinator.send({ type: 'budget.resume', ...(limitUsd === undefined ? {} : { limitUsd }) });
  rt.stage({ op: 'updateRun', id: rt.runId, patch: { budget: rt.budgetFlags() } });
  await rt.durable();
  return parked;
}

export function wireCoordinatorEvents(rt: ControlParts): void {
  rt.coordinator.on('notice', (e) => rt.messaging.deliverNotice(e));
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

/** A snapshot for health checks: the fatal failure or the shutdown, and both queues. */
export function healthOf(rt: { failure: TroupeError | null; usable: boolean; gateway: { queue: PQueue }; toolQueue: PQueue }): CoordinatorHealth {
  const error = rt.failure ?? (rt.usable ? null : new TroupeError('COORDINATOR_SHUT_DOWN', 'The coordinator was shut down'));
  const queue = (q: PQueue) => ({ waiting: q.size, running: q.pending, concurrency: q.concurrency });
  return {
    ok: error === null,
    error: error === null ? null : { code: error.code, message: error.message },
    modelQueue: queue(rt.gateway.queue),
    toolQueue: queue(rt.toolQueue),
  };
}
