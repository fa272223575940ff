/**
 * The runtime behind `createCoordinator`: it owns the coordinator actor, one root actor per agent
 * (addressed `agent:<id>`; not XState children, see DESIGN §11), the queues, the read model and
 * the store, and turns machine decisions into committed rows and wake-ups.
 *
 * Ordering rule: every coordinator event is sent inside `commit()`, whose store transaction holds
 * the status change together with the notice rows it causes; wake-ups of other actors run only
 * after that transaction commits (`afterCommit`), so mail is delivered from committed rows only
 * and the coordinator is never re-entered.
 * @module
 */
import { customAlphabet } from 'nanoid';
import PQueue from 'p-queue';
import { pino, type Logger } from 'pino';
import { createActor, type Actor, type SnapshotFrom } from 'xstate';
import { agentMachine, type AgentInput, type AgentLifecycleState } from '../../machines/agentMachine.js';
import {
  coordinatorMachine,
  getAgentRecord,
  spawnRejection,
  type AgentRecord,
  type BudgetFlags,
  type CoordinatorEmitted,
} from '../../machines/coordinatorMachine.js';
import { isActive, isTerminal, type AgentStatus, type WaitKind } from '../../machines/types.js';
import { systemClock, type Clock } from '../clock.js';
import { ConfigError, TroupeError } from '../errors.js';
import type { Model, ModelDelta, ModelRequest, ModelTurn, SessionItem, ToolSpec, UsagePurpose } from '../model/types.js';
import { FailureTracker } from '../turn/failureTracker.js';
import { RateLimiter } from '../turn/rateLimiter.js';
import { createCycleLogic } from '../turn/cycle.js';
import { INTERRUPTED, STOP_REQUESTED } from '../turn/turn.js';
import { childFirstInput, inheritedContext, rootFirstInput, systemPrompt } from '../turn/texts.js';
import { memoryStore } from '../store/memoryStore.js';
import { newAgentRow } from '../store/rows.js';
import type { AgentRow, MessagePriority, MessageRow, NewMessage, RunRow, Store } from '../store/types.js';
import { BUILTIN_TOOLS } from '../tools/builtin.js';
import { compileTool, toToolSpec, type CompiledTool } from '../tools/defineTool.js';
import { BudgetHalt, BudgetLedger } from './budget.js';
import { BackgroundReviews } from '../turn/review.js';
import { AsyncExecutions } from './executions.js';
import { Delegations, ReentryBudgets } from './delegations.js';
import { messageRefusal } from './messageRules.js';
import { createRegistry, toTree, type AgentView, type Registry, type TreeNode } from './registry.js';
import { Waiters } from './waiters.js';
import { deadWaits, type DeadWait } from './deadlock.js';
import { isValidAgentName, positiveLimit, resolveOptions, type CoordinatorOptions, type InspectOption, type ResolvedOptions } from './options.js';

const shutDown = () => new TroupeError('COORDINATOR_SHUT_DOWN', 'The coordinator was shut down');

const isFatalStoreError = (err: unknown): err is TroupeError =>
  err instanceof TroupeError && (err.code === 'STORE_IO' || err.code === 'STORE_CORRUPT');

const notAllowed = (target: { id: string; name: string }) =>
  new TroupeError(
    'RECIPIENT_NOT_ALLOWED',
    `You may message only your parent, children and siblings; ${target.name} (${target.id}) is none of them.`,
  );

const newId = customAlphabet('0123456789abcdefghijklmnopqrstuvwxyz', 10);

type AgentLogic = typeof agentMachine;
type AgentSnapshot = SnapshotFrom<AgentLogic>;

/** The runtime's live view of one agent. */
export interface AgentHandle {
  readonly id: string;
  readonly name: string;
  readonly parentId: string | null;
  readonly depth: number;
  readonly task: string;
  readonly skills: string[];
  readonly createdAt: number;
  readonly children: string[];
  readonly logger: Logger;
  readonly tracker: FailureTracker;
  /**
   * The agent's actor. A restored agent in a terminal state gets its actor only when something
   * needs it (a message that may revive it): thousands of finished agents cost no actors.
   */
  readonly actor: Actor<AgentLogic>;
  /** The actor if it exists, without creating it. */
  live: Actor<AgentLogic> | null;
  /** The lifecycle state of an agent whose actor does not exist yet. */
  dormant: AgentLifecycleState | null;
  status: AgentStatus;
  waitKind: WaitKind | null;
  recoveries: number;
  idleResumes: number;
  turns: number;
  lastTool: string | null;
  spentUsd: number;
  /** Spend by call purpose (main, compaction, …). */
  spentByPurpose: Partial<Record<UsagePurpose, number>>;
  /**
   * Aborts the in-flight model call: with INTERRUPTED when a message cuts the turn short, with
   * STOP_REQUESTED when the agent is stopped (the request is cancelled on the wire).
   */
  inFlight: AbortController | null;
  /** Notes for this agent's next call only, never persisted (finished executions). */
  notes: string[];
  /** The strategy-rotation prompt to inject before the next model call. */
  strategyPrompt: string | null;
  /** Plain text of the last plain-text turn (respond_to_user may deliver it). */
  lastText: string | null;
  /** Built on the first turn. */
  systemPrompt: string | null;
  /** Set when a dead wait woke the agent: the wait-for graph its wait's result reports (then cleared). */
  deadlock: DeadWait[] | null;
}

/** What `get(id)` returns. */
export interface AgentInfo extends AgentView {
  task: string;
  skills: string[];
  error: { code: string; message: string } | null;
  stopReason: string | null;
  report: { summary: string; findings: string[]; openItems: string[]; success: boolean } | null;
  pendingMessages: number;
  createdAt: number;
  /** This agent's spend by call purpose (`main`, `compaction`, …), in USD. */
  spentByPurpose: Partial<Record<UsagePurpose, number>>;
}

/** Events for views and scripts (`coordinator.subscribe`). */
export type TroupeEvent =
  | { type: 'agent.status'; agentId: string; name: string; from: AgentStatus | null; to: AgentStatus; at: number }
  | { type: 'agent.said'; agentId: string; name: string; text: string; at: number }
  /** A piece of a streamed model answer (streaming providers only; never persisted). */
  | { type: 'agent.delta'; agentId: string; name: string; delta: ModelDelta; at: number }
  /** A background review proposed a reusable note about this agent's work (also a `review.note` event row). */
  | { type: 'review.note'; agentId: string; name: string; title: string; content: string; at: number }
  /**
   * The run went quiescent with agents waiting on agents that cannot answer: they are woken at once
   * with the `deadlock` wait outcome (also a `run.deadlock` event row).
   */
  | { type: 'run.deadlock'; waits: DeadWait[]; at: number }
  /** The store failed: the coordinator stopped; resume from the file in a new process. */
  | { type: 'coordinator.failed'; error: { code: string; message: string }; at: number };

