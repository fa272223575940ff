/**
 * The runtime behind `createCoordinator`: the composition root. It owns the coordinator actor and
 * wires the parts — agents (agents.ts, lifecycle.ts), mailboxes and messaging, sessions, the model
 * gateway, the budget ledger, the views — around one group committer (commit.ts): decisions are
 * taken in memory, their writes committed in groups, and nothing leaves the process before the
 * commit that makes it true. Turns and tools reach it only through their ports (turn/ports.ts,
 * tools/ports.ts).
 * @module
 */
import PQueue from 'p-queue';
import { pino, type Logger } from 'pino';
import { createActor, type Actor } from 'xstate';
import { agentMachine } from '../../machines/agentMachine.js';
import { coordinatorMachine, getAgentRecord, type AgentRecord, type BudgetFlags } from '../../machines/coordinatorMachine.js';
import { isActive, type TurnOutcome } from '../../machines/types.js';
import { systemClock, type Clock } from '../clock.js';
import { ConfigError, TroupeError } from '../errors.js';
import type { Model, ToolSpec, UsagePurpose } from '../model/types.js';
import { memoryStore } from '../store/memoryStore.js';
import { isStorePort, portOf, type StorePort, type WriteOp } from '../store/port.js';
import type { AgentRow, RunRow, Store } from '../store/types.js';
import { BUILTIN_TOOLS, type BuiltinEnv } from '../tools/builtin.js';
import { compileTool, toToolSpec, type CompiledTool } from '../tools/defineTool.js';
import type { BuiltinHost } from '../tools/ports.js';
import { runUserTool } from '../tools/runUserTool.js';
import { createCycleLogic } from '../turn/cycle.js';
import type { AgentRef, ModelRecovery, ToolLedger, TurnHost } from '../turn/ports.js';
import { BackgroundReviews, type ReviewNote } from '../turn/review.js';
import { STOP_REQUESTED } from '../turn/turn.js';
import { Agents, type AgentHandle } from './agents.js';
import { BudgetLedger } from './budget.js';
import { GroupCommitter } from './commit.js';
import { deadWaits, deadlockResult } from './deadlock.js';
import { Delegations, ReentryBudgets } from './delegations.js';
import { AsyncExecutions } from './executions.js';
import { Gateway } from './gateway.js';
import { assertNothingOutstanding, childrenSummary, graphView, stopFromAgent, waitsOn, type GraphHost } from './graph.js';
import { Lifecycle } from './lifecycle.js';
import { Mailboxes } from './mailbox.js';
import { Registrar } from './registration.js';
import { Messaging, newId } from './messaging.js';
import { positiveLimit, resolveOptions, type CoordinatorOptions, type ResolvedOptions } from './options.js';
import type { TreeNode } from './registry.js';
import { Sessions } from './sessions.js';
import { IdleTimers } from './timers.js';
import { Views, type AgentInfo, type CoordinatorHealth } from './views.js';

export type { AgentInfo, CoordinatorHealth, TroupeEvent } from './views.js';
export type { AgentHandle } from './agents.js';

const shutDown = () => new TroupeError('COORDINATOR_SHUT_DOWN', 'The coordinator was shut down');

const isFatal = (err: unknown): err is TroupeError => err instanceof TroupeError && (err.code === 'STORE_IO' || err.code === 'STORE_CORRUPT');

/** A run read back from the store, after its recovery. */
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

export class Runtime implements TurnHost {
  readonly runId: string;
  /** What the user passed (an embedded store, or a port). */
  readonly store: Store | StorePort;
  readonly port: StorePort;
  readonly model: Model;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly options: ResolvedOptions;
  readonly tools: ReadonlyMap<string, CompiledTool>;
  readonly committer: GroupCommitter;
  readonly coordinator: Actor<typeof coordinatorMachine>;
  readonly timers: IdleTimers;
  readonly agents: Agents;
  readonly mailboxes: Mailboxes;
  readonly sessions: Sessions;
  readonly views: Views;
  readonly messaging: Messaging;
  readonly lifecycle: Lifecycle;
  readonly budget: BudgetLedger;
  readonly gateway: Gateway;
  readonly toolQueue: PQueue;
  readonly executions: AsyncExecutions;
  readonly delegations: Delegations;
  readonly reentry: ReentryBudgets;
  readonly reviews: BackgroundReviews | null;
  readonly ledger: ToolLedger;
  readonly registrar: Registrar;
  /** Notes background reviews proposed in this run (restored at resume). */
  readonly reviewNotes: ReviewNote[] = [];
  readonly #toolSpecs = new Map<'root' | 'child', ToolSpec[]>();
  readonly #builtins: BuiltinHost;
  readonly #graph: GraphHost;
  #shutdown = false;
  #failure: TroupeError | null = null;
  #quiescenceCheck = false;
  #stopWindowListener: (() => void) | null;

