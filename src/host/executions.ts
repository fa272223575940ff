/**
 * Async executions (seeds/003–004): a tool result that says `execution <uuid> running|queued`
 * links the execution to the agent; when the host reports its end, the agent is re-invoked once
 * with `execution <id> completed|failed: <result>` added to its next call only. Continued-at is
 * written before the agent runs, so a continuation can never loop. With approvals on, it happens
 * only inside the agent's approval window — and when a window opens, what finished outside it
 * continues then.
 * @module
 */
import { continuationNote, extractExecutionIds } from '../autonomy/executions.js';
import { ConfigError, TroupeError } from '../errors.js';
import type { ExecutionRow } from '../store/types.js';
import type { AgentHandle, Runtime } from './runtime.js';

export class AsyncExecutions {
  readonly #rt: Runtime;
  /** Running executions per agent: what an agent parked on its own work waits for (kept in memory by the owner). */
  readonly #running = new Map<string, Set<string>>();

  constructor(rt: Runtime) {
    this.#rt = rt;
  }

  /** Executions of this agent still running. */
  runningFor(agentId: string): string[] {
    return [...(this.#running.get(agentId) ?? [])];
  }

  /** Whether any execution of this run is still running (a run with one is never quiescent). */
  get anyRunning(): boolean {
    return this.#running.size > 0;
  }

  /** After a restart: learn which executions of this run's agents are still running. */
  restore(): void {
    for (const row of this.#rt.store.runningExecutions()) if (this.#rt.find(row.agentId)) this.#track(row.agentId, row.id);
  }

  #track(agentId: string, id: string): void {
    let set = this.#running.get(agentId);
    if (!set) this.#running.set(agentId, (set = new Set()));
    set.add(id);
  }

  #untrack(agentId: string, id: string): void {
    const set = this.#running.get(agentId);
    if (!set?.delete(id)) return;
    if (set.size === 0) this.#running.delete(agentId);
  }

  /** Link the executions a tool result announces (`execution <uuid> running|queued`) to the agent. */
  link(agent: AgentHandle, text: string): void {
    const ids = extractExecutionIds(text);
    if (ids.length === 0) return;
    const rt = this.#rt;
    const at = rt.clock.now();
    const linked = rt.commit(() => ids.filter((id) => rt.store.linkExecution({ id, agentId: agent.id, linkedAt: at })));
    for (const id of linked) this.#track(agent.id, id);
    agent.logger.info({ executions: ids }, 'linked async executions');
  }

  /**
   * The host reports an execution's end; its agent is re-invoked with the result. False if it had
   * already finished; EXECUTION_NOT_FOUND if no agent of this run linked it (nothing is written).
   */
  finish(id: string, end: { status: 'completed' | 'failed'; result: string }): boolean {
    const rt = this.#rt;
    rt.assertUsable();
    if (end?.status !== 'completed' && end?.status !== 'failed') {
      throw new ConfigError(`Expected status "completed" or "failed", got ${JSON.stringify(end?.status)}`);
    }
    const known = typeof id === 'string' ? rt.store.getExecution(id) : undefined;
    if (!known || !rt.find(known.agentId)) {
      throw new TroupeError('EXECUTION_NOT_FOUND', `No execution ${JSON.stringify(id)} was linked to an agent of run ${rt.runId}`);
    }
    const done = rt.commit(() => rt.store.finishExecution(id, { status: end.status, result: String(end.result ?? ''), at: rt.clock.now() }));
    if (!done) return false;
    this.#untrack(known.agentId, id);
    const continued = this.#continue(rt.store.getExecution(id)!);
    // Its agent may not be woken (stopped, outside its window): the run may now have nothing left to wait for.
    if (!continued) rt.checkQuiescence();
    return true;
  }

  /** Continue every finished execution not continued yet (after a restart). Returns how many. */
  continueAll(): number {
    let n = 0;
    for (const row of this.#rt.store.uncontinuedExecutions()) if (this.#continue(row)) n += 1;
    return n;
  }

  /** An approval opened the agent's window: continue its executions that finished outside it. */
  continueFor(agentId: string): void {
    if (!this.#rt.usable || !this.#rt.find(agentId)) return;
    for (const row of this.#rt.store.uncontinuedExecutions()) if (row.agentId === agentId) this.#continue(row);
  }

  #continue(row: ExecutionRow): boolean {
    const rt = this.#rt;
    const h = rt.find(row.agentId);
    if (!h || row.finishedAt === null || row.status === 'running') return false;
    if (rt.options.approvals && !rt.options.approvals.windowOpen(h.id)) return false;
    const status = h.status;
    const wakeable =
      status === 'running' || status === 'waiting' || status === 'stalled' || ((status === 'completed' || status === 'stopped') && rt.options.interactive);
    if (!wakeable) return false;
    // Marked before the agent runs: a continuation can never loop.
    if (!rt.commit(() => rt.store.markExecutionContinued(row.id, rt.clock.now()))) return false;
    h.notes.push(continuationNote(row.id, row.status, row.result ?? ''));
    h.logger.info({ execution: row.id, status: row.status }, 're-invoking the agent with a finished execution');
    if (status !== 'running') h.actor.send({ type: 'agent.message', from: 'system', user: false });
    return true;
  }
}
