/**
 * The runtime behind `createCoordinator`: what a run is made of. It owns the coordinator actor and
 * the group committer (commit.ts) — decisions are taken in memory, their writes committed in
 * groups, and nothing leaves the process before the commit that makes it true — and it puts the
 * families of parts together, each in its folder's `wire…` (each folder imports only those before
 * it, and the vocabulary here: options.ts, deadlock.ts):
 *
 * - agents/: the agents' handles and actors, the run's one idle timer;
 * - mail/: mailboxes, messaging and its rules, sessions;
 * - views/: the read model, events and waiters, the live stream;
 * - async/: approvals, async executions, delegations, the re-entry budget;
 * - calls/: the budget's controls and ledger, the model gateway;
 * - waits/: the wait-for graph and the dead-wait watch;
 * - lifecycle/: what a status change records and wakes, registration, what a resume restores;
 * - the turns' host (turnHost.ts) last, from all of them.
 *
 * A family built before another reaches it through a port read when it is called (a cycle, a
 * wake): the composition order is this constructor's. Turns and tools reach the run only through
 * their ports (turn/ports.ts, tools/ports.ts).
 * @module
 */
import PQueue from 'p-queue';
import type { Logger } from 'pino';
import { silentLogger } from '../logging/createLogger.js';
import { createActor, type Actor } from 'xstate';
import { coordinatorMachine, type BudgetFlags } from '../../machines/coordinatorMachine.js';
import { systemClock, type Clock } from '../clock.js';
import { TroupeError } from '../errors.js';
import { journalFor } from '../fork/journal.js';
import { memoryStore } from '../store/memoryStore.js';
import { isStorePort, portOf, type StorePort } from '../store/port.js';
import type { Store } from '../store/types.js';
import { runTrace, type RunTrace } from '../trace/tracer.js';
import type { TurnHost } from '../turn/ports.js';
import type { BackgroundReviews, ReviewNote } from '../turn/review.js';
import type { Agents } from './agents/agents.js';
import type { FailurePatterns } from './agents/failurePatterns.js';
import type { OutputChecks } from './agents/outputs.js';
import { wireAgents } from './agents/wire.js';
import type { DurableApprovals } from './async/approvals.js';
import type { Delegations, ReentryBudgets } from './async/delegations.js';
import type { AsyncExecutions } from './async/executions.js';
import type { SelfWakes } from './async/selfWakes.js';
import { wireAsyncWork } from './async/wire.js';
import type { BudgetLedger } from './calls/budget.js';
import type { RunBreakers } from './calls/breakers.js';
import { CallLog } from './calls/callLog.js';
import type { Gateway } from './calls/gateway.js';
import { wireCalls } from './calls/wire.js';
import { GroupCommitter } from './commit.js';
import { healthOf, type budgetControls } from './control.js';
import type { Lifecycle } from './lifecycle/lifecycle.js';
import type { Registrar } from './lifecycle/registration.js';
import { recordsOf, type RestoredRun } from './lifecycle/restore.js';
import { wireLifecycle } from './lifecycle/wire.js';
import type { Mailboxes } from './mail/mailbox.js';
import { newId, randomIds, type Messaging } from './mail/messaging.js';
import type { Sessions } from './mail/sessions.js';
import { wireMail } from './mail/wire.js';
import { runExistsError, type CoordinatorOptions, type ResolvedOptions } from './options.js';
import { resolveOptions } from './resolveOptions.js';
import { Toolbox } from './toolbox.js';
import { wireTurns } from './turnHost.js';
import type { StreamRecorder } from './views/streamRecorder.js';
import type { CoordinatorHealth, Views } from './views/views.js';
import { wireViews } from './views/wire.js';
import type { DeadlockWatch } from './waits/deadlockWatch.js';
import { wireWaits } from './waits/wire.js';

export type { AgentActivity, AgentInfo, CoordinatorHealth, TroupeEvent } from './views/views.js';

const shutDown = () => new TroupeError('COORDINATOR_SHUT_DOWN', 'The coordinator was shut down');

