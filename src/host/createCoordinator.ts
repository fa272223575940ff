/**
 * The public face of a run: start a root agent, message agents, watch and stop them.
 * @module
 */
import { TERMINAL_STATUSES, type AgentStatus } from '../../machines/types.js';
import { TroupeError } from '../errors.js';
import { reviewNotes, type ReviewNote } from '../turn/review.js';
import type { ExecutionRow, MessagePriority, MessageRow, Store } from '../store/types.js';
import type { Delegations, ReentryBudgets } from './delegations.js';
import type { Registry, TreeNode } from './registry.js';
import { Runtime, type AgentInfo, type CoordinatorHealth, type TroupeEvent } from './runtime.js';
import type { CoordinatorOptions } from './options.js';

export interface SendOptions {
  content: string;
  /** Messages from the API come from `user` (default) or `system`; agents message through tools. */
  from?: 'user' | 'system';
  type?: string;
  priority?: MessagePriority;
}

export interface BudgetState {
  spentUsd: number;
  limitUsd: number | null;
  /** Estimates held by calls in flight (pre-call reservation), not yet settled to their real cost. */
  reservedUsd: number;
  policy: 'stop' | 'pause';
  reserveStopped: boolean;
  budgetStopped: boolean;
  paused: boolean;
}

export interface Coordinator extends AsyncDisposable {
  readonly runId: string;
  readonly store: Store;
  /** The `@xstate/store` read model: subscribe instead of polling. */
  readonly registry: Registry;
  /** Register and start the root agent; resolves with its id. */
  start(root: { name: string; task: string; skills?: string[] }): Promise<string>;
  /** Queue a message; resolves once it is committed to the agent's mailbox. */
  send(to: string, message: SendOptions): Promise<Pick<MessageRow, 'id' | 'to' | 'from' | 'createdAt'>>;
  get(id: string): AgentInfo;
  list(): AgentInfo[];
  tree(): TreeNode[];
  /** Resolves when the agent is in one of `statuses`; rejects with WAIT_TIMEOUT after `timeoutMs`. */
  waitFor(id: string, statuses: readonly AgentStatus[], options?: { timeoutMs?: number }): Promise<AgentInfo>;
  /** Stop after the current turn (with cascade, descendants first); resolves with the stopped ids once they are terminal. */
  stop(id: string, options?: { cascade?: boolean }): Promise<string[]>;
  /** Forget an agent's tool-failure streaks (a new user turn is a new attempt). */
  resetToolFailures(id: string): void;
  /** Resolves when no agent is running: every agent is terminal or parked. */
  whenIdle(): Promise<void>;
  /** Whether work is still accepted (false after a fatal store error or shutdown) and the queues' fill; never throws. */
  health(): CoordinatorHealth;
  /** Run-wide budget state; per-agent spend is in `get(id).spentUsd` / `.spentByPurpose`. */
  budget(): BudgetState;
  /** Operator pause: every agent parks before its next paid call (calls in flight finish). */
  pauseBudget(): Promise<void>;
  /**
   * Clear a pause and wake every parked agent, which retries the call it parked before; with
   * `limitUsd`, replace the limit first (validated: an invalid value throws CONFIG_INVALID and
   * changes nothing). Resolves with the ids woken. If the new limit is already spent they park again.
   */
  resumeBudget(limitUsd?: number): Promise<string[]>;
  subscribe(listener: (event: TroupeEvent) => void): () => void;
  /**
   * Background work an agent dispatched whose result must come back to it: `dispatch` returns
   * `deleg_NNNN`; `complete`/`fail` record the result and message the agent. After a restart,
   * delegations that were running are `interrupted` and their agents told so.
   */
  readonly delegations: Pick<Delegations, 'dispatch' | 'complete' | 'fail' | 'list'>;
  /**
   * Async executions tools started (a result saying `execution <uuid> running|queued` links it to
   * the agent). `finish` reports the end: the agent is re-invoked once with
   * `execution <id> completed|failed: <result>` (inside its approval window when approvals are on).
   */
  readonly executions: {
    finish(id: string, end: { status: 'completed' | 'failed'; result: string }): boolean;
    get(id: string): ExecutionRow | undefined;
  };
  /**
   * Background review (option `review`): the notes reviewers proposed in this run (persisted as
   * `review.note` events), and `settled()`, which resolves when the reviews started so far ended.
   */
  readonly reviews: { notes(): ReviewNote[]; settled(): Promise<void> };
  /** Self-wake counters per agent (persisted; rows older than 7 days are dropped on resume). */
  readonly reentry: Pick<ReentryBudgets, 'get' | 'record' | 'reset'>;
  /** Stop every actor; persisted statuses stay as they are, so a later resume continues the run. */
  shutdown(): Promise<void>;
}

