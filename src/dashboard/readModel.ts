/**
 * What the dashboard shows, read from the store port: the team (agents with status, turns, spend,
 * last tool, what a waiting agent waits on and why a failed or stopped one ended, counts by status,
 * the budget), the timeline (one lane per agent: status spans and marks for model calls and their
 * retries, tool calls, messages, notices, budget warnings and trips; the run's hostings, one per
 * process that drove it) and one agent (transcript, spend by purpose, children, mailbox). Plain
 * JSON for the page; every value is derived from rows, nothing is kept here.
 * @module
 */
import { allowanceViews, type AllowanceView } from '../host/views/allowanceViews.js';
import { isActive, type AgentStatus, type SerializedError, type StopReason } from '../../machines/types.js';
import { DEFAULT_RESERVE_FRACTION } from '../host/options.js';
import { TroupeError } from '../errors.js';
import type { SessionItem, UsagePurpose } from '../model/types.js';
import { agentViews, type AgentView } from '../host/views/registry.js';
import type { StorePort } from '../store/port.js';
import { approvalsFromEvents, APPROVAL_EVENT, type ApprovalView } from '../host/async/approvals.js';

/** The reads the dashboard makes: any store's port (SQLite, memory, PostgreSQL's lease-free reads). */
export type StoreReads = Omit<StorePort, 'boot' | 'commit'>;
import { forksOf, originOf, turnPointsOf, type ForkOrigin } from '../fork/fork.js';
import type { AgentRow, EventRow, MessageRow, RunRow } from '../store/types.js';

/** @public The dashboard page (public/app.js) types its agents with it, which knip does not read. */
export interface TeamAgent extends AgentView {
  /** For a waiting agent: `the user`, the names of the children it waits on, or its pending approvals (`approval ap-1`). */
  waitingOn: string | null;
  /** For a waiting agent: the ids of the agents it waits on (its active children); empty otherwise. */
  waitingOnIds: string[];
  /** Why a stopped agent was stopped (null otherwise). */
  stopReason: StopReason | null;
  /** The error a failed or crashed agent ended with (null otherwise). */
  error: SerializedError | null;
}

interface BudgetView {
  spentUsd: number;
  limitUsd: number | null;
  /** The line under which sub-agents' calls must stay (stop policy), in USD; null without a limit. */
  reserveUsd: number | null;
  reserveStopped: boolean;
  budgetStopped: boolean;
  paused: boolean;
  /** Spend against each allowance a spawn gave (its owner's whole subtree). */
  allowances: AllowanceView[];
}

export interface Team {
  run: { id: string; createdAt: number; interactive: boolean; rootId: string | null };
  runs: { id: string; createdAt: number }[];
  agents: TeamAgent[];
  counts: Partial<Record<AgentStatus, number>>;
  budget: BudgetView;
  /** Where this run was forked from (null: it is no fork), and the runs forked from it (fork/fork.ts). */
  origin: ForkOrigin | null;
  forks: { runId: string; origin: ForkOrigin }[];
}

interface Span {
  status: AgentStatus;
  from: number;
  /** null: still in it. */
  to: number | null;
}

type MarkKind = 'model' | 'retry' | 'tool' | 'message' | 'notice' | 'said' | 'warning' | 'error' | 'trip' | 'deadlock';

interface Mark {
  at: number;
  kind: MarkKind;
  label: string;
}

interface Lane {
  agentId: string;
  name: string;
  depth: number;
  spans: Span[];
  marks: Mark[];
}

/**
 * One hosting of the run: a process that drove it, from its first event to its last. A run killed
 * (or stopped) and resumed has several, with a gap between them where nothing hosted it.
 */
interface Hosting {
  /** The store's boot (owner) number of the process; null when the store does not say (one hosting). */
  boot: number | null;
  /** Its first event (the run's creation for the first hosting). */
  from: number;
  /** Its last event (the end of the timeline for the last hosting). */
  to: number;
}

