/**
 * Every agent transition lands here (DESIGN §12): the coordinator records it (and decides the
 * notices it owes), its writes are staged for the group commit, the read model and subscribers
 * hear of it — and only once the commit is done are other agents woken, so events arrive in causal
 * order and nothing is acted on before it is durable. A parked or finished agent then goes dormant.
 * @module
 */
import type { Actor } from 'xstate';
import type { AgentLifecycleState } from '../../../machines/agentMachine.js';
import { getAgentRecord, type coordinatorMachine } from '../../../machines/coordinatorMachine.js';
import { isReport } from '../../../machines/notices.js';
import { isTerminal, type AgentStatus } from '../../../machines/types.js';
import type { Clock } from '../../clock.js';
import type { WriteOp } from '../../store/port.js';
import type { RunTrace } from '../../trace/tracer.js';
import { lifecycleOf, statusOf, type AgentHandle, type Agents, type AgentSnapshot } from '../agents/agents.js';
import type { Mailboxes } from '../mail/mailbox.js';

export interface LifecycleHost {
  readonly runId: string;
  readonly clock: Clock;
  readonly interactive: boolean;
  readonly coordinator: Actor<typeof coordinatorMachine>;
  readonly agents: Agents;
  readonly mailboxes: Mailboxes;
  /** Stint spans: one per stretch of `running`, and one per change of a dormant agent (no-op without an OpenTelemetry SDK). */
  readonly trace: Pick<RunTrace, 'stintStarted' | 'dormantChanged' | 'stintEnded'>;
  stage(op: WriteOp): void;
  after(effect: () => void): void;
  /** The read model, subscribers and waits learn of a change (once it is committed). */
  published(h: AgentHandle, change: { from: AgentStatus; to: AgentStatus; at: number } | null): void;
  /** Deliver a wake for a message already committed. */
  wakeFor(h: AgentHandle, mail: { from: string; noticeKey: string | null; interrupt: boolean; type: string }): void;
  /** A finished agent's session leaves memory. */
  finished(h: AgentHandle): void;
  checkQuiescence(): void;
  resumeEpoch(): number;
  /** A status change, as it is decided (the allowances hold or return on it). */
  statusChanged(h: AgentHandle, status: AgentStatus): void;
  /** Its idle timer woke a wait on agents: a self-wake of the re-entry budget (async/selfWakes.ts). */
  timerWoke(h: AgentHandle): void;
  /**
   * The budget resumed a parked agent: what finished for it while it was parked (its executions'
   * notes, which a parked agent is not woken for) goes into the call it retries.
   */
  resumedFromBudget(h: AgentHandle): void;
}

export class Lifecycle {
  readonly #host: LifecycleHost;

  constructor(host: LifecycleHost) {
    this.#host = host;
  }