export class Runtime {
  readonly runId: string;
  /** What the user passed (an embedded store, or a port). */
  readonly store: Store | StorePort;
  readonly clock: Clock;
  readonly options: ResolvedOptions;
  /** Every model call and outside input, recorded for replay (calls/callLog.ts). */
  readonly callLog: CallLog;
  /** User tools: `defineTool` tools and the tools of MCP servers (toolbox.ts, mcp/catalog.ts). */
  readonly toolbox: Toolbox;
  readonly committer: GroupCommitter;
  /** OpenTelemetry spans and metrics (a no-op unless an SDK is registered). */
  readonly trace: RunTrace;
  readonly agents: Agents;
  /** Each agent's output check (typed results): from its persisted schema, or the API's Standard Schema. */
  readonly outputs: OutputChecks;
  /** The team's failure patterns (null: `failurePatterns: false`); trips restored from notice keys at resume. */
  readonly failurePatterns: FailurePatterns | null;
  readonly mailboxes: Mailboxes;
  readonly sessions: Sessions;
  readonly messaging: Messaging;
  readonly views: Views;
  /** Durable approvals: asked by the run's rules, answered from anywhere through the inbox. */
  readonly approvals: DurableApprovals;
  readonly executions: AsyncExecutions;
  readonly delegations: Delegations;
  readonly reentry: ReentryBudgets;
  readonly budget: BudgetLedger;
  /** The budget's pause, resume and trips (control.ts). */
  readonly controls: ReturnType<typeof budgetControls>;
  readonly registrar: Registrar;
  readonly reviews: BackgroundReviews | null;
  /** Notes background reviews proposed in this run (restored at resume). */
  readonly reviewNotes: ReviewNote[] = [];
  readonly #coordinator: Actor<typeof coordinatorMachine>;
  /** The run's live stream, written with the group commit (views/streamRecorder.ts). */
  readonly #stream: StreamRecorder | null;
  /** The re-entry budget's gate on every self-wake (async/selfWakes.ts). */
  readonly #selfWakes: SelfWakes;
  readonly #gateway: Gateway;
  /** The breakers of the endpoints this run's models call (calls/breakers.ts). */
  readonly #breakers: RunBreakers;
  /** The adaptive admission of model calls (null: the queue keeps `concurrency.model`). */
  readonly #admission: { close(): void } | null;
  readonly #toolQueue: PQueue;
  readonly #deadlocks: DeadlockWatch;
  readonly #lifecycle: Lifecycle;
  /** What the turns reach of the run (turnHost.ts). */
  readonly #turns: TurnHost;
  readonly #stopWindowListener: (() => void) | null;
  readonly #logger: Logger;
  #shutdown = false;
  #shutdownDone: Promise<void> | null = null;
  #failure: TroupeError | null = null;

  constructor(options: CoordinatorOptions<Store | StorePort>, restore?: RestoredRun) {
    this.options = resolveOptions(options);
    const model = options.model;
    this.store = options.store ?? memoryStore();
    const port = isStorePort(this.store) ? this.store : portOf(this.store);
    const clock = (this.clock = options.clock ?? systemClock);
    const logger = (this.#logger = options.logger ?? silentLogger());
    const runId = (this.runId = restore?.run.id ?? options.runId ?? `run_${newId()}`);
    const ids = options.ids ?? randomIds;
    const embedded = isStorePort(this.store) ? null : this.store;
    if (!restore && options.runId !== undefined && embedded?.getRun(options.runId)) {
      throw runExistsError(options.runId);
    }
    /** What most parts know of the run, and what every family may ask of the hosting. */
    const run = { runId, clock, logger };
    const live = { usable: () => this.usable, assertUsable: () => this.assertUsable() };
    const budgetFlags = () => this.budgetFlags();
    this.callLog = new CallLog({
      stage: (row) => this.committer.stage({ op: 'appendEvent', row }),
      runId,
      now: () => clock.now(),
      flushes: () => this.committer.flushes,
      // Its MCP tools' origins go with a tool list's first entry (a replay offers them from there).
      origin: (name) => this.toolbox.catalog.origin(name),
    });
    this.toolbox = new Toolbox(options.tools ?? [], {
      interactive: this.options.interactive,
      maxDepth: this.options.limits.maxDepth,
      clock,
      logger,
      find: (id) => this.agents.find(id),
      profiles: this.options.profiles,
    });
    const commit = (this.committer = new GroupCommitter(
      port,
      (err) => this.#fail(err),
      journalFor(port, runId, () => clock.now()),
    ));
    this.trace = runTrace(options.telemetry, {
      runId,
      modelFor: (purpose, agentId) => this.budget.modelFor(purpose, agentId).name ?? 'model',
      now: () => clock.now(),
      stage: (op) => commit.stage(op),
      agent: (id) => this.agents.find(id),
    });
    const coordinator = (this.#coordinator = createActor(coordinatorMachine, {
      id: 'coordinator',
      systemId: 'coordinator',
      input: {
        runId,
        limits: this.options.limits,
        ...(restore
          ? { agents: recordsOf(restore.agents), budget: restore.run.budget, reservesTripped: restore.reservesTripped ?? [] }
          : { budget: { limitUsd: this.options.budget.limitUsd } }),
      },
      clock,
      ...(options.inspect ? { inspect: options.inspect } : {}),
    }));
    const parts = { ...run, ...live, ids, port, model, coordinator, commit, committer: commit, trace: this.trace, callLog: this.callLog, budgetFlags };

