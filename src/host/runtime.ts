/**
 * The runtime behind `createCoordinator`: the composition root. It owns the coordinator actor and
 * wires the parts around one group committer (commit.ts): decisions are taken in memory, their
 * writes committed in groups, and nothing leaves the process before the commit that makes it true.
 * The parts, by family (each folder imports only those before it, and the vocabulary here:
 * options.ts, deadlock.ts):
 *
 * - agents/: the agents' handles and actors, the run's one idle timer;
 * - mail/: mailboxes, messaging and its rules, sessions;
 * - lifecycle/: what a status change records and wakes, registration, what a resume restores;
 * - calls/: the model gateway and the budget ledger;
 * - async/: async executions and delegations;
 * - views/: the read model, events and waiters;
 * - waits/: the wait-for graph and the dead-wait watch.
 *
 * Turns and tools reach it only through their ports (turn/ports.ts, tools/ports.ts).
 * @module
 */
import type { RunBreakers } from './calls/breakers.js';
import { profileOf } from './profiles.js';
import PQueue from 'p-queue';
import { pino, type Logger } from 'pino';
import { createActor, type Actor } from 'xstate';
import { agentMachine } from '../../machines/agentMachine.js';
import { coordinatorMachine, getAgentRecord, type BudgetFlags } from '../../machines/coordinatorMachine.js';
import { systemClock, type Clock } from '../clock.js';
import { TroupeError } from '../errors.js';
import type { Model, UsagePurpose } from '../model/types.js';
import { memoryStore } from '../store/memoryStore.js';
import { isStorePort, portOf, type StorePort } from '../store/port.js';
import type { Store } from '../store/types.js';
import type { BuiltinHost } from '../tools/ports.js';
import { createCycleLogic } from '../turn/cycle.js';
import type { ToolLedger, TurnHost } from '../turn/ports.js';
import { runTrace, type RunTrace } from '../trace/tracer.js';
import type { BackgroundReviews, ReviewNote } from '../turn/review.js';
import { Agents, type AgentHandle } from './agents/agents.js';
import { BudgetLedger } from './calls/budget.js';
import { FailurePatterns } from './agents/failurePatterns.js';
import { runStream, type StreamRecorder } from './views/streamRecorder.js';
import { GroupCommitter } from './commit.js';
import { journalFor } from '../fork/journal.js';
import { budgetControls, healthOf, requestStop } from './control.js';
import { DeadlockWatch } from './waits/deadlockWatch.js';
import { Delegations, ReentryBudgets } from './async/delegations.js';
import { SelfWakes } from './async/selfWakes.js';
import { AsyncExecutions } from './async/executions.js';
import { attachAdmission } from './calls/admission.js';
import type { Gateway } from './calls/gateway.js';
import { runProvider } from './calls/provider.js';
import { CallLog } from './calls/callLog.js';
import { type GraphHost } from './waits/graph.js';
import { builtinHost } from './builtinHost.js';
import { turnHost } from './turnHost.js';
import { recordsOf, type RestoredRun } from './lifecycle/restore.js';
import { Lifecycle } from './lifecycle/lifecycle.js';
import { Mailboxes } from './mail/mailbox.js';
import { Registrar } from './lifecycle/registration.js';
import { Messaging, newId, randomIds } from './mail/messaging.js';
import { runExistsError, type CoordinatorOptions, type IdSource, type ResolvedOptions } from './options.js';
import { resolveOptions } from './resolveOptions.js';
import { Sessions } from './mail/sessions.js';
import { Toolbox } from './toolbox.js';
import { OutputChecks } from './agents/outputs.js';
import { approvalsHost, asyncWorkHost, backgroundReviews, toolLedger } from './turnServices.js';
import { DurableApprovals } from './async/approvals.js';
import { IdleTimers } from './agents/timers.js';
import { Views, type CoordinatorHealth } from './views/views.js';

export type { AgentActivity, AgentInfo, CoordinatorHealth, TroupeEvent } from './views/views.js';

const shutDown = () => new TroupeError('COORDINATOR_SHUT_DOWN', 'The coordinator was shut down');

const isFatal = (err: unknown): err is TroupeError => err instanceof TroupeError && (err.code === 'STORE_IO' || err.code === 'STORE_CORRUPT');

