/**
 * Async executions (seeds/003–004): a tool result that says `execution <uuid> running|queued`
 * links the execution to the agent; when the host reports its end, the agent is re-invoked once
 * with `execution <id> completed|failed: <result>` added to its next call only. Continued-at is
 * decided before the agent runs (and committed with that decision), so a continuation can never
 * loop. With approvals on, it happens only inside the agent's approval window — and when a window
 * opens, what finished outside it continues then. The owner keeps its run's executions in memory.
 * @module
 */
import type { Logger } from 'pino';
import { continuationNote, extractExecutionIds } from './executionText.js';
import { ConfigError, TroupeError } from '../../errors.js';
import type { WriteOp } from '../../store/port.js';
import type { ExecutionRow } from '../../store/types.js';
import type { AgentHandle } from '../agents/agents.js';

export interface ExecutionsHost {
  readonly runId: string;
  readonly interactive: boolean;
  /** The host runs no turns (holdTurns): a continuation is left to the next host, which runs them. */
  readonly holdTurns: boolean;
  readonly approvals: { windowOpen(agentId: string): boolean } | null;
  now(): number;
  find(id: string): AgentHandle | undefined;
  status(h: AgentHandle): string;
  stage(op: WriteOp): void;
  /** Wake a parked agent for its note (a system message event). */
  wake(h: AgentHandle): void;
  /**
   * The re-entry budget: whether `h` may be woken now (else `retry` runs once it may, or it is
   * being stopped); `live` says meanwhile whether the retry would still wake it.
   */
  selfWake(h: AgentHandle, retry: () => void, live: () => boolean): boolean;
  /** Text without known secrets: a note goes into a model call (sessions.ts). */
  scrub(text: string): string;
  assertUsable(): void;
  /** The run may have nothing left to wait for (an execution ended and woke nobody). */
  checkQuiescence(): void;
}

export class AsyncExecutions {
  readonly #host: ExecutionsHost;
  /** This run's executions, by id. */
  readonly #rows = new Map<string, ExecutionRow>();
  /** How many are still running (a run with one running is never quiescent). */
  #running = 0;

  constructor(host: ExecutionsHost) {
    this.#host = host;
  }

  /** After a restart: the executions of this run's agents. */
  restore(rows: readonly ExecutionRow[]): void {
    for (const row of rows) {
      this.#rows.set(row.id, { ...row });
      if (row.status === 'running') this.#running += 1;
    }
  }

  get(id: string): ExecutionRow | undefined {
    const row = this.#rows.get(id);
    return row && { ...row };
  }

  /** Executions of this agent still running. */
  runningFor(agentId: string): string[] {
    const out: string[] = [];
    for (const row of this.#rows.values()) if (row.agentId === agentId && row.status === 'running') out.push(row.id);
    return out;
  }

  get anyRunning(): boolean {
    return this.#running > 0;
  }

  /** A finished execution left for its agent's approval window: a person opening it continues the agent. */
  get anyAwaitingWindow(): boolean {
    const gate = this.#host.approvals;
    if (!gate) return false;
    for (const row of this.#rows.values()) if (row.finishedAt !== null && row.continuedAt === null && !gate.windowOpen(row.agentId)) return true;
    return false;
  }

  /** Link the executions a tool result announces (`execution <uuid> running|queued`) to the agent. */
  link(agent: { id: string; logger: Logger }, text: string): void {
    const ids = extractExecutionIds(text).filter((id) => !this.#rows.has(id));
    if (ids.length === 0) return;
    const at = this.#host.now();
    for (const id of ids) {
      const row: ExecutionRow = { id, agentId: agent.id, status: 'running', result: null, linkedAt: at, finishedAt: null, continuedAt: null };
      this.#rows.set(id, row);
      this.#running += 1;
      this.#host.stage({ op: 'linkExecution', row: { id, agentId: agent.id, linkedAt: at } });
    }
    agent.logger.info({ executions: ids }, 'linked async executions');
  }

  /**
   * The host reports an execution's end; its agent is re-invoked with the result. False if it had
   * already finished; EXECUTION_NOT_FOUND if no agent of this run linked it (nothing is written).
   */
  finish(id: string, end: { status: 'completed' | 'failed'; result: string }): boolean {
    const host = this.#host;
    host.assertUsable();
    if (end?.status !== 'completed' && end?.status !== 'failed') {
      throw new ConfigError(`Expected status "completed" or "failed", got ${JSON.stringify(end?.status)}`);
    }
    const row = typeof id === 'string' ? this.#rows.get(id) : undefined;
    if (!row) throw new TroupeError('EXECUTION_NOT_FOUND', `No execution ${JSON.stringify(id)} was linked to an agent of run ${host.runId}`);
    if (row.status !== 'running') return false;
    const result = String(end.result ?? '');
    const at = host.now();
    Object.assign(row, { status: end.status, result, finishedAt: at });
    this.#running -= 1;
    host.stage({ op: 'finishExecution', id, end: { status: end.status, result, at } });
    // Its agent may not be woken (stopped, outside its window): the run may now have nothing left to wait for.
    if (!this.#continue(row)) host.checkQuiescence();
    return true;
  }

  /** Continue every finished execution not continued yet (after a restart). Returns how many. */
  continueAll(): number {
    let n = 0;
    for (const row of this.#rows.values()) if (this.#continue(row)) n += 1;
    return n;
  }

  /** An approval opened the agent's window, or the budget resumed it: continue its executions that finished meanwhile. */
  continueFor(agentId: string): void {
    for (const row of this.#rows.values()) if (row.agentId === agentId) this.#continue(row);
  }

  /** The agent this finished execution would continue now, or undefined (see the checks). */
  #target(row: ExecutionRow): { h: AgentHandle; status: string; end: 'completed' | 'failed' } | undefined {
    const host = this.#host;
    if (row.finishedAt === null || row.status === 'running' || row.continuedAt !== null) return undefined;
    // Its note lives in this host's memory until the agent's next call: a host that makes no call
    // would mark it continued and lose it. The next host continues it at its resume.
    if (host.holdTurns) return undefined;
    const h = host.find(row.agentId);
    if (!h) return undefined;
    if (host.approvals && !host.approvals.windowOpen(h.id)) return undefined;
    const status = host.status(h);
    const wakeable =
      status === 'running' || status === 'waiting' || status === 'stalled' || ((status === 'completed' || status === 'stopped') && host.interactive);
    return wakeable ? { h, status, end: row.status } : undefined;
  }

  #continue(row: ExecutionRow): boolean {
    const host = this.#host;
    const target = this.#target(row);
    if (!target) return false;
    const { h, status, end } = target;
    // A parked agent woken by its own execution is a self-wake: asked before anything is marked, so
    // a wake put off (spacing) or refused (budget spent) leaves the execution to continue later —
    // an answer on its way only while it would still continue the agent.
    const retry = () => void (this.#continue(row) || host.checkQuiescence());
    if (status !== 'running' && !host.selfWake(h, retry, () => this.#target(row) !== undefined)) return false;
    // Marked before the agent runs: a continuation can never loop.
    row.continuedAt = host.now();
    host.stage({ op: 'markExecutionContinued', id: row.id, at: row.continuedAt });
    h.notes.push(host.scrub(continuationNote(row.id, end, row.result ?? '')));
    h.logger.info({ execution: row.id, status: end }, 're-invoking the agent with a finished execution');
    if (status !== 'running') host.wake(h);
    return true;
  }
}