  constructor(options: CoordinatorOptions<Store | StorePort>, restore?: RestoredRun) {
    this.options = resolveOptions(options);
    this.model = options.model;
    this.store = options.store ?? memoryStore();
    this.port = isStorePort(this.store) ? this.store : portOf(this.store);
    this.clock = options.clock ?? systemClock;
    this.logger = options.logger ?? pino({ level: 'silent' });
    this.runId = restore?.run.id ?? options.runId ?? `run_${newId()}`;
    const embedded = isStorePort(this.store) ? null : this.store;
    if (!restore && options.runId !== undefined && embedded?.getRun(options.runId)) {
      throw new ConfigError(`The store already holds run ${options.runId}: resume it with resumeCoordinator({ store, runId })`);
    }
    const tools = new Map<string, CompiledTool>();
    for (const tool of options.tools ?? []) {
      const compiled = compileTool(tool);
      if (BUILTIN_TOOLS.has(compiled.name) || tools.has(compiled.name)) {
        throw new ConfigError(`Expected tool names to be unique and not shadow a built-in, got "${compiled.name}" twice`);
      }
      tools.set(compiled.name, compiled);
    }
    this.tools = tools;
    this.committer = new GroupCommitter(this.port, (err) => this.#fail(err));
    this.coordinator = createActor(coordinatorMachine, {
      id: 'coordinator',
      systemId: 'coordinator',
      input: {
        runId: this.runId,
        limits: this.options.limits,
        ...(restore ? { agents: recordsOf(restore.agents), budget: restore.run.budget } : { budget: { limitUsd: this.options.budget.limitUsd } }),
      },
      clock: this.clock,
      ...(options.inspect ? { inspect: options.inspect } : {}),
    });
    this.timers = new IdleTimers(this.clock, (id) => this.#idleTimeout(id));
    this.mailboxes = new Mailboxes((op) => this.stage(op));
    this.sessions = new Sessions({ port: this.port, stage: (op) => this.stage(op), mailboxes: this.mailboxes, now: () => this.clock.now() });
    const logic = agentMachine.provide({ actors: { runCycle: createCycleLogic(this, (id) => this.agents.context(id)) } });
    this.agents = new Agents({
      runId: this.runId,
      clock: this.clock,
      logger: this.logger,
      inspect: options.inspect,
      policy: { interactive: this.options.interactive, maxTurns: this.options.limits.maxTurns, idleResumeMs: this.options.idleResumeMs },
      logic,
      timers: this.timers,
      recorded: (id) => getAgentRecord(this.coordinator.getSnapshot().context, id)!,
      onSnapshot: (h, snap) => {
        if (this.#shutdown || this.#failure || snap.status !== 'active') return;
        try {
          this.lifecycle.apply(h, snap);
        } catch (err) {
          // Never throw into XState (it would end the host process): stop, with the cause recorded.
          this.#fail(isFatal(err) ? err : new TroupeError('INTERNAL', `recording a transition of ${h.name} failed: ${(err as Error).message}`, { cause: err }));
        }
      },
      onActorError: (h, err) => this.#onActorError(h, err),
    });
    this.views = new Views({ agents: this.agents, clock: this.clock, logger: this.logger, pending: (id) => this.mailboxes.count(id) });
    this.messaging = new Messaging(this);
    this.lifecycle = new Lifecycle({
      runId: this.runId,
      clock: this.clock,
      interactive: this.options.interactive,
      coordinator: this.coordinator,
      agents: this.agents,
      mailboxes: this.mailboxes,
      stage: (op) => this.stage(op),
      after: (effect) => this.after(effect),
      published: (h, change) => this.views.changed(h, change),
      wakeFor: (h, mail) => this.messaging.wake(h, mail),
      finished: (h) => {
        this.sessions.evict(h.id);
        this.gateway.forget(h.id);
      },
      checkQuiescence: () => this.checkQuiescence(),
      resumeEpoch: () => this.budgetFlags().resumeEpoch,
    });
    this.budget = new BudgetLedger(
      {
        runId: this.runId,
        clock: this.clock,
        logger: this.logger,
        model: this.model,
        budget: this.options.budget,
        flags: () => this.budgetFlags(),
        trip: (event) => this.#budgetEvent(event, () => this.coordinator.send({ type: event })),
        stage: (op) => this.stage(op),
        spent: (agentId, purpose, usd) => this.#spent(agentId, purpose, usd),
      },
      restore?.spentUsd ?? 0,
    );
    this.gateway = new Gateway({
      model: this.model,
      clock: this.clock,
      ledger: this.budget,
      concurrency: this.options.concurrency.model,
      rateLimit: this.options.rateLimit,
      interactive: this.options.interactive,
      systemPrompt: this.options.systemPrompt,
      session: (agent) => this.sessions.items(agent),
      toolSpecs: (agent) => this.toolSpecs(agent),
      parentName: (agent) => (agent.parentId === null ? null : (this.agents.find(agent.parentId)?.name ?? null)),
      delta: (agent, delta) => this.views.emit({ type: 'agent.delta', agentId: agent.id, name: agent.name, delta, at: this.clock.now() }),
      hasListeners: () => this.views.hasListeners,
    });
    this.toolQueue = new PQueue({ concurrency: this.options.concurrency.tools });
    const host = {
      runId: this.runId,
      interactive: this.options.interactive,
      approvals: this.options.approvals,
      boot: this.port.boot,
      now: () => this.clock.now(),
      stage: (op: WriteOp) => this.stage(op),
      find: (id: string) => this.agents.find(id),
      status: (h: AgentHandle) => this.agents.status(h),
      wake: (h: AgentHandle) => this.agents.send(h, { type: 'agent.message', from: 'system', user: false }),
      assertUsable: () => this.assertUsable(),
      assertAgent: (id: string) => void this.agents.get(id),
      notify: (agentId: string, m: { type: string; content: string; noticeKey: string }) => this.messaging.notify(agentId, m),
      checkQuiescence: () => this.checkQuiescence(),
    };
    this.executions = new AsyncExecutions(host);
    this.delegations = new Delegations(host);
    this.reentry = new ReentryBudgets(host);
    this.reviews = this.options.review
      ? new BackgroundReviews(
          {
            gateway: this.gateway,
            sessions: this.sessions,
            now: () => this.clock.now(),
            proposeNote: (agent, note) => {
              this.stage({ op: 'appendEvent', row: { runId: this.runId, agentId: agent.id, type: 'review.note', data: { agentName: agent.name, title: note.title, content: note.content }, at: note.at } });
              this.reviewNotes.push({ agentId: agent.id, agentName: agent.name, ...note });
              this.after(() => this.views.emit({ type: 'review.note', agentId: agent.id, name: agent.name, ...note }));
            },
          },
          this.options.review,
        )
      : null;
    this.ledger = {
      start: (agent, call) => this.stage({ op: 'startToolCall', row: { agentId: agent.id, turn: call.turn, callId: call.callId, tool: call.tool, argsHash: call.argsHash, startedAt: this.clock.now() } }),
      finish: (agent, turn, callIds) => this.stage({ op: 'finishToolCalls', agentId: agent.id, turn, callIds, at: this.clock.now() }),
      started: async (agent) => (await this.port.startedToolCalls(agent.id)).map((r) => ({ turn: r.turn, callId: r.callId })),
    };
    this.#graph = {
      agents: this.agents,
      coordinator: this.coordinator,
      budgetFlags: () => this.budgetFlags(),
      runningExecutions: (id) => this.executions.runningFor(id),
      runningDelegations: (id) => this.delegations.list(id).filter((d) => d.status === 'running').map((d) => d.delegationId),
      tree: () => this.views.tree(),
      requestStop: (target, cascade) => this.requestStop(target, cascade),
    };
    this.registrar = new Registrar(this, embedded !== null || restore !== undefined);
    this.#builtins = this.#builtinHost();
    // Executions that finished outside the agent's approval window continue when one opens.
    this.#stopWindowListener = this.options.approvals?.onWindowOpen?.((agentId) => this.usable && this.executions.continueFor(agentId)) ?? null;

    this.coordinator.subscribe({ error: (err) => this.logger.fatal({ err }, 'coordinator actor failed') });
    this.coordinator.on('notice', (e) => this.messaging.deliverNotice(e));
    this.coordinator.on('agents.stop', (e) =>
      this.after(() => {
        for (const id of e.ids) {
          const h = this.agents.find(id);
          if (h) this.agents.send(h, { type: 'agent.stop', reason: e.reason });
        }
      }),
    );
    this.coordinator.on('budget.resumed', (e) =>
      this.after(() => {
        for (const h of this.agents.values()) if (this.agents.status(h) === 'budgetPaused') this.agents.send(h, { type: 'budget.resume', epoch: e.epoch });
      }),
    );
    this.coordinator.on('register.rejected', (e) => this.logger.warn({ ...e }, 'registration rejected'));
    this.coordinator.start();
  }

  // ── the commit pipeline ─────────────────────────────────────────────────────────────────────

  stage(op: WriteOp): void {
    this.committer.stage(op);
  }

  /** Run `effect` once everything staged so far is committed. */
  after(effect: () => void): void {
    this.committer.after(effect);
  }

  durable(): Promise<void> {
    return this.committer.durable();
  }

  /** The fatal error that stopped this coordinator, if any. */
  get failure(): TroupeError | null {
    return this.#failure;
  }

  get usable(): boolean {
    return !this.#shutdown && this.#failure === null;
  }

  /** Throws the fatal failure, or COORDINATOR_SHUT_DOWN, once work is no longer accepted. */
  assertUsable(): void {
    if (this.#failure) throw this.#failure;
    if (this.#shutdown) throw shutDown();
  }

  /**
   * A commit failed (I/O, full disk, corruption): memory and store may have diverged, so nothing
   * more is accepted (crash-only; a resume re-reads what committed).
   */
  #fail(err: unknown): TroupeError {
    if (this.#failure) return this.#failure;
    const error = err instanceof TroupeError ? err : new TroupeError('STORE_IO', `a commit failed: ${(err as Error)?.message ?? String(err)}`, { cause: err });
    this.#failure = error;
    this.logger.fatal({ err: error }, 'the coordinator stopped accepting work');
    this.views.emit({ type: 'coordinator.failed', error: { code: error.code, message: error.message }, at: this.clock.now() });
    this.views.waiters.rejectAll(error);
    // Stopping actors from inside one of their own transitions is unsafe: do it right after.
    queueMicrotask(() => void this.shutdown());
    return error;
  }

  // ── turns (TurnHost) ────────────────────────────────────────────────────────────────────────

  agent(id: string): AgentHandle {
    return this.agents.get(id);
  }

  toolNames(agent: AgentRef): string[] {
    return this.toolSpecs(agent).map((t) => t.name);
  }

  /** The tools an agent is offered: the same list object for every root, and for every child. */
  toolSpecs(agent: Pick<AgentRef, 'id' | 'name' | 'parentId'>): readonly ToolSpec[] {
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

  builtinEnv(agent: AgentRef, callId: string, state: BuiltinEnv['state']): BuiltinEnv {
    return { host: this.#builtins, agent, callId, state };
  }

  runTool(agent: AgentRef, tool: CompiledTool, args: Record<string, unknown>, signal: AbortSignal, idempotencyKey: string): Promise<unknown> {
    return runUserTool({ queue: this.toolQueue, clock: this.clock, defaultTimeoutMs: this.options.toolTimeoutMs, runId: this.runId }, tool, args, agent, signal, idempotencyKey);
  }

  linkExecutions(agent: AgentRef, content: string): void {
    this.executions.link(agent, content);
  }

  afterTurn(agent: AgentRef, outcome: TurnOutcome): void {
    this.reviews?.afterTurn(agent, outcome);
  }

  stopRequested(agent: AgentRef): boolean {
    return this.agents.stopRequested(this.agents.get(agent.id));
  }

  recovering(agent: AgentRef, recovery: ModelRecovery): void {
    this.stage({ op: 'appendEvent', row: { runId: this.runId, agentId: agent.id, type: 'model.recovery', data: { ...recovery }, at: this.clock.now() } });
  }

  #builtinHost(): BuiltinHost {
    const g = this.#graph;
    const h = (a: { id: string }) => this.agents.get(a.id);
    return {
      interactive: this.options.interactive,
      now: () => this.clock.now(),
      spawnChild: (parent, req) => this.registrar.spawnChild(h(parent), req),
      sendFromAgent: (from, to, content, opts) => {
        const { mail, target } = this.messaging.sendFromAgent(h(from), to, content, opts);
        return { messageId: mail.id, target: { id: target.id, name: target.name, status: this.agents.status(target) } };
      },
      stopFromAgent: (caller, ref, cascade) => stopFromAgent(g, h(caller), ref, cascade),
      said: (agent, text) => this.said(h(agent), text),
      budgetFlags: () => this.budgetFlags(),
      isStopRequested: (agent) => this.agents.stopRequested(h(agent)),
      pendingCount: (agent) => this.mailboxes.count(agent.id),
      pendingFromUser: (agent) => this.mailboxes.fromUser(agent.id),
      waitsOn: (agent) => waitsOn(g, h(agent)),
      assertNothingOutstanding: (agent) => assertNothingOutstanding(g, h(agent)),
      childrenSummary: (agent) => childrenSummary(g, h(agent)),
      graphView: (agent) => graphView(g, h(agent)),
    };
  }

  // ── agents ──────────────────────────────────────────────────────────────────────────────────

  #spent(agentId: string, purpose: UsagePurpose, usd: number): void {
    const h = this.agents.find(agentId);
    if (!h) return;
    h.spentUsd += usd;
    h.spentByPurpose[purpose] = (h.spentByPurpose[purpose] ?? 0) + usd;
  }

  /** A dormant wait's idle timer fired: wake the agent for it. */
  #idleTimeout(id: string): void {
    const h = this.agents.find(id);
    if (h && this.usable && this.agents.status(h) === 'waiting') this.agents.send(h, { type: 'agent.idleTimeout' });
  }

  #onActorError(h: AgentHandle, err: unknown): void {
    // The machine never throws by design; if it does, the agent restarts in `crashed` through its
    // machine (one transition function), and its parent is told.
    h.logger.error({ err }, 'agent actor failed');
    if (!this.usable) return;
    const error = { code: 'INTERNAL', message: err instanceof Error ? err.message : String(err), retryable: false };
    queueMicrotask(() => this.registrar.crash(h, error));
  }

  /** The agent said something to the user (respond_to_user). */
  said(agent: AgentHandle, text: string): void {
    const at = this.clock.now();
    this.stage({ op: 'appendEvent', row: { runId: this.runId, agentId: agent.id, type: 'agent.said', data: { text }, at } });
    this.after(() => this.views.emit({ type: 'agent.said', agentId: agent.id, name: agent.name, text, at }));
  }

  /** Ask `target` (and with cascade its subtree, leaves first) to stop after the current turn. */
  requestStop(target: AgentHandle, cascade: boolean): string[] {
    const order: AgentHandle[] = [];
    const visit = (h: AgentHandle) => {
      if (cascade) for (const id of h.children) visit(this.agents.get(id));
      order.push(h);
    };
    visit(target);
    const stopping = order.filter((h) => isActive(this.agents.status(h)));
    for (const h of stopping) {
      this.agents.send(h, { type: 'agent.stop', reason: 'requested' });
      // A model call in flight is cancelled; tools already running finish and are recorded.
      h.inFlight?.abort(STOP_REQUESTED);
    }
    return stopping.map((h) => h.id);
  }

  // ── budget ──────────────────────────────────────────────────────────────────────────────────

  budgetFlags(): BudgetFlags {
    return this.coordinator.getSnapshot().context.budget;
  }

  pauseBudget(): Promise<void> {
    this.assertUsable();
    this.#budgetEvent('budget.pause', () => this.coordinator.send({ type: 'budget.pause' }));
    return this.durable();
  }

  /**
   * Change the run's budget flags: persist them, and when they changed, journal the change (a
   * `budget.*` event row with the spend at that moment, what the dashboard's timeline shows).
   */
  #budgetEvent(type: 'budget.stop' | 'budget.reserveTrip' | 'budget.pause' | 'budget.resume', change: () => void): void {
    const before = JSON.stringify(this.budgetFlags());
    change();
    const flags = this.budgetFlags();
    this.stage({ op: 'updateRun', id: this.runId, patch: { budget: flags } });
    if (JSON.stringify(flags) !== before) {
      this.stage({ op: 'appendEvent', row: { runId: this.runId, agentId: null, type, data: { spentUsd: this.budget.spentUsd, limitUsd: flags.limitUsd }, at: this.clock.now() } });
    }
  }

  async resumeBudget(limitUsd?: number): Promise<string[]> {
    if (limitUsd !== undefined) positiveLimit('resumeBudget limitUsd', limitUsd);
    this.assertUsable();
    const parked = [...this.agents.values()].filter((h) => this.agents.status(h) === 'budgetPaused').map((h) => h.id);
    this.#budgetEvent('budget.resume', () => this.coordinator.send({ type: 'budget.resume', ...(limitUsd === undefined ? {} : { limitUsd }) }));
    await this.durable();
    return parked;
  }

  // ── waits and views ─────────────────────────────────────────────────────────────────────────

  info(id: string): AgentInfo {
    return this.views.info(id);
  }

  tree(): TreeNode[] {
    return this.views.tree();
  }

  /**
   * Report dead waits (deadlock.ts) once the effects of the current step have run: when the run is
   * quiescent, every agent waiting on agents is woken at once with the `deadlock` outcome. Once per
   * quiescent episode: the woken agents run, so the next episode starts only when they park again,
   * and each report counts against their idle limit like a timeout (so it never loops).
   */
  checkQuiescence(): void {
    if (this.#quiescenceCheck || this.agents.running > 0) return;
    this.#quiescenceCheck = true;
    // After the commit that parked the last agent (and the wakes it releases) — the same tick.
    this.after(() =>
      queueMicrotask(() => {
        this.#quiescenceCheck = false;
        if (!this.usable) return;
        const waits = deadWaits({
          interactive: this.options.interactive,
          runningAgents: this.agents.running,
          agents: () => this.agents.values(),
          find: (id) => this.agents.find(id),
          status: (h) => this.agents.status(h as AgentHandle),
          waitKind: (h) => this.agents.waitKind(h as AgentHandle),
          anyExecutionRunning: () => this.executions.anyRunning,
          anyDelegationRunning: () => this.delegations.anyRunning,
        });
        if (waits.length === 0) return;
        const at = this.clock.now();
        this.logger.warn({ waits }, 'the run is quiescent and these waits cannot be answered: waking them');
        this.stage({ op: 'appendEvent', row: { runId: this.runId, agentId: null, type: 'run.deadlock', data: { waits }, at } });
        this.views.emit({ type: 'run.deadlock', waits, at });
        const report = deadlockResult(waits);
        for (const wait of waits) {
          const h = this.agents.get(wait.agent_id);
          h.waitReport = report;
          this.agents.send(h, { type: 'agent.deadlock' });
        }
      }),
    );
  }

  health(): CoordinatorHealth {
    const error = this.#failure ?? (this.#shutdown ? shutDown() : null);
    const queue = (q: PQueue) => ({ waiting: q.size, running: q.pending, concurrency: q.concurrency });
    return {
      ok: error === null,
      error: error === null ? null : { code: error.code, message: error.message },
      modelQueue: queue(this.gateway.queue),
      toolQueue: queue(this.toolQueue),
    };
  }

  /**
   * Stop every actor, which aborts every in-flight turn's signal; what was staged is still
   * committed, and persisted statuses stay as they are. In-flight calls are not awaited (a model
   * that ignores its signal would hang shutdown): a turn re-checks its signal after every await and
   * writes nothing once aborted.
   */
  async shutdown(): Promise<void> {
    if (this.#shutdown) return;
    this.#shutdown = true;
    this.#stopWindowListener?.();
    this.reviews?.close();
    this.agents.stopAll();
    this.coordinator.stop();
    this.gateway.queue.clear();
    this.toolQueue.clear();
    this.views.waiters.rejectAll(this.#failure ?? shutDown());
    await this.committer.close();
  }
}