export class Runtime {
  readonly runId: string;
  /** Where new agent and message ids come from. */
  readonly ids: IdSource;
  /** Every model call and outside input, recorded for replay (calls/callLog.ts). */
  readonly callLog: CallLog;
  /** What the user passed (an embedded store, or a port). */
  readonly store: Store | StorePort;
  readonly port: StorePort;
  readonly model: Model;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly options: ResolvedOptions;
  /** User tools: `defineTool` tools and the tools of MCP servers (toolbox.ts, mcp/catalog.ts). */
  readonly toolbox: Toolbox;
  /** Each agent's output check (typed results): from its persisted schema, or the API's Standard Schema. */
  readonly outputs = new OutputChecks();
  readonly committer: GroupCommitter;
  readonly coordinator: Actor<typeof coordinatorMachine>;
  readonly timers: IdleTimers;
  readonly agents: Agents;
  readonly mailboxes: Mailboxes;
  readonly sessions: Sessions;
  readonly views: Views;
  /** The run's live stream, written with the group commit (views/streamRecorder.ts). */
  readonly stream: StreamRecorder | null;
  readonly messaging: Messaging;
  readonly lifecycle: Lifecycle;
  readonly budget: BudgetLedger;
  readonly gateway: Gateway;
  readonly toolQueue: PQueue;
  readonly executions: AsyncExecutions;
  /** Durable approvals: asked by the run's rules, answered from anywhere through the inbox. */
  readonly approvals: DurableApprovals;
  readonly delegations: Delegations;
  readonly reentry: ReentryBudgets;
  /** The team's failure patterns (null: `failurePatterns: false`); trips restored from notice keys at resume. */
  readonly failurePatterns: FailurePatterns | null;
  /** The re-entry budget's gate on every self-wake (async/selfWakes.ts). */
  readonly selfWakes: SelfWakes;
  readonly reviews: BackgroundReviews | null;
  readonly ledger: ToolLedger;
  readonly registrar: Registrar;
  /** The budget's pause, resume and trips (control.ts). */
  readonly controls: ReturnType<typeof budgetControls>;
  readonly deadlocks: DeadlockWatch;
  /** OpenTelemetry spans and metrics (a no-op unless an SDK is registered). */
  readonly trace: RunTrace;
  /** Notes background reviews proposed in this run (restored at resume). */
  readonly reviewNotes: ReviewNote[] = [];
  /** What the built-in tools reach of the run (builtinHost.ts). */
  readonly builtins: BuiltinHost;
  readonly #graph: GraphHost;
  /** What the turns reach of the run (turnHost.ts). */
  readonly #turns: TurnHost;
  #shutdown = false;
  /** The adaptive admission of model calls (null: the queue keeps `concurrency.model`). */
  readonly #admission: { close(): void } | null;
  #shutdownDone: Promise<void> | null = null;
  #failure: TroupeError | null = null;
  #stopWindowListener: (() => void) | null;
  /** The breakers of the endpoints this run's models call (calls/breakers.ts). */
  readonly #breakers: RunBreakers;

