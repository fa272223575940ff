/**
 * Operator controls and the coordinator's emitted events, as the runtime applies them: a stop
 * (with cascade, leaves first), pausing and resuming the budget, and what the coordinator actor
 * asks the host to do once the commit that recorded its decision is durable.
 * @module
 */
import { isActive } from '../../machines/types.js';
import type { ResolvedOptions } from './options.js';
import { positiveLimit } from './resolveOptions.js';
import { requirePriceForBudget } from '../model/prices.js';
import type { Model } from '../model/types.js';
import { EVENT_BUDGET_STOP, EVENT_RESERVE_TRIP } from '../trace/attributes.js';
import { STOP_REQUESTED } from '../turn/turn.js';
import type PQueue from 'p-queue';
import type { Logger } from 'pino';
import type { Actor } from 'xstate';
import type { BudgetFlags, coordinatorMachine } from '../../machines/coordinatorMachine.js';
import type { CommitPort } from './commit.js';
import type { AgentHandle, Agents } from './agents/agents.js';
import type { Messaging } from './mail/messaging.js';
import { TroupeError } from '../errors.js';
import type { CoordinatorHealth, Views } from './views/views.js';
import type { Clock } from '../clock.js';
import type { RunTrace } from '../trace/tracer.js';

/** What the controls act on: the parts they use, built. */
interface ControlParts {
  readonly runId: string;
  readonly coordinator: Actor<typeof coordinatorMachine>;
  readonly agents: Agents;
  readonly logger: Logger;
  readonly messaging: Pick<Messaging, 'deliverNotice'>;
  readonly trace: Pick<RunTrace, 'event' | 'notice'>;
  readonly clock: Clock;
  readonly views: Pick<Views, 'emit'>;
  /** The run's spend now (calls/budget.ts). */
  spentUsd(): number;
  readonly model: Model;
  readonly options: { readonly budget: Pick<ResolvedOptions['budget'], 'prices'> };
  readonly commit: CommitPort;
  assertUsable(): void;
  budgetFlags(): BudgetFlags;
}

/** The budget's controls over one run (pause, resume, trips), and the coordinator's events wired to the parts. */
export function budgetControls(rt: ControlParts) {
  wireCoordinatorEvents(rt);
  return {
    pause: () => pauseBudget(rt),
    resume: (limitUsd?: number) => resumeBudget(rt, limitUsd),
    trip: (event: 'budget.stop' | 'budget.reserveTrip', reason: string, agentId: string) => tripBudget(rt, event, reason, agentId),
    tripAllowance: (kind: 'reserve' | 'allowance', ownerId: string, allowanceUsd: number, reason: string, agentId: string) =>
      tripAllowance(rt, kind, ownerId, allowanceUsd, reason, agentId),
  };
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
    // A model call in flight is cancelled, and so are the tools running (their AbortSignal): each
    // ends as TOOL_CANCELLED, recorded with the turn that stops the agent.
    h.inFlight?.abort(STOP_REQUESTED);
    h.toolsInFlight?.abort(STOP_REQUESTED);
  }
  return stopping.map((h) => h.id);
}

/** Resolves once the pause is durable. */
function pauseBudget(rt: ControlParts): Promise<void> {
  rt.assertUsable();
  const before = rt.budgetFlags();
  rt.coordinator.send({ type: 'budget.pause' });
  rt.commit.stage({ op: 'updateRun', id: rt.runId, patch: { budget: rt.budgetFlags() } });
  journalBudget(rt, 'budget.pause', before);
  return rt.commit.durable();
}

/** Resolves, once the resume is durable, with the agents it un-parks. */
async function resumeBudget(rt: ControlParts, limitUsd?: number): Promise<string[]> {
  if (limitUsd !== undefined) {
    positiveLimit('resumeBudget limitUsd', limitUsd);
    // A limit set on a run whose model has no price would never bind: refused, nothing changed.
    requirePriceForBudget(rt.model, rt.options.budget.prices, limitUsd, 'resumeBudget limitUsd');
  }
  rt.assertUsable();
  const parked = [...rt.agents.values()].filter((h) => rt.agents.status(h) === 'budgetPaused').map((h) => h.id);
  const before = rt.budgetFlags();
  rt.coordinator.send({ type: 'budget.resume', ...(limitUsd === undefined ? {} : { limitUsd }) });
  rt.commit.stage({ op: 'updateRun', id: rt.runId, patch: { budget: rt.budgetFlags() } });
  journalBudget(rt, 'budget.resume', before);
  await rt.commit.durable();
  return parked;
}

/**
 * Trip the reserve or the budget stop. A trip that happened is logged, an event on the stint whose
 * call caused it, and (once committed) a `budget.tripped` event saying why in words.
 */
