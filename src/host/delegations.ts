/**
 * Delegations and re-entry budgets (seeds/001), made restart-durable by the store.
 *
 * A delegation is background work an agent dispatched (`deleg_NNNN`, never reissued within the
 * agent's session) whose result must come back to it: completing it records the result (capped
 * at 4,000 characters) and messages the agent. A delegation still running when the process died
 * is marked `interrupted` at resume and the agent is told, once, that it did NOT complete.
 *
 * Both registries fail open: if the store cannot keep them (a store without these tables, or a
 * non-fatal store error), they continue in memory with a logged warning. The agent registry and
 * the mailbox never do: their failures stop the coordinator.
 * @module
 */
import type { Logger } from 'pino';
import { TroupeError } from '../errors.js';
import type { DelegationRow, ReentryBudgetRow, Store } from '../store/types.js';

export const RESULT_TEXT_CAP = 4_000;
/** Budget rows whose last wake is older than this are dropped when a run is loaded. */
export const STALE_BUDGET_MS = 7 * 24 * 60 * 60 * 1_000;

const isFatal = (err: unknown) => err instanceof TroupeError && (err.code === 'STORE_IO' || err.code === 'STORE_CORRUPT');

/**
 * Run against the store, or — after the first non-fatal failure, logged once — against memory.
 * A fatal store error (I/O, corruption) is not absorbed: it stops the coordinator as usual.
 */
class FailOpen {
  #degraded = false;

  constructor(
    readonly store: Store,
    readonly logger: Logger,
    readonly registry: string,
  ) {}

  get degraded(): boolean {
    return this.#degraded;
  }

  run<T>(what: string, onStore: (store: Store) => T, inMemory: () => T): T {
    if (!this.#degraded) {
      try {
        return onStore(this.store);
      } catch (err) {
        if (isFatal(err)) throw err;
        this.#degraded = true;
        this.logger.warn({ err }, `the store could not ${what}; ${this.registry} continue in memory only`);
      }
    }
    return inMemory();
  }
}

export const interruptedText = (d: Pick<DelegationRow, 'delegationId' | 'goal'>) =>
  `Background delegation ${d.delegationId} (${d.goal.slice(0, 200)}) was interrupted by a process restart and did NOT complete. Re-dispatch it if the work is still needed.`;

/**
 * Mark every delegation of `runId` still running under an earlier boot as interrupted and queue
 * one message to its agent. Part of the recovery transaction: idempotent (an interrupted row is
 * no longer running, and the message's key is accepted once).
 */
export function interruptStaleDelegations(store: Store, runId: string, at: number): number {
  let count = 0;
  for (const d of store.listDelegations(runId)) {
    if (d.status !== 'running' || d.startedBoot >= store.boot) continue;
    if (!store.finishDelegation(d.sessionId, d.delegationId, { status: 'interrupted', at, resultText: 'Process restarted while this delegation was running.' })) continue;
    count++;
    if (!store.getAgent(d.sessionId)) continue;
    store.enqueueMessage({
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
    });
  }
  return count;
}

export interface DelegationHost {
  readonly store: Store;
  readonly runId: string;
  readonly logger: Logger;
  now(): number;
  /** Run `fn` in one transaction (the coordinator's commit: wakes run after it). */
  commit<T>(fn: () => T): T;
  /** Queue a system message to an agent inside the current transaction; it wakes the agent once committed. */
  notify(agentId: string, message: { type: string; content: string; noticeKey: string }): void;
  assertAgent(agentId: string): void;
}

export class Delegations {
  readonly #host: DelegationHost;
  /** Rows kept in memory after the store failed to keep them (fail-open). */
  readonly #memory = new Map<string, DelegationRow>();
  readonly #counters = new Map<string, number>();
  readonly #store: FailOpen;

  constructor(host: DelegationHost) {
    this.#host = host;
    this.#store = new FailOpen(host.store, host.logger, 'delegations');
  }

  #all(): DelegationRow[] {
    const stored = this.#store.degraded ? [] : this.#store.run('list delegations', (s) => s.listDelegations(this.#host.runId), () => []);
    return [...stored, ...this.#memory.values()];
  }