    ({
      agents: this.agents,
      outputs: this.outputs,
      failurePatterns: this.failurePatterns,
    } = wireAgents({
      ...parts,
      options: this.options,
      inspect: options.inspect,
      turns: () => this.#turns,
      apply: (h, snap) => this.#lifecycle.apply(h, snap),
      crash: (h, error) => this.registrar.crash(h, error),
      fail: (err) => this.#fail(err),
    }));
    const agents = this.agents;
    ({
      mailboxes: this.mailboxes,
      sessions: this.sessions,
      messaging: this.messaging,
    } = wireMail({
      ...parts,
      options: this.options,
      agents,
      selfWakes: () => this.#selfWakes,
    }));
    const { mailboxes, sessions, messaging } = this;
    ({ views: this.views, stream: this.#stream } = wireViews({
      ...parts,
      options: this.options,
      restored: restore ? { agents: restore.restoredStatuses, unshown: restore.unshown } : null,
      agents,
      mailboxes,
      catalog: this.toolbox.catalog,
    }));
    const views = this.views;
    const work = wireAsyncWork({
      ...parts,
      boot: port.boot,
      options: this.options,
      agents,
      toolbox: this.toolbox,
      messaging,
      mailboxes,
      sessions,
      views,
      runTool: (...call) => this.#turns.runTool(...call),
      checkQuiescence: () => this.#deadlocks.check(),
    });
    ({ approvals: this.approvals, executions: this.executions, delegations: this.delegations, reentry: this.reentry, selfWakes: this.#selfWakes } = work);
    this.#stopWindowListener = work.stopWindowListener;
    // With approval rules, the options every later part reads name the durable approvals as the gate.
    this.options = work.options;
    const calls = wireCalls({ ...parts, options: this.options, agents, messaging, sessions, toolbox: this.toolbox, views, spentUsd: restore?.spentUsd ?? 0 });
    ({ controls: this.controls, budget: this.budget, gateway: this.#gateway, breakers: this.#breakers, admission: this.#admission } = calls);
    this.#toolQueue = new PQueue({ concurrency: this.options.concurrency.tools });
    const { approvals, executions, delegations } = this;
    const waits = wireWaits({ ...parts, interactive: this.options.interactive, agents, executions, approvals, delegations, selfWakes: this.#selfWakes, views });
    this.#deadlocks = waits.deadlocks;
    ({ lifecycle: this.#lifecycle, registrar: this.registrar } = wireLifecycle({
      ...parts,
      options: this.options,
      agents,
      mailboxes,
      sessions,
      messaging,
      views,
      stream: this.#stream,
      budget: this.budget,
      gateway: this.#gateway,
      selfWakes: this.#selfWakes,
      executions,
      deadlocks: this.#deadlocks,
      checkedRunId: embedded !== null || restore !== undefined,
    }));
    ({ turns: this.#turns, reviews: this.reviews } = wireTurns({
      ...parts,
      options: this.options,
      failure: () => this.#failure,
      gateway: this.#gateway,
      sessions,
      agents,
      toolbox: this.toolbox,
      outputs: this.outputs,
      toolQueue: this.#toolQueue,
      executions,
      views,
      failurePatterns: this.failurePatterns,
      messaging,
      mailboxes,
      registrar: this.registrar,
      budget: this.budget,
      approvals,
      graph: waits.graph,
      notes: this.reviewNotes,
    }));

    // A lost lease (PostgreSQL) ends the hosting at once: every in-flight turn is aborted and nothing more is committed.
    port.guard?.onLost((err) => this.usable && this.#fail(err));
    coordinator.subscribe({ error: (err) => logger.fatal({ err }, 'coordinator actor failed') });
    coordinator.on('register.rejected', (e) => logger.warn({ ...e }, 'registration rejected'));
    coordinator.start();
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
    this.#logger.fatal({ err: error }, 'the coordinator stopped accepting work');
    this.views.emit({ type: 'coordinator.failed', error: { code: error.code, message: error.message }, at: this.clock.now() });
    this.views.waiters.rejectAll(error);
    // Stopping actors from inside one of their own transitions is unsafe: do it right after.
    queueMicrotask(() => void this.shutdown());
    return error;
  }

  budgetFlags(): BudgetFlags {
    return this.#coordinator.getSnapshot().context.budget;
  }

  health(): CoordinatorHealth {
    return healthOf({ failure: this.#failure, usable: this.usable, modelQueue: this.#gateway.queue, toolQueue: this.#toolQueue });
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
    this.#selfWakes.dispose();
    this.trace.close((id) => this.agents.status(this.agents.get(id)));
    this.agents.stopAll();
    this.#coordinator.stop();
    this.#gateway.queue.clear();
    this.#admission?.close();
    this.#toolQueue.clear();
    this.views.waiters.rejectAll(this.#failure ?? shutDown());
    // The statuses of what is committing now reach the stream once their commit is done (views
    // publish after commit): the stream closes after them, or it ends behind the store.
    // An effect may stage more (a parked agent's release): until nothing is left to commit.
    while (this.#stream && this.committer.failure === null) {
      await this.committer.durable().catch(() => undefined);
      if (this.committer.pending === 0) break;
    }
    await this.#stream?.close();
    await this.committer.close();
    await this.toolbox.catalog.close();
  }
}
