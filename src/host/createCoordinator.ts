/**
 * The public face of a run: start a root agent, message agents, watch and stop them.
 * @module
 */
import type { Agents } from './agents/agents.js';
import { usedOf } from './calls/allowances.js';
import type { BudgetLedger } from './calls/budget.js';
import { requestStop } from './control.js';
import { applyInboxRequest, recordInput } from './inbox.js';
import type { ApprovalAnswer, ApprovalView } from './async/approvals.js';
import { TERMINAL_STATUSES, type AgentStatus } from '../../machines/types.js';
import { isErrorCode, TroupeError } from '../errors.js';
import type { StorePort } from '../store/port.js';
import type { ReviewNote } from '../turn/review.js';
import type { ExecutionRow, InboxRequest, InboxResult, Store } from '../store/types.js';
import type { Delegations, ReentryBudgets } from './async/delegations.js';
import type { Registry, TreeNode } from './views/registry.js';
import { Runtime, type AgentInfo, type CoordinatorHealth, type TroupeEvent } from './runtime.js';
import type { CoordinatorOptions } from './options.js';
import type { SendOptions, SentMessage } from './mail/messaging.js';
import type { McpServerStatus } from '../mcp/connection.js';
import type { OutputSchema } from '../tools/outputSchema.js';
import { resultOf, rootOutput, type AgentId, type AgentIdOf, type AgentResult } from './results.js';

export interface BudgetState {
  spentUsd: number;
  limitUsd: number | null;
  /** Estimates held by calls in flight (pre-call reservation), not yet settled to their real cost. */
  reservedUsd: number;
  policy: 'stop' | 'pause';
  reserveStopped: boolean;
  budgetStopped: boolean;
  paused: boolean;
  /**
   * Spend against each allowance a spawn gave (`spentUsd`/`reservedUsd`: the owner's whole
   * subtree); `returnedUsd` is what came back to the parent once the owner ended (null while `open`).
   */
  allowances: AllowanceState[];
}

export interface AllowanceState {
  agentId: string;
  name: string;
  allowanceUsd: number;
  spentUsd: number;
  reservedUsd: number;
  returnedUsd: number | null;
  open: boolean;
}

export interface Coordinator<S extends Store | StorePort = Store> extends AsyncDisposable {
  readonly runId: string;
  /** The store it was given (an embedded `Store`, or a networked store's port). */
  readonly store: S;
  /** The `@xstate/store` read model: subscribe instead of polling. */
  readonly registry: Registry;
  /**
   * Register and start the root agent; resolves with its id. With `output` (a JSON Schema, or a
   * Standard Schema such as a zod schema) the root must `finish` with a matching `value`, and the
   * id is typed with it: `result(id)` resolves with the value as that type. A Standard Schema
   * validates in this process; its JSON Schema form (`~standard.jsonSchema`, else `{}`) is what is
   * persisted, shown to the model and checked after a resume. An invalid JSON Schema is
   * CONFIG_INVALID.
   */
  start<const O extends OutputSchema | undefined = undefined>(root: {
    name: string;
    task: string;
    skills?: string[];
    output?: O;
    /** One of the run's `profiles` for the root (PROFILE_UNKNOWN otherwise). */
    profile?: string;
    /**
     * What the root reads of the promoted notes (`troupe notes`), instead of the store's: a replay
     * gives what the recorded root read (its `terms.notes`); null: none. Default: the store's, as
     * the `notes` option bounds them.
     */
    notes?: string | null;
  }): Promise<AgentIdOf<O>>;
  /**
   * How an agent ended, once it is terminal (its first terminal state; it may be revived after):
   * its status, the value it finished with (typed from its output schema), report, stop reason and
   * error.
   */
  result<T>(id: AgentId<T>): Promise<AgentResult<T>>;
  /** Queue a message; resolves once it is committed to the agent's mailbox. */
  send(to: string, message: SendOptions): Promise<SentMessage>;
  get(id: string): AgentInfo;
  list(): AgentInfo[];
  tree(): TreeNode[];
  /** Resolves when the agent is in one of `statuses`; rejects with WAIT_TIMEOUT after `timeoutMs`. */
  waitFor(id: string, statuses: readonly AgentStatus[], options?: { timeoutMs?: number }): Promise<AgentInfo>;
  /** Stop after the current turn (with cascade, descendants first); resolves with the stopped ids once they are terminal. */
  stop(id: string, options?: { cascade?: boolean }): Promise<string[]>;
  /** Forget an agent's tool-failure streaks (a new user turn is a new attempt). */
  resetToolFailures(id: string): void;
  /** Resolves when no agent is running (every agent is terminal or parked) and no approved tool runs here. */
  whenIdle(): Promise<void>;
  /** Whether work is still accepted (false after a fatal store error or shutdown) and the queues' fill; never throws. */
  health(): CoordinatorHealth;
  /** Where each MCP server stands (`mcp.server` events tell the changes). */
  mcpServers(): McpServerStatus[];
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
  readonly delegations: Pick<Delegations, 'dispatch' | 'list'> & {
    /** Record the result and message the agent; resolves once both are committed. */
    complete(agentId: string, delegationId: string, result: string): Promise<void>;
    fail(agentId: string, delegationId: string, error: string): Promise<void>;
  };
  /**
   * Async executions tools started (a result saying `execution <uuid> running|queued` links it to
   * the agent). `finish` reports the end: the agent is re-invoked once with
   * `execution <id> completed|failed: <result>` (inside its approval window when approvals are on).
   */
  readonly executions: {
    /** Resolves once the end is committed: true, or false if it had already finished. */
    finish(id: string, end: { status: 'completed' | 'failed'; result: string }): Promise<boolean>;
    get(id: string): ExecutionRow | undefined;
  };
  /**
   * Durable approvals (option `approvals` as rules): the steps waiting for a person and their
   * answers. `approve` (optionally with edited arguments) or `deny` (with a reason the model sees)
   * resolves once the answer is committed; the approved tool then runs and its result is messaged to
   * the agent. An answer is applied once: a second one changes nothing. Any other process answers
   * the same through the run's inbox (`troupe approve`, the dashboard).
   */
  readonly approvals: {
    list(): ApprovalView[];
    approve(id: string, opts?: { args?: Record<string, unknown> }): Promise<string>;
    deny(id: string, reason: string): Promise<string>;
  };
  /**
   * Background review (option `review`): the notes reviewers proposed in this run (persisted as
   * `review.note` events), and `settled()`, which resolves when the reviews started so far ended.
   */
  readonly reviews: { notes(): ReviewNote[]; settled(): Promise<void> };
  /** Self-wake counters per agent (persisted; rows older than 7 days are dropped on resume). */
  readonly reentry: Pick<ReentryBudgets, 'get' | 'record' | 'reset'>;
  /**
   * Apply a request posted to the run's inbox (how a host applies what comes from outside: a
   * message, a stop, a budget pause or resume, an execution's or a delegation's end). Its answer is
   * committed with its effect; resolves with the answer (a refusal is an answer, with its code).
   */
  applyRequest(request: Pick<InboxRequest, 'id' | 'kind' | 'payload'>): Promise<InboxResult>;
  /** Stop every actor; persisted statuses stay as they are, so a later resume continues the run. */
  shutdown(): Promise<void>;
}

