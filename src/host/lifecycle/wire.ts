/**
 * The lifecycle family put together: what a status change records and wakes, and the registrar
 * (spawns, the root, respawns and crashes). Built last of the parts: a change reaches the mail, the
 * views, the calls, the async work and the wait-for graph, all built by now.
 * @module
 */
import type { Logger } from 'pino';
import type { Actor } from 'xstate';
import type { BudgetFlags, coordinatorMachine } from '../../../machines/coordinatorMachine.js';
import type { Clock } from '../../clock.js';
import type { StorePort } from '../../store/port.js';
import type { RunTrace } from '../../trace/tracer.js';
import type { Agents } from '../agents/agents.js';
import type { AsyncExecutions } from '../async/executions.js';
import type { SelfWakes } from '../async/selfWakes.js';
import type { BudgetLedger } from '../calls/budget.js';
import type { Gateway } from '../calls/gateway.js';
import type { CommitPort } from '../commit.js';
import type { Mailboxes } from '../mail/mailbox.js';
import type { Messaging } from '../mail/messaging.js';
import type { Sessions } from '../mail/sessions.js';
import type { IdSource, ResolvedOptions } from '../options.js';
import type { StreamRecorder } from '../views/streamRecorder.js';
import type { Views } from '../views/views.js';
import type { DeadlockWatch } from '../waits/deadlockWatch.js';
import { Lifecycle } from './lifecycle.js';
import { Registrar } from './registration.js';

export interface LifecycleFamilyPorts {
  readonly runId: string;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly ids: IdSource;
  readonly options: ResolvedOptions;
  readonly port: StorePort;
  readonly coordinator: Actor<typeof coordinatorMachine>;
  readonly agents: Agents;
  readonly mailboxes: Mailboxes;
  readonly sessions: Sessions;
  readonly messaging: Pick<Messaging, 'wake'>;
  readonly views: Views;
  readonly stream: StreamRecorder | null;
  readonly trace: RunTrace;
  readonly budget: BudgetLedger;
  readonly gateway: Pick<Gateway, 'forget'>;
  readonly selfWakes: Pick<SelfWakes, 'admit'>;
  readonly executions: Pick<AsyncExecutions, 'continueFor'>;
  readonly deadlocks: Pick<DeadlockWatch, 'check'>;
  readonly commit: Pick<CommitPort, 'stage' | 'after'>;
  /** Whether the run id was checked free already (an embedded store, or a resume). */
  readonly checkedRunId: boolean;
  budgetFlags(): BudgetFlags;
  assertUsable(): void;
}

export function wireLifecycle(p: LifecycleFamilyPorts) {
  const { runId, clock, logger, coordinator, agents, sessions, views, trace, budget, commit, deadlocks } = p;
  const run = { runId, clock, logger };
  const lifecycle = new Lifecycle({
    ...run,
    interactive: p.options.interactive,
    coordinator,
    agents,
    mailboxes: p.mailboxes,
    trace,
    stage: (op) => commit.stage(op),
    after: (effect) => commit.after(effect),
    published: (h, change) => views.changed(h, change),
    wakeFor: (h, mail) => p.messaging.wake(h, mail),
    finished: (h) => {
      sessions.evict(h.id);
      p.gateway.forget(h.id);
    },
    checkQuiescence: () => deadlocks.check(),
    resumeEpoch: () => p.budgetFlags().resumeEpoch,
    statusChanged: (h, status) => budget.allowances.changed(h.id, status),
    timerWoke: (h) => p.selfWakes.admit(h, 'timer', () => undefined),
    resumedFromBudget: (h) => p.executions.continueFor(h.id),
  });
  const registrar = new Registrar(
    {
      ...run,
      ids: p.ids,
      options: p.options,
      port: p.port,
      coordinator,
      agents,
      sessions,
      views,
      lifecycle,
      trace,
      stream: p.stream,
      budget,
      stage: (op) => commit.stage(op),
      assertUsable: p.assertUsable,
      checkQuiescence: () => deadlocks.check(),
    },
    p.checkedRunId,
  );
  return { lifecycle, registrar };
}
