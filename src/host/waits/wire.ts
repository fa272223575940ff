/**
 * The wait-for graph family put together: what the graph reads of the run (whose end wakes an
 * agent) and the dead-wait watch. A pending approval is work whose end wakes the agent, like a
 * running execution; so is a wake the re-entry budget's spacing put off, while it can still wake
 * its agent.
 * @module
 */
import type { Logger } from 'pino';
import type { Actor } from 'xstate';
import type { BudgetFlags, coordinatorMachine } from '../../../machines/coordinatorMachine.js';
import type { Clock } from '../../clock.js';
import type { Agents } from '../agents/agents.js';
import type { DurableApprovals } from '../async/approvals.js';
import type { Delegations } from '../async/delegations.js';
import type { AsyncExecutions } from '../async/executions.js';
import type { SelfWakes } from '../async/selfWakes.js';
import type { CommitPort } from '../commit.js';
import { requestStop } from '../control.js';
import type { Views } from '../views/views.js';
import { DeadlockWatch } from './deadlockWatch.js';
import type { GraphHost } from './graph.js';

export interface WaitFamilyPorts {
  readonly runId: string;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly interactive: boolean;
  readonly agents: Agents;
  readonly coordinator: Actor<typeof coordinatorMachine>;
  readonly executions: Pick<AsyncExecutions, 'runningFor' | 'anyRunning' | 'anyAwaitingWindow'>;
  readonly approvals: Pick<DurableApprovals, 'pendingFor' | 'anyPending'>;
  readonly delegations: Pick<Delegations, 'list' | 'anyRunning'>;
  readonly selfWakes: Pick<SelfWakes, 'anyOnItsWay' | 'admit'>;
  readonly views: Pick<Views, 'tree' | 'emit'>;
  readonly commit: Pick<CommitPort, 'stage' | 'after'>;
  budgetFlags(): BudgetFlags;
  usable(): boolean;
}

export function wireWaits(p: WaitFamilyPorts): { graph: GraphHost; deadlocks: DeadlockWatch } {
  const { agents, executions, approvals, delegations, selfWakes, views, commit } = p;
  const graph: GraphHost = {
    agents,
    coordinator: p.coordinator,
    budgetFlags: p.budgetFlags,
    runningExecutions: (id) => [...executions.runningFor(id), ...approvals.pendingFor(id)],
    runningDelegations: (id) =>
      delegations
        .list(id)
        .filter((d) => d.status === 'running')
        .map((d) => d.delegationId),
    tree: () => views.tree(),
    requestStop: (target, cascade) => requestStop(agents, target, cascade),
  };
  const deadlocks = new DeadlockWatch({
    runId: p.runId,
    clock: p.clock,
    logger: p.logger,
    interactive: p.interactive,
    agents,
    usable: p.usable,
    stage: (op) => commit.stage(op),
    after: (effect) => commit.after(effect),
    emit: (event) => views.emit(event),
    // A person attached: a finished execution left for an approval window is an answer on its way too.
    anyExecutionRunning: () => executions.anyRunning || selfWakes.anyOnItsWay || approvals.anyPending || (p.interactive && executions.anyAwaitingWindow),
    anyDelegationRunning: () => delegations.anyRunning,
    selfWake: (h, retry) => selfWakes.admit(h, 'deadlock', retry) === 'now',
  });
  return { graph, deadlocks };
}