function waitFor(
  rt: Pick<Runtime, 'agents' | 'failure' | 'usable' | 'assertUsable' | 'views'>,
  id: string,
  statuses: readonly AgentStatus[],
  timeoutMs?: number,
): Promise<AgentInfo> {
  const h = rt.agents.resolve(id);
  if (rt.failure) throw rt.failure;
  const status = rt.agents.status(h);
  if (!rt.usable && !statuses.includes(status)) rt.assertUsable();
  return rt.views.waiters.waitFor({ id: h.id, name: h.name, status }, statuses, timeoutMs);
}

/** Synchronous throws become rejections, so a method that is no async function fails as the async ones do. */
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
export function createCoordinator<S extends Store | StorePort = Store>(options: CoordinatorOptions<S>): Coordinator<S> {
  return coordinatorOf<S>(new Runtime(options as CoordinatorOptions<Store | StorePort>));
}

/** The public object over a runtime (shared by createCoordinator and resumeCoordinator). */
export function coordinatorOf<S extends Store | StorePort = Store>(rt: Runtime): Coordinator<S> {
  return {
    runId: rt.runId,
    store: rt.store as S,
    registry: rt.views.registry,
    start: async (root) => {
      const output = rootOutput(root.output);
      // MCP servers start with the run: the root's first model call already lists their tools.
      await rt.toolbox.catalog.startStrict(rt.options.strictMcp);
      // A Standard Schema checks in this process: set before the root exists (the previous one kept if it is refused).
      const previous = rt.outputs.root;
      if (output?.inProcess) rt.outputs.root = output.check;
      const profile = root.profile;
      const terms =
        output || profile !== undefined ? { ...(output ? { output: output.check.schema } : {}), ...(profile === undefined ? {} : { profile }) } : null;
      const h = await rt.registrar
        .startRoot({ name: root.name, task: root.task, skills: root.skills, terms, ...(root.notes === undefined ? {} : { notes: root.notes }) })
        .catch((err: unknown) => {
          rt.outputs.root = previous;
          throw err;
        });
      // Acknowledged only once the run and its root are committed.
      await rt.committer.durable();
      return h.id as never;
    },
    result: async (id) => {
      const h = rt.agents.resolve(id);
      await waitFor(rt, h.id, [...TERMINAL_STATUSES]);
      return resultOf(rt.views.info(h.id));
    },
    // Messaging's own: the path from here to the agent is the commit and the wake (test/unit/host/sendPath.test.ts).
    send: rt.messaging.send.bind(rt.messaging),
    get: (id) => rt.views.info(id),
    list: () => rt.views.list(),
    tree: () => rt.views.tree(),
    waitFor: (id, statuses, opts) => settle(() => waitFor(rt, id, statuses, opts?.timeoutMs)),
    stop: async (id, opts) => {
      const target = rt.agents.resolve(id);
      recordInput(rt, 'stop', { agent: target.id, cascade: opts?.cascade ?? true });
      const ids = requestStop(rt.agents, target, opts?.cascade ?? true);
      await Promise.all(ids.map((stopped) => coordinatorOf(rt).waitFor(stopped, [...TERMINAL_STATUSES])));
      return ids;
    },
    whenIdle: async () => {
      rt.assertUsable();
      // An approved tool running on this host is work its agent waits for: not idle until it ends.
      for (;;) {
        await rt.views.waiters.whenIdle();
        if (!rt.approvals.busy) return;
        await rt.approvals.settled();
      }
    },
    health: () => rt.health(),
    mcpServers: () => rt.toolbox.catalog.servers(),
    resetToolFailures: (id) => rt.agents.resolve(id).tracker.resetAll(),
    budget: () => {
      const flags = rt.budgetFlags();
      return {
        spentUsd: rt.budget.spentUsd,
        limitUsd: flags.limitUsd,
        reservedUsd: rt.budget.reservedUsd,
        policy: rt.options.budget.policy,
        reserveStopped: flags.reserveStopped,
        budgetStopped: flags.budgetStopped,
        paused: flags.paused,
        allowances: allowanceStates(rt.budget, rt.agents),
      };
    },
    pauseBudget: () =>
      settle(() => {
        recordInput(rt, 'pause', {});
        return rt.controls.pause();
      }),
    resumeBudget: (limitUsd) =>
      settle(() => {
        recordInput(rt, 'resume', limitUsd === undefined ? {} : { limitUsd });
        return rt.controls.resume(limitUsd);
      }),
    subscribe: (listener) => rt.views.subscribe(listener),
    delegations: {
      dispatch: (agentId, goal) => rt.delegations.dispatch(agentId, goal),
      list: (agentId) => rt.delegations.list(agentId),
      complete: async (agentId, id, result) => {
        recordInput(rt, 'delegation', { agent: agentId, delegation: id, status: 'completed', result });
        rt.delegations.complete(agentId, id, result);
        await rt.committer.durable();
      },
      fail: async (agentId, id, error) => {
        recordInput(rt, 'delegation', { agent: agentId, delegation: id, status: 'failed', result: error });
        rt.delegations.fail(agentId, id, error);
        await rt.committer.durable();
      },
    },
    executions: {
      finish: async (id, end) => {
        recordInput(rt, 'execution', { execution: id, status: end.status, result: end.result });
        const done = rt.executions.finish(id, end);
        await rt.committer.durable();
        return done;
      },
      get: (id) => rt.executions.get(id),
    },
    approvals: {
      list: () => rt.approvals.list(),
      approve: (id, opts) => settle(() => answerApproval(rt, { approval: id, approve: true, ...(opts?.args ? { args: opts.args } : {}) })),
      deny: (id, reason) => settle(() => answerApproval(rt, { approval: id, approve: false, reason })),
    },
    reviews: {
      notes: () => [...rt.reviewNotes],
      settled: () => rt.reviews?.settled() ?? Promise.resolve(),
    },
    reentry: rt.reentry,
    applyRequest: (request) => applyInboxRequest(rt, request),
    shutdown: () => rt.shutdown(),
    [Symbol.asyncDispose]: () => rt.shutdown(),
  };
}

