/**
 * What the outside sees of a run: the read model (`registry`), the events subscribers get, the
 * `get`/`list`/`tree` views and the waits on statuses. Everything here is derived from the agents'
 * one source of truth (their machines and the coordinator's records); nothing is stored twice.
 * @module
 */
import type { BreakerChange } from '../../providers/breaker.js';
import type { Logger } from 'pino';
import type { AgentStatus, CompletionReport } from '../../../machines/types.js';
import type { Clock } from '../../clock.js';
import type { ModelDelta, UsagePurpose } from '../../model/types.js';
import type { AgentActivity } from '../../turn/ports.js';
import type { AgentHandle, Agents } from '../agents/agents.js';
import type { DeadWait } from '../deadlock.js';
import type { ApprovalView } from '../async/approvals.js';
import { createRegistry, toTree, type AgentView, type Registry, type TreeNode } from './registry.js';
import { Waiters } from './waiters.js';

/** What `get(id)` returns. */
export interface AgentInfo extends AgentView {
  task: string;
  skills: string[];
  error: { code: string; message: string } | null;
  stopReason: string | null;
  /** `value`: what an agent with an output schema finished with. */
  report: CompletionReport | null;
  pendingMessages: number;
  createdAt: number;
  /** This agent's spend by call purpose (`main`, `compaction`, …), in USD. */
  spentByPurpose: Partial<Record<UsagePurpose, number>>;
}

export type { AgentActivity };

/** Events for views and scripts (`coordinator.subscribe`). */
export type TroupeEvent =
  | { type: 'agent.status'; agentId: string; name: string; from: AgentStatus | null; to: AgentStatus; at: number }
  | { type: 'agent.said'; agentId: string; name: string; text: string; at: number }
  /** A piece of a streamed model answer (streaming providers only; never persisted). */
  | { type: 'agent.delta'; agentId: string; name: string; delta: ModelDelta; at: number }
  /** A background review proposed a reusable note about this agent's work (also a `review.note` event row); `id` is what `troupe notes promote` names. */
  | { type: 'review.note'; id: string; agentId: string; name: string; title: string; content: string; at: number }
  /**
   * The run went quiescent with agents waiting on agents that cannot answer: they are woken at once
   * with the `deadlock` wait outcome (also a `run.deadlock` event row).
   */
  | { type: 'run.deadlock'; waits: DeadWait[]; at: number }
  /**
   * What an agent is doing between status changes (never persisted): a tool call starting, a
   * transient provider error it will retry after a wait, a plain-text nudge. For views only.
   */
  | { type: 'agent.activity'; agentId: string; name: string; activity: AgentActivity; at: number }
  /**
   * The stop policy tripped the sub-agent reserve or stopped the budget; `reason` says why in words
   * (the spend crossed the line, or the next call's estimate would have).
   */
  | { type: 'budget.tripped'; kind: 'reserve' | 'stop'; reason: string; spentUsd: number; limitUsd: number; at: number }
  /**
   * An MCP server failed to start (its tools are missing until it does; it is retried with
   * backoff), connected, or was lost.
   */
  | { type: 'mcp.server'; server: string; state: 'connected' | 'failed' | 'lost'; tools: number; error: string | null; at: number }
  /**
   * The model endpoint's circuit breaker changed state (providers/breaker.ts): `open` (calls park,
   * a probe every cooldown), `halfOpen` (the probe is out), `closed` (calls go again). Shared by
   * every run of the process on that endpoint; also a `provider.breaker` event row.
   */
  | ({ type: 'provider.breaker' } & BreakerChange)
  /**
   * The same tool failed the same way — normalised arguments and error code: its `fingerprint` —
   * for `agents` within the window (`failurePatterns`); each distinct parent got one notice (also a
   * `team.failure_pattern` event row).
   */
  | {
      type: 'team.failure_pattern';
      tool: string;
      fingerprint: string;
      errorClass: string;
      args: string;
      agents: { id: string; name: string }[];
      at: number;
    }
  /** A 429 with `retry-after` paused a model endpoint's quota until `until`: every run sharing it waits (src/providers/quota.ts). */
  | { type: 'provider.quota'; endpoint: string; state: 'paused'; until: number; at: number }
  /** A durable approval was asked, answered, or its approved tool ran (host/async/approvals.ts). */
  | { type: 'approval'; approval: ApprovalView; at: number }
  /** The store failed: the coordinator stopped; resume from the file in a new process. */
  | { type: 'coordinator.failed'; error: { code: string; message: string }; at: number };

