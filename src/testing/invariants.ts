/**
 * The lifecycle invariants troupe promises, as checkers you can run on a `simulateTeam` run (after
 * every step of a property test, or once at the end). Each returns the violations it found, each
 * a sentence that says what went wrong and where; `assertInvariants` throws if any is found.
 * @module
 */
import { DEFAULT_IDLE_LIMIT, DEFAULT_RECOVERY_LIMIT, isActive, isTerminal } from '../../machines/types.js';
import { DEFAULT_LIMITS } from '../host/options.js';
import { SUMMARY_HEADER } from '../turn/compaction.js';
import type { AgentRow, MessageRow } from '../store/types.js';
import type { Simulation, TransitionRecord } from './simulate.js';

export type Checker = (sim: Simulation) => string[];

/** Message types that close a child's stint: its report, or the notice that no report is coming. */
const STINT_ITEMS = new Set(['completion', 'completed', 'stopped', 'failed', 'crashed']);

function rows(sim: Simulation): { agents: AgentRow[]; messages: MessageRow[]; name: (id: string) => string } {
  const runId = sim.coordinator.runId;
  const agents = sim.store.listAgents(runId);
  const names = new Map(agents.map((a) => [a.id, a.name]));
  return { agents, messages: sim.store.listMessages(runId), name: (id) => `${names.get(id) ?? '?'} (${id})` };
}

/** Each child stint yields exactly one completion report or terminal notice to its parent. */
export const oneReportPerStint: Checker = (sim) => {
  const { agents, messages, name } = rows(sim);
  const out: string[] = [];
  for (const a of agents) {
    if (a.parentId === null) continue;
    const items = messages.filter((m) => m.from === a.id && m.to === a.parentId && STINT_ITEMS.has(m.type));
    const perKey = new Map<string, number>();
    for (const m of items) perKey.set(m.noticeKey ?? '(none)', (perKey.get(m.noticeKey ?? '(none)') ?? 0) + 1);
    for (const [key, count] of perKey) if (count > 1) out.push(`${name(a.id)} told its parent ${count} times for stint key ${key}`);
    if (items.length > a.stint + 1) out.push(`${name(a.id)} sent ${items.length} stint-closing items over ${a.stint + 1} stint(s)`);
    if (isTerminal(a.status) && !items.some((m) => m.noticeKey === `notice:${a.id}:${a.stint}`)) {
      out.push(`${name(a.id)} is ${a.status} but its parent was never told how stint ${a.stint} ended`);
    }
  }
  return out;
};

/** A stall notice never takes the stint's claim: the child still owes (and later sends) its real report. */
export const stallNoticesKeepTheClaim: Checker = (sim) => {
  const { agents, messages, name } = rows(sim);
  const out: string[] = [];
  for (const m of messages) {
    if (m.type === 'stalled' && m.noticeKey !== null && /^notice:[^:]+:\d+$/.test(m.noticeKey)) {
      out.push(`the stall notice from ${name(m.from)} used the stint claim ${m.noticeKey}`);
    }
  }
  for (const a of agents) {
    if (a.parentId === null || !isTerminal(a.status)) continue;
    const stalled = messages.some((m) => m.from === a.id && m.type === 'stalled');
    const closed = messages.some((m) => m.from === a.id && m.noticeKey === `notice:${a.id}:${a.stint}`);
    if (stalled && !closed) out.push(`${name(a.id)} stalled, then ended ${a.status}, but the stall notice stood in for its report`);
  }
  return out;
};

/** No model call starts after the budget stopped. */
export const noCallAfterBudgetStop: Checker = (sim) =>
  sim.trace.calls.filter((c) => c.budgetStopped).map((c) => `${c.agentName} (${c.agentId}) started a model call at ${c.at} ms after the budget stop`);

/** No sub-agent starts a model call after the reserve tripped. */
export const noChildCallAfterReserve: Checker = (sim) =>
  sim.trace.calls
    .filter((c) => c.parentId !== null && c.reserveStopped)
    .map((c) => `sub-agent ${c.agentName} (${c.agentId}) started a model call at ${c.at} ms after the reserve tripped`);

/**
 * Whether nothing but the agents a dead-wait report wakes could move when it came (the run was
 * quiescent): by the trace, no other agent of that boot was running, budget-paused or — in an
 * interactive run — waiting on the user. (Executions and delegations are not in the trace: a
 * report they should have prevented is not caught here.)
 */
function quiescentAt(sim: Simulation, wake: TransitionRecord): boolean {
  const latest = new Map<string, TransitionRecord>();
  for (const t of sim.trace.transitions) if (t.boot === wake.boot && t.seq < wake.seq) latest.set(t.agentId, t);
  for (const t of latest.values()) {
    if (t.to === 'running' && t.wake === 'deadlock' && t.at === wake.at) continue; // woken by the same report
    if (t.to === 'running' || t.to === 'budgetPaused') return false;
    if (t.to === 'waiting' && t.waitKind === 'user' && sim.options.interactive) return false;
  }
  return true;
}

