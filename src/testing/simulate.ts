/**
 * `simulateTeam`: a team driven by per-agent behaviours (what the model does on each call) on a
 * simulated clock, with a trace of everything the invariant checkers need — every model call
 * with the budget flags when it started, every agent transition with its wake reason and counters,
 * every acknowledged user message, every restart. `restart()` shuts the coordinator down as a
 * crash would leave it, reopens the store and resumes the run.
 * @module
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SimulatedClock, type InspectionEvent } from 'xstate';
import type { AgentStatus } from '../../machines/types.js';
import { createCoordinator, type Coordinator } from '../host/createCoordinator.js';
import type { BudgetOptions, Limits, ReviewOptions } from '../host/options.js';
import { resumeCoordinator } from '../host/resumeCoordinator.js';
import { ProviderError, type ErrorCode } from '../errors.js';
import type { Model, ModelRequest, ModelTurn, UsagePurpose } from '../model/types.js';
import { memoryStore } from '../store/memoryStore.js';
import { openStore } from '../store/sqliteStore.js';
import type { Store } from '../store/types.js';
import type { Tool } from '../tools/defineTool.js';
import { sleep } from '../clock.js';

/** What the model does on one call of one agent. */
export type Behaviour = (
  | { kind: 'tool'; name: string; args: Record<string, unknown> | string }
  | { kind: 'tools'; calls: { name: string; args: Record<string, unknown> | string }[] }
  | { kind: 'text'; text: string }
  | { kind: 'refusal'; text: string }
  | { kind: 'error'; code: Extract<ErrorCode, `PROVIDER_${string}`>; status?: number; retryAfterMs?: number }
  /** The model adapter throws something that is not a ProviderError (a bug): the agent crashes. */
  | { kind: 'crash'; message: string }
) & {
  /** Answer after this long on the simulated clock (a stop or a message may cut it short). */
  delayMs?: number;
  /** What the call costs (USD); the budget reserves it exactly unless `reserveUsd` says otherwise. */
  costUsd?: number;
  reserveUsd?: number;
};

export interface SimulateOptions {
  /**
   * Behaviours per agent name, used in order; when an agent's list runs out, `fallback` decides.
   * Agents that share a name share its list; a call that is priced first (a budget limit is set)
   * takes its behaviour then, so the behaviour it was priced by is the one it gets.
   */
  behaviours: Record<string, Behaviour[]>;
  /** Default: a child reports with agent_finish, the root calls finish. */
  fallback?: (agent: { name: string; parentId: string | null }) => Behaviour;
  tools?: Tool[];
  limits?: Partial<Limits>;
  budget?: BudgetOptions;
  interactive?: boolean;
  idleResumeMs?: number;
  concurrency?: { model?: number; tools?: number };
  /** Background review; a reviewer's calls are answered from the behaviours (or fallback) of `<name>:review`. */
  review?: ReviewOptions;
  /** `memory` (default, fast) or `sqlite` (a real file in a temp directory, reopened on restart). */
  store?: 'memory' | 'sqlite';
  clock?: SimulatedClock;
}

export interface CallRecord {
  seq: number;
  boot: number;
  agentId: string;
  agentName: string;
  parentId: string | null;
  at: number;
  budgetStopped: boolean;
  reserveStopped: boolean;
  /** The budget when the call started: spent, reserved (this call's reservation included) and the limit then. */
  spentUsd: number;
  reservedUsd: number;
  limitUsd: number | null;
  /**
   * The trace `seq` at which this call's turn began — the agent entered `running` or finished its
   * previous turn — and its mailbox was drained, before its first call. Null for a review (not a turn).
   */
  turnSeq: number | null;
  /** A main call of a turn that already made one (a retry after a provider error, compaction or image strip). */
  retry: boolean;
  /**
   * The reservation this call settles against (USD): for a main call the estimate its turn was
   * admitted with (every retry of the turn reuses it), for a review the estimate it was admitted
   * with, for a compaction 0 (never reserved). What a call costs beyond it is settlement error.
   */
  reservationUsd: number;
  /** `main`, or what troupe asked on its own behalf (`compaction`, `review`). */
  purpose: UsagePurpose;
  behaviour: Behaviour;
}