  constructor(options: CoordinatorOptions<Store | StorePort>, restore?: RestoredRun) {
    this.options = resolveOptions(options);
    this.model = options.model;
    this.store = options.store ?? memoryStore();
    this.port = isStorePort(this.store) ? this.store : portOf(this.store);
    this.clock = options.clock ?? systemClock;
    this.logger = options.logger ?? pino({ level: 'silent' });
    this.runId = restore?.run.id ?? options.runId ?? `run_${newId()}`;
    this.ids = options.ids ?? randomIds;
    this.callLog = new CallLog({
      stage: (row) => this.committer.stage({ op: 'appendEvent', row }),
      runId: this.runId,
      now: () => this.clock.now(),
      flushes: () => this.committer.flushes,
      // Its MCP tools' origins go with a tool list's first entry (a replay offers them from there).
      origin: (name) => this.toolbox.catalog.origin(name),
    });
    /** What most parts know of the run. */
    const run = { runId: this.runId, clock: this.clock, logger: this.logger };
    const budgetFlags = () => this.budgetFlags();
    // Not profileOf at spawn: a profile no longer configured fails the agent at its next call.
    const profile = (agentId: string) => profileOf(this.options.profiles, this.agents.find(agentId)?.terms?.profile);
    const embedded = isStorePort(this.store) ? null : this.store;
    if (!restore && options.runId !== undefined && embedded?.getRun(options.runId)) {
      throw runExistsError(options.runId);
    }
    this.toolbox = new Toolbox(options.tools ?? [], {
      interactive: this.options.interactive,
      maxDepth: this.options.limits.maxDepth,
      clock: this.clock,
      logger: this.logger,
      find: (id) => this.agents.find(id),
      profiles: this.options.profiles,
    });
    this.committer = new GroupCommitter(
      this.port,
      (err) => this.#fail(err),
      journalFor(this.port, this.runId, () => this.clock.now()),
    );
    this.trace = runTrace(options.telemetry, {
      runId: this.runId,
      modelFor: (purpose, agentId) => this.budget.modelFor(purpose, agentId).name ?? 'model',
      now: () => this.clock.now(),
      stage: (op) => this.committer.stage(op),
      agent: (id) => this.agents.find(id),
    });
    this.coordinator = createActor(coordinatorMachine, {
      id: 'coordinator',
      systemId: 'coordinator',
      input: {
        runId: this.runId,
        limits: this.options.limits,
        ...(restore
          ? { agents: recordsOf(restore.agents), budget: restore.run.budget, reservesTripped: restore.reservesTripped ?? [] }
          : { budget: { limitUsd: this.options.budget.limitUsd } }),
      },
      clock: this.clock,
      ...(options.inspect ? { inspect: options.inspect } : {}),
    });
    this.timers = new IdleTimers(this.clock, (id) => this.#idleTimeout(id));
    this.failurePatterns = this.options.failurePatterns ? new FailurePatterns(this.options.failurePatterns) : null;
    this.mailboxes = new Mailboxes((op) => this.committer.stage(op));
    this.sessions = new Sessions({ port: this.port, stage: (op) => this.committer.stage(op), mailboxes: this.mailboxes, now: () => this.clock.now() });
    // The turns' host is made of parts built below: a cycle reads it when it starts.
    const logic = agentMachine.provide({
      actors: {
        runCycle: createCycleLogic(
          () => this.#turns,
          (id) => this.agents.context(id),
        ),
      },
    });
    this.agents = new Agents({
      ...run,
      inspect: options.inspect,
      policy: { interactive: this.options.interactive, maxTurns: this.options.limits.maxTurns, idleResumeMs: this.options.idleResumeMs },
      // Not profileOf: a profile no longer configured fails the agent at its next call, not its actor's start.
      maxTurns: (h) => (h.terms?.profile === undefined ? null : (this.options.profiles.get(h.terms.profile)?.maxTurns ?? null)),
      logic,
      timers: this.timers,
      recorded: (id) => getAgentRecord(this.coordinator.getSnapshot().context, id)!,
      running: () => this.coordinator.getSnapshot().context.running,
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
    this.views = new Views({
      ...run,
      agents: this.agents,
      pending: (id) => this.mailboxes.count(id),
      after: (effect) => this.committer.after(effect),
    });
    this.stream = runStream({
      runId: this.runId,
      settings: this.options.stream,
      port: this.port,
      restored: restore !== undefined,
      logger: this.logger,
      committer: this.committer,
      views: this.views,
    });
    // An MCP server down or back: a view or a script hears of it (the log has the detail). Under
    // strictMcp a failed start is start()'s error instead (only a first start ends as `failed`).
    this.toolbox.catalog.onServerStatus(({ server, state, tools, error }) => {
      if (state === 'starting' || (state === 'failed' && this.options.strictMcp)) return;
      this.views.emit({ type: 'mcp.server', server, state, tools, error, at: this.clock.now() });
    });
    this.messaging = new Messaging({
      ...run,
      ids: this.ids,
      callLog: this.callLog,
      options: this.options,
      agents: this.agents,
      mailboxes: this.mailboxes,
      coordinator: this.coordinator,
      commit: this.committer,
      userSpoke: (id) => this.selfWakes.userSpoke(id),
      // A proactive message is a self-wake, counted and never put off: false when the budget refuses it.
      proactiveWake: (id) => this.selfWakes.admit(this.agents.get(id), 'proactive', () => undefined) !== 'refused',
    });
    const rules = this.options.approvalRules;
    this.approvals = new DurableApprovals(
      approvalsHost({
        ...run,
        options: this.options,
        agents: this.agents,
        toolbox: this.toolbox,
        messaging: this.messaging,
        views: this.views,
        commit: this.committer,
        runTool: (...call) => this.#turns.runTool(...call),
        linkExecutions: (h, text) => this.executions.link(h, text),
      }),
      rules,
    );
    // With rules, the turns ask the durable approvals (one policy: a gate or rules, never both).
    if (rules) this.options = { ...this.options, approvals: this.approvals };
    this.lifecycle = new Lifecycle({
      ...run,
      interactive: this.options.interactive,
      coordinator: this.coordinator,
      agents: this.agents,
      mailboxes: this.mailboxes,
      trace: this.trace,
      stage: (op) => this.committer.stage(op),
      after: (effect) => this.committer.after(effect),
      published: (h, change) => this.views.changed(h, change),
      wakeFor: (h, mail) => this.messaging.wake(h, mail),
      finished: (h) => {
        this.sessions.evict(h.id);
        this.gateway.forget(h.id);
      },
      checkQuiescence: () => this.deadlocks.check(),
      resumeEpoch: () => this.budgetFlags().resumeEpoch,
      statusChanged: (h, status) => this.budget.allowances.changed(h.id, status),
      timerWoke: (h) => this.selfWakes.admit(h, 'timer', () => undefined),
    });
    this.controls = budgetControls({
      ...run,
      coordinator: this.coordinator,
      agents: this.agents,
      messaging: this.messaging,
      trace: this.trace,
      views: this.views,
      spentUsd: () => this.budget.spentUsd,
      model: this.model,
      options: this.options,
      commit: this.committer,
      assertUsable: () => this.assertUsable(),
      budgetFlags,
    });
    this.budget = new BudgetLedger(
      {
        ...run,
        model: this.model,
        auxiliaryModel: this.options.auxiliaryModel,
        agentModel: (agentId) => profile(agentId)?.model ?? null,
        budget: this.options.budget,
        flags: budgetFlags,
        trip: this.controls.trip,
        stage: (op) => this.committer.stage(op),
        spent: (agentId, purpose, usd) => this.#spent(agentId, purpose, usd),
        agent: (id) => this.agents.find(id),
        rootId: () => this.coordinator.getSnapshot().context.rootId,
        reserveTripped: (ownerId) => this.coordinator.getSnapshot().context.reservesTripped[ownerId] === true,
        tripAllowance: this.controls.tripAllowance,
      },
      restore?.spentUsd ?? 0,
    );
    ({ gateway: this.gateway, breakers: this.#breakers } = runProvider({
      ...run,
      model: this.model,
      options: this.options,
      budget: this.budget,
      commit: this.committer,
      views: this.views,
      port: this.port,
      callLog: this.callLog,
      usable: () => this.usable,
      profile,
      session: (agent) => this.sessions.items(agent),
      toolSpecs: (agent) => this.toolbox.specs(agent),
      parentName: (agent) => (agent.parentId === null ? null : (this.agents.find(agent.parentId)?.name ?? null)),
      warned: (agent, warning) => this.trace.budgetWarning(agent.id, warning),
    }));
    this.#admission = attachAdmission(this.gateway.queue, this.options.concurrency, this.clock);
    this.toolQueue = new PQueue({ concurrency: this.options.concurrency.tools });
    const host = asyncWorkHost({
      ...run,
      options: this.options,
      boot: this.port.boot,
      approvals: this.approvals,
      agents: this.agents,
      messaging: this.messaging,
      mailboxes: this.mailboxes,
      sessions: this.sessions,
      commit: this.committer,
      admit: (h, source, retry) => this.selfWakes.admit(h, source, retry),
      assertUsable: () => this.assertUsable(),
      checkQuiescence: () => this.deadlocks.check(),
    });
    this.executions = new AsyncExecutions(host);
    this.delegations = new Delegations(host);
    this.reentry = new ReentryBudgets(host);
    this.selfWakes = new SelfWakes({
      ...run,
      policy: this.options.reentry,
      budgets: this.reentry,
      status: (h) => this.agents.status(h),
      stop: (h) => this.agents.send(h, { type: 'agent.stop', reason: 'reentry' }),
      stage: (op) => this.committer.stage(op),
    });
    this.ledger = toolLedger({ clock: this.clock, port: this.port, commit: this.committer });
    this.reviews = this.options.review
      ? backgroundReviews(
          {
            ...run,
            commit: this.committer,
            gateway: this.gateway,
            trace: this.trace,
            sessions: this.sessions,
            views: this.views,
            notes: this.reviewNotes,
          },
          this.options.review,
        )
      : null;
    this.#graph = {
      agents: this.agents,
      coordinator: this.coordinator,
      budgetFlags,
      // A pending approval is work whose end wakes the agent, like a running execution.
      runningExecutions: (id) => [...this.executions.runningFor(id), ...this.approvals.pendingFor(id)],
      runningDelegations: (id) =>
        this.delegations
          .list(id)
          .filter((d) => d.status === 'running')
          .map((d) => d.delegationId),
      tree: () => this.views.tree(),
      requestStop: (target, cascade) => requestStop(this.agents, target, cascade),
    };
    this.deadlocks = new DeadlockWatch({
      ...run,
      interactive: this.options.interactive,
      agents: this.agents,
      usable: () => this.usable,
      stage: (op) => this.committer.stage(op),
      after: (effect) => this.committer.after(effect),
      emit: (event) => this.views.emit(event),
      // A wake put off by the re-entry budget's spacing is an answer on its way, like a running execution.
      // So is a pending approval, and (a person attached) a finished execution left for an approval window.
      anyExecutionRunning: () =>
        this.executions.anyRunning || this.selfWakes.anyArmed || this.approvals.anyPending || (this.options.interactive && this.executions.anyAwaitingWindow),
      anyDelegationRunning: () => this.delegations.anyRunning,
      selfWake: (h, retry) => this.selfWakes.admit(h, 'deadlock', retry) === 'now',
    });
    this.registrar = new Registrar(
      {
        ...run,
        ids: this.ids,
        options: this.options,
        port: this.port,
        coordinator: this.coordinator,
        agents: this.agents,
        sessions: this.sessions,
        views: this.views,
        lifecycle: this.lifecycle,
        trace: this.trace,
        stream: this.stream,
        budget: this.budget,
        stage: (op) => this.committer.stage(op),
        assertUsable: () => this.assertUsable(),
        checkQuiescence: () => this.deadlocks.check(),
      },
      embedded !== null || restore !== undefined,
    );
    this.builtins = builtinHost(
      {
        runId: this.runId,
        options: this.options,
        clock: this.clock,
        agents: this.agents,
        mailboxes: this.mailboxes,
        registrar: this.registrar,
        messaging: this.messaging,
        views: this.views,
        commit: this.committer,
        budgetFlags,
        budget: this.budget,
        sessions: this.sessions,
        approvals: this.approvals,
      },
      this.#graph,
    );
    this.#turns = turnHost({
      ...run,
      options: this.options,
      failure: () => this.#failure,
      commit: this.committer,
      gateway: this.gateway,
      sessions: this.sessions,
      ledger: this.ledger,
      trace: this.trace,
      agents: this.agents,
      toolbox: this.toolbox,
      outputs: this.outputs,
      builtins: this.builtins,
      fenced: () => this.port.guard?.check() ?? null,
      toolQueue: this.toolQueue,
      executions: this.executions,
      reviews: this.reviews,
      views: this.views,
      failurePatterns: this.failurePatterns,
      messaging: this.messaging,
      callLog: this.callLog,
    });
    // Executions that finished outside the agent's approval window continue when one opens.
    this.#stopWindowListener = this.options.approvals?.onWindowOpen?.((agentId) => this.usable && this.executions.continueFor(agentId)) ?? null;

