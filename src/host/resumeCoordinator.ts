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
import { isStorePort, portOf, type AgentSpend, type StorePort, type WriteOp } from '../store/port.js';
import { withJournal } from '../fork/journal.js';
import type { AgentRow, DelegationRow, EventRow, ExecutionRow, MessageRow, ReentryBudgetRow, RunRow, Store, UsagePurpose } from '../store/types.js';
import { STINT_EVENT } from '../trace/attributes.js';
import { tracingRegistered, type RunTrace } from '../trace/tracer.js';
import { reviewNotes, type BackgroundReviews, type ReviewNote } from '../turn/review.js';
import type { ToolCatalog } from '../mcp/catalog.js';
import type { FailurePatterns } from './agents/failurePatterns.js';
import { APPROVAL_EVENT, type DurableApprovals } from './async/approvals.js';
import type { AsyncExecutions } from './async/executions.js';
import type { BudgetLedger } from './calls/budget.js';
import type { Registrar } from './lifecycle/registration.js';
import type { Mailboxes } from './mail/mailbox.js';
import type { Sessions } from './mail/sessions.js';
import { coordinatorOf, type Coordinator } from './createCoordinator.js';
import { interruptStaleDelegations, STALE_BUDGET_MS, type Delegations, type ReentryBudgets } from './async/delegations.js';
import { requirePriceForBudget } from '../model/prices.js';
import type { CoordinatorOptions, ResolvedOptions } from './options.js';
import { resolveBudget } from './resolveOptions.js';
import { Runtime } from './runtime.js';