const statusOf = (snap: AgentSnapshot): AgentStatus => {
  const value = snap.value;
  return typeof value === 'string' ? (value as AgentStatus) : 'waiting';
};

function lifecycleOf(ctx: AgentLifecycleState): AgentLifecycleState {
  return {
    turns: ctx.turns,
    stintTurns: ctx.stintTurns,
    recoveries: ctx.recoveries,
    idleResumes: ctx.idleResumes,
    waitKind: ctx.waitKind,
    waitTimeoutMs: ctx.waitTimeoutMs,
    waitingSince: ctx.waitingSince,
    pendingWait: ctx.pendingWait,
    stopReason: ctx.stopReason,
    error: ctx.error,
    report: ctx.report,
    lastTool: ctx.lastTool,
    budgetEpoch: ctx.budgetEpoch,
  };
}

/**
 * The messages with a note at the end: merged into a trailing user message (strict-alternation
 * providers reject two in a row), else as a user message of its own.
 */
function withNote(messages: readonly SessionItem[], note: string): SessionItem[] {
  const last = messages.at(-1);
  if (last?.role === 'user' && typeof last.content === 'string') return [...messages.slice(0, -1), { role: 'user', content: `${last.content}\n\n${note}` }];
  return [...messages, { role: 'user', content: note }];
}

/** A run read back from the store, after its recovery transaction. */
export interface RestoredRun {
  run: RunRow;
  agents: readonly AgentRow[];
  spentUsd: number;
}

/** The coordinator's records of restored agents: claims, stints and counters survive a restart. */
function recordsOf(rows: readonly AgentRow[]): AgentRecord[] {
  const alive = new Map<string, number>();
  const spawned = new Map<string, number>();
  for (const row of rows) {
    if (row.parentId === null) continue;
    spawned.set(row.parentId, (spawned.get(row.parentId) ?? 0) + 1);
    if (isActive(row.status)) alive.set(row.parentId, (alive.get(row.parentId) ?? 0) + 1);
  }
  return rows.map((row) => ({
    id: row.id,
    name: row.name,
    parentId: row.parentId,
    depth: row.depth,
    status: row.status,
    waitKind: row.status === 'waiting' ? row.waitKind : null,
    recoveries: row.recoveries,
    idleResumes: row.idleResumes,
    noticeClaimed: row.noticeClaimed,
    stint: row.stint,
    aliveChildren: alive.get(row.id) ?? 0,
    spawnedChildren: spawned.get(row.id) ?? 0,
  }));
}

/** A snapshot for health checks (`coordinator.health()`). */
export interface CoordinatorHealth {
  /** False once the coordinator failed (a fatal store error) or was shut down. */
  ok: boolean;
  error: { code: string; message: string } | null;
  /** Model calls: `waiting` in the queue, `running` now, at most `concurrency` at once. */
  modelQueue: { waiting: number; running: number; concurrency: number };
  toolQueue: { waiting: number; running: number; concurrency: number };
}

export class Runtime {
  readonly runId: string;
  readonly store: Store;
  readonly model: Model;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly options: ResolvedOptions;
  readonly tools: ReadonlyMap<string, CompiledTool>;
  /** Async executions tools started, and their continuation of agents. */
  readonly executions: AsyncExecutions;
  /** Background reviews, when `review` is configured. */
  readonly reviews: BackgroundReviews | null;
  readonly modelQueue: PQueue;
  readonly toolQueue: PQueue;
  readonly registry: Registry;
  readonly coordinator: Actor<typeof coordinatorMachine>;
  readonly ledger: BudgetLedger;
  readonly delegations: Delegations;
  readonly reentry: ReentryBudgets;

  readonly #inspect: InspectOption | undefined;
  readonly #rateLimiter: RateLimiter | null;
  readonly #agentLogic: AgentLogic;
  readonly #agents = new Map<string, AgentHandle>();
  readonly #waiters: Waiters<AgentInfo>;
  readonly #listeners = new Set<(event: TroupeEvent) => void>();
  readonly #toolSpecs = new Map<'root' | 'child', ToolSpec[]>();
  readonly #dirtyViews = new Set<AgentHandle>();
  /** Agents respawned so far, published to the read model together when respawn ends. */
  readonly #respawned: AgentHandle[] = [];
  #respawning = false;
  #running = 0;
  #quiescenceCheck = false;
  #pending: (() => void)[] | null = null;
  #shutdown = false;
  #failure: TroupeError | null = null;
  #stopWindowListener: (() => void) | null;