function tripBudget(rt: ControlParts, event: 'budget.stop' | 'budget.reserveTrip', reason: string, agentId: string): void {
  const before = rt.budgetFlags();
  rt.coordinator.send({ type: event });
  const after = rt.budgetFlags();
  rt.commit.stage({ op: 'updateRun', id: rt.runId, patch: { budget: after } });
  journalBudget(rt, event, before, agentId);
  const kind = after.budgetStopped && !before.budgetStopped ? 'stop' : after.reserveStopped && !before.reserveStopped ? 'reserve' : null;
  if (after.reserveStopped && !before.reserveStopped) rt.trace.event(agentId, EVENT_RESERVE_TRIP);
  if (after.budgetStopped && !before.budgetStopped) rt.trace.event(agentId, EVENT_BUDGET_STOP);
  if (kind === null) return;
  rt.logger.warn({ kind, reason }, kind === 'stop' ? 'the budget stopped the run' : 'the sub-agent reserve tripped');
  const at = rt.clock.now();
  rt.commit.after(() => rt.views.emit({ type: 'budget.tripped', kind, reason, spentUsd: rt.spentUsd(), limitUsd: after.limitUsd ?? 0, at }));
}

/**
 * An allowance's reserve trips (its subtree but its owner stops; the owner is told once) or the
 * allowance is spent (its whole subtree stops, reason `allowance`): the coordinator decides, a
 * `budget.allowanceReserveTrip` / `budget.allowanceStop` event on the owner's lane says why.
 */
function tripAllowance(rt: ControlParts, kind: 'reserve' | 'allowance', ownerId: string, allowanceUsd: number, reason: string, agentId: string): void {
  const owner = rt.agents.find(ownerId);
  if (!owner) return;
  const ids: string[] = [];
  const visit = (h: AgentHandle) => {
    for (const id of h.children) visit(rt.agents.get(id));
    if (isActive(rt.agents.status(h)) && (kind === 'allowance' || h !== owner)) ids.push(h.id);
  };
  visit(owner);
  const tripped = () => rt.coordinator.getSnapshot().context.reservesTripped[ownerId] === true;
  if (kind === 'reserve') {
    if (tripped()) return;
    rt.coordinator.send({ type: 'allowance.reserveTrip', ownerId, allowanceUsd, ids });
  } else {
    rt.coordinator.send({ type: 'allowance.stop', ids });
  }
  const type = kind === 'reserve' ? 'budget.allowanceReserveTrip' : 'budget.allowanceStop';
  rt.commit.stage({ op: 'appendEvent', row: { runId: rt.runId, agentId: ownerId, type, data: { allowanceUsd, reason, by: agentId }, at: rt.clock.now() } });
  rt.logger.warn({ kind, ownerId, reason }, kind === 'reserve' ? "an allowance's sub-agent reserve tripped" : 'an allowance is spent: its subtree stops');
}

function wireCoordinatorEvents(rt: ControlParts): void {
  rt.coordinator.on('notice', (e) => {
    rt.trace.notice(e);
    rt.messaging.deliverNotice(e);
  });
  rt.coordinator.on('agents.stop', (e) =>
    rt.commit.after(() => {
      for (const id of e.ids) {
        const h = rt.agents.find(id);
        // One that ended between the decision and this effect has nothing to stop (its actor is
        // final: XState would warn of an event sent to a stopped actor).
        if (!h || !isActive(rt.agents.status(h))) continue;
        rt.agents.send(h, { type: 'agent.stop', reason: e.reason });
        // The budget's stop cancels running tools too (a model call in flight settles and is charged).
        h.toolsInFlight?.abort(STOP_REQUESTED);
      }
    }),
  );
  rt.coordinator.on('budget.resumed', (e) =>
    rt.commit.after(() => {
      for (const h of rt.agents.values()) if (rt.agents.status(h) === 'budgetPaused') rt.agents.send(h, { type: 'budget.resume', epoch: e.epoch });
    }),
  );
}

/** A snapshot for health checks: the fatal failure or the shutdown, and both queues. */
export function healthOf(rt: { failure: TroupeError | null; usable: boolean; modelQueue: PQueue; toolQueue: PQueue }): CoordinatorHealth {
  const error = rt.failure ?? (rt.usable ? null : new TroupeError('COORDINATOR_SHUT_DOWN', 'The coordinator was shut down'));
  const queue = (q: PQueue) => ({ waiting: q.size, running: q.pending, concurrency: q.concurrency });
  return {
    ok: error === null,
    error: error === null ? null : { code: error.code, message: error.message },
    modelQueue: queue(rt.modelQueue),
    toolQueue: queue(rt.toolQueue),
  };
}

/**
 * When the run's budget flags changed, journal the change: a `budget.*` event row with the spend at
 * that moment (what the dashboard's timeline shows). Written once per real change.
 */
function journalBudget(
  rt: ControlParts,
  type: 'budget.stop' | 'budget.reserveTrip' | 'budget.pause' | 'budget.resume',
  before: BudgetFlags,
  by?: string,
): void {
  const flags = rt.budgetFlags();
  if (JSON.stringify(flags) === JSON.stringify(before)) return;
  // `agentId` in the data: the agent whose call tripped it (its lane on the timeline); the row stays run-wide.
  const data = { spentUsd: rt.spentUsd(), limitUsd: flags.limitUsd, ...(by === undefined ? {} : { agentId: by }) };
  rt.commit.stage({ op: 'appendEvent', row: { runId: rt.runId, agentId: null, type, data, at: rt.clock.now() } });
}