export interface TransitionRecord {
  seq: number;
  boot: number;
  agentId: string;
  from: AgentStatus | null;
  to: AgentStatus;
  /** What a `waiting` agent waits on (`agents` or `user`); null otherwise. */
  waitKind: string | null;
  wake: string | null;
  recoveries: number;
  idleResumes: number;
  at: number;
}

export interface AckRecord {
  seq: number;
  boot: number;
  messageId: string;
  to: string;
  content: string;
  at: number;
}

export interface RestartRecord {
  seq: number;
  /** The boot that starts with this restart. */
  boot: number;
  at: number;
  /** Each agent's status when the previous process stopped. */
  statuses: Record<string, AgentStatus>;
}

export interface SimulationTrace {
  calls: CallRecord[];
  transitions: TransitionRecord[];
  acks: AckRecord[];
  restarts: RestartRecord[];
}

export interface Simulation extends AsyncDisposable {
  readonly clock: SimulatedClock;
  readonly store: Store;
  readonly trace: SimulationTrace;
  readonly options: SimulateOptions;
  /** The coordinator of the current boot (a new one after each restart). */
  readonly coordinator: Coordinator;
  readonly rootId: string | null;
  start(task?: string): Promise<string>;
  /** Let every turn that can run without time passing run. */
  settle(): Promise<void>;
  /** Move the simulated clock, settling between steps. */
  advance(ms: number, stepMs?: number): Promise<void>;
  /** A user message; recorded as acknowledged when `send` resolves. Rejections are returned, not thrown. */
  send(to: string, content: string): Promise<boolean>;
  /** Shut the coordinator down where it stands, reopen the store and resume the run. */
  restart(): Promise<void>;
  close(): Promise<void>;
}

const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

const defaultFallback = (agent: { parentId: string | null }): Behaviour =>
  agent.parentId === null ? { kind: 'tool', name: 'finish', args: { summary: 'done' } } : { kind: 'tool', name: 'agent_finish', args: { summary: 'done' } };

/**
 * @example
 * await using sim = await simulateTeam({ behaviours: { lead: [{ kind: 'tool', name: 'finish', args: { summary: 'ok' } }] } });
 * await sim.start();
 * await sim.settle();
 * assertInvariants(sim);
 */
