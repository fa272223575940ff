/**
 * The coordinator (DESIGN §3): one actor that owns every agent's registration, parent link and
 * depth, the spawn limits, the exactly-once notice claims, the once-per-run reserve-notice claim
 * and the budget flags — facts about relations between agents. An agent's own counters (recoveries,
 * idle resumes, turns) are its agent machine's alone; the counts here (active, running) are derived
 * from the status changes this machine sees, in the one place it sees them.
 *
 * Agents are *not* XState children of this machine (spawning into one parent is O(n), stopping it
 * O(n²), see DESIGN §11): the runtime creates each agent as a root actor addressed `agent:<id>` and
 * reports its status changes here as `agent.changed`. Per-agent records are kept in a sharded
 * record so that an update copies ~64 + n/64 properties, not n.
 *
 * Pure: decisions leave as emitted events (`notice`, `agents.stop`, `budget.resumed`) that the
 * runtime turns into committed rows and wake-ups.
 * @module
 */
import { assign, emit, enqueueActions, setup } from 'xstate';
import { allowanceReserveText } from './allowanceNotices.js';
import { completionReportText, RESERVE_NOTICE_TEXT, stallNoticeText, terminalNoticeText, type NoticeData, type NoticeKind } from './notices.js';
import { getSharded, setSharded, shardedById, shardedValues, type Sharded } from './sharded.js';
import { isActive, isTerminal, type AgentStatus, type CompletionReport, type SerializedError, type StopReason, type WaitKind } from './types.js';

export interface SpawnLimits {
  /** Deepest level below the root (root = depth 0). */
  maxDepth: number;
  /** Children alive (active) at once per parent. */
  maxChildren: number;
  /** Agents registered per run, root included (a lifetime cap). */
  maxAgents: number;
}

/** The coordinator's view of one agent. */
export interface AgentRecord {
  id: string;
  name: string;
  parentId: string | null;
  depth: number;
  status: AgentStatus;
  waitKind: WaitKind | null;
  /** This stint's single parent notice is taken (released when the agent runs again). */
  noticeClaimed: boolean;
  /** Stints so far: a new one starts each time the agent runs again after a terminal state. */
  stint: number;
  /** Children currently active. */
  aliveChildren: number;
  /** Children ever registered. */
  spawnedChildren: number;
}

export interface BudgetFlags {
  /** The run's limit in USD (null: none). `resumeBudget(limit)` replaces it; it is persisted with the flags. */
  limitUsd: number | null;
  budgetStopped: boolean;
  reserveStopped: boolean;
  paused: boolean;
  resumeEpoch: number;
  reserveNoticeClaimed: boolean;
}

export interface CoordinatorContext {
  runId: string;
  limits: SpawnLimits;
  agents: Sharded<AgentRecord>;
  rootId: string | null;
  agentCount: number;
  /** Active agents other than the root: the finish gate. */
  activeNonRoot: number;
  /** Agents whose status is `running` (none: the run is idle, every agent parked or terminal). */
  running: number;
  budget: BudgetFlags;
  /** Owners of allowances whose reserve tripped (once each: restored from their notice keys). */
  reservesTripped: Readonly<Record<string, true>>;
}

export interface CoordinatorInput {
  runId: string;
  limits: SpawnLimits;
  /** Restore: the records and flags read back from the store. */
  agents?: AgentRecord[];
  budget?: Partial<BudgetFlags>;
  reservesTripped?: readonly string[];
}

export interface AgentChange {
  id: string;
  status: AgentStatus;
  waitKind: WaitKind | null;
  error: SerializedError | null;
  stopReason: StopReason | null;
  report: CompletionReport | null;
  task: string;
  at: number;
}

export type CoordinatorEvent =
  | { type: 'agent.register'; id: string; name: string; parentId: string | null }
  | ({ type: 'agent.changed' } & AgentChange)
  | { type: 'budget.reserveTrip' }
  | { type: 'budget.stop' }
  | { type: 'budget.pause' }
  | { type: 'budget.resume'; limitUsd?: number }
  /** An allowance's reserve trips: `ids` (its subtree but its owner) stop; the owner is told once. */
  | { type: 'allowance.reserveTrip'; ownerId: string; allowanceUsd: number; ids: string[] }
  /** An allowance is spent: `ids` (its subtree, owner included) stop. */
  | { type: 'allowance.stop'; ids: string[] };