  apply(h: AgentHandle, snap: AgentSnapshot): void {
    const host = this.#host;
    const ctx = snap.context;
    const record = getAgentRecord(host.coordinator.getSnapshot().context, h.id)!;
    const status = statusOf(snap);
    const waitKind = status === 'waiting' ? ctx.waitKind : null;
    const prev = h.applied;
    // Status and wait kind are the coordinator's to see; the counters are the agent machine's own.
    const lifecycleChanged =
      status !== record.status || waitKind !== record.waitKind || ctx.recoveries !== prev.recoveries || ctx.idleResumes !== prev.idleResumes;
    if (!lifecycleChanged && ctx.turns === prev.turns && ctx.lastTool === prev.lastTool && ctx.attempts === prev.attempts && ctx.stintTurns === prev.stintTurns)
      return;
    h.applied = ctx;
    const from = record.status;
    const at = host.clock.now();
    if (!lifecycleChanged) {
      host.stage({
        op: 'updateAgent',
        id: h.id,
        patch: { turns: ctx.turns, stintTurns: ctx.stintTurns, lastTool: ctx.lastTool, attempts: ctx.attempts, updatedAt: at },
      });
      host.after(() => host.published(h, null));
      return;
    }
    if (from !== 'running' && status === 'running') host.trace.stintStarted(h);
    // A dormant agent changing status (a wait timed out into a stall, a stop reached it parked):
    // its change gets a span of its own, so the stall and the notices it owes are recorded.
    else if (from !== 'running' && status !== from) host.trace.dormantChanged(h, from);
    // The coordinator decides the notices this change owes; they are staged with it (coordinator.on('notice')).
    host.coordinator.send({
      type: 'agent.changed',
      id: h.id,
      status,
      waitKind,
      error: ctx.error,
      stopReason: ctx.stopReason,
      report: ctx.report,
      task: h.task,
      at,
    });
    // After the coordinator's decision: its notices are events on this stint (or dormant change) before it ends.
    if (status !== 'running' && status !== from) host.trace.stintEnded(h.id, { status, error: ctx.error, stopReason: ctx.stopReason });
    const claimed = getAgentRecord(host.coordinator.getSnapshot().context, h.id)!;
    host.stage({
      op: 'updateAgent',
      id: h.id,
      patch: { ...lifecycleOf(ctx), status, noticeClaimed: claimed.noticeClaimed, stint: claimed.stint, updatedAt: at },
    });
    if (status !== from) {
      host.statusChanged(h, status);
      host.stage({
        op: 'appendEvent',
        row: { runId: host.runId, agentId: h.id, type: 'agent.status', data: { from, to: status, waitKind, error: ctx.error }, at },
      });
      if (status === 'budgetPaused') this.#resumeIfEpochMoved(h, ctx.budgetEpoch);
      if (status !== 'running') this.#rewakeIfMail(h, status);
      if (from === 'running' && h.notes.length > 0) this.#rewakeForNotes(h, status);
      if (from === 'waiting' && status === 'running' && (ctx.wake === 'timeout' || ctx.wake === 'timer')) host.after(() => host.timerWoke(h));
      // Before its cycle builds the retried call's request: that waits at least for the session's load.
      if (from === 'budgetPaused' && status === 'running') host.resumedFromBudget(h);
    }
    const change = status !== from ? { from, to: status, at } : null;
    host.after(() => host.published(h, change));
    if (status !== 'running') {
      // Parked or finished: no actor until something wakes it (once this change is committed). A
      // finished agent's session leaves memory then too (a review forked from it has its copy).
      host.after(() => {
        host.agents.dehydrate(h);
        if (isTerminal(host.agents.status(h))) host.finished(h);
      });
      host.checkQuiescence();
    }
  }

  /**
   * A parked agent must not sleep on mail that arrived while it was finishing its turn (the
   * message was sent while it was still `running`, so it did not wake it): re-deliver the wake.
   */
  #rewakeIfMail(h: AgentHandle, status: AgentStatus): void {
    const host = this.#host;
    // Only messages wake these states at all (budget resumes and non-interactive ends never do).
    if (status === 'budgetPaused') return;
    if ((status === 'completed' || status === 'stopped') && !host.interactive) return;
    const pending = host.mailboxes.list(h.id);
    if (pending.length === 0) return;
    const userGated = status === 'failed' || status === 'crashed';
    const finished = status === 'completed' || status === 'stopped';
    // A waiting agent is woken by anything but a report a wait for all its children gathers: one
    // message that is not a report wakes every wait; with reports alone, the wake decides.
    const waker = userGated
      ? pending.find((m) => m.from === 'user')
      : finished
        ? pending.find((m) => m.noticeKey === null)
        : (pending.find((m) => !isReport(m)) ?? pending[0]);
    if (waker) host.after(() => host.wakeFor(h, waker));
  }

  /**
   * A finished execution's note reached the agent while its turn was ending (the note was added
   * while it was `running`), and the turn parked it: wake it for the note, which is already marked
   * continued and would otherwise wait for an unrelated wake. A stopped agent is not woken (a
   * budget stop would stop it again, and again).
   */
  #rewakeForNotes(h: AgentHandle, status: AgentStatus): void {
    const host = this.#host;
    const wakeable = status === 'waiting' || status === 'stalled' || (status === 'completed' && host.interactive);
    if (wakeable) host.after(() => host.agents.send(h, { type: 'agent.message', from: 'system', user: false }));
  }

  /** Pause policy: a resume that landed between the park decision and the park is not lost. */
  #resumeIfEpochMoved(h: AgentHandle, parkedEpoch: number): void {
    const host = this.#host;
    const epoch = host.resumeEpoch();
    if (epoch > parkedEpoch) host.after(() => host.agents.send(h, { type: 'budget.resume', epoch }));
  }

  /** After a restart: wake whoever mail or a budget resume would have woken. */
  rewakeRestored(h: AgentHandle, status: AgentStatus, state: AgentLifecycleState): void {
    if (status === 'running') return;
    this.#rewakeIfMail(h, status);
    if (status === 'budgetPaused') this.#resumeIfEpochMoved(h, state.budgetEpoch);
  }
}
