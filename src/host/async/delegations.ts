/**
 * Delegations and re-entry budgets (seeds/001), restart-durable through the group commit like
 * every other fact of the run.
 *
 * A delegation is background work an agent dispatched (`deleg_NNNN`, never reissued within the
 * agent's session) whose result must come back to it: completing it records the result (capped at
 * 4,000 characters) and messages the agent, in the same group. A delegation still running when the
 * process died is marked `interrupted` at resume and the agent is told, once, that it did NOT
 * complete.
 * @module
 */
import { TroupeError } from '../../errors.js';
import type { WriteOp } from '../../store/port.js';
import type { DelegationRow, ReentryBudgetRow } from '../../store/types.js';

export const RESULT_TEXT_CAP = 4_000;
/** Budget rows whose last wake is older than this are dropped when a run is loaded. */
export const STALE_BUDGET_MS = 7 * 24 * 60 * 60 * 1_000;

const interruptedText = (d: Pick<DelegationRow, 'delegationId' | 'goal'>) =>
  `Background delegation ${d.delegationId} (${d.goal.slice(0, 200)}) was interrupted by a process restart and did NOT complete. Re-dispatch it if the work is still needed.`;

/**
 * The writes of the recovery that interrupt every delegation of a run still running under an
 * earlier boot, with one message to its agent each. Idempotent: an interrupted row is no longer
 * running, and the message's key is used once.
 */
export function interruptStaleDelegations(
  delegations: readonly DelegationRow[],
  agentIds: Pick<ReadonlySet<string>, 'has'>,
  boot: number,
  runId: string,
  at: number,
): WriteOp[] {
  const ops: WriteOp[] = [];
  for (const d of delegations) {
    if (d.status !== 'running' || d.startedBoot >= boot) continue;
    ops.push({
      op: 'finishDelegation',
      sessionId: d.sessionId,
      delegationId: d.delegationId,
      end: { status: 'interrupted', at, resultText: 'Process restarted while this delegation was running.' },
    });
    if (!agentIds.has(d.sessionId)) continue;
    ops.push({
      op: 'enqueueMessage',
      message: {
        id: `msg_${d.sessionId}_${d.delegationId}_interrupted`,
        runId,
        to: d.sessionId,
        from: 'system',
        fromName: 'system',
        type: 'delegation_interrupted',
        priority: 'high',
        content: interruptedText(d),
        interrupt: false,
        createdAt: at,
        noticeKey: `deleg:${d.sessionId}:${d.delegationId}`,
      },
    });
  }
  return ops;
}

/** What delegations need of the host (the pattern the other ports copy). */
export interface DelegationHost {
  readonly runId: string;
  readonly boot: number;
  now(): number;
  stage(op: WriteOp): void;
  /** Queue a system message to an agent (with the current group); it wakes the agent once committed. */
  notify(agentId: string, message: { type: string; content: string; noticeKey: string }): void;
  assertAgent(agentId: string): void;
  /** The run may have nothing left to wait for. */
  checkQuiescence(): void;
}

export class Delegations {
  readonly #host: DelegationHost;
  readonly #rows = new Map<string, DelegationRow>();
  readonly #counters = new Map<string, number>();

  constructor(host: DelegationHost) {
    this.#host = host;
  }

  /** After a restart: the run's delegations. */
  restore(rows: readonly DelegationRow[]): void {
    for (const row of rows) this.#rows.set(`${row.sessionId}/${row.delegationId}`, { ...row });
  }

