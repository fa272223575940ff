/**
 * The agents of a run: their handles, and their actors — which exist only while an agent is awake.
 *
 * An agent's status has one source of truth: its machine's snapshot while it has an actor, and the
 * coordinator's record (which every transition updates) otherwise. A parked agent (waiting,
 * stalled, budget-paused) or a finished one is *dormant*: no XState actor, just its lifecycle state
 * and, for a wait on agents, an entry in the run's one idle timer (timers.ts). It gets an actor
 * again when something wakes it (a message, its timer, a budget resume, a dead-wait report): the
 * actor boots in the persisted state and handles the event, exactly as a live one would. Every
 * awake agent is in the inspector as `agent:<id>`; a dormant one shows there as a stopped actor
 * until it wakes.
 * @module
 */
import type { Logger } from 'pino';
import { createActor, type Actor, type SnapshotFrom } from 'xstate';
import type { AgentContext, AgentEvent, AgentInput, AgentLifecycleState } from '../../../machines/agentMachine.js';
import type { agentMachine } from '../../../machines/agentMachine.js';
import { idleDeadline, type AgentStatus, type WaitKind } from '../../../machines/types.js';
import type { Clock } from '../../clock.js';
import { TroupeError } from '../../errors.js';
import type { UsagePurpose } from '../../model/types.js';
import type { AgentRow, AgentTerms } from '../../store/types.js';
import type { AgentRef } from '../../turn/ports.js';
import { FailureTracker } from '../../turn/failureTracker.js';
import type { InspectOption } from '../options.js';
import type { IdleTimers } from './timers.js';

export type AgentLogic = typeof agentMachine;
export type AgentSnapshot = SnapshotFrom<AgentLogic>;

/** The runtime's handle on one agent: identity, the actor while awake, what the turn loop keeps. */
export interface AgentHandle extends AgentRef {
  readonly runId: string;
  readonly task: string;
  readonly skills: string[];
  readonly createdAt: number;
  /** What its parent set at spawn (allowance, result schema); null: nothing. */
  readonly terms: AgentTerms | null;
  readonly children: string[];
  /** The actor while the agent is awake. */
  live: Actor<AgentLogic> | null;
  /** The lifecycle state of a dormant agent (no actor). */
  dormant: AgentLifecycleState | null;
  /**
   * The lifecycle state whose counters were last recorded (turns, last tool, attempts): a snapshot
   * whose context is this object, or equal to it, changes nothing.
   */
  applied: AgentLifecycleState;
  /** Spend by call purpose (main, compaction, …) and in total. */
  spentUsd: number;
  spentByPurpose: Partial<Record<UsagePurpose, number>>;
}

export const statusOf = (snap: AgentSnapshot): AgentStatus => {
  const value = snap.value;
  return typeof value === 'string' ? (value as AgentStatus) : 'waiting';
};

export function lifecycleOf(ctx: AgentLifecycleState): AgentLifecycleState {
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
    attempts: ctx.attempts,
  };
}

/** Statuses in which an agent needs no actor. */
const isDormantStatus = (status: AgentStatus) => status !== 'running';

/**
 * An agent handle. A class, so that every handle shares one hidden class with its lazy getters on
 * the prototype: an object literal with per-object getters was a dictionary-mode object (~1.6 KB
 * of property table) plus two closures that kept the whole agent row alive — most of the heap of a
 * dormant agent.
 */
class Handle implements AgentHandle {
  readonly id: string;
  readonly runId: string;
  readonly name: string;
  readonly parentId: string | null;
  readonly depth: number;
  readonly task: string;
  readonly skills: string[];
  readonly createdAt: number;
  readonly terms: AgentTerms | null;
  readonly children: string[] = [];
  live: Actor<AgentLogic> | null = null;
  dormant: AgentLifecycleState | null = null;
  applied: AgentLifecycleState;
  spentUsd = 0;
  spentByPurpose: Partial<Record<UsagePurpose, number>> = {};
  notes: string[] = [];
  strategyPrompt: string | null = null;
  lastText: string | null = null;
  waitReport: string | null = null;
  inFlight: AbortController | null = null;
  toolsInFlight: AbortController | null = null;
  /** The run's logger until this agent's own child is made (then the child). */
  #logger: Logger;
  #ownLogger = false;
  #tracker: FailureTracker | null = null;

  constructor(row: AgentRow, runId: string, applied: AgentLifecycleState, rootLogger: Logger) {
    this.id = row.id;
    this.runId = runId;
    this.name = row.name;
    this.parentId = row.parentId;
    this.terms = row.terms ?? null;
    this.depth = row.depth;
    this.task = row.task;
    this.skills = row.skills;
    this.createdAt = row.createdAt;
    this.applied = applied;
    this.#logger = rootLogger;
  }