export async function simulateTeam(options: SimulateOptions): Promise<Simulation> {
  const clock = options.clock ?? new SimulatedClock();
  const fallback = options.fallback ?? defaultFallback;
  const queues = new Map(Object.entries(options.behaviours).map(([name, list]) => [name, [...list]]));
  const trace: SimulationTrace = { calls: [], transitions: [], acks: [], restarts: [] };
  let seq = 0;
  let boot = 1;
  const dir = options.store === 'sqlite' ? mkdtempSync(join(tmpdir(), 'troupe-sim-')) : null;
  const path = dir ? join(dir, 'sim.db') : null;
  let store: Store = path ? openStore({ path }) : memoryStore();
  let coordinator: Coordinator;
  let rootId: string | null = null;
  const lastStatus = new Map<string, AgentStatus>();
  const lastCounters = new Map<string, string>();
  /** Per agent: its finished-turn count as last seen, and the seq at which its current turn began. */
  const turnsSeen = new Map<string, number>();
  const turnStart = new Map<string, number>();
  /** Per requesting agent id: the last estimate the ledger asked for (what it reserved, if it admitted the call). */
  const estimates = new Map<string, number>();

  /**
   * Behaviours an agent claimed when its call was estimated: the call that was priced is the call
   * that gets them, even if another agent with the same name calls in between.
   */
  const claimed = new Map<string, Behaviour[]>();
  const next = (request: ModelRequest): Behaviour => {
    // A compaction serves the turn but is not the call its estimate priced: it takes the next
    // unclaimed behaviour, and the retry after it still gets the priced one.
    const mine = request.purpose === 'compaction' ? undefined : claimed.get(request.agent.id);
    const b = mine && mine.length > 0 ? mine.shift() : queues.get(request.agent.name)?.shift();
    return b ?? fallback({ name: request.agent.name, parentId: request.agent.parentId });
  };
  /** The behaviour that will answer this request (errors before it are retries of the same call), claimed for this agent. */
  const peek = (request: ModelRequest): Behaviour => {
    let mine = claimed.get(request.agent.id);
    if (!mine || mine.length === 0) {
      const queue = queues.get(request.agent.name) ?? [];
      const answering = queue.findIndex((b) => b.kind !== 'error');
      mine = queue.splice(0, answering === -1 ? queue.length : answering + 1);
      claimed.set(request.agent.id, mine);
    }
    return mine.find((b) => b.kind !== 'error') ?? fallback({ name: request.agent.name, parentId: request.agent.parentId });
  };
  let callIds = 0;
  const model: Model = {
    name: 'simulated',
    estimateCostUsd: (request) => {
      const b = peek(request);
      const usd = b.reserveUsd ?? b.costUsd ?? 0;
      estimates.set(request.agent.id, usd);
      return usd;
    },
    async complete(request, options): Promise<ModelTurn> {
      const behaviour = next(request);
      const budget = coordinator.budget();
      const purpose = request.purpose ?? 'main';
      const turnSeq = purpose === 'review' ? null : (turnStart.get(request.agent.id) ?? 0);
      const retry =
        purpose === 'main' && trace.calls.some((c) => c.agentId === request.agent.id && c.boot === boot && c.purpose === 'main' && c.turnSeq === turnSeq);
      // Only a limit makes the ledger reserve (it estimates nothing without one); the estimate is clamped at 0 there too.
      const reservationUsd = purpose === 'compaction' || budget.limitUsd === null ? 0 : Math.max(0, estimates.get(request.agent.id) ?? 0);
      trace.calls.push({
        seq: ++seq,
        boot,
        agentId: request.agent.id,
        agentName: request.agent.name,
        parentId: request.agent.parentId,
        at: clock.now(),
        budgetStopped: budget.budgetStopped,
        reserveStopped: budget.reserveStopped,
        spentUsd: budget.spentUsd,
        reservedUsd: budget.reservedUsd,
        limitUsd: budget.limitUsd,
        turnSeq,
        retry,
        reservationUsd,
        purpose,
        behaviour,
      });
      if (behaviour.delayMs) await sleep(clock, behaviour.delayMs, options.signal);
      const usage = { costUsd: behaviour.costUsd ?? 0 };
      switch (behaviour.kind) {
        case 'crash':
          throw new TypeError(behaviour.message);
        case 'error':
          throw new ProviderError(behaviour.code, `simulated ${behaviour.code}`, {
            ...(behaviour.status === undefined ? {} : { status: behaviour.status }),
            ...(behaviour.retryAfterMs === undefined ? {} : { retryAfterMs: behaviour.retryAfterMs }),
          });
        case 'text':
          return { text: behaviour.text, toolCalls: [], usage };
        case 'refusal':
          return { text: null, toolCalls: [], refusal: behaviour.text, usage };
        default: {
          const calls = behaviour.kind === 'tool' ? [{ name: behaviour.name, args: behaviour.args }] : behaviour.calls;
          return {
            text: null,
            toolCalls: calls.map((c) => ({ id: `call_${++callIds}`, name: c.name, arguments: typeof c.args === 'string' ? c.args : JSON.stringify(c.args) })),
            usage,
          };
        }
      }
    },
  };

  /** Agent transitions, with the wake reason and counters, straight from the actors. */
  const inspect = (event: InspectionEvent) => {
    if (event.type !== '@xstate.snapshot') return;
    const id = (event.actorRef as { id?: string }).id ?? '';
    if (!id.startsWith('agent:')) return;
    const snapshot = event.snapshot as {
      value?: unknown;
      context?: { wake?: string | null; recoveries?: number; idleResumes?: number; turns?: number; waitKind?: string | null };
    };
    const value = snapshot.value;
    const to = (typeof value === 'string' ? value : 'waiting') as AgentStatus;
    const agentId = id.slice('agent:'.length);
    const ctx = snapshot.context ?? {};
    const counters = `${ctx.recoveries ?? 0}/${ctx.idleResumes ?? 0}`;
    const from = lastStatus.get(agentId) ?? null;
    // A turn begins when the agent enters running or finishes a turn (every turn.done counts one);
    // the cycle drains the mailbox right after either (within a microtask), before the turn's first call.
    const turns = ctx.turns ?? 0;
    if (to === 'running' && (from !== 'running' || turnsSeen.get(agentId) !== turns)) turnStart.set(agentId, ++seq);
    turnsSeen.set(agentId, turns);
    if (from === to && lastCounters.get(agentId) === counters) return;
    lastStatus.set(agentId, to);
    lastCounters.set(agentId, counters);
    trace.transitions.push({
      seq: ++seq,
      boot,
      agentId,
      from,
      to,
      waitKind: to === 'waiting' ? (ctx.waitKind ?? null) : null,
      wake: ctx.wake ?? null,
      recoveries: ctx.recoveries ?? 0,
      idleResumes: ctx.idleResumes ?? 0,
      at: clock.now(),
    });
  };

  const common = () => ({
    model,
    clock,
    inspect,
    ...(options.tools ? { tools: options.tools } : {}),
    ...(options.limits ? { limits: options.limits } : {}),
    ...(options.budget ? { budget: options.budget } : {}),
    ...(options.interactive === undefined ? {} : { interactive: options.interactive }),
    ...(options.idleResumeMs === undefined ? {} : { idleResumeMs: options.idleResumeMs }),
    ...(options.concurrency ? { concurrency: options.concurrency } : {}),
    ...(options.review ? { review: options.review } : {}),
  });
  coordinator = createCoordinator({ ...common(), store });

  const settle = async () => {
    // Until nothing moves for a few ticks: every turn that needs no time has run.
    let quiet = 0;
    for (let i = 0; i < 500 && quiet < 3; i++) {
      const before = seq;
      await flush();
      quiet = seq === before ? quiet + 1 : 0;
    }
  };

  const sim: Simulation = {
    clock,
    trace,
    options,
    get store() {
      return store;
    },
    get coordinator() {
      return coordinator;
    },
    get rootId() {
      return rootId;
    },
    async start(task = 'Simulated task.') {
      rootId = await coordinator.start({ name: Object.keys(options.behaviours)[0] ?? 'lead', task });
      return rootId;
    },
    settle,
    async advance(ms, stepMs = 1_000) {
      for (let t = 0; t < ms; t += stepMs) {
        await settle();
        clock.increment(Math.min(stepMs, ms - t));
        await settle();
      }
    },
    async send(to, content) {
      try {
        const row = await coordinator.send(to, { content });
        trace.acks.push({ seq: ++seq, boot, messageId: row.id, to: row.to, content, at: clock.now() });
        return true;
      } catch {
        return false;
      }
    },
    async restart() {
      const statuses: Record<string, AgentStatus> = {};
      for (const agent of coordinator.list()) statuses[agent.id] = agent.status;
      await coordinator.shutdown();
      if (path) {
        (store as { close(): void }).close();
        store = openStore({ path });
      }
      boot += 1;
      trace.restarts.push({ seq: ++seq, boot, at: clock.now(), statuses });
      // Respawned agents show up as transitions from the status they had when the process stopped.
      lastStatus.clear();
      lastCounters.clear();
      turnsSeen.clear();
      for (const [id, status] of Object.entries(statuses)) lastStatus.set(id, status);
      coordinator = await resumeCoordinator({ ...common(), store });
    },
    async close() {
      await coordinator.shutdown();
      if (path) (store as { close(): void }).close();
      if (dir) rmSync(dir, { recursive: true, force: true });
    },
    [Symbol.asyncDispose]: () => sim.close(),
  };
  return sim;
}