    // A lost lease (PostgreSQL) ends the hosting at once: every in-flight turn is aborted and nothing more is committed.
    this.port.guard?.onLost((err) => this.usable && this.#fail(err));
    this.coordinator.subscribe({ error: (err) => this.logger.fatal({ err }, 'coordinator actor failed') });
    this.coordinator.on('register.rejected', (e) => this.logger.warn({ ...e }, 'registration rejected'));
    this.coordinator.start();
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

  budgetFlags(): BudgetFlags {
    return this.coordinator.getSnapshot().context.budget;
  }

  health(): CoordinatorHealth {
    return healthOf({ failure: this.#failure, usable: this.usable, modelQueue: this.gateway.queue, toolQueue: this.toolQueue });
  }

  /**
   * Stop every actor, which aborts every in-flight turn's signal; what was staged is still
   * committed, and persisted statuses stay as they are. In-flight calls are not awaited (a model
   * that ignores its signal would hang shutdown): a turn re-checks its signal after every await and
   * writes nothing once aborted.
   */
  shutdown(): Promise<void> {
    // Every caller waits for the one shutdown: a second caller returning before the last commit is
    // durable would let its host release the run (or close the store) under a commit in flight.
    this.#shutdownDone ??= this.#shutDown();
    return this.#shutdownDone;
  }

  async #shutDown(): Promise<void> {
    this.#shutdown = true;
    this.#stopWindowListener?.();
    this.#breakers.close();
    this.reviews?.close();
    this.approvals.close();
    this.selfWakes.dispose();
    this.trace.close((id) => this.agents.status(this.agents.get(id)));
    this.agents.stopAll();
    this.coordinator.stop();
    this.gateway.queue.clear();
    this.#admission?.close();
    this.toolQueue.clear();
    this.views.waiters.rejectAll(this.#failure ?? shutDown());
    // The statuses of what is committing now reach the stream once their commit is done (views
    // publish after commit): the stream closes after them, or it ends behind the store.
    // An effect may stage more (a parked agent's release): until nothing is left to commit.
    while (this.stream && this.committer.failure === null) {
      await this.committer.durable().catch(() => undefined);
      if (this.committer.pending === 0) break;
    }
    await this.stream?.close();
    await this.committer.close();
    await this.toolbox.catalog.close();
  }
}