  /** A pino child costs ~15 µs: made on first use, not for every agent spawned. */
  get logger(): Logger {
    if (!this.#ownLogger) {
      this.#logger = this.#logger.child({ agentId: this.id, runId: this.runId });
      this.#ownLogger = true;
    }
    return this.#logger;
  }

  /** Most agents never see a failing tool: their tracker is made on first use. */
  get tracker(): FailureTracker {
    return (this.#tracker ??= new FailureTracker(3));
  }
}

export interface AgentsDeps {
  runId: string;
  clock: Clock;
  logger: Logger;
  inspect: InspectOption | undefined;
  policy: { interactive: boolean; maxTurns: number; idleResumeMs: number };
  /** An agent's own maxTurns (its profile's), if it has one. */
  maxTurns?(h: AgentHandle): number | null;
  logic: AgentLogic;
  timers: IdleTimers;
  /** The coordinator's view of the agent's status (the source of truth while it is dormant). */
  recorded(id: string): { status: AgentStatus; waitKind: WaitKind | null };
  /** Agents running now, as the coordinator counts them. */
  running(): number;
  onSnapshot(h: AgentHandle, snap: AgentSnapshot): void;
  onActorError(h: AgentHandle, err: unknown): void;
}

export class Agents {
  readonly #deps: AgentsDeps;
  readonly #all = new Map<string, AgentHandle>();
  /**
   * Set by `stopAll` (shutdown): no actor starts again. A wake that comes later (a commit's effect
   * during the shutdown's last commits) would run a turn whose `running` is never recorded (the
   * host records no transition once shutting down) while its delivery of the mail is committed:
   * the next host would find the agent parked with its mail delivered and unanswered. Dropped
   * instead, the wake's mail stays pending, and the next host wakes the agent for it.
   */
  #stopped = false;
  /** Agents whose status is `running`: the coordinator's count, derived from every status change. */
  get running(): number {
    return this.#deps.running();
  }

  constructor(deps: AgentsDeps) {
    this.#deps = deps;
  }

  get size(): number {
    return this.#all.size;
  }

  values(): IterableIterator<AgentHandle> {
    return this.#all.values();
  }

  find(id: string): AgentHandle | undefined {
    return this.#all.get(id);
  }

  get(id: string): AgentHandle {
    const h = this.#all.get(id);
    if (!h) throw new TroupeError('AGENT_NOT_FOUND', `No agent with id ${id}`);
    return h;
  }

  /** Resolve an id, or a name that is unique among `candidates` (all agents by default). */
  resolve(ref: string, candidates: Iterable<AgentHandle> = this.#all.values()): AgentHandle {
    const byId = this.#all.get(ref);
    if (byId) return byId;
    const named = [...candidates].filter((h) => h.name === ref);
    if (named.length === 1) return named[0]!;
    if (named.length > 1) {
      throw new TroupeError('AGENT_NOT_FOUND', `"${ref}" names ${named.length} agents: use an id (${named.map((h) => h.id).join(', ')})`);
    }
    throw new TroupeError('AGENT_NOT_FOUND', `No agent with id or name "${ref}"`);
  }

  status(h: AgentHandle): AgentStatus {
    return h.live ? statusOf(h.live.getSnapshot()) : this.#deps.recorded(h.id).status;
  }

  waitKind(h: AgentHandle): WaitKind | null {
    return this.statusAndWaitKind(h).waitKind;
  }

  /** Both at once, for a view: a dormant agent's coordinator record is looked up once, not twice. A live agent's wait kind only while it waits. */
  statusAndWaitKind(h: AgentHandle): { readonly status: AgentStatus; readonly waitKind: WaitKind | null } {
    if (!h.live) return this.#deps.recorded(h.id);
    const snap = h.live.getSnapshot();
    const status = statusOf(snap);
    return { status, waitKind: status === 'waiting' ? snap.context.waitKind : null };
  }

  /** The lifecycle state now: the actor's context, or the dormant state. */
  lifecycle(h: AgentHandle): AgentLifecycleState {
    return h.live ? h.live.getSnapshot().context : h.dormant!;
  }

  /** The stop this agent will make after its current turn, if one was requested. */
  stopRequested(h: AgentHandle): boolean {
    return (h.live?.getSnapshot().context.stopRequested ?? null) !== null;
  }

  /** The machine context of an awake agent (the cycle reads it before every turn). */
  context(id: string): AgentContext {
    return this.materialize(this.get(id)).getSnapshot().context;
  }