/** A snapshot for health checks (`coordinator.health()`). */
export interface CoordinatorHealth {
  /** False once the coordinator failed (a fatal store error) or was shut down. */
  ok: boolean;
  error: { code: string; message: string } | null;
  /** Model calls: `waiting` in the queue, `running` now, at most `concurrency` at once. */
  modelQueue: { waiting: number; running: number; concurrency: number };
  toolQueue: { waiting: number; running: number; concurrency: number };
}

export class Views {
  readonly registry: Registry = createRegistry();
  readonly waiters: Waiters<AgentInfo>;
  readonly #agents: Agents;
  readonly #logger: Logger;
  readonly #pending: (id: string) => number;
  readonly #after: (effect: () => void) => void;
  readonly #listeners = new Set<(event: TroupeEvent) => void>();
  readonly #dirty = new Set<AgentHandle>();
  /** While respawning: views are published together when it ends. */
  #batch: AgentHandle[] | null = null;

  constructor(deps: { agents: Agents; clock: Clock; logger: Logger; pending: (id: string) => number; after: (effect: () => void) => void }) {
    this.#agents = deps.agents;
    this.#after = deps.after;
    this.#logger = deps.logger;
    this.#pending = deps.pending;
    this.waiters = new Waiters(
      deps.clock,
      () => deps.agents.running === 0,
      (id) => this.info(id),
    );
  }

  get hasListeners(): boolean {
    return this.#listeners.size > 0;
  }

  view(h: AgentHandle): AgentView {
    const state = this.#agents.lifecycle(h);
    const { status, waitKind } = this.#agents.statusAndWaitKind(h);
    return {
      id: h.id,
      name: h.name,
      parentId: h.parentId,
      depth: h.depth,
      status,
      waitKind,
      turns: state.turns,
      lastTool: state.lastTool,
      spentUsd: h.spentUsd,
    };
  }

  /** Publish views of many agents in one change (a resume publishes thousands at once). */
  batch(fn: () => void): void {
    this.#batch = [];
    try {
      fn();
    } finally {
      const handles = this.#batch;
      this.#batch = null;
      this.registry.trigger.upsertMany({ views: handles.map((h) => this.view(h)) });
    }
  }

  /**
   * An agent appeared: its view at once (in-process reads must find it), and its first status event
   * once its registration is committed (subscribers are outside: they never hear of an agent a
   * crash could still take back).
   */
  added(h: AgentHandle, at: number): void {
    if (this.#batch) this.#batch.push(h);
    else this.registry.trigger.upsert({ view: this.view(h) });
    const to = this.#agents.status(h);
    this.#after(() => this.emit({ type: 'agent.status', agentId: h.id, name: h.name, from: null, to, at }));
  }

  /**
   * An agent changed. A status change is published at once (with its event, and the waits on it
   * told); counters (turns, last tool, spend) reach the read model once per event-loop turn
   * (setImmediate), for every agent that changed, instead of on every turn: with an instant model
   * or an in-memory store many turns run inside one loop turn (host/commit.ts), and an upsert into
   * the registry store per turn was ~8 % of an in-memory turn. `tree()` flushes first.
   */
  changed(h: AgentHandle, change: { from: AgentStatus; to: AgentStatus; at: number } | null): void {
    if (!change) {
      this.#dirty.add(h);
      if (this.#dirty.size === 1) setImmediate(() => this.flush());
      return;
    }
    this.registry.trigger.upsert({ view: this.view(h) });
    this.emit({ type: 'agent.status', agentId: h.id, name: h.name, from: change.from, to: change.to, at: change.at });
    this.waiters.notify({ id: h.id, name: h.name, status: change.to });
  }

  flush(): void {
    for (const h of this.#dirty) this.registry.trigger.upsert({ view: this.view(h) });
    this.#dirty.clear();
  }

  info(ref: string): AgentInfo {
    const h = this.#agents.resolve(ref);
    const ctx = this.#agents.lifecycle(h);
    return {
      ...this.view(h),
      task: h.task,
      skills: [...h.skills],
      error: ctx.error ? { code: ctx.error.code, message: ctx.error.message } : null,
      stopReason: ctx.stopReason,
      report: ctx.report ? { ...ctx.report } : null,
      pendingMessages: this.#pending(h.id),
      createdAt: h.createdAt,
      spentByPurpose: { ...h.spentByPurpose },
    };
  }

  list(): AgentInfo[] {
    return [...this.#agents.values()].map((h) => this.info(h.id));
  }

  tree(): TreeNode[] {
    this.flush();
    return toTree(this.registry.getSnapshot().context.agents);
  }

  subscribe(listener: (event: TroupeEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  emit(event: TroupeEvent): void {
    for (const listener of this.#listeners) {
      try {
        listener(event);
      } catch (err) {
        this.#logger.error({ err }, 'event listener threw');
      }
    }
  }
}
