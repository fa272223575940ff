/**
 * The run's budget as the turn sees it: every model call's usage goes into the ledger, and the
 * gate before a paid call applies the coordinator's budget flags. (Prices, pre-call reservation,
 * warnings and the pause API are the budget issue's.)
 * @module
 */
import type { TurnOutcome, TurnUsage } from '../../machines/types.js';
import type { UsagePurpose } from '../model/types.js';
import type { AgentHandle, Runtime } from './runtime.js';

export class BudgetLedger {
  readonly #rt: Runtime;
  #spentUsd = 0;

  constructor(rt: Runtime, spentUsd = 0) {
    this.#rt = rt;
    this.#spentUsd = spentUsd;
  }

  get spentUsd(): number {
    return this.#spentUsd;
  }

  /** Record one call's usage and trip the reserve or the budget stop when due (stop policy). */
  record(agent: AgentHandle, usage: Partial<TurnUsage> | undefined, purpose: UsagePurpose = 'main'): void {
    const rt = this.#rt;
    const row = {
      runId: rt.runId,
      agentId: agent.id,
      purpose,
      model: rt.model.name ?? 'model',
      inputTokens: usage?.inputTokens ?? 0,
      outputTokens: usage?.outputTokens ?? 0,
      cachedInputTokens: usage?.cachedInputTokens ?? 0,
      costUsd: usage?.costUsd ?? 0,
      at: rt.clock.now(),
    };
    agent.spentUsd += row.costUsd;
    this.#spentUsd += row.costUsd;
    const { limitUsd, reserveFraction, policy } = rt.options.budget;
    if (limitUsd === null || policy !== 'stop') {
      rt.store.recordUsage(row);
      return;
    }
    rt.commit(() => {
      rt.store.recordUsage(row);
      if (this.#spentUsd >= limitUsd) rt.coordinator.send({ type: 'budget.stop' });
      else if (this.#spentUsd >= reserveFraction * limitUsd) rt.coordinator.send({ type: 'budget.reserveTrip' });
      rt.store.updateRun(rt.runId, { budget: rt.budgetFlags() });
    });
  }

  /** Before a paid call: a stopped budget ends the turn, the pause policy parks it. */
  gate(agent: AgentHandle): TurnOutcome | null {
    const flags = this.#rt.budgetFlags();
    const { limitUsd, policy } = this.#rt.options.budget;
    if (flags.budgetStopped) return { kind: 'stopped', reason: 'budget' };
    if (flags.reserveStopped && agent.parentId !== null) return { kind: 'stopped', reason: 'reserve' };
    if (policy === 'pause' && (flags.paused || (limitUsd !== null && this.#spentUsd >= limitUsd))) {
      return { kind: 'budgetPaused', epoch: flags.resumeEpoch };
    }
    return null;
  }
}
