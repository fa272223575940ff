/**
 * Resume a run after a crash (or a clean shutdown): one idempotent recovery transaction, then
 * every agent respawned from its rows. See DESIGN §5 and strix-spec §5.7 (weaknesses 1, 2, 5, 8
 * and 9 are fixed here: one source of truth, every wake/notice invariant persisted, mail kept
 * queued until it is in the session, every active status resumable, respawn failures notified).
 * @module
 */
import type { BudgetFlags } from '../../machines/coordinatorMachine.js';
import { systemClock } from '../clock.js';
import { ConfigError, TroupeError } from '../errors.js';
import type { RunRow, Store, UsagePurpose } from '../store/types.js';
import { coordinatorOf, type Coordinator } from './createCoordinator.js';
import { interruptStaleDelegations, STALE_BUDGET_MS } from './delegations.js';
import { resolveBudget, type CoordinatorOptions } from './options.js';
import { Runtime } from './runtime.js';

export interface ResumeOptions extends Omit<CoordinatorOptions, 'runId' | 'store'> {
  store: Store;
  /** Which run to resume; the latest one by default. */
  runId?: string;
}

/**
 * Budget flags recomputed from the ledger, never trusted from the old row: the budget stop follows
 * the spend; the reserve-notice claim, the operator's pause and the resume epoch are kept.
 *
 * The reserve is the exception: it can trip at admission below the line (no call in flight fits
 * under it), so spend alone cannot tell whether it tripped. A trip is persisted and survives the
 * restart (else the root could spawn children again and the reserve would trip a second time)
 * unless the resume sets a different limit, which is a new budget.
 */
export function recomputeBudgetFlags(run: RunRow, spentUsd: number, budget: CoordinatorOptions['budget']): BudgetFlags {
  const resolved = resolveBudget(budget);
  const { reserveFraction, policy } = resolved;
  // A limit passed to resume wins; otherwise the run keeps the last one set (resumeBudget).
  const limitUsd = budget?.limitUsd !== undefined ? resolved.limitUsd : (run.budget.limitUsd ?? null);
  const stop = limitUsd !== null && policy === 'stop';
  return {
    limitUsd,
    budgetStopped: stop && spentUsd >= limitUsd,
    reserveStopped: stop && (spentUsd >= reserveFraction * limitUsd || (run.budget.reserveStopped && limitUsd === run.budget.limitUsd)),
    reserveNoticeClaimed: run.budget.reserveNoticeClaimed,
    paused: run.budget.paused,
    resumeEpoch: run.budget.resumeEpoch,
  };
}

/**
 * The recovery transaction: idempotent (running it twice changes nothing) and atomic (a kill
 * inside it leaves the previous state). Returns the run as recovered.
 */
export function recoverRun(
  store: Store,
  runId: string | undefined,
  options: Pick<CoordinatorOptions, 'budget' | 'interactive'> & { now?: number },
): RunRow {
  const now = options.now ?? Date.now();
  return store.transaction(() => {
    const runs = store.listRuns();
    const run = runId === undefined ? runs.at(-1) : runs.find((r) => r.id === runId);
    if (!run) {
      throw new TroupeError('RUN_NOT_FOUND', runId === undefined ? 'The store holds no run to resume' : `The store holds no run ${runId}`);
    }
    const spent = store.listUsage(run.id).reduce((sum, u) => sum + u.costUsd, 0);
    const recovered: RunRow = {
      ...run,
      interactive: options.interactive ?? run.interactive,
      budget: recomputeBudgetFlags(run, spent, options.budget),
    };
    store.updateRun(run.id, { interactive: recovered.interactive, budget: recovered.budget });
    // Honest, never magic: a delegation running under an earlier boot did not complete.
    interruptStaleDelegations(store, run.id, now);
    store.dropReentryBudgets(now - STALE_BUDGET_MS);
    return recovered;
  });
}

/**
 * Resume the latest run (or `runId`) of `store`: children come back parked unless they were
 * running, nothing is told twice, and no failed agent is woken by a peer.
 * @example
 * const store = openStore({ path: '.troupe/troupe.db' });
 * const coordinator = await resumeCoordinator({ store, model, interactive: true });
 */
export async function resumeCoordinator(options: ResumeOptions): Promise<Coordinator> {
  if (typeof options?.store?.listRuns !== 'function') {
    throw new ConfigError(`Expected store to be a Store (openStore or memoryStore), got ${String(options?.store)}`);
  }
  const { store, runId, ...rest } = options;
  const run = recoverRun(store, runId, { ...rest, now: (options.clock ?? systemClock).now() });
  const agents = store.listAgents(run.id);
  const usage = store.listUsage(run.id);
  const spentByAgent = new Map<string, Partial<Record<UsagePurpose, number>>>();
  for (const u of usage) {
    let spent = spentByAgent.get(u.agentId);
    if (!spent) spentByAgent.set(u.agentId, (spent = {}));
    spent[u.purpose] = (spent[u.purpose] ?? 0) + u.costUsd;
  }
  const spentUsd = usage.reduce((sum, u) => sum + u.costUsd, 0);
  const rt = new Runtime({ ...rest, store, interactive: run.interactive }, { run, agents, spentUsd });
  rt.respawn(agents, spentByAgent);
  // Agents parked on executions still running stay parked, woken when the host finishes them.
  rt.executions.restore();
  // Executions that finished while the process was down continue their agents, once.
  rt.executions.continueAll();
  return coordinatorOf(rt);
}