export interface Timeline {
  start: number;
  end: number;
  lanes: Lane[];
  /** Run-wide marks: budget trips and pauses, deadlocks. */
  marks: Mark[];
  /** The run's hostings, oldest first (at least one). */
  hostings: Hosting[];
}

export interface AgentDetail {
  agent: Pick<
    AgentRow,
    'id' | 'name' | 'parentId' | 'depth' | 'task' | 'skills' | 'status' | 'turns' | 'waitKind' | 'stopReason' | 'error' | 'report' | 'lastTool' | 'createdAt'
  >;
  spentByPurpose: Partial<Record<UsagePurpose, number>>;
  transcript: SessionItem[];
  children: { id: string; name: string; status: AgentStatus }[];
  /** Messages to this agent, oldest first (`deliveredAt` null: still in its mailbox). */
  mailbox: Pick<MessageRow, 'id' | 'fromName' | 'type' | 'content' | 'createdAt' | 'deliveredAt' | 'noticeKey'>[];
  /** The agent's committed turns, each with its transcript's length right after it: where the page offers to fork. */
  turnPoints: { turn: number; sessionLength: number }[];
}

/** The run asked for (RUN_NOT_FOUND if there is no such run), else the latest one. */
export async function pickRun(port: StoreReads, runId: string | undefined): Promise<RunRow> {
  if (runId !== undefined && runId !== '') {
    const run = await port.getRun(runId);
    if (!run) throw new TroupeError('RUN_NOT_FOUND', `The database holds no run ${runId}`);
    return run;
  }
  const run = (await port.listRuns()).at(-1);
  if (!run) throw new TroupeError('RUN_NOT_FOUND', 'The database holds no run yet');
  return run;
}

/** The run's reserve fraction, as its `troupe run` saved it (else the default). */
async function reserveFraction(port: StoreReads, runId: string): Promise<number> {
  const saved = (await port.eventsOf(runId, 'cli.run'))[0]?.data.budget as { reserveFraction?: unknown } | undefined;
  return typeof saved?.reserveFraction === 'number' ? saved.reserveFraction : DEFAULT_RESERVE_FRACTION;
}

/** What a waiting agent waits on: its active children (a wait on agents), else the user, its timer, its pending approvals or nothing. */
function waitingOn(agent: AgentRow, children: readonly AgentRow[], approvals: readonly string[]): { text: string | null; ids: string[] } {
  if (agent.status !== 'waiting') return { text: null, ids: [] };
  if (agent.waitKind === 'user') return { text: 'the user', ids: [] };
  if (agent.waitKind === 'timer') return { text: 'its timer', ids: [] };
  const active = children.filter((a) => isActive(a.status));
  if (active.length > 0) return { text: active.map((a) => a.name).join(', '), ids: active.map((a) => a.id) };
  if (approvals.length > 0) return { text: `approval ${approvals.join(', ')}`, ids: [] };
  return { text: agent.waitKind === 'agents' ? 'its agents' : null, ids: [] };
}

/** agentId → the ids of its approvals still waiting for an answer. */
async function pendingApprovals(port: StoreReads, runId: string): Promise<Map<string, string[]>> {
  const pending = new Map<string, string[]>();
  for (const a of approvalsFromEvents(await port.eventsOf(runId, APPROVAL_EVENT), (id) => id)) {
    if (a.state === 'pending') pending.set(a.agentId, [...(pending.get(a.agentId) ?? []), a.id]);
  }
  return pending;
}