  /**
   * @param restore a run read back from the store (resumeCoordinator): its records and flags
   * seed the coordinator, and `respawn()` recreates its agents.
   */
  constructor(options: CoordinatorOptions, restore?: RestoredRun) {
    this.options = resolveOptions(options);
    this.model = options.model;
    this.store = options.store ?? memoryStore();
    this.clock = options.clock ?? systemClock;
    this.logger = options.logger ?? pino({ level: 'silent' });
    this.runId = restore?.run.id ?? options.runId ?? `run_${newId()}`;
    if (!restore && options.runId !== undefined && this.store.getRun(options.runId)) {
      throw new ConfigError(`The store already holds run ${options.runId}: resume it with resumeCoordinator({ store, runId })`);
    }
    this.#inspect = options.inspect;
    const tools = new Map<string, CompiledTool>();
    for (const tool of options.tools ?? []) {
      const compiled = compileTool(tool);
      if (BUILTIN_TOOLS.has(compiled.name) || tools.has(compiled.name)) {
        throw new ConfigError(`Expected tool names to be unique and not shadow a built-in, got "${compiled.name}" twice`);
      }
      tools.set(compiled.name, compiled);
    }
    this.tools = tools;
    this.modelQueue = new PQueue({ concurrency: this.options.concurrency.model });
    this.toolQueue = new PQueue({ concurrency: this.options.concurrency.tools });
    const rate = this.options.rateLimit;
    this.#rateLimiter = rate ? new RateLimiter(this.clock, rate.requests, rate.intervalMs) : null;
    this.registry = createRegistry();
    this.ledger = new BudgetLedger(this, restore?.spentUsd ?? 0);
    const host = {
      store: this.store,
      runId: this.runId,
      logger: this.logger,
      now: () => this.clock.now(),
      commit: <T>(fn: () => T): T => this.commit(fn),
      assertAgent: (id: string) => void this.handle(id),
      notify: (agentId: string, m: { type: string; content: string; noticeKey: string }) => {
        const target = this.handle(agentId);
        this.commit(() => {
          const row = this.store.enqueueMessage({
            id: `msg_${newId()}`,
            runId: this.runId,
            to: agentId,
            from: 'system',
            fromName: 'system',
            type: m.type,
            priority: 'high',
            content: m.content,
            interrupt: false,
            createdAt: this.clock.now(),
            noticeKey: m.noticeKey,
          });
          if (row) this.afterCommit(() => this.#wake(target, row));
        });
        // A delegation's end may wake nobody (a finished agent): the run may now be quiescent.
        this.checkQuiescence();
      },
    };
    this.delegations = new Delegations(host);
    this.reentry = new ReentryBudgets(host);
    this.reviews = this.options.review ? new BackgroundReviews(this, this.options.review) : null;
    // Executions that finished outside the agent's approval window continue when one opens.
    this.executions = new AsyncExecutions(this);
    this.#stopWindowListener = this.options.approvals?.onWindowOpen?.((agentId) => this.executions.continueFor(agentId)) ?? null;
    this.#waiters = new Waiters(this.clock, () => this.#running === 0, (id) => this.info(id));
    this.#agentLogic = agentMachine.provide({ actors: { runCycle: createCycleLogic(this) } });

    this.coordinator = createActor(coordinatorMachine, {
      id: 'coordinator',
      systemId: 'coordinator',
      input: {
        runId: this.runId,
        limits: this.options.limits,
        ...(restore
          ? { agents: recordsOf(restore.agents), budget: restore.run.budget }
          : { budget: { limitUsd: this.options.budget.limitUsd } }),
      },
      clock: this.clock,
      ...(this.#inspect ? { inspect: this.#inspect } : {}),
    });
    this.coordinator.subscribe({ error: (err) => this.logger.fatal({ err }, 'coordinator actor failed') });
    this.coordinator.on('notice', (e) => this.#deliverNotice(e));
    this.coordinator.on('agents.stop', (e) =>
      this.afterCommit(() => {
        for (const id of e.ids) this.#agents.get(id)?.actor.send({ type: 'agent.stop', reason: e.reason });
      }),
    );
    this.coordinator.on('budget.resumed', (e) =>
      this.afterCommit(() => {
        for (const h of this.#agents.values()) if (h.status === 'budgetPaused') h.actor.send({ type: 'budget.resume', epoch: e.epoch });
      }),
    );
    this.coordinator.on('register.rejected', (e) => this.logger.warn({ ...e }, 'registration rejected'));
    this.coordinator.start();
  }

  /**
   * Recreate the agents of a restored run, parents first, each in its persisted state: running
   * agents run again from their session, parked ones stay parked (idle timers re-armed from
   * `waitingSince`), and mail that arrived before the crash wakes whoever it would have woken.
   * An agent that cannot be respawned is marked crashed and its parent is told.
   */
  respawn(rows: readonly AgentRow[], spentByAgent: ReadonlyMap<string, Partial<Record<UsagePurpose, number>>>): void {
    const now = this.clock.now();
    this.#respawning = true;
    for (const row of rows) {
      let handle: AgentHandle;
      try {
        // A running agent reads its session at once: check it now, while a failure is still a respawn failure.
        if (row.status === 'running') this.store.loadSession(row.id);
        const waitsOnAgents = row.status === 'waiting' && row.waitKind === 'agents' && row.waitingSince !== null;
        const idleTimerMs = waitsOnAgents ? Math.max(0, row.waitingSince! + (row.waitTimeoutMs ?? this.options.idleResumeMs) - now) : undefined;
        handle = this.#startActor(row, { idleTimerMs });
      } catch (err) {
        handle = this.#respawnFailed(row, err);
      }
      const spent = spentByAgent.get(row.id) ?? {};
      handle.spentByPurpose = { ...spent };
      handle.spentUsd = Object.values(spent).reduce((sum, usd) => sum + usd, 0);
      if (row.parentId !== null) this.#agents.get(row.parentId)?.children.push(row.id);
    }
    // The read model learns of every respawned agent in one change, not thousands.
    this.#respawning = false;
    this.registry.trigger.upsertMany({ views: this.#respawned.splice(0).map((h) => this.#view(h)) });
    for (const h of this.#agents.values()) {
      if (h.status === 'running') continue;
      this.#batch(() => {
        this.#rewakeIfMail(h, h.status);
        if (h.status === 'budgetPaused') this.#resumeIfEpochMoved(h, h.actor.getSnapshot().context.budgetEpoch);
      });
    }
    // A run that stopped between going quiescent and reporting its dead waits reports them now.
    this.checkQuiescence();
  }

  #respawnFailed(row: AgentRow, err: unknown): AgentHandle {
    this.logger.error({ err, agentId: row.id }, 'respawn failed; the agent is marked crashed');
    const error = { code: (err as { code?: string }).code ?? 'INTERNAL', message: `respawn failed: ${(err as Error).message}`, retryable: false };
    const crashedRow: AgentRow = { ...row, status: 'crashed', error };
    const handle = this.#startActor(crashedRow, {});
    const at = this.clock.now();
    this.commit(() => {
      this.coordinator.send({ type: 'agent.changed', id: row.id, status: 'crashed', waitKind: null, recoveries: row.recoveries, idleResumes: row.idleResumes, error, stopReason: null, report: null, task: row.task, at });
      const record = getAgentRecord(this.coordinator.getSnapshot().context, row.id);
      this.store.updateAgent(row.id, { status: 'crashed', error, noticeClaimed: record?.noticeClaimed ?? false, stint: record?.stint ?? row.stint, updatedAt: at });
    });
    return handle;
  }

  // ── transactions ────────────────────────────────────────────────────────────────────────────

  /**
   * Run `fn` in one store transaction; effects queued with `afterCommit` run once it committed.
   * A fatal store error (I/O, full disk, corruption) stops the coordinator: memory and file may
   * have diverged, so nothing more is accepted (crash-only; resume re-reads the file).
   */
  commit<T>(fn: () => T): T {
    if (this.#failure) throw this.#failure;
    try {
      return this.#batch(() => this.store.transaction(fn));
    } catch (err) {
      if (isFatalStoreError(err)) this.#fail(err);
      throw err;
    }
  }

  /** The fatal error that stopped this coordinator, if any. */
  get failure(): TroupeError | null {
    return this.#failure;
  }

  #fail(err: TroupeError): void {
    if (this.#failure) return;
    this.#failure = err;
    this.logger.fatal({ err }, 'the coordinator stopped accepting work');
    this.#emit({ type: 'coordinator.failed', error: { code: err.code, message: err.message }, at: this.clock.now() });
    this.#waiters.rejectAll(err);
    // Stopping actors from inside one of their own transitions is unsafe: do it right after.
    queueMicrotask(() => void this.shutdown());
  }

  /**
   * Collect `afterCommit` effects while `fn` runs and run them when it returns (dropped if it
   * throws). Nested batches join the outermost one.
   */
  #batch<T>(fn: () => T): T {
    if (this.#pending) return fn();
    const effects: (() => void)[] = [];
    this.#pending = effects;
    let result: T;
    try {
      result = fn();
    } finally {
      this.#pending = null;
    }
    for (const effect of effects) effect();
    return result;
  }

  afterCommit(effect: () => void): void {
    if (this.#pending) this.#pending.push(effect);
    else effect();
  }

  // ── agents ──────────────────────────────────────────────────────────────────────────────────

  find(id: string): AgentHandle | undefined {
    return this.#agents.get(id);
  }

  /** Every agent of the run. */
  agents(): IterableIterator<AgentHandle> {
    return this.#agents.values();
  }

  handle(id: string): AgentHandle {
    const h = this.#agents.get(id);
    if (!h) throw new TroupeError('AGENT_NOT_FOUND', `No agent with id ${id}`);
    return h;
  }

  /** Resolve an id, or a name that is unique among `candidates` (all agents by default). */
  resolve(ref: string, candidates: Iterable<AgentHandle> = this.#agents.values()): AgentHandle {
    const byId = this.#agents.get(ref);
    if (byId) return byId;
    const named = [...candidates].filter((h) => h.name === ref);
    if (named.length === 1) return named[0]!;
    if (named.length > 1) {
      throw new TroupeError('AGENT_NOT_FOUND', `"${ref}" names ${named.length} agents: use an id (${named.map((h) => h.id).join(', ')})`);
    }
    throw new TroupeError('AGENT_NOT_FOUND', `No agent with id or name "${ref}"`);
  }

  startRoot(req: { name: string; task: string; skills?: string[] }): AgentHandle {
    if (this.#failure) throw this.#failure;
    if (this.#shutdown) throw shutDown();
    const { name, task, skills } = this.#checkSpawnRequest(req);
    const rejection = spawnRejection(this.coordinator.getSnapshot().context, null);
    if (rejection) throw new TroupeError(rejection.code, rejection.reason);
    const id = newId();
    return this.#register({ id, name, parentId: null, depth: 0, task, skills }, rootFirstInput({ id, name, parentId: null, parentName: null }, task, skills));
  }

  spawnChild(parent: AgentHandle, req: { name: string; task: string; skills: string[]; inheritContext: boolean }): AgentHandle {
    const { name, task, skills } = this.#checkSpawnRequest(req);
    const rejection = spawnRejection(this.coordinator.getSnapshot().context, parent.id);
    if (rejection) throw new TroupeError(rejection.code, rejection.reason);
    const id = newId();
    const identity = { id, name, parentId: parent.id, parentName: parent.name };
    const background = req.inheritContext ? inheritedContext(this.store.loadSession(parent.id)) : null;
    const first = childFirstInput(identity, task, skills, background);
    const child = this.#register({ id, name, parentId: parent.id, depth: parent.depth + 1, task, skills }, first);
    parent.children.push(child.id);
    return child;
  }

  #checkSpawnRequest(req: { name: string; task: string; skills?: string[] }) {
    const { name, task, skills = [] } = req as { name: unknown; task: unknown; skills?: unknown };
    if (!isValidAgentName(name)) {
      throw new TroupeError('CONFIG_INVALID', `Expected name to be a one-line string of 1..64 characters, got ${JSON.stringify(name)}`);
    }
    if (typeof task !== 'string' || task.trim() === '') {
      throw new TroupeError('CONFIG_INVALID', `Expected task to be a non-empty string, got ${JSON.stringify(task)}`);
    }
    if (Buffer.byteLength(task) > this.options.limits.maxMessageBytes) {
      throw new TroupeError('MESSAGE_TOO_LARGE', `The task is ${Buffer.byteLength(task)} bytes; maxMessageBytes is ${this.options.limits.maxMessageBytes}`);
    }
    if (!Array.isArray(skills) || skills.length > 5 || skills.some((s) => typeof s !== 'string')) {
      throw new TroupeError('CONFIG_INVALID', `Expected skills to be at most 5 strings, got ${JSON.stringify(skills)}`);
    }
    return { name: name.trim(), task, skills: skills as string[] };
  }

  #register(
    reg: { id: string; name: string; parentId: string | null; depth: number; task: string; skills: string[] },
    firstInput: ReturnType<typeof rootFirstInput>,
  ): AgentHandle {
    const at = this.clock.now();
    const row = newAgentRow({ ...reg, runId: this.runId }, at);
    // Registration and the first input are one transaction: an agent never exists without its
    // identity, and a run never exists without its root.
    this.commit(() => {
      if (reg.parentId === null) {
        this.store.insertRun({
          id: this.runId,
          createdAt: at,
          interactive: this.options.interactive,
          rootId: reg.id,
          budget: this.coordinator.getSnapshot().context.budget,
        });
      }
      this.store.registerAgent(row, [firstInput]);
      this.coordinator.send({ type: 'agent.register', id: reg.id, name: reg.name, parentId: reg.parentId });
      if (!getAgentRecord(this.coordinator.getSnapshot().context, reg.id)) {
        throw new TroupeError('INTERNAL', `the coordinator did not register ${reg.id}`);
      }
      this.store.appendEvent({ runId: this.runId, agentId: reg.id, type: 'agent.registered', data: { parentId: reg.parentId, name: reg.name }, at });
    });
    return this.#startActor(row);
  }

  #startActor(row: AgentRow, restore?: { idleTimerMs?: number | undefined }): AgentHandle {
    const rootLogger = this.logger;
    const runId = this.runId;
    const handle: AgentHandle = {
      id: row.id,
      name: row.name,
      parentId: row.parentId,
      depth: row.depth,
      task: row.task,
      skills: row.skills,
      createdAt: row.createdAt,
      children: [],
      // A pino child costs ~15 µs: made on first use, not for every agent spawned.
      get logger() {
        const child = rootLogger.child({ agentId: row.id, runId });
        Object.defineProperty(this, 'logger', { value: child });
        return child;
      },
      // Most agents never see a failing tool: their tracker is made on first use.
      get tracker() {
        const tracker = new FailureTracker(3);
        Object.defineProperty(this, 'tracker', { value: tracker });
        return tracker;
      },
      get actor() {
        return this.live ?? materialize();
      },
      live: null,
      dormant: null,
      status: row.status,
      waitKind: row.waitKind,
      recoveries: row.recoveries,
      idleResumes: row.idleResumes,
      turns: row.turns,
      lastTool: row.lastTool,
      spentUsd: 0,
      spentByPurpose: {},
      inFlight: null,
      notes: [],
      strategyPrompt: null,
      lastText: null,
      systemPrompt: null,
      deadlock: null,
    };
    const input: AgentInput = {
      id: row.id,
      name: row.name,
      parentId: row.parentId,
      policy: {
        interactive: this.options.interactive,
        maxTurns: this.options.limits.maxTurns,
        idleResumeMs: this.options.idleResumeMs,
      },
      ...(restore
        ? {
            status: row.status,
            state: lifecycleOf(row),
            ...(restore.idleTimerMs === undefined ? {} : { idleTimerMs: restore.idleTimerMs }),
          }
        : {}),
    };
    const materialize = (): Actor<AgentLogic> => {
      if (handle.live) return handle.live;
      const actor = createActor(this.#agentLogic, {
        id: `agent:${row.id}`,
        systemId: `agent:${row.id}`,
        input,
        clock: this.clock,
        ...(this.#inspect ? { inspect: this.#inspect } : {}),
      });
      handle.live = actor;
      handle.dormant = null;
      actor.subscribe({
        next: (snap) => this.#onSnapshot(handle, snap),
        error: (err) => this.#onActorError(handle, err),
      });
      actor.start();
      return actor;
    };
    this.#agents.set(row.id, handle);
    if (row.status === 'running') this.#running += 1;
    // The actor exists before anyone hears of the agent: a listener that reads it (get, list)
    // must find this one, not start a second.
    if (restore && isTerminal(row.status)) handle.dormant = lifecycleOf(row);
    else materialize();
    if (this.#respawning) this.#respawned.push(handle);
    else this.registry.trigger.upsert({ view: this.#view(handle) });
    this.#emit({ type: 'agent.status', agentId: handle.id, name: handle.name, from: null, to: row.status, at: row.createdAt });
    if (this.logger.isLevelEnabled('info')) {
      handle.logger.info({ name: row.name, parentId: row.parentId, depth: row.depth, status: row.status }, restore ? 'agent respawned' : 'agent registered');
    }
    return handle;
  }

  /**
   * Every agent transition lands here: persist it, tell the coordinator, update the read model,
   * announce it — and only then wake the agents it concerns, so events arrive in causal order.
   */
  #onSnapshot(h: AgentHandle, snap: AgentSnapshot): void {
    if (this.#shutdown || this.#failure || snap.status !== 'active') return;
    try {
      this.#batch(() => this.#applySnapshot(h, snap));
    } catch (err) {
      // Never throw into XState (it would end the host process): stop, with the cause recorded.
      this.#fail(isFatalStoreError(err) ? err : new TroupeError('INTERNAL', `recording a transition of ${h.name} failed: ${(err as Error).message}`, { cause: err }));
    }
  }

  #applySnapshot(h: AgentHandle, snap: AgentSnapshot): void {
    const ctx = snap.context;
    const status = statusOf(snap);
    const waitKind = status === 'waiting' ? ctx.waitKind : null;
    const lifecycleChanged =
      status !== h.status || waitKind !== h.waitKind || ctx.recoveries !== h.recoveries || ctx.idleResumes !== h.idleResumes;
    if (!lifecycleChanged && ctx.turns === h.turns && ctx.lastTool === h.lastTool) return;
    const prev = h.status;
    if (prev === 'running' && status !== 'running') this.#running -= 1;
    if (prev !== 'running' && status === 'running') this.#running += 1;
    h.status = status;
    h.waitKind = waitKind;
    h.recoveries = ctx.recoveries;
    h.idleResumes = ctx.idleResumes;
    h.turns = ctx.turns;
    h.lastTool = ctx.lastTool;
    const at = this.clock.now();

    if (lifecycleChanged) {
      this.commit(() => {
        this.coordinator.send({
          type: 'agent.changed',
          id: h.id,
          status,
          waitKind,
          recoveries: ctx.recoveries,
          idleResumes: ctx.idleResumes,
          error: ctx.error,
          stopReason: ctx.stopReason,
          report: ctx.report,
          task: h.task,
          at,
        });
        const record = getAgentRecord(this.coordinator.getSnapshot().context, h.id);
        this.store.updateAgent(h.id, {
          ...lifecycleOf(ctx),
          status,
          noticeClaimed: record?.noticeClaimed ?? false,
          stint: record?.stint ?? 0,
          updatedAt: at,
        });
        if (status !== prev) {
          this.store.appendEvent({ runId: this.runId, agentId: h.id, type: 'agent.status', data: { from: prev, to: status, waitKind, error: ctx.error }, at });
          if (status === 'budgetPaused') this.#resumeIfEpochMoved(h, ctx.budgetEpoch);
          if (status !== 'running') this.#rewakeIfMail(h, status);
          if (prev === 'running' && h.notes.length > 0) this.#rewakeForNotes(h, status);
        }
      });
    } else {
      this.store.updateAgent(h.id, { turns: ctx.turns, stintTurns: ctx.stintTurns, lastTool: ctx.lastTool, updatedAt: at });
    }
    if (lifecycleChanged) this.registry.trigger.upsert({ view: this.#view(h) });
    else this.#markViewDirty(h);
    if (status !== prev) {
      if (this.logger.isLevelEnabled('debug')) h.logger.debug({ from: prev, to: status, waitKind, error: ctx.error ?? undefined }, 'status');
      this.#emit({ type: 'agent.status', agentId: h.id, name: h.name, from: prev, to: status, at });
      this.#waiters.notify(h);
      if (status !== 'running') this.checkQuiescence();
    }
  }

  /**
   * Report dead waits (deadlock.ts) once the effects of the current step have run: when the run is
   * quiescent, every agent waiting on agents is woken at once with the `deadlock` outcome. Once per
   * quiescent episode: the woken agents run, so the next episode starts only when they park again,
   * and each report counts against their idle limit like a timeout (so it never loops).
   */
  checkQuiescence(): void {
    if (this.#quiescenceCheck || this.#running > 0) return;
    this.#quiescenceCheck = true;
    queueMicrotask(() => {
      this.#quiescenceCheck = false;
      if (!this.usable) return;
      const waits = deadWaits({
        interactive: this.options.interactive,
        runningAgents: this.#running,
        agents: () => this.#agents.values(),
        find: (id) => this.#agents.get(id),
        anyExecutionRunning: () => this.executions.anyRunning,
        anyDelegationRunning: () => this.delegations.list().some((d) => d.status === 'running'),
      });
      if (waits.length === 0) return;
      const at = this.clock.now();
      this.logger.warn({ waits }, 'the run is quiescent and these waits cannot be answered: waking them');
      try {
        this.commit(() => this.store.appendEvent({ runId: this.runId, agentId: null, type: 'run.deadlock', data: { waits }, at }));
      } catch (err) {
        if (!isFatalStoreError(err)) this.logger.error({ err }, 'could not record the deadlock event');
        return;
      }
      this.#emit({ type: 'run.deadlock', waits, at });
      for (const wait of waits) {
        const h = this.#agents.get(wait.agent_id)!;
        h.deadlock = waits;
        h.actor.send({ type: 'agent.deadlock' });
      }
    });
  }

  /**
   * A parked agent must not sleep on mail that arrived while it was finishing its turn (the
   * message was sent while it was still `running`, so it did not wake it): re-deliver the wake.
   */
  #rewakeIfMail(h: AgentHandle, status: AgentStatus): void {
    // Only messages wake these states at all (budget resumes and non-interactive ends never do).
    if (status === 'budgetPaused') return;
    if ((status === 'completed' || status === 'stopped') && !this.options.interactive) return;
    if (this.store.pendingCount(h.id) === 0) return;
    const pending = this.store.pendingMessages(h.id);
    const userGated = status === 'failed' || status === 'crashed';
    const finished = status === 'completed' || status === 'stopped';
    const waker = userGated ? pending.find((m) => m.from === 'user') : finished ? pending.find((m) => m.noticeKey === null) : pending[0];
    if (waker) this.afterCommit(() => this.#wake(h, waker));
  }

  /**
   * A finished execution's note reached the agent while its turn was ending (the note was
   * added while it was `running`), and the turn parked it: wake it for the note, which is
   * already marked continued and would otherwise wait for an unrelated wake. A stopped agent is
   * not woken (a budget stop would stop it again, and again).
   */
  #rewakeForNotes(h: AgentHandle, status: AgentStatus): void {
    const wakeable = status === 'waiting' || status === 'stalled' || (status === 'completed' && this.options.interactive);
    if (wakeable) this.afterCommit(() => h.actor.send({ type: 'agent.message', from: 'system', user: false }));
  }

  /** Pause policy: a resume that landed between the park decision and the park is not lost. */
  #resumeIfEpochMoved(h: AgentHandle, parkedEpoch: number): void {
    const epoch = this.coordinator.getSnapshot().context.budget.resumeEpoch;
    if (epoch > parkedEpoch) this.afterCommit(() => h.actor.send({ type: 'budget.resume', epoch }));
  }

  #onActorError(h: AgentHandle, err: unknown): void {
    // The machine never throws by design; if it does, the agent is crashed and its parent told.
    h.logger.error({ err }, 'agent actor failed');
    if (this.#shutdown) return;
    const at = this.clock.now();
    const prev = h.status;
    if (prev === 'running') this.#running -= 1;
    h.status = 'crashed';
    const error = { code: 'INTERNAL', message: err instanceof Error ? err.message : String(err), retryable: false };
    this.commit(() => {
      this.coordinator.send({ type: 'agent.changed', id: h.id, status: 'crashed', waitKind: null, recoveries: h.recoveries, idleResumes: h.idleResumes, error, stopReason: null, report: null, task: h.task, at });
      const noticeClaimed = getAgentRecord(this.coordinator.getSnapshot().context, h.id)?.noticeClaimed ?? false;
      this.store.updateAgent(h.id, { status: 'crashed', error, noticeClaimed, updatedAt: at });
    });
    this.registry.trigger.upsert({ view: this.#view(h) });
    this.#waiters.notify(h);
    this.checkQuiescence();
  }

  // ── messages ────────────────────────────────────────────────────────────────────────────────

  #deliverNotice(e: Extract<CoordinatorEmitted, { type: 'notice' }>): void {
    const from = e.from === 'system' ? null : this.#agents.get(e.from);
    const row = this.store.enqueueMessage({
      noticeKey: e.key,
      id: `msg_${newId()}`,
      runId: this.runId,
      to: e.to,
      from: e.from,
      fromName: from?.name ?? 'system',
      type: e.kind,
      priority: 'high',
      content: e.content,
      // Notices never cut into the parent's turn.
      interrupt: false,
      createdAt: this.clock.now(),
    });
    if (!row) {
      // The claim should make this impossible; the store's unique key is the backstop.
      this.logger.error({ key: e.key, to: e.to }, 'a notice for this stint was already sent; not sending it twice');
      return;
    }
    const target = this.#agents.get(e.to);
    if (target) this.afterCommit(() => this.#wake(target, row));
  }

  #wake(target: AgentHandle, row: MessageRow): void {
    target.actor.send({ type: 'agent.message', from: row.from, user: row.from === 'user', notice: row.noticeKey !== null });
    if (row.interrupt && this.options.interruptOnMessage) target.inFlight?.abort(INTERRUPTED);
  }

  #checkMessage(target: AgentHandle, content: unknown): string {
    const refusal = messageRefusal(target, content, {
      interactive: this.options.interactive,
      limits: this.options.limits,
      pending: () => this.store.pendingCount(target.id),
    });
    if (refusal) throw refusal;
    return content as string;
  }

  #enqueue(message: Omit<NewMessage, 'id' | 'runId' | 'createdAt'>): MessageRow {
    const target = this.handle(message.to);
    return this.commit(() => {
      // Only notices carry a key, so an ordinary message is never refused as a repeat.
      const stored = this.store.enqueueMessage({ ...message, id: `msg_${newId()}`, runId: this.runId, createdAt: this.clock.now() })!;
      this.afterCommit(() => this.#wake(target, stored));
      return stored;
    });
  }

  /** A message from outside the team (`user` by default). Acknowledged once committed. */
  sendExternal(to: string, msg: { content: string; from?: 'user' | 'system'; type?: string; priority?: MessagePriority }): MessageRow {
    if (this.#failure) throw this.#failure;
    if (this.#shutdown) throw shutDown();
    const target = this.resolve(to);
    const from = msg.from ?? 'user';
    if (from !== 'user' && from !== 'system') {
      throw new TroupeError('CONFIG_INVALID', `Expected from to be "user" or "system", got ${JSON.stringify(from)}`);
    }
    const content = this.#checkMessage(target, msg.content);
    return this.#enqueue({
      to: target.id,
      from,
      fromName: from,
      type: msg.type ?? 'instruction',
      priority: msg.priority ?? 'normal',
      content,
      interrupt: true,
    });
  }

  /** Agents an agent may message: parent, children and siblings (or everyone with messagePolicy "any"). */
  recipientsOf(agent: AgentHandle): AgentHandle[] {
    if (this.options.messagePolicy === 'any') return [...this.#agents.values()].filter((h) => h.id !== agent.id);
    const out: AgentHandle[] = [];
    const parent = agent.parentId === null ? undefined : this.#agents.get(agent.parentId);
    if (parent) {
      out.push(parent);
      for (const id of parent.children) if (id !== agent.id) out.push(this.handle(id));
    }
    for (const id of agent.children) out.push(this.handle(id));
    return out;
  }

  /** A name is looked up among the sender's recipients first, then in the whole run (to refuse it clearly). */
  #findRecipient(ref: string, allowed: AgentHandle[]): AgentHandle {
    if (this.#agents.has(ref) || !allowed.some((h) => h.name === ref)) return this.resolve(ref);
    return this.resolve(ref, allowed);
  }

  sendFromAgent(from: AgentHandle, to: string, content: string, opts: { type: string; priority: MessagePriority }) {
    const allowed = this.recipientsOf(from);
    const target = this.#findRecipient(to, allowed);
    if (target.id === from.id) {
      throw new TroupeError('RECIPIENT_NOT_ALLOWED', 'You cannot message yourself; continue your work or call a lifecycle tool.');
    }
    if (!allowed.includes(target)) throw notAllowed(target);
    const body = this.#checkMessage(target, content);
    const message = this.#enqueue({ to: target.id, from: from.id, fromName: from.name, type: opts.type, priority: opts.priority, content: body, interrupt: true });
    return { message, target };
  }

  /** The agent said something to the user (respond_to_user). */
  said(agent: AgentHandle, text: string): void {
    this.store.appendEvent({ runId: this.runId, agentId: agent.id, type: 'agent.said', data: { text }, at: this.clock.now() });
    this.#emit({ type: 'agent.said', agentId: agent.id, name: agent.name, text, at: this.clock.now() });
  }

  // ── graph queries used by the built-in tools ───────────────────────────────────────────────

  /** False once the coordinator failed or was shut down. */
  get usable(): boolean {
    return !this.#shutdown && this.#failure === null;
  }

  /** Throws the fatal failure, or COORDINATOR_SHUT_DOWN, once work is no longer accepted. */
  assertUsable(): void {
    if (this.#failure) throw this.#failure;
    if (this.#shutdown) throw shutDown();
  }

  pauseBudget(): void {
    this.assertUsable();
    this.commit(() => {
      this.coordinator.send({ type: 'budget.pause' });
      this.store.updateRun(this.runId, { budget: this.budgetFlags() });
    });
  }

  resumeBudget(limitUsd?: number): string[] {
    if (limitUsd !== undefined) positiveLimit('resumeBudget limitUsd', limitUsd);
    this.assertUsable();
    const parked = [...this.#agents.values()].filter((h) => h.status === 'budgetPaused').map((h) => h.id);
    this.commit(() => {
      this.coordinator.send({ type: 'budget.resume', ...(limitUsd === undefined ? {} : { limitUsd }) });
      this.store.updateRun(this.runId, { budget: this.budgetFlags() });
    });
    return parked;
  }

  budgetFlags(): BudgetFlags {
    return this.coordinator.getSnapshot().context.budget;
  }

  isStopRequested(agent: AgentHandle): boolean {
    return agent.actor.getSnapshot().context.stopRequested !== null;
  }

  /** Ask `target` (and with cascade its subtree, leaves first) to stop after the current turn. */
  requestStop(target: AgentHandle, cascade: boolean): string[] {
    const order: AgentHandle[] = [];
    const visit = (h: AgentHandle) => {
      if (cascade) for (const id of h.children) visit(this.handle(id));
      order.push(h);
    };
    visit(target);
    const stopping = order.filter((h) => isActive(h.status));
    for (const h of stopping) {
      h.actor.send({ type: 'agent.stop', reason: 'requested' });
      // A model call in flight is cancelled; tools already running finish and are recorded.
      h.inFlight?.abort(STOP_REQUESTED);
    }
    return stopping.map((h) => h.id);
  }

  toolNames(agent: AgentHandle): string[] {
    return this.toolSpecs(agent).map((t) => t.name);
  }

  /** The tools an agent is offered: the same list object for every root, and for every child. */
  toolSpecs(agent: AgentHandle): readonly ToolSpec[] {
    const key = agent.parentId === null ? 'root' : 'child';
    let specs = this.#toolSpecs.get(key);
    if (!specs) {
      specs = [];
      for (const tool of BUILTIN_TOOLS.values()) if (tool.offeredTo(agent, this.options.interactive)) specs.push(toToolSpec(tool as never));
      for (const tool of this.tools.values()) specs.push(toToolSpec(tool));
      this.#toolSpecs.set(key, specs);
    }
    return specs;
  }

  buildRequest(agent: AgentHandle, turn: number): ModelRequest {
    if (agent.systemPrompt === null) {
      const parent = agent.parentId === null ? undefined : this.#agents.get(agent.parentId);
      agent.systemPrompt = systemPrompt(
        { id: agent.id, name: agent.name, parentId: agent.parentId, parentName: parent?.name ?? null },
        this.options.interactive,
        this.options.systemPrompt,
      );
    }
    let messages: readonly SessionItem[] = this.store.loadSession(agent.id);
    for (const note of agent.notes) messages = withNote(messages, note);
    const warning = this.ledger.warning(agent);
    return {
      agent: { id: agent.id, name: agent.name, parentId: agent.parentId, depth: agent.depth },
      system: agent.systemPrompt,
      // A budget warning goes into this call's input only, never into the session.
      messages: warning === null ? messages : withNote(messages, warning),
      tools: this.toolSpecs(agent),
      turn,
    };
  }

  /**
   * One model call through the shared queue and rate limit. A call aborted while it queues throws
   * the abort reason instead of calling the model; streamed pieces become `agent.delta` events.
   */
  complete(agent: AgentHandle, request: ModelRequest, signal: AbortSignal): Promise<ModelTurn> {
    const onDelta = (delta: ModelDelta) => {
      if (this.#listeners.size > 0) this.#emit({ type: 'agent.delta', agentId: agent.id, name: agent.name, delta, at: this.clock.now() });
    };
    const purpose = request.purpose ?? 'main';
    return this.modelQueue.add(async () => {
      if (signal.aborted) throw signal.reason;
      if (this.#rateLimiter) await this.#rateLimiter.acquire(signal);
      // The budget may have stopped or paused while this call queued: then it never starts.
      // A compaction is not reserved (it belongs to an admitted turn) but is held to the same check:
      // after a budget stop, or a limit lowered below what is spent, it would be money for nothing.
      const halt = purpose === 'main' || purpose === 'compaction' ? this.ledger.recheck(agent) : null;
      if (halt) throw new BudgetHalt(halt);
      if (purpose === 'review' && !this.ledger.optionalFits()) throw new TroupeError('BUDGET_EXCEEDED', 'The budget moved while a background review queued; it is skipped.');
      // A review's answer is not the agent's: it streams to nobody.
      return this.model.complete(request, purpose === 'review' ? { signal } : { signal, onDelta });
    });
  }

  // ── views and waiting ───────────────────────────────────────────────────────────────────────

  /**
   * Turn counters reach the read model once per microtask, for every agent that took turns,
   * instead of on every turn; status changes are published at once.
   */
  #markViewDirty(h: AgentHandle): void {
    this.#dirtyViews.add(h);
    if (this.#dirtyViews.size === 1) queueMicrotask(() => this.#flushViews());
  }

  #flushViews(): void {
    for (const h of this.#dirtyViews) this.registry.trigger.upsert({ view: this.#view(h) });
    this.#dirtyViews.clear();
  }

  #view(h: AgentHandle): AgentView {
    return {
      id: h.id,
      name: h.name,
      parentId: h.parentId,
      depth: h.depth,
      status: h.status,
      waitKind: h.waitKind,
      turns: h.turns,
      lastTool: h.lastTool,
      spentUsd: h.spentUsd,
    };
  }

  info(id: string): AgentInfo {
    const h = this.resolve(id);
    const ctx = h.live?.getSnapshot().context ?? h.dormant ?? h.actor.getSnapshot().context;
    return {
      ...this.#view(h),
      task: h.task,
      skills: [...h.skills],
      error: ctx.error ? { code: ctx.error.code, message: ctx.error.message } : null,
      stopReason: ctx.stopReason,
      report: ctx.report ? { ...ctx.report } : null,
      pendingMessages: this.store.pendingCount(h.id),
      createdAt: h.createdAt,
      spentByPurpose: { ...h.spentByPurpose },
    };
  }

  list(): AgentInfo[] {
    return [...this.#agents.keys()].map((id) => this.info(id));
  }

  tree(): TreeNode[] {
    this.#flushViews();
    return toTree(this.registry.getSnapshot().context.agents);
  }

  subscribe(listener: (event: TroupeEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Deliver an event to subscribers (used by the run's helpers, e.g. background reviews). */
  publish(event: TroupeEvent): void {
    this.#emit(event);
  }

  #emit(event: TroupeEvent): void {
    for (const listener of this.#listeners) {
      try {
        listener(event);
      } catch (err) {
        this.logger.error({ err }, 'event listener threw');
      }
    }
  }

  waitFor(id: string, statuses: readonly AgentStatus[], timeoutMs?: number): Promise<AgentInfo> {
    const h = this.resolve(id);
    if (this.#failure) return Promise.reject(this.#failure);
    if (this.#shutdown && !statuses.includes(h.status)) return Promise.reject(shutDown());
    return this.#waiters.waitFor(h, statuses, timeoutMs);
  }

  /** What a watchdog needs: whether work is still accepted, and how full the two queues are. */
  health(): CoordinatorHealth {
    const error = this.#failure ?? (this.#shutdown ? shutDown() : null);
    const queue = (q: PQueue) => ({ waiting: q.size, running: q.pending, concurrency: q.concurrency });
    return {
      ok: error === null,
      error: error === null ? null : { code: error.code, message: error.message },
      modelQueue: queue(this.modelQueue),
      toolQueue: queue(this.toolQueue),
    };
  }

  /** Resolves when no agent is running: every agent is terminal or parked. */
  whenIdle(): Promise<void> {
    if (this.#failure) return Promise.reject(this.#failure);
    if (this.#shutdown) return Promise.reject(shutDown());
    return this.#waiters.whenIdle();
  }

  /**
   * Stop every actor, which aborts every in-flight turn's signal; persisted statuses are left as
   * they are. In-flight calls are not awaited (a model that ignores its signal would hang
   * shutdown): a turn re-checks its signal after every await and writes nothing once aborted.
   */
  async shutdown(): Promise<void> {
    if (this.#shutdown) return;
    this.#shutdown = true;
    this.#stopWindowListener?.();
    this.reviews?.close();
    for (const h of this.#agents.values()) h.live?.stop();
    this.coordinator.stop();
    this.modelQueue.clear();
    this.toolQueue.clear();
    this.#waiters.rejectAll(shutDown());
  }
}
