/**
 * The calls family put together: the budget's controls (control.ts: pause, resume, trips), the
 * budget ledger, the run's way to its model (the gateway, its breakers, its adaptive admission).
 * An agent's model comes from its profile, read at each call: a profile no longer configured fails
 * the agent at its next call, not at spawn.
 * @module
 */
import type { Logger } from 'pino';
import type { Actor } from 'xstate';
import type { BudgetFlags, coordinatorMachine } from '../../../machines/coordinatorMachine.js';
import type { Clock } from '../../clock.js';
import type { Model } from '../../model/types.js';
import type { StorePort } from '../../store/port.js';
import type { RunTrace } from '../../trace/tracer.js';
import type { Agents } from '../agents/agents.js';
import type { CommitPort } from '../commit.js';
import { budgetControls } from '../control.js';
import type { Messaging } from '../mail/messaging.js';
import type { Sessions } from '../mail/sessions.js';
import type { ResolvedOptions } from '../options.js';
import { profileOf } from '../profiles.js';
import type { Toolbox } from '../toolbox.js';
import type { Views } from '../views/views.js';
import { attachAdmission } from './admission.js';
import { BudgetLedger } from './budget.js';
import type { CallLog } from './callLog.js';
import { runProvider } from './provider.js';

export interface CallFamilyPorts {
  readonly runId: string;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly model: Model;
  readonly options: ResolvedOptions;
  readonly port: StorePort;
  readonly coordinator: Actor<typeof coordinatorMachine>;
  readonly agents: Agents;
  readonly messaging: Pick<Messaging, 'deliverNotice'>;
  readonly sessions: Pick<Sessions, 'items'>;
  readonly toolbox: Pick<Toolbox, 'specs'>;
  readonly views: Views;
  readonly trace: RunTrace;
  readonly callLog: CallLog;
  readonly commit: CommitPort;
  /** What a resumed run had spent (0 for a new run). */
  readonly spentUsd: number;
  budgetFlags(): BudgetFlags;
  usable(): boolean;
  assertUsable(): void;
}

export function wireCalls(p: CallFamilyPorts) {
  const { runId, clock, logger, model, options, coordinator, agents, commit, trace } = p;
  const run = { runId, clock, logger };
  const profile = (agentId: string) => profileOf(options.profiles, agents.find(agentId)?.terms?.profile);
  const controls = budgetControls({
    ...run,
    coordinator,
    agents,
    messaging: p.messaging,
    trace,
    views: p.views,
    spentUsd: () => budget.spentUsd,
    model,
    options,
    commit,
    assertUsable: p.assertUsable,
    budgetFlags: p.budgetFlags,
  });
  const budget: BudgetLedger = new BudgetLedger(
    {
      ...run,
      model,
      auxiliaryModel: options.auxiliaryModel,
      agentModel: (agentId) => profile(agentId)?.model ?? null,
      budget: options.budget,
      flags: p.budgetFlags,
      trip: controls.trip,
      stage: (op) => commit.stage(op),
      spent: (agentId, purpose, usd) => agents.charge(agentId, purpose, usd),
      agent: (id) => agents.find(id),
      rootId: () => coordinator.getSnapshot().context.rootId,
      reserveTripped: (ownerId) => coordinator.getSnapshot().context.reservesTripped[ownerId] === true,
      tripAllowance: controls.tripAllowance,
    },
    p.spentUsd,
  );
  const { gateway, breakers } = runProvider({
    ...run,
    model,
    options,
    budget,
    commit,
    views: p.views,
    port: p.port,
    callLog: p.callLog,
    usable: p.usable,
    profile,
    session: (agent) => p.sessions.items(agent),
    toolSpecs: (agent) => p.toolbox.specs(agent),
    parentName: (agent) => (agent.parentId === null ? null : (agents.find(agent.parentId)?.name ?? null)),
    warned: (agent, warning) => trace.budgetWarning(agent.id, warning),
  });
  const admission = attachAdmission(gateway.queue, options.concurrency, clock);
  return { controls, budget, gateway, breakers, admission };
}