export async function readTeam(port: StoreReads, runId?: string): Promise<Team> {
  const run = await pickRun(port, runId);
  const [runs, rows, spend, fraction, approvals, origin, forks] = await Promise.all([
    port.listRuns(),
    port.listAgents(run.id),
    port.spendOf(run.id),
    reserveFraction(port, run.id),
    pendingApprovals(port, run.id),
    originOf(port, run.id),
    forksOf(port, run.id),
  ]);
  const counts: Partial<Record<AgentStatus, number>> = {};
  const childrenOf = new Map<string, AgentRow[]>();
  for (const r of rows) {
    if (r.parentId === null) continue;
    const list = childrenOf.get(r.parentId);
    if (list) list.push(r);
    else childrenOf.set(r.parentId, [r]);
  }
  const agents = agentViews(rows, spend).map((view, i): TeamAgent => {
    counts[view.status] = (counts[view.status] ?? 0) + 1;
    const row = rows[i]!;
    const waits = waitingOn(row, childrenOf.get(row.id) ?? [], approvals.get(row.id) ?? []);
    // Why it ended, for the statuses that say something went short of done (a revived agent's old reason is not shown).
    const ended = view.status === 'stopped' || view.status === 'failed' || view.status === 'crashed';
    return {
      ...view,
      waitingOn: waits.text,
      waitingOnIds: waits.ids,
      stopReason: view.status === 'stopped' ? row.stopReason : null,
      error: ended ? row.error : null,
    };
  });
  const limitUsd = run.budget.limitUsd;
  const spentOf = new Map(agents.map((a) => [a.id, a.spentUsd]));
  return {
    run: { id: run.id, createdAt: run.createdAt, interactive: run.interactive, rootId: run.rootId },
    runs: runs.map((r) => ({ id: r.id, createdAt: r.createdAt })),
    agents,
    counts,
    budget: {
      spentUsd: agents.reduce((sum, a) => sum + a.spentUsd, 0),
      limitUsd,
      reserveUsd: limitUsd === null ? null : limitUsd * fraction,
      reserveStopped: run.budget.reserveStopped,
      budgetStopped: run.budget.budgetStopped,
      paused: run.budget.paused,
      allowances: allowanceViews(rows, (id) => spentOf.get(id) ?? 0),
    },
    origin,
    forks,
  };
}

const usd = (value: number) => `$${value.toFixed(4)}`;
const clip = (text: string, max = 80) => (text.length > max ? `${text.slice(0, max - 1)}…` : text);

/** Run-wide event types and how they read on the timeline. */
const RUN_MARKS: Record<string, { kind: MarkKind; label: (data: Record<string, unknown>) => string }> = {
  'budget.reserveTrip': { kind: 'trip', label: (d) => `reserve tripped at ${usd(Number(d.spentUsd ?? 0))}` },
  'budget.stop': { kind: 'trip', label: (d) => `budget stopped at ${usd(Number(d.spentUsd ?? 0))}` },
  'budget.pause': { kind: 'trip', label: () => 'budget paused' },
  'budget.resume': { kind: 'trip', label: () => 'budget resumed' },
  'team.failure_pattern': {
    kind: 'error',
    label: (d) =>
      clip(
        `tool ${String(d.tool)} fails the same way (${String(d.errorClass)}) for ${((d.agents as { name: string }[] | undefined) ?? []).map((a) => a.name).join(', ')}`,
        160,
      ),
  },
  'run.deadlock': { kind: 'deadlock', label: () => 'deadlock: waits on agents that cannot answer' },
  'provider.quota': { kind: 'trip', label: (d) => `provider said 429: paused for every agent until ${new Date(Number(d.until)).toISOString()}` },
  'provider.breaker': {
    kind: 'trip',
    label: (d) =>
      d.state === 'open'
        ? `provider down (${String(d.failures)} failures in a row): circuit open, calls wait for a probe`
        : d.state === 'halfOpen'
          ? 'provider probed'
          : 'provider answers again: circuit closed',
  },
};

/** `retry 1 in 200 ms after PROVIDER_RATE_LIMITED: …`, `compaction after PROVIDER_CONTEXT_OVERFLOW: …` */
function recoveryLabel(d: Record<string, unknown>): string {
  const what = d.kind === 'retry' ? `retry ${String(d.attempt)} in ${String(d.delayMs)} ms` : d.kind === 'compact' ? 'compaction' : 'images stripped';
  return `${what} after ${String(d.code)}: ${String(d.message)}`;
}