export type CoordinatorEmitted =
  /** `data`: the notice's facts as data (absent from the reserve notice, which is about no agent). */
  | { type: 'notice'; to: string; from: string; kind: NoticeKind; content: string; key: string | null; data?: NoticeData }
  | { type: 'agents.stop'; ids: string[]; reason: StopReason }
  | { type: 'budget.resumed'; epoch: number }
  | { type: 'register.rejected'; id: string; code: string; reason: string };

export interface SpawnRejection {
  code:
    'AGENT_NOT_FOUND' | 'ROOT_EXISTS' | 'MAX_AGENTS_EXCEEDED' | 'MAX_DEPTH_EXCEEDED' | 'MAX_CHILDREN_EXCEEDED' | 'BUDGET_EXCEEDED' | 'BUDGET_RESERVE_REACHED';
  reason: string;
}

/** Why registering an agent under `parentId` (null: the root) — or `count` of them at once — would break a limit, or null. */
export function spawnRejection(context: CoordinatorContext, parentId: string | null, count = 1): SpawnRejection | null {
  const { limits, budget } = context;
  if (parentId === null) {
    return context.rootId === null ? null : { code: 'ROOT_EXISTS', reason: 'this run already has a root agent' };
  }
  const parent = getSharded(context.agents, parentId);
  if (!parent) return { code: 'AGENT_NOT_FOUND', reason: `no agent with id ${parentId}` };
  if (budget.budgetStopped) return { code: 'BUDGET_EXCEEDED', reason: 'the run budget is spent; no new agents' };
  if (budget.reserveStopped) {
    return { code: 'BUDGET_RESERVE_REACHED', reason: 'the sub-agent budget reserve is reached; no new sub-agents' };
  }
  // A batch (count > 1) is checked whole: all of it fits, or none is spawned.
  const more = count === 1 ? '' : `; ${count} more would exceed it`;
  if (context.agentCount + count > limits.maxAgents) {
    return { code: 'MAX_AGENTS_EXCEEDED', reason: `the run already has ${context.agentCount} agents (maxAgents ${limits.maxAgents})${more}` };
  }
  if (parent.depth + 1 > limits.maxDepth) {
    return { code: 'MAX_DEPTH_EXCEEDED', reason: `a child of ${parent.name} would be at depth ${parent.depth + 1} (maxDepth ${limits.maxDepth})` };
  }
  if (parent.aliveChildren + count > limits.maxChildren) {
    return {
      code: 'MAX_CHILDREN_EXCEEDED',
      reason: `${parent.name} already has ${parent.aliveChildren} active children (maxChildren ${limits.maxChildren})${more}; wait for one to finish or stop one`,
    };
  }
  return null;
}

/** Active agents other than `exceptId` (what blocks the root's finish). */
export function activeAgentsExcept(context: CoordinatorContext, exceptId: string): AgentRecord[] {
  const out: AgentRecord[] = [];
  for (const rec of shardedValues(context.agents)) if (rec.id !== exceptId && isActive(rec.status)) out.push(rec);
  return out;
}

export const getAgentRecord = (context: CoordinatorContext, id: string): AgentRecord | undefined => getSharded(context.agents, id);

/** How many of the agent's children are active: more reports are coming while this is above zero. */
export const activeChildren = (context: CoordinatorContext, id: string): number => getSharded(context.agents, id)?.aliveChildren ?? 0;

const DEFAULT_FLAGS: BudgetFlags = {
  limitUsd: null,
  budgetStopped: false,
  reserveStopped: false,
  paused: false,
  resumeEpoch: 0,
  reserveNoticeClaimed: false,
};

