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
export function budgetControls(c: ControlParts) {
  wireCoordinatorEvents(c);
  return {
    pause: () => pauseBudget(c),
    resume: (limitUsd?: number) => resumeBudget(c, limitUsd),
    trip: (event: 'budget.stop' | 'budget.reserveTrip', reason: string, agentId: string) => tripBudget(c, event, reason, agentId),
    tripAllowance: (kind: 'reserve' | 'allowance', ownerId: string, allowanceUsd: number, reason: string, agentId: string) =>
      tripAllowance(c, kind, ownerId, allowanceUsd, reason, agentId),
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
function pauseBudget(c: ControlParts): Promise<void> {
  c.assertUsable();
  const before = c.budgetFlags();
  c.coordinator.send({ type: 'budget.pause' });
  c.commit.stage({ op: 'updateRun', id: c.runId, patch: { budget: c.budgetFlags() } });
  journalBudget(c, 'budget.pause', before);
  return c.commit.durable();
}

/** Resolves, once the resume is durable, with the agents it un-parks. */
async function resumeBudget(c: ControlParts, limitUsd?: number): Promise<string[]> {
  if (limitUsd !== undefined) {
    positiveLimit('resumeBudget limitUsd', limitUsd);
    // A limit set on a run whose model has no price would never bind: refused, nothing changed.
    requirePriceForBudget(c.model, c.options.budget.prices, limitUsd, 'resumeBudget limitUsd');
  }
  c.assertUsable();
  const parked = [...c.agents.values()].filter((h) => c.agents.status(h) === 'budgetPaused').map((h) => h.id);
  const before = c.budgetFlags();
  c.coordinator.send({ type: 'budget.resume', ...(limitUsd === undefined ? {} : { limitUsd }) });
  c.commit.stage({ op: 'updateRun', id: c.runId, patch: { budget: c.budgetFlags() } });
  journalBudget(c, 'budget.resume', before);
  await c.commit.durable();
  return parked;
}

/**
 * Trip the reserve or the budget stop. A trip that happened is logged, an event on the stint whose
 * call caused it, and (once committed) a `budget.tripped` event saying why in words.
 */
function tripBudget(c: ControlParts, event: 'budget.stop' | 'budget.reserveTrip', reason: string, agentId: string): void {
  const before = c.budgetFlags();
  c.coordinator.send({ type: event });
  const after = c.budgetFlags();
  c.commit.stage({ op: 'updateRun', id: c.runId, patch: { budget: after } });
  journalBudget(c, event, before, agentId);
  const kind = after.budgetStopped && !before.budgetStopped ? 'stop' : after.reserveStopped && !before.reserveStopped ? 'reserve' : null;
  if (after.reserveStopped && !before.reserveStopped) c.trace.event(agentId, EVENT_RESERVE_TRIP);
  if (after.budgetStopped && !before.budgetStopped) c.trace.event(agentId, EVENT_BUDGET_STOP);
  if (kind === null) return;
  c.logger.warn({ kind, reason }, kind === 'stop' ? 'the budget stopped the run' : 'the sub-agent reserve tripped');
  const at = c.clock.now();
  c.commit.after(() => c.views.emit({ type: 'budget.tripped', kind, reason, spentUsd: c.spentUsd(), limitUsd: after.limitUsd ?? 0, at }));
}

/**
 * An allowance's reserve trips (its subtree but its owner stops; the owner is told once) or the
 * allowance is spent (its whole subtree stops, reason `allowance`): the coordinator decides, a
 * `budget.allowanceReserveTrip` / `budget.allowanceStop` event on the owner's lane says why.
 */
function tripAllowance(c: ControlParts, kind: 'reserve' | 'allowance', ownerId: string, allowanceUsd: number, reason: string, agentId: string): void {
  const owner = c.agents.find(ownerId);
  if (!owner) return;
  const ids: string[] = [];
  const visit = (h: AgentHandle) => {
    for (const id of h.children) visit(c.agents.get(id));
    if (isActive(c.agents.status(h)) && (kind === 'allowance' || h !== owner)) ids.push(h.id);
  };
  visit(owner);
  const tripped = () => c.coordinator.getSnapshot().context.reservesTripped[ownerId] === true;
  if (kind === 'reserve') {
    if (tripped()) return;
    c.coordinator.send({ type: 'allowance.reserveTrip', ownerId, allowanceUsd, ids });
  } else {
    c.coordinator.send({ type: 'allowance.stop', ids });
  }
  const type = kind === 'reserve' ? 'budget.allowanceReserveTrip' : 'budget.allowanceStop';
  c.commit.stage({ op: 'appendEvent', row: { runId: c.runId, agentId: ownerId, type, data: { allowanceUsd, reason, by: agentId }, at: c.clock.now() } });
  c.logger.warn({ kind, ownerId, reason }, kind === 'reserve' ? "an allowance's sub-agent reserve tripped" : 'an allowance is spent: its subtree stops');
}

function wireCoordinatorEvents(c: ControlParts): void {
  c.coordinator.on('notice', (e) => {
    c.trace.notice(e);
    c.messaging.deliverNotice(e);
  });
  c.coordinator.on('agents.stop', (e) =>
    c.commit.after(() => {
      for (const id of e.ids) {
        const h = c.agents.find(id);
        // One that ended between the decision and this effect has nothing to stop (its actor is
        // final: XState would warn of an event sent to a stopped actor).
        if (!h || !isActive(c.agents.status(h))) continue;
        c.agents.send(h, { type: 'agent.stop', reason: e.reason });
        // The budget's stop cancels running tools too (a model call in flight settles and is charged).
        h.toolsInFlight?.abort(STOP_REQUESTED);
      }
    }),
  );
  c.coordinator.on('budget.resumed', (e) =>
    c.commit.after(() => {
      for (const h of c.agents.values()) if (c.agents.status(h) === 'budgetPaused') c.agents.send(h, { type: 'budget.resume', epoch: e.epoch });
    }),
  );
}

/** A snapshot for health checks: the fatal failure or the shutdown, and both queues. */
export function healthOf(c: { failure: TroupeError | null; usable: boolean; modelQueue: PQueue; toolQueue: PQueue }): CoordinatorHealth {
  const error = c.failure ?? (c.usable ? null : new TroupeError('COORDINATOR_SHUT_DOWN', 'The coordinator was shut down'));
  const queue = (q: PQueue) => ({ waiting: q.size, running: q.pending, concurrency: q.concurrency });
  return {
    ok: error === null,
    error: error === null ? null : { code: error.code, message: error.message },
    modelQueue: queue(c.modelQueue),
    toolQueue: queue(c.toolQueue),
  };
}

/**
 * When the run's budget flags changed, journal the change: a `budget.*` event row with the spend at
 * that moment (what the dashboard's timeline shows). Written once per real change.
 */
function journalBudget(c: ControlParts, type: 'budget.stop' | 'budget.reserveTrip' | 'budget.pause' | 'budget.resume', before: BudgetFlags, by?: string): void {
  const flags = c.budgetFlags();
  if (JSON.stringify(flags) === JSON.stringify(before)) return;
  // `agentId` in the data: the agent whose call tripped it (its lane on the timeline); the row stays run-wide.
  const data = { spentUsd: c.spentUsd(), limitUsd: flags.limitUsd, ...(by === undefined ? {} : { agentId: by }) };
  c.commit.stage({ op: 'appendEvent', row: { runId: c.runId, agentId: null, type, data, at: c.clock.now() } });
}