/**
 * The run's hostings from the boots its event rows were written under: consecutive rows of one
 * boot are one hosting, from its first event to its last (other rows do not say which process
 * wrote them, so the gap between two hostings is bounded by events, never guessed).
 */
function hostingsOf(events: readonly EventRow[], start: number, end: number): Hosting[] {
  const boots: { boot: number; first: number; last: number }[] = [];
  for (const e of events) {
    // The memory store does not record it: its run is one hosting.
    if (e.boot === undefined) continue;
    const last = boots.at(-1);
    if (last?.boot === e.boot) last.last = Math.max(last.last, e.at);
    else boots.push({ boot: e.boot, first: e.at, last: e.at });
  }
  if (boots.length === 0) return [{ boot: null, from: start, to: end }];
  return boots.map((b, i) => ({ boot: b.boot, from: i === 0 ? start : b.first, to: i === boots.length - 1 ? end : b.last }));
}

export async function readTimeline(port: StoreReads, runId?: string): Promise<Timeline> {
  const run = await pickRun(port, runId);
  const [agents, events, usage, messages] = await Promise.all([
    port.listAgents(run.id),
    port.listEvents(run.id),
    port.listUsage(run.id),
    port.listMessages(run.id),
  ]);
  const lanes = new Map<string, Lane>(agents.map((a) => [a.id, { agentId: a.id, name: a.name, depth: a.depth, spans: [], marks: [] }]));
  const marks: Mark[] = [];
  let end = run.createdAt;
  const seen = (at: number) => (end = Math.max(end, at));
  const open = (lane: Lane, status: AgentStatus, at: number) => {
    const last = lane.spans.at(-1);
    if (last && last.to === null) last.to = at;
    lane.spans.push({ status, from: at, to: null });
  };
  for (const a of agents) {
    const lane = lanes.get(a.id)!;
    open(lane, 'running', a.createdAt);
    seen(a.updatedAt);
  }
  for (const e of events) {
    seen(e.at);
    const lane = e.agentId === null ? undefined : lanes.get(e.agentId);
    const runMark = RUN_MARKS[e.type];
    if (runMark) {
      marks.push({ at: e.at, kind: runMark.kind, label: runMark.label(e.data) });
      // A trip is on the lane of the agent whose call tripped it, too.
      const by = typeof e.data.agentId === 'string' ? lanes.get(e.data.agentId) : undefined;
      by?.marks.push({ at: e.at, kind: runMark.kind, label: runMark.label(e.data) });
    }
    if (!lane) continue;
    if (e.type === 'agent.status') {
      const to = e.data.to as AgentStatus;
      open(lane, to, e.at);
      const error = e.data.error as { code?: string; message?: string } | null | undefined;
      if (error) lane.marks.push({ at: e.at, kind: 'error', label: clip(`${error.code ?? ''}: ${error.message ?? ''}`) });
    } else if (e.type === 'model.recovery') {
      lane.marks.push({ at: e.at, kind: 'retry', label: clip(recoveryLabel(e.data), 160) });
    } else if (e.type === 'tool.call') {
      lane.marks.push({ at: e.at, kind: 'tool', label: clip(`tool call: ${String(e.data.tool)}`) });
    } else if (e.type === 'budget.warning') {
      lane.marks.push({
        at: e.at,
        kind: 'warning',
        label: `budget ${String(e.data.level)}: ${String(e.data.pct)}% spent (${usd(Number(e.data.spentUsd ?? 0))})`,
      });
    } else if (e.type === 'budget.allowanceReserveTrip' || e.type === 'budget.allowanceStop') {
      // On the owner's lane: its allowance's reserve tripped, or the allowance is spent.
      const what = e.type === 'budget.allowanceStop' ? 'allowance spent' : 'allowance reserve tripped';
      lane.marks.push({ at: e.at, kind: 'trip', label: clip(`${what}: ${String(e.data.reason ?? '')}`, 160) });
    } else if (e.type === 'agent.said') {
      lane.marks.push({ at: e.at, kind: 'said', label: clip(String(e.data.text ?? '')) });
    }
  }
  for (const u of usage) {
    seen(u.at);
    lanes.get(u.agentId)?.marks.push({ at: u.at, kind: 'model', label: `${u.purpose} call: ${u.inputTokens} in / ${u.outputTokens} out, ${usd(u.costUsd)}` });
  }
  for (const m of messages) {
    seen(m.createdAt);
    if (m.noticeKey !== null) lanes.get(m.from)?.marks.push({ at: m.createdAt, kind: 'notice', label: clip(`notice to parent: ${m.content}`) });
    else lanes.get(m.to)?.marks.push({ at: m.createdAt, kind: 'message', label: clip(`from ${m.fromName}: ${m.content}`) });
  }
  // A terminal status ends its lane's last span at the moment it was entered.
  for (const lane of lanes.values()) {
    const last = lane.spans.at(-1);
    if (last && last.to === null && !isActive(last.status)) last.to = last.from;
    lane.marks.sort((x, y) => x.at - y.at);
  }
  return { start: run.createdAt, end, lanes: [...lanes.values()], marks, hostings: hostingsOf(events, run.createdAt, end) };
}