  /** Record a dispatch; returns its id (`deleg_NNNN`, never reissued for this agent). */
  dispatch(agentId: string, goal: string): string {
    this.#host.assertAgent(agentId);
    if (typeof goal !== 'string' || goal.trim() === '') {
      throw new TroupeError('CONFIG_INVALID', `Expected goal to be a non-empty string, got ${JSON.stringify(goal)}`);
    }
    let counter = this.#counters.get(agentId);
    if (counter === undefined) {
      // Seed from what was ever issued for this session, so a restarted run never reissues an id.
      counter = 0;
      for (const d of this.#all()) {
        if (d.sessionId !== agentId || !d.delegationId.startsWith('deleg_')) continue;
        const n = Number(d.delegationId.slice(6));
        if (Number.isInteger(n)) counter = Math.max(counter, n);
      }
    }
    counter += 1;
    this.#counters.set(agentId, counter);
    const row: DelegationRow = {
      sessionId: agentId,
      delegationId: `deleg_${String(counter).padStart(4, '0')}`,
      runId: this.#host.runId,
      goal,
      status: 'running',
      dispatchedAt: this.#host.now(),
      completedAt: null,
      resultText: null,
      startedBoot: this.#host.store.boot,
    };
    this.#store.run('record a delegation', (s) => s.insertDelegation(row), () => void this.#memory.set(`${agentId}/${row.delegationId}`, row));
    return row.delegationId;
  }

  complete(agentId: string, delegationId: string, result: string): void {
    this.#finish(agentId, delegationId, 'completed', result);
  }

  fail(agentId: string, delegationId: string, error: string): void {
    this.#finish(agentId, delegationId, 'failed', error);
  }

  #finish(agentId: string, delegationId: string, status: 'completed' | 'failed', text: string): void {
    const resultText = String(text ?? '').slice(0, RESULT_TEXT_CAP);
    const end = { status, at: this.#host.now(), resultText };
    const key = `${agentId}/${delegationId}`;
    const goal = this.list(agentId).find((d) => d.delegationId === delegationId)?.goal ?? '';
    // The end of the delegation and the message that reports it commit together: a crash between
    // them would leave a finished delegation whose agent is never told.
    this.#host.commit(() => {
      const memo = this.#memory.get(key);
      const finished = memo
        ? memo.status === 'running' && (this.#memory.set(key, { ...memo, status, completedAt: end.at, resultText }), true)
        : this.#store.run('finish a delegation', (s) => s.finishDelegation(agentId, delegationId, end), () => false);
      if (!finished) {
        const known = this.list(agentId).find((d) => d.delegationId === delegationId);
        throw new TroupeError(
          known ? 'TOOL_NOT_ALLOWED' : 'AGENT_NOT_FOUND',
          known ? `Delegation ${delegationId} is already ${known.status}` : `Agent ${agentId} has no delegation ${delegationId}`,
        );
      }
      this.#host.notify(agentId, {
        type: 'delegation_result',
        content: `Delegation ${delegationId} (${goal.slice(0, 200)}) ${status}: ${resultText}`,
        noticeKey: `deleg:${agentId}:${delegationId}`,
      });
    });
  }

  list(agentId?: string): DelegationRow[] {
    return this.#all().filter((d) => agentId === undefined || d.sessionId === agentId);
  }
}

/** Self-wake counters per agent: how often an agent woke itself, and when last. */
export class ReentryBudgets {
  readonly #host: Pick<DelegationHost, 'store' | 'logger' | 'now'>;
  readonly #memory = new Map<string, ReentryBudgetRow>();
  readonly #store: FailOpen;

  constructor(host: Pick<DelegationHost, 'store' | 'logger' | 'now'>) {
    this.#host = host;
    this.#store = new FailOpen(host.store, host.logger, 're-entry budgets');
  }

  get(agentId: string): ReentryBudgetRow | undefined {
    return this.#memory.get(agentId) ?? this.#store.run('read a re-entry budget', (s) => s.getReentryBudget(agentId), () => undefined);
  }

  /** Count one self-wake. */
  record(agentId: string): ReentryBudgetRow {
    const prev = this.get(agentId);
    const row = { sessionId: agentId, count: (prev?.count ?? 0) + 1, lastWakeAt: this.#host.now() };
    this.#store.run('record a re-entry budget', (s) => s.putReentryBudget(row), () => void this.#memory.set(agentId, row));
    return row;
  }

  reset(agentId: string): void {
    const row = { sessionId: agentId, count: 0, lastWakeAt: this.#host.now() };
    this.#memory.delete(agentId);
    this.#store.run('reset a re-entry budget', (s) => s.putReentryBudget(row), () => undefined);
  }

  /** Drop budgets older than 7 days (a wake recorded days ago must not throttle a new process). */
  dropStale(): number {
    const before = this.#host.now() - STALE_BUDGET_MS;
    for (const [id, row] of this.#memory) if (row.lastWakeAt < before) this.#memory.delete(id);
    return this.#store.run('drop stale re-entry budgets', (s) => s.dropReentryBudgets(before), () => 0);
  }
}