/** An answer from the API: the inbox's effect, committed; a refusal throws its code. */
async function answerApproval(rt: Pick<Runtime, 'assertUsable' | 'agents' | 'callLog' | 'approvals' | 'committer'>, answer: ApprovalAnswer): Promise<string> {
  rt.assertUsable();
  recordInput(rt, 'approval', { ...answer });
  const result = rt.approvals.answer(answer);
  await rt.committer.durable();
  if (!result.ok) throw new TroupeError(isErrorCode(result.code) ? result.code : 'CONFIG_INVALID', result.message.replace(/^[A-Z_]+: /, ''));
  return result.message;
}

/** Each allowance's spend, in spawn order. */
function allowanceStates(budget: Pick<BudgetLedger, 'allowances'>, agents: Pick<Agents, 'find'>): AllowanceState[] {
  const out: AllowanceState[] = [];
  for (const a of budget.allowances.accounts) {
    const allowanceUsd = a.allowanceUsd ?? 0;
    out.push({
      agentId: a.owner,
      name: agents.find(a.owner)?.name ?? a.owner,
      allowanceUsd,
      spentUsd: a.spent,
      reservedUsd: a.reserved,
      // Returned: the allowance less what the subtree committed (a hold past the allowance returns nothing).
      returnedUsd: a.active ? null : Math.max(0, allowanceUsd - usedOf(a)),
      open: a.active,
    });
  }
  return out;
}