  /**
   * Add an agent. A new one (no `restore`) starts running at once; a restored one is dormant unless
   * it was running. Its actor exists before anyone hears of the agent: a listener that reads it
   * (get, list) must find this one, not start a second.
   */
  add(row: AgentRow, restore: boolean): AgentHandle {
    const { logger: rootLogger, runId } = this.#deps;
    // One lifecycle object serves as both the recorded and the dormant state (never mutated in place).
    const state = lifecycleOf(row);
    const h = new Handle(row, runId, state, rootLogger);
    this.#all.set(row.id, h);
    if (restore && isDormantStatus(row.status)) {
      h.dormant = state;
      this.#arm(h, row.status);
    } else {
      this.#start(h, restore ? row.status : 'running', restore ? lifecycleOf(row) : undefined);
    }
    return h;
  }

  /** The agent's actor, created from its dormant state if it has none. */
  materialize(h: AgentHandle): Actor<AgentLogic> {
    if (h.live) return h.live;
    const { status } = this.#deps.recorded(h.id);
    return this.#start(h, status, h.dormant ?? undefined);
  }

  /**
   * Replace the agent's actor with a new one booting in `status` from `state` (an actor that
   * errored, an agent whose respawn failed: they restart as crashed, through their machine).
   */
  restart(h: AgentHandle, status: AgentStatus, state: AgentLifecycleState): void {
    if (this.#stopped) return;
    const old = h.live;
    h.live = null;
    old?.stop();
    this.#start(h, status, state);
  }

  /**
   * The agent's actor, ready for an event: woken first if dormant; null once the host stopped or
   * if the actor is in a final state (it would ignore the event, and XState warn: a message to an
   * agent that ended changes nothing).
   */
  awake(h: AgentHandle): Actor<AgentLogic> | null {
    if (this.#stopped) return null;
    const actor = this.materialize(h);
    return actor.getSnapshot().status === 'active' ? actor : null;
  }

  /** Deliver an event, waking a dormant agent first (see `awake`). */
  send(h: AgentHandle, event: AgentEvent): void {
    this.awake(h)?.send(event);
  }

  /**
   * Put a parked or finished agent to sleep: its actor stops, its lifecycle state is kept, and a
   * wait on agents gets its deadline in the run's idle timer. No-op if it is awake for a reason.
   */
  dehydrate(h: AgentHandle): void {
    const actor = h.live;
    if (!actor) return;
    const snap = actor.getSnapshot();
    if (snap.status !== 'active') return;
    const status = statusOf(snap);
    if (!isDormantStatus(status) || snap.context.stopRequested !== null) return;
    h.dormant = lifecycleOf(snap.context);
    // Equal to what was recorded, and it frees the stopped actor's context.
    h.applied = h.dormant;
    h.live = null;
    actor.stop();
    this.#arm(h, status);
  }

  /** A settled call's cost on its agent's handle (what its views show as spent, by purpose). */
  charge(agentId: string, purpose: UsagePurpose, usd: number): void {
    const h = this.#all.get(agentId);
    if (!h) return;
    h.spentUsd += usd;
    h.spentByPurpose[purpose] = (h.spentByPurpose[purpose] ?? 0) + usd;
  }

  /** Stop every actor and the idle timer (shutdown). */
  stopAll(): void {
    this.#stopped = true;
    this.#deps.timers.close();
    for (const h of this.#all.values()) h.live?.stop();
  }

  #arm(h: AgentHandle, status: AgentStatus): void {
    const deadline = idleDeadline(status, h.dormant!, this.#deps.policy.idleResumeMs);
    if (deadline !== null) this.#deps.timers.set(h.id, deadline);
  }

  #start(h: AgentHandle, status: AgentStatus, state: AgentLifecycleState | undefined): Actor<AgentLogic> {
    const { clock, inspect, policy, logic } = this.#deps;
    this.#deps.timers.delete(h.id);
    const deadline = state ? idleDeadline(status, state, policy.idleResumeMs) : null;
    const maxTurns = this.#deps.maxTurns?.(h) ?? null;
    const input: AgentInput = {
      id: h.id,
      name: h.name,
      parentId: h.parentId,
      policy: maxTurns === null ? policy : { ...policy, maxTurns },
      ...(state
        ? {
            status,
            state,
            ...(deadline === null ? {} : { idleTimerMs: Math.max(0, deadline - clock.now()) }),
          }
        : {}),
    };
    const actor = createActor(logic, { id: `agent:${h.id}`, systemId: `agent:${h.id}`, input, clock, ...(inspect ? { inspect } : {}) });
    h.live = actor;
    if (state) h.applied = state;
    h.dormant = null;
    actor.subscribe({
      next: (snap) => this.#deps.onSnapshot(h, snap),
      error: (err) => this.#deps.onActorError(h, err),
    });
    actor.start();
    return actor;
  }
}