/** Synchronous throws become rejections, so every async method fails the same way. */
const settle = <T>(fn: () => T | Promise<T>): Promise<T> => {
  try {
    return Promise.resolve(fn());
  } catch (err) {
    return Promise.reject(err);
  }
};

/**
 * Create a coordinator for one run.
 * @example
 * const coordinator = createCoordinator({ model: scriptedModel(script) });
 * const rootId = await coordinator.start({ name: 'lead', task: 'Review this repo' });
 * await coordinator.waitFor(rootId, ['completed', 'failed', 'crashed', 'stopped']);
 * await coordinator.shutdown();
 */
export function createCoordinator(options: CoordinatorOptions): Coordinator {
  return coordinatorOf(new Runtime(options));
}

/** The public object over a runtime (shared by createCoordinator and resumeCoordinator). */
export function coordinatorOf(rt: Runtime): Coordinator {
  return {
    runId: rt.runId,
    store: rt.store,
    registry: rt.registry,
    start: (root) => settle(() => rt.startRoot(root).id),
    send: (to, message) =>
      settle(() => {
        if (typeof message !== 'object' || message === null) {
          throw new TroupeError('CONFIG_INVALID', `Expected a message object, got ${String(message)}`);
        }
        const row = rt.sendExternal(to, message);
        return { id: row.id, to: row.to, from: row.from, createdAt: row.createdAt };
      }),
    get: (id) => rt.info(id),
    list: () => rt.list(),
    tree: () => rt.tree(),
    waitFor: (id, statuses, opts) => settle(() => rt.waitFor(id, statuses, opts?.timeoutMs)),
    stop: (id, opts) =>
      settle(async () => {
        const target = rt.resolve(id);
        const ids = rt.requestStop(target, opts?.cascade ?? true);
        await Promise.all(ids.map((stopped) => rt.waitFor(stopped, [...TERMINAL_STATUSES])));
        return ids;
      }),
    whenIdle: () => rt.whenIdle(),
    health: () => rt.health(),
    resetToolFailures: (id) => rt.resolve(id).tracker.resetAll(),
    budget: () => {
      const flags = rt.budgetFlags();
      return {
        spentUsd: rt.ledger.spentUsd,
        limitUsd: flags.limitUsd,
        reservedUsd: rt.ledger.reservedUsd,
        policy: rt.options.budget.policy,
        reserveStopped: flags.reserveStopped,
        budgetStopped: flags.budgetStopped,
        paused: flags.paused,
      };
    },
    pauseBudget: () => settle(() => rt.pauseBudget()),
    resumeBudget: (limitUsd) => settle(() => rt.resumeBudget(limitUsd)),
    subscribe: (listener) => rt.subscribe(listener),
    delegations: rt.delegations,
    executions: {
      finish: (id, end) => rt.executions.finish(id, end),
      get: (id) => rt.store.getExecution(id),
    },
    reviews: {
      notes: () => reviewNotes(rt.store, rt.runId),
      settled: () => rt.reviews?.settled() ?? Promise.resolve(),
    },
    reentry: rt.reentry,
    shutdown: () => rt.shutdown(),
    [Symbol.asyncDispose]: () => rt.shutdown(),
  };
}
