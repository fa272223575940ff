/**
 * When to ask deadlock.ts its question, and what to do with the answer. Once the effects of the
 * current step have run (after the commit that parked the last agent and the wakes it releases —
 * the same tick), a quiescent run wakes every agent waiting on agents at once with the `deadlock`
 * outcome. Once per quiescent episode: the woken agents run, so the next episode starts only when
 * they park again, and each report counts against their idle limit like a timeout (so it never
 * loops).
 * @module
 */
import type { Logger } from 'pino';
import type { Clock } from '../../clock.js';
import type { WriteOp } from '../../store/port.js';
import type { AgentHandle, Agents } from '../agents/agents.js';
import { deadWaits, deadlockResult } from '../deadlock.js';
import type { TroupeEvent } from '../views/views.js';

export interface DeadlockWatchHost {
  readonly runId: string;
  readonly interactive: boolean;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly agents: Agents;
  usable(): boolean;
  stage(op: WriteOp): void;
  after(effect: () => void): void;
  emit(event: TroupeEvent): void;
  anyExecutionRunning(): boolean;
  anyDelegationRunning(): boolean;
  /** The re-entry budget: whether `h` may be woken now (else `retry` runs once it may, or it is being stopped). */
  selfWake(h: AgentHandle, retry: () => void): boolean;
}

export class DeadlockWatch {
  readonly #host: DeadlockWatchHost;
  #scheduled = false;

  constructor(host: DeadlockWatchHost) {
    this.#host = host;
  }

  /** Called whenever something parks or finishes; cheap when agents are running. */
  check(): void {
    const host = this.#host;
    if (this.#scheduled || host.agents.running > 0) return;
    this.#scheduled = true;
    host.after(() =>
      queueMicrotask(() => {
        this.#scheduled = false;
        this.#report();
      }),
    );
  }

  #report(): void {
    const host = this.#host;
    if (!host.usable()) return;
    const agents = host.agents;
    const waits = deadWaits({
      interactive: host.interactive,
      runningAgents: agents.running,
      agents: () => agents.values(),
      find: (id) => agents.find(id),
      status: (h) => agents.status(h as AgentHandle),
      waitKind: (h) => agents.waitKind(h as AgentHandle),
      anyExecutionRunning: () => host.anyExecutionRunning(),
      anyDelegationRunning: () => host.anyDelegationRunning(),
    });
    if (waits.length === 0) return;
    const at = host.clock.now();
    host.logger.warn({ waits }, 'the run is quiescent and these waits cannot be answered: waking them');
    host.stage({ op: 'appendEvent', row: { runId: host.runId, agentId: null, type: 'run.deadlock', data: { waits }, at } });
    host.emit({ type: 'run.deadlock', waits, at });
    const report = deadlockResult(waits);
    for (const wait of waits) {
      const h = agents.get(wait.agent_id);
      h.waitReport = report;
      // A report is a self-wake: counted, spaced, and refused once the agent's budget is spent.
      const wake = () => {
        if (agents.status(h) !== 'waiting' || agents.waitKind(h) !== 'agents') return;
        if (host.selfWake(h, wake)) agents.send(h, { type: 'agent.deadlock' });
      };
      wake();
    }
  }
}