/** Apply one status change; returns the new context fields and the notices it owes. */
function applyChange(context: CoordinatorContext, change: AgentChange) {
  const prev = getSharded(context.agents, change.id);
  if (!prev) return null;
  let agents = context.agents;
  let activeNonRoot = context.activeNonRoot;
  const running = context.running + (change.status === 'running' ? 1 : 0) - (prev.status === 'running' ? 1 : 0);
  const notices: Extract<CoordinatorEmitted, { type: 'notice' }>[] = [];
  const wasActive = isActive(prev.status);
  const nowActive = isActive(change.status);

  let noticeClaimed = prev.noticeClaimed;
  let stint = prev.stint;
  if (change.status === 'running' && isTerminal(prev.status)) {
    // A new stint owes its own notice.
    noticeClaimed = false;
    stint += 1;
  }
  if (!isTerminal(prev.status) && isTerminal(change.status) && !noticeClaimed && prev.parentId !== null) {
    noticeClaimed = true;
    const subject = { id: prev.id, name: prev.name, task: change.task };
    const report = change.status === 'completed' ? change.report : null;
    const data: NoticeData = {
      agentId: prev.id,
      name: prev.name,
      status: change.status as NoticeData['status'],
      stint,
      ...(report ? { success: report.success } : {}),
      ...(report && report.value !== undefined ? { value: report.value } : {}),
      stopReason: change.stopReason,
      errorCode: change.error?.code ?? null,
    };
    notices.push({
      data,
      type: 'notice',
      to: prev.parentId,
      from: prev.id,
      key: `notice:${prev.id}:${stint}`,
      kind: report ? 'completion' : (change.status as NoticeKind),
      content: report ? completionReportText(report) : terminalNoticeText(subject, change.status as 'completed' | 'failed' | 'crashed' | 'stopped', change),
    });
  }
  if (change.status === 'stalled' && prev.status !== 'stalled' && prev.parentId !== null) {
    // A stall notice does not take the claim: the child still owes its real report.
    const cause = prev.status === 'waiting' ? 'idle' : 'plainText';
    notices.push({
      type: 'notice',
      to: prev.parentId,
      from: prev.id,
      key: null,
      kind: 'stalled',
      data: { agentId: prev.id, name: prev.name, status: 'stalled', stint, stopReason: null, errorCode: null },
      content: stallNoticeText({ id: prev.id, name: prev.name, task: change.task }, cause),
    });
  }

  if (wasActive !== nowActive && prev.parentId !== null) {
    const parent = getSharded(agents, prev.parentId);
    if (parent) {
      agents = setSharded(agents, parent.id, {
        ...parent,
        aliveChildren: Math.max(0, parent.aliveChildren + (nowActive ? 1 : -1)),
      });
    }
    activeNonRoot += nowActive ? 1 : -1;
  }
  agents = setSharded(agents, prev.id, {
    ...prev,
    status: change.status,
    waitKind: change.waitKind,
    noticeClaimed,
    stint,
  });
  return { agents, activeNonRoot, running, notices };
}

function activeIds(context: CoordinatorContext, includeRoot: boolean): string[] {
  const ids: string[] = [];
  for (const rec of shardedValues(context.agents)) {
    if (isActive(rec.status) && (includeRoot || rec.id !== context.rootId)) ids.push(rec.id);
  }
  return ids;
}