/**
 * After a restart, an agent that was parked (or finished) runs again only when something woke it:
 * a message that was pending at the restart or came after it, its idle timer (time has passed),
 * a budget resume, or a dead-wait report in a run where nothing else could move.
 */
export const parkedStayParkedAfterRestart: Checker = (sim) => {
  const out: string[] = [];
  const { messages, name } = rows(sim);
  for (const restart of sim.trace.restarts) {
    for (const [agentId, status] of Object.entries(restart.statuses)) {
      if (status === 'running') continue;
      const first = sim.trace.transitions.find((t) => t.boot === restart.boot && t.agentId === agentId && t.to === 'running');
      if (!first) continue;
      const mail = messages.some((m) => m.to === agentId && m.createdAt <= first.at && (m.deliveredAt === null || m.deliveredAt >= restart.at));
      const timePassed = first.at > restart.at;
      const resumed = status === 'budgetPaused' && first.wake === 'budgetResumed';
      const deadWait = status === 'waiting' && first.wake === 'deadlock' && quiescentAt(sim, first);
      if (!mail && !timePassed && !resumed && !deadWait) {
        out.push(`${name(agentId)}, ${status} when the process stopped, ran after restart ${restart.boot - 1} with nothing to wake it`);
      }
    }
  }
  return out;
};

/** The recovery (plain-text) and idle auto-resume counters never pass their caps. */
export const countersWithinCaps: Checker = (sim) =>
  sim.trace.transitions
    .filter((t) => t.recoveries > DEFAULT_RECOVERY_LIMIT || t.idleResumes > DEFAULT_IDLE_LIMIT)
    .map((t) => `agent ${t.agentId} reached recoveries ${t.recoveries}/${DEFAULT_RECOVERY_LIMIT}, idle resumes ${t.idleResumes}/${DEFAULT_IDLE_LIMIT}`);

/** A failed or crashed agent runs again only for a user message to it (sent after it went down, or still undelivered then). */
export const userGatedRevival: Checker = (sim) => {
  const out: string[] = [];
  const { messages } = rows(sim);
  for (const t of sim.trace.transitions) {
    if (t.to !== 'running' || (t.from !== 'failed' && t.from !== 'crashed')) continue;
    const downSince = [...sim.trace.transitions].reverse().find((x) => x.agentId === t.agentId && x.seq < t.seq && x.to === t.from)?.at ?? 0;
    const fromUser = messages.some(
      (m) => m.to === t.agentId && m.from === 'user' && (m.createdAt >= downSince || m.deliveredAt === null || m.deliveredAt >= downSince),
    );
    if (!fromUser) out.push(`agent ${t.agentId} went from ${t.from} to running at ${t.at} ms without a user message`);
  }
  return out;
};

/**
 * Every acknowledged message is kept, reaches its recipient's session exactly as often as it is
 * marked delivered (so never twice, and never marked delivered but lost), and is delivered before
 * the recipient's next turn.
 */
export const acknowledgedDeliveredOnce: Checker = (sim) => {
  const out: string[] = [];
  const { messages, name } = rows(sim);
  const byId = new Map(messages.map((m) => [m.id, m]));
  const groups = new Set<string>();
  for (const ack of sim.trace.acks) {
    const m = byId.get(ack.messageId);
    if (!m) {
      out.push(`acknowledged message ${ack.messageId} to ${name(ack.to)} is missing from the store`);
      continue;
    }
    // A turn that began after the acknowledgement drained the mailbox before its first call. Only
    // turns count: a compaction or a retry serves a turn that began earlier.
    const laterTurn = sim.trace.calls.some(
      (c) => c.agentId === ack.to && c.boot === ack.boot && c.purpose === 'main' && c.turnSeq !== null && c.turnSeq > ack.seq,
    );
    if (laterTurn && m.deliveredAt === null) out.push(`message ${ack.messageId} to ${name(ack.to)} was not delivered before its next turn`);
    const key = `${ack.to}\u0000${ack.content}`;
    if (groups.has(key)) continue;
    groups.add(key);
    // User messages enter the session verbatim: count copies per recipient and text.
    const delivered = messages.filter((x) => x.to === ack.to && x.from === 'user' && x.content === ack.content && x.deliveredAt !== null).length;
    const session = sim.store.loadSession(ack.to);
    const copies = session.filter((i) => i.role === 'user' && i.content === ack.content).length;
    // A compaction may have summarised older delivered mail; it can never add copies.
    const compacted = session.some((i) => i.role === 'user' && typeof i.content === 'string' && i.content.includes(SUMMARY_HEADER));
    if (copies > delivered) out.push(`"${ack.content}" reached ${name(ack.to)} ${copies} times but was delivered ${delivered} time(s)`);
    if (copies < delivered && !compacted)
      out.push(`"${ack.content}" is marked delivered to ${name(ack.to)} ${delivered} time(s) but is in its session ${copies} time(s)`);
  }
  return out;
};