export async function readAgent(port: StoreReads, runId: string | undefined, ref: string): Promise<AgentDetail> {
  const run = await pickRun(port, runId);
  const agents = await port.listAgents(run.id);
  const a = agents.find((x) => x.id === ref || x.name === ref);
  if (!a) throw new TroupeError('AGENT_NOT_FOUND', `No agent "${ref}" in run ${run.id}`);
  const [spend, transcript, messages, turnPoints] = await Promise.all([
    port.spendOf(run.id),
    port.loadSession(a.id),
    port.listMessages(run.id),
    turnPointsOf(port, run.id, a.id),
  ]);
  const spentByPurpose: Partial<Record<UsagePurpose, number>> = {};
  for (const s of spend) if (s.agentId === a.id) spentByPurpose[s.purpose] = (spentByPurpose[s.purpose] ?? 0) + s.costUsd;
  return {
    agent: {
      id: a.id,
      name: a.name,
      parentId: a.parentId,
      depth: a.depth,
      task: a.task,
      skills: a.skills,
      status: a.status,
      turns: a.turns,
      waitKind: a.waitKind,
      stopReason: a.stopReason,
      error: a.error,
      report: a.report,
      lastTool: a.lastTool,
      createdAt: a.createdAt,
    },
    spentByPurpose,
    transcript,
    children: agents.filter((c) => c.parentId === a.id).map((c) => ({ id: c.id, name: c.name, status: c.status })),
    mailbox: messages
      .filter((m) => m.to === a.id)
      .map((m) => ({
        id: m.id,
        fromName: m.fromName,
        type: m.type,
        content: m.content,
        createdAt: m.createdAt,
        deliveredAt: m.deliveredAt,
        noticeKey: m.noticeKey,
      })),
    turnPoints,
  };
}

/** @public The dashboard page (public/app.js) reads it, which knip does not read. A run's approvals as the dashboard shows them: its id, the pending ones (oldest first), then the answered (newest first). */
export interface Approvals {
  runId: string;
  approvals: ApprovalView[];
}

/**
 * The run's approvals, read from its `approval` rows (host/async/approvals.ts), so they read the
 * same whichever process hosts the run, on any store, and with no host at all.
 */
export async function readApprovals(port: StoreReads, runId?: string): Promise<Approvals> {
  const run = await pickRun(port, runId);
  const [events, agents] = await Promise.all([port.eventsOf(run.id, APPROVAL_EVENT), port.listAgents(run.id)]);
  const names = new Map(agents.map((a) => [a.id, a.name]));
  const all = approvalsFromEvents(events, (id) => names.get(id) ?? id);
  const pending = all.filter((a) => a.state === 'pending');
  const answered = all.filter((a) => a.state !== 'pending').reverse();
  return { runId: run.id, approvals: [...pending, ...answered] };
}
