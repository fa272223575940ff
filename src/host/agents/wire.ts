/**
 * The agents family put together: the run's one idle timer, the team's failure patterns, each
 * agent's output check, and the agents, whose machine runs its turns through the turns' host.
 * What an agent's actor reports is handed on: a transition to the lifecycle (lifecycle/), an
 * actor's failure to the registrar's crash.
 * @module
 */
import type { Logger } from 'pino';
import type { Actor } from 'xstate';
import { agentMachine } from '../../../machines/agentMachine.js';
import { getAgentRecord, type coordinatorMachine } from '../../../machines/coordinatorMachine.js';
import type { SerializedError } from '../../../machines/types.js';
import type { Clock } from '../../clock.js';
import { TroupeError } from '../../errors.js';
import { createCycleLogic } from '../../turn/turn.js';
import type { TurnHost } from '../../turn/ports.js';
import type { InspectOption, ResolvedOptions } from '../options.js';
import { Agents, type AgentHandle, type AgentSnapshot } from './agents.js';
import { FailurePatterns } from './failurePatterns.js';
import { OutputChecks } from './outputs.js';
import { IdleTimers } from './timers.js';

export interface AgentFamilyPorts {
  readonly runId: string;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly options: Pick<ResolvedOptions, 'interactive' | 'limits' | 'idleResumeMs' | 'profiles' | 'failurePatterns'>;
  readonly inspect: InspectOption | undefined;
  readonly coordinator: Actor<typeof coordinatorMachine>;
  /** The turns' host, made of parts built after the agents: a cycle reads it when it starts. */
  turns(): TurnHost;
  usable(): boolean;
  /** Record a transition of an awake agent (lifecycle/lifecycle.ts). */
  apply(h: AgentHandle, snap: AgentSnapshot): void;
  /** Restart an agent in `crashed`, its parent told (lifecycle/registration.ts). */
  crash(h: AgentHandle, error: SerializedError): void;
  /** Stop the run's hosting, the cause recorded. */
  fail(err: TroupeError): void;
}

const isFatal = (err: unknown): err is TroupeError => err instanceof TroupeError && (err.code === 'STORE_IO' || err.code === 'STORE_CORRUPT');

export function wireAgents(p: AgentFamilyPorts) {
  const { options, coordinator } = p;
  // A dormant wait's idle timer fired: wake the agent for it.
  const timers = new IdleTimers(p.clock, (id) => {
    const h = agents.find(id);
    if (h && p.usable() && agents.status(h) === 'waiting') agents.send(h, { type: 'agent.idleTimeout' });
  });
  const failurePatterns = options.failurePatterns ? new FailurePatterns(options.failurePatterns) : null;
  const logic = agentMachine.provide({
    actors: {
      runCycle: createCycleLogic(
        () => p.turns(),
        (id) => agents.context(id),
      ),
    },
  });
  const agents: Agents = new Agents({
    runId: p.runId,
    clock: p.clock,
    logger: p.logger,
    inspect: p.inspect,
    policy: { interactive: options.interactive, maxTurns: options.limits.maxTurns, idleResumeMs: options.idleResumeMs },
    // Not profileOf: a profile no longer configured fails the agent at its next call, not its actor's start.
    maxTurns: (h) => (h.terms?.profile === undefined ? null : (options.profiles.get(h.terms.profile)?.maxTurns ?? null)),
    logic,
    timers,
    recorded: (id) => getAgentRecord(coordinator.getSnapshot().context, id)!,
    running: () => coordinator.getSnapshot().context.running,
    onSnapshot: (h, snap) => {
      if (!p.usable() || snap.status !== 'active') return;
      try {
        p.apply(h, snap);
      } catch (err) {
        // Never throw into XState (it would end the host process): stop, with the cause recorded.
        p.fail(isFatal(err) ? err : new TroupeError('INTERNAL', `recording a transition of ${h.name} failed: ${(err as Error).message}`, { cause: err }));
      }
    },
    onActorError: (h, err) => {
      // The machine never throws by design; if it does, the agent restarts in `crashed` through its
      // machine (one transition function), and its parent is told.
      h.logger.error({ err }, 'agent actor failed');
      if (!p.usable()) return;
      const error = { code: 'INTERNAL', message: err instanceof Error ? err.message : String(err), retryable: false };
      queueMicrotask(() => p.crash(h, error));
    },
  });
  return { agents, failurePatterns, outputs: new OutputChecks() };
}