/**
 * Spend stays within the limit in force: no call starts unless what is spent and reserved fits
 * under the limit of that moment, and the total ends within the highest limit set — beyond either
 * only by what calls cost over the reservations they settle against. A turn is reserved once, at
 * its admission: its retries (after a provider error, a compaction or an image strip) reuse that
 * reservation, and a compaction is never reserved, so all of its cost is settlement error. (An
 * operator may lower the limit below what is already spent; that stops further calls, it does not
 * undo spending.)
 */
export const spendWithinLimit: Checker = (sim) => {
  const out: string[] = [];
  // A call that throws records no usage; one that answers costs its behaviour's costUsd.
  const error = (c: (typeof sim.trace.calls)[number]) =>
    c.behaviour.kind === 'error' || c.behaviour.kind === 'crash' ? 0 : Math.max(0, (c.behaviour.costUsd ?? 0) - c.reservationUsd);
  let slack = 0;
  let highest = 0;
  for (const c of sim.trace.calls) {
    if (c.limitUsd === null) continue;
    highest = Math.max(highest, c.limitUsd);
    if (c.spentUsd + c.reservedUsd > c.limitUsd + slack + 1e-9) {
      out.push(
        `${c.agentName} started a ${c.purpose} call at ${c.at} ms with $${(c.spentUsd + c.reservedUsd).toFixed(4)} spent and reserved under a $${c.limitUsd} limit`,
      );
    }
    slack += error(c);
  }
  const budget = sim.coordinator.budget();
  if (budget.limitUsd !== null) {
    const cap = Math.max(highest, budget.limitUsd);
    if (budget.spentUsd > cap + slack + 1e-9)
      out.push(`spent $${budget.spentUsd.toFixed(4)}; the highest limit set was $${cap} (settlement errors allow $${slack.toFixed(4)} over)`);
  }
  return out;
};

/** Depth, active children per parent and agents per run never pass the limits. */
export const limitsRespected: Checker = (sim) => {
  const limits = { ...DEFAULT_LIMITS, ...sim.options.limits };
  const { agents, name } = rows(sim);
  const out: string[] = [];
  if (agents.length > limits.maxAgents) out.push(`${agents.length} agents registered; the limit is ${limits.maxAgents}`);
  for (const a of agents) if (a.depth > limits.maxDepth) out.push(`${name(a.id)} is at depth ${a.depth}; the limit is ${limits.maxDepth}`);
  // Replay the transitions: active children per parent at every step.
  const parentOf = new Map(agents.map((a) => [a.id, a.parentId]));
  const active = new Map<string, boolean>();
  for (const t of sim.trace.transitions) {
    active.set(t.agentId, isActive(t.to));
    const parent = parentOf.get(t.agentId);
    if (!parent) continue;
    const siblings = agents.filter((a) => a.parentId === parent && active.get(a.id)).length;
    if (siblings > limits.maxChildren) out.push(`${name(parent)} had ${siblings} active children at ${t.at} ms; the limit is ${limits.maxChildren}`);
  }
  return out;
};

/** Every invariant, by name. */
export const INVARIANTS: Readonly<Record<string, Checker>> = {
  oneReportPerStint,
  stallNoticesKeepTheClaim,
  noCallAfterBudgetStop,
  noChildCallAfterReserve,
  parkedStayParkedAfterRestart,
  countersWithinCaps,
  userGatedRevival,
  acknowledgedDeliveredOnce,
  spendWithinLimit,
  limitsRespected,
};

/** Run every checker; returns `name: violation` lines (empty when all hold). */
export function checkInvariants(sim: Simulation, checkers: Readonly<Record<string, Checker>> = INVARIANTS): string[] {
  return Object.entries(checkers).flatMap(([name, check]) => check(sim).map((v) => `${name}: ${v}`));
}

export class InvariantViolation extends Error {
  constructor(readonly violations: string[]) {
    super(`${violations.length} invariant violation(s):\n- ${violations.join('\n- ')}`);
    this.name = 'InvariantViolation';
  }
}

/** Throw an InvariantViolation listing every violation found. */
export function assertInvariants(sim: Simulation, checkers?: Readonly<Record<string, Checker>>): void {
  const violations = checkInvariants(sim, checkers);
  if (violations.length > 0) throw new InvariantViolation(violations);
}