  /** Record a dispatch; returns its id (`deleg_NNNN`, never reissued for this agent). */
  dispatch(agentId: string, goal: string): string {
    const host = this.#host;
    host.assertAgent(agentId);
    if (typeof goal !== 'string' || goal.trim() === '') {
      throw new TroupeError('CONFIG_INVALID', `Expected goal to be a non-empty string, got ${JSON.stringify(goal)}`);
    }
    let counter = this.#counters.get(agentId);
    if (counter === undefined) {
      // Seed from what was ever issued for this session, so a restarted run never reissues an id.
      counter = 0;
      for (const d of this.list(agentId)) {
        const n = Number(d.delegationId.slice(6));
        if (d.delegationId.startsWith('deleg_') && Number.isInteger(n)) counter = Math.max(counter, n);
      }
    }
    counter += 1;
    this.#counters.set(agentId, counter);
    const row: DelegationRow = {
      sessionId: agentId,
      delegationId: `deleg_${String(counter).padStart(4, '0')}`,
      runId: host.runId,
      goal,
      status: 'running',
      dispatchedAt: host.now(),
      completedAt: null,
      resultText: null,
      startedBoot: host.boot,
    };
    this.#rows.set(`${agentId}/${row.delegationId}`, row);
    host.stage({ op: 'insertDelegation', row });
    return row.delegationId;
  }

  complete(agentId: string, delegationId: string, result: string): void {
    this.#finish(agentId, delegationId, 'completed', result);
  }

  fail(agentId: string, delegationId: string, error: string): void {
    this.#finish(agentId, delegationId, 'failed', error);
  }

  /** The end of the delegation and the message that reports it go in the same group. */
  #finish(agentId: string, delegationId: string, status: 'completed' | 'failed', text: string): void {
    const host = this.#host;
    const row = this.#rows.get(`${agentId}/${delegationId}`);
    if (!row || row.status !== 'running') {
      throw new TroupeError(
        row ? 'TOOL_NOT_ALLOWED' : 'AGENT_NOT_FOUND',
        row ? `Delegation ${delegationId} is already ${row.status}` : `Agent ${agentId} has no delegation ${delegationId}`,
      );
    }
    const resultText = String(text ?? '').slice(0, RESULT_TEXT_CAP);
    const end = { status, at: host.now(), resultText };
    Object.assign(row, { status, completedAt: end.at, resultText });
    host.stage({ op: 'finishDelegation', sessionId: agentId, delegationId, end });
    host.notify(agentId, {
      type: 'delegation_result',
      content: `Delegation ${delegationId} (${row.goal.slice(0, 200)}) ${status}: ${resultText}`,
      noticeKey: `deleg:${agentId}:${delegationId}`,
    });
    // The agent may not be woken (it finished): the run may now have nothing left to wait for.
    host.checkQuiescence();
  }

  list(agentId?: string): DelegationRow[] {
    const out: DelegationRow[] = [];
    for (const d of this.#rows.values()) if (agentId === undefined || d.sessionId === agentId) out.push({ ...d });
    return out;
  }

  get anyRunning(): boolean {
    for (const d of this.#rows.values()) if (d.status === 'running') return true;
    return false;
  }
}

/** Self-wake counters per agent: how often an agent woke itself, and when last. */
export class ReentryBudgets {
  readonly #host: Pick<DelegationHost, 'now' | 'stage'>;
  readonly #rows = new Map<string, ReentryBudgetRow>();

  constructor(host: Pick<DelegationHost, 'now' | 'stage'>) {
    this.#host = host;
  }

  /** After a restart: the run's budgets (stale ones were dropped by the recovery). */
  restore(rows: readonly ReentryBudgetRow[]): void {
    for (const row of rows) this.#rows.set(row.sessionId, { ...row });
  }

  get(agentId: string): ReentryBudgetRow | undefined {
    const row = this.#rows.get(agentId);
    return row && { ...row };
  }

  /** Count one self-wake. */
  record(agentId: string): ReentryBudgetRow {
    const row = { sessionId: agentId, count: (this.#rows.get(agentId)?.count ?? 0) + 1, lastWakeAt: this.#host.now() };
    this.#rows.set(agentId, row);
    this.#host.stage({ op: 'putReentryBudget', row });
    return { ...row };
  }

  reset(agentId: string): void {
    const row = { sessionId: agentId, count: 0, lastWakeAt: this.#host.now() };
    this.#rows.set(agentId, row);
    this.#host.stage({ op: 'putReentryBudget', row });
  }
}