export interface ResumeOptions<S extends Store | StorePort = Store> extends Omit<CoordinatorOptions<S>, 'runId' | 'store'> {
  store: S;
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
function recomputeBudgetFlags(run: RunRow, spentUsd: number, budget: CoordinatorOptions['budget']): BudgetFlags {
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
 * The recovery: idempotent (running it twice changes nothing) and atomic (one commit: a kill inside
 * it leaves the previous state). Budget flags are recomputed from the ledger; delegations still
 * running under an earlier boot are interrupted and their agents told; stale re-entry budgets are
 * dropped. Returns the run as recovered.
 */
export async function recoverRun(
  store: Store | StorePort,
  runId: string | undefined,
  options: Pick<CoordinatorOptions, 'budget' | 'interactive'> & { now?: number },
): Promise<RunRow> {
  return (await recover(isStorePort(store) ? store : portOf(store), runId, options)).run;
}

/**
 * recoverRun, also handing back the agent and spend rows it read: the recovery writes neither, so
 * resume reuses them instead of reading (and decoding) every agent a second time — measured at a
 * fifth of a 10,000-agent resume.
 */
async function recover(
  port: StorePort,
  runId: string | undefined,
  options: Pick<CoordinatorOptions, 'budget' | 'interactive'> & Partial<Pick<CoordinatorOptions, 'model'>> & { now?: number; unshown?: boolean },
): Promise<{ run: RunRow; agents: AgentRow[]; restoredStatuses: Map<string, string>; unshown: Map<string, string | null> | null; spend: AgentSpend[] }> {
  const now = options.now ?? Date.now();
  const run = runId === undefined ? (await port.listRuns()).at(-1) : await port.getRun(runId);
  if (!run) {
    throw new TroupeError('RUN_NOT_FOUND', runId === undefined ? 'The store holds no run to resume' : `The store holds no run ${runId}`);
  }
  const spend = await port.spendOf(run.id);
  const spent = spend.reduce((sum, s) => sum + s.costUsd, 0);
  const recovered: RunRow = { ...run, interactive: options.interactive ?? run.interactive, budget: recomputeBudgetFlags(run, spent, options.budget) };
  // A limit this resume sets needs a price for the model: refused before anything is written. (A
  // resume that keeps the run's limit is not: `troupe stop` resumes with a model that makes no
  // call. An unpriced call is then charged at its estimate, and the ledger says so once.)
  if (typeof options.model === 'object' && options.model !== null) {
    const { prices, limitUsd } = resolveBudget(options.budget);
    requirePriceForBudget(options.model, prices, limitUsd);
  }
  const agents = await port.listAgents(run.id);
  const restoredStatuses = new Map<string, string>(agents.map((a) => [a.id, a.status]));
  // For a resume: which of them the live stream does not show, compared by the store with the rows
  // as they stand, which are the rows just listed (nothing is written in between). Unreadable (a
  // damaged row an unchecked open let through): every agent is announced again, as to a stream
  // that shows none.
  const unshown = options.unshown ? await port.unshownStatuses(run.id).catch(() => null) : null;
  const delegations = await port.listDelegations(run.id);
  const recovery: WriteOp[] = [
    { op: 'updateRun', id: run.id, patch: { interactive: recovered.interactive, budget: recovered.budget } },
    // Honest, never magic: a delegation running under an earlier boot did not complete.
    ...interruptStaleDelegations(delegations, restoredStatuses, port.boot, run.id, now),
    { op: 'dropReentryBudgets', before: now - STALE_BUDGET_MS },
  ];
  // Journaled like any commit of the run (fork/journal.ts), so that a fork sees what recovery wrote.
  await port.commit(withJournal(port, run.id, recovery, now));
  return { run: recovered, agents, restoredStatuses, unshown, spend };
}

/**
 * Resume the latest run (or `runId`) of `store`: children come back parked unless they were
 * running, nothing is told twice, and no failed agent is woken by a peer.
 * @example
 * const store = openStore({ path: '.troupe/troupe.db' });
 * const coordinator = await resumeCoordinator({ store, model, interactive: true });
 */
export async function resumeCoordinator<S extends Store | StorePort = Store>(options: ResumeOptions<S>): Promise<Coordinator<S>> {
  const given = options?.store as unknown;
  if (!isStorePort(given) && typeof (given as Store | undefined)?.listRuns !== 'function') {
    throw new ConfigError(`Expected store to be a Store (openStore or memoryStore), got ${String(given)}`);
  }
  const { store, runId, ...rest } = options;
  const port = isStorePort(store) ? store : portOf(store as Store);
  const { run, agents, restoredStatuses, unshown, spend } = await recover(port, runId, { ...rest, now: (options.clock ?? systemClock).now(), unshown: true });
  const [pending, noticeKeys, delegations, notes, stints, reviewTurns, approvals] = await Promise.all([
    port.pendingMessagesOf(run.id),
    port.noticeKeysOf(run.id),
    port.listDelegations(run.id),
    port.eventsOf(run.id, 'review.note'),
    // Read only when spans can record: a link needs a tracer to put it on.
    tracingRegistered(options.telemetry) ? port.eventsOf(run.id, STINT_EVENT) : [],
    // The review cadence: read only when reviews run.
    options.review ? port.eventsOf(run.id, 'review.turn') : [],
    // Read whatever the options: an answer may come to any host of the run.
    port.eventsOf(run.id, APPROVAL_EVENT),
  ]);
  const ids = agents.map((a) => a.id);
  const [executions, reentry] = await Promise.all([port.executionsOf(ids), port.reentryBudgetsOf(ids)]);
  const spentByAgent = new Map<string, Partial<Record<UsagePurpose, number>>>();
  for (const s of spend) {
    let sums = spentByAgent.get(s.agentId);
    if (!sums) spentByAgent.set(s.agentId, (sums = {}));
    sums[s.purpose] = (sums[s.purpose] ?? 0) + s.costUsd;
  }
  const spentUsd = spend.reduce((sum, s) => sum + s.costUsd, 0);
  // An allowance's reserve tripped iff its owner's reserve notice was queued (same commit as the trip).
  const owners = new Set(agents.filter((a) => a.terms?.allowanceUsd !== undefined).map((a) => a.id));
  const reservesTripped = noticeKeys.filter((k) => k.startsWith('reserve:') && owners.has(k.slice(8))).map((k) => k.slice(8));
  const rt = new Runtime(
    { ...rest, store: store as Store | StorePort, interactive: run.interactive },
    { run, agents, restoredStatuses, unshown, spentUsd, reservesTripped },
  );
  try {
    await restoreInto(rt, { agents, spentByAgent, pending, noticeKeys, delegations, notes, stints, executions, reentry, reviewTurns, approvals });
  } catch (err) {
    // A resume that fails half-way leaves nothing running (its MCP servers, its actors).
    await rt.shutdown().catch(() => undefined);
    throw err;
  }
  return coordinatorOf<S>(rt);
}

interface Restored {
  agents: AgentRow[];
  spentByAgent: Map<string, Partial<Record<UsagePurpose, number>>>;
  pending: MessageRow[];
  noticeKeys: string[];
  delegations: DelegationRow[];
  notes: EventRow[];
  stints: EventRow[];
  executions: ExecutionRow[];
  reentry: ReentryBudgetRow[];
  reviewTurns: EventRow[];
  approvals: EventRow[];
}

/** What a resume restores into: each part takes back its rows, then the agents are respawned. */
interface RestoreParts {
  readonly options: Pick<ResolvedOptions, 'strictMcp'>;
  readonly mailboxes: Pick<Mailboxes, 'restore'>;
  readonly failurePatterns: Pick<FailurePatterns, 'restore'> | null;
  readonly delegations: Pick<Delegations, 'restore'>;
  readonly executions: Pick<AsyncExecutions, 'restore' | 'continueAll'>;
  readonly approvals: Pick<DurableApprovals, 'restore' | 'resume'>;
  readonly reentry: Pick<ReentryBudgets, 'restore'>;
  readonly reviewNotes: ReviewNote[];
  readonly reviews: Pick<BackgroundReviews, 'restore'> | null;
  readonly toolbox: { readonly catalog: Pick<ToolCatalog, 'startStrict'> };
  readonly trace: Pick<RunTrace, 'restore'>;
  readonly sessions: Pick<Sessions, 'load'>;
  readonly budget: Pick<BudgetLedger, 'restoreAllowances'>;
  readonly registrar: Pick<Registrar, 'respawn'>;
}

async function restoreInto(
  run: RestoreParts,
  { agents, spentByAgent, pending, noticeKeys, delegations, notes, stints, executions, reentry, reviewTurns, approvals }: Restored,
): Promise<void> {
  run.mailboxes.restore(pending, noticeKeys);
  run.failurePatterns?.restore(noticeKeys);
  run.delegations.restore(delegations);
  run.executions.restore(executions);
  run.approvals.restore(approvals);
  run.reentry.restore(reentry);
  run.reviewNotes.push(...reviewNotes(notes));
  const turnsByAgent = new Map<string, number>();
  for (const e of reviewTurns) if (e.agentId) turnsByAgent.set(e.agentId, (turnsByAgent.get(e.agentId) ?? 0) + 1);
  run.reviews?.restore(turnsByAgent);
  // MCP servers start before any agent runs: a call cut by the crash is judged by its tool's risk.
  await run.toolbox.catalog.startStrict(run.options.strictMcp);
  // Resumed stints link to the spans they continue.
  run.trace.restore(stints);
  // A running agent reads its session at once: read it now, while a failure is still a respawn failure.
  const failed = new Map<string, unknown>();
  await Promise.all(agents.filter((a) => a.status === 'running').map((a) => run.sessions.load(a).catch((err: unknown) => void failed.set(a.id, err))));
  run.budget.restoreAllowances(agents, (id) => Object.values(spentByAgent.get(id) ?? {}).reduce((sum, usd) => sum + usd, 0));
  run.registrar.respawn(agents, spentByAgent, failed);
  // Executions that finished while the process was down continue their agents, once.
  run.executions.continueAll();
  // Approved while no host ran turns: the tool runs now; cut by the crash: the agent is told.
  run.approvals.resume();
}