export const coordinatorMachine = setup({
  types: {
    context: {} as CoordinatorContext,
    events: {} as CoordinatorEvent,
    input: {} as CoordinatorInput,
    emitted: {} as CoordinatorEmitted,
  },
  guards: {
    canRegister: ({ context, event }) =>
      event.type === 'agent.register' && getSharded(context.agents, event.id) === undefined && spawnRejection(context, event.parentId) === null,
    isKnownAgent: ({ context, event }) => event.type === 'agent.changed' && getSharded(context.agents, event.id) !== undefined,
    isReserveUntripped: ({ context }) => !context.budget.reserveStopped && !context.budget.budgetStopped,
    isBudgetRunning: ({ context }) => !context.budget.budgetStopped,
    isAllowanceReserveUntripped: ({ context, event }) => event.type === 'allowance.reserveTrip' && context.reservesTripped[event.ownerId] === undefined,
  },
  actions: {
    register: assign(({ context, event }) => {
      if (event.type !== 'agent.register') return {};
      const parent = event.parentId === null ? undefined : getSharded(context.agents, event.parentId);
      let agents = context.agents;
      if (parent) {
        agents = setSharded(agents, parent.id, {
          ...parent,
          aliveChildren: parent.aliveChildren + 1,
          spawnedChildren: parent.spawnedChildren + 1,
        });
      }
      agents = setSharded(agents, event.id, {
        id: event.id,
        name: event.name,
        parentId: event.parentId,
        depth: parent ? parent.depth + 1 : 0,
        status: 'running',
        waitKind: null,
        noticeClaimed: false,
        stint: 0,
        aliveChildren: 0,
        spawnedChildren: 0,
      });
      return {
        agents,
        agentCount: context.agentCount + 1,
        rootId: event.parentId === null ? event.id : context.rootId,
        activeNonRoot: context.activeNonRoot + (event.parentId === null ? 0 : 1),
        running: context.running + 1,
      };
    }),
    rejectRegistration: emit(({ context, event }) => {
      const id = event.type === 'agent.register' ? event.id : '';
      const parentId = event.type === 'agent.register' ? event.parentId : null;
      const rejection = getSharded(context.agents, id)
        ? { code: 'AGENT_EXISTS', reason: `agent ${id} is already registered` }
        : (spawnRejection(context, parentId) ?? { code: 'INTERNAL', reason: 'rejected' });
      return { type: 'register.rejected' as const, id, code: rejection.code, reason: rejection.reason };
    }),
    applyChange: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== 'agent.changed') return;
      const result = applyChange(context, event);
      if (!result) return;
      enqueue.assign({ agents: result.agents, activeNonRoot: result.activeNonRoot, running: result.running });
      for (const notice of result.notices) enqueue.emit(notice);
    }),
    tripReserve: enqueueActions(({ context, enqueue }) => {
      enqueue.assign({ budget: { ...context.budget, reserveStopped: true, reserveNoticeClaimed: true } });
      enqueue.emit({ type: 'agents.stop', ids: activeIds(context, false), reason: 'reserve' });
      if (!context.budget.reserveNoticeClaimed && context.rootId !== null) {
        enqueue.emit({
          type: 'notice',
          to: context.rootId,
          from: 'system',
          key: `reserve:${context.runId}`,
          kind: 'budget_reserve_stop',
          content: RESERVE_NOTICE_TEXT,
        });
      }
    }),
    stopForBudget: enqueueActions(({ context, enqueue }) => {
      enqueue.assign({ budget: { ...context.budget, budgetStopped: true } });
      enqueue.emit({ type: 'agents.stop', ids: activeIds(context, true), reason: 'budget' });
    }),
    tripAllowanceReserve: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== 'allowance.reserveTrip') return;
      enqueue.assign({ reservesTripped: { ...context.reservesTripped, [event.ownerId]: true } });
      enqueue.emit({ type: 'agents.stop', ids: event.ids, reason: 'reserve' });
      // An owner that already ended is not woken by it (a notice would revive it).
      const owner = getSharded(context.agents, event.ownerId);
      if (owner && isActive(owner.status)) {
        enqueue.emit({
          type: 'notice',
          to: event.ownerId,
          from: 'system',
          key: `reserve:${event.ownerId}`,
          kind: 'budget_reserve_stop',
          content: allowanceReserveText(event.allowanceUsd),
        });
      }
    }),
    stopForAllowance: emit(({ event }) => ({
      type: 'agents.stop' as const,
      ids: event.type === 'allowance.stop' ? event.ids : [],
      reason: 'allowance' as const,
    })),
    pauseBudget: assign(({ context }) => ({ budget: { ...context.budget, paused: true } })),
    resumeBudget: enqueueActions(({ context, event, enqueue }) => {
      const epoch = context.budget.resumeEpoch + 1;
      const limitUsd = event.type === 'budget.resume' && event.limitUsd !== undefined ? event.limitUsd : context.budget.limitUsd;
      enqueue.assign({ budget: { ...context.budget, limitUsd, paused: false, resumeEpoch: epoch } });
      enqueue.emit({ type: 'budget.resumed', epoch });
    }),
  },
}).createMachine({
  id: 'coordinator',
  context: ({ input }) => {
    let rootId: string | null = null;
    let activeNonRoot = 0;
    let running = 0;
    for (const rec of input.agents ?? []) {
      if (rec.parentId === null) rootId = rec.id;
      else if (isActive(rec.status)) activeNonRoot += 1;
      if (rec.status === 'running') running += 1;
    }
    const agents = shardedById(input.agents ?? []);
    return {
      runId: input.runId,
      limits: input.limits,
      agents,
      rootId,
      agentCount: input.agents?.length ?? 0,
      activeNonRoot,
      running,
      budget: { ...DEFAULT_FLAGS, ...input.budget },
      reservesTripped: Object.fromEntries((input.reservesTripped ?? []).map((id) => [id, true as const])),
    };
  },
  on: {
    'agent.register': [{ guard: 'canRegister', actions: 'register' }, { actions: 'rejectRegistration' }],
    'agent.changed': { guard: 'isKnownAgent', actions: 'applyChange' },
    // The reserve trips once per run; the flag is persisted, so a restarted run never re-announces it.
    'budget.reserveTrip': { guard: 'isReserveUntripped', actions: 'tripReserve' },
    'budget.stop': { guard: 'isBudgetRunning', actions: 'stopForBudget' },
    'budget.pause': { actions: 'pauseBudget' },
    'budget.resume': { actions: 'resumeBudget' },
    'allowance.reserveTrip': { guard: 'isAllowanceReserveUntripped', actions: 'tripAllowanceReserve' },
    'allowance.stop': { actions: 'stopForAllowance' },
  },
});
