/**
 * One agent's lifecycle (DESIGN §2). Pure: the turns themselves are run by the `runCycle` actor,
 * supplied by the runtime with `.provide()`, which reports each finished turn as `turn.done`; this
 * machine decides what each outcome, message, stop and timer means. Every status change of an
 * agent goes through here.
 *
 * While the agent is `running`, one cycle actor runs turn after turn: a turn that changes nothing
 * but counters is a targetless transition, so no actor is created per turn (an invoke per turn
 * cost 25–50 µs here, more than the rest of the turn); any other decision leaves `running`, which
 * stops the cycle.
 *
 * States = statuses: running, waiting (agents | user | timer), stalled, budgetPaused, completed, stopped,
 * failed, crashed. Terminal states are not XState final states: an interactive user can revive
 * them, and failed/crashed agents wake on a user message in every mode.
 * @module
 */
import { and, assign, fromCallback, setup } from 'xstate';
import {
  DEFAULT_IDLE_LIMIT,
  DEFAULT_IDLE_RESUME_MS,
  DEFAULT_RECOVERY_LIMIT,
  type AgentStatus,
  type StopReason,
  type TurnOutcome,
  type WaitKind,
} from './types.js';
import { serializeUnknown, type AgentContext, type AgentEvent, type AgentInput, type CycleInput } from './agentContext.js';

export type { AgentContext, AgentEvent, AgentInput, AgentLifecycleState, CycleInput, TurnInput } from './agentContext.js';
export { turnInputOf } from './agentContext.js';

const notProvided = () => {
  throw new Error('runCycle was not provided: use agentMachine.provide({ actors: { runCycle } })');
};

function outcomeOf(event: AgentEvent): TurnOutcome | null {
  return event.type === 'turn.done' ? event.outcome : null;
}

export const agentMachine = setup({
  types: {
    context: {} as AgentContext,
    events: {} as AgentEvent,
    input: {} as AgentInput,
  },
  actors: {
    runCycle: fromCallback<AgentEvent, CycleInput>(notProvided),
  },
  delays: {
    idleResume: ({ context }) => context.idleTimerMs,
  },
  guards: {
    bootsAs: ({ context }, params: { status: AgentStatus; waitKind?: WaitKind }) =>
      context.spec.initialStatus === params.status && (params.waitKind === undefined || context.waitKind === params.waitKind),
    isOutcome: ({ event }, params: { kind: TurnOutcome['kind'] }) => outcomeOf(event)?.kind === params.kind,
    isWaitFor: ({ event }, params: { waitKind: WaitKind }) => {
      const outcome = outcomeOf(event);
      return outcome?.kind === 'wait' && outcome.waitKind === params.waitKind;
    },
    isStopRequested: ({ context }) => context.stopRequested !== null,
    /** A tool turn with nothing pending: no stop, turns left. Exactly the final fall-through case. */
    isPlainNextTurn: ({ context, event }) =>
      outcomeOf(event)?.kind === 'continue' && context.stopRequested === null && context.stintTurns + 1 < context.spec.maxTurns,
    /** This plain-text turn is the last one recovery allows. */
    isRecoveryExhausted: ({ context, event }) => outcomeOf(event)?.kind === 'plainText' && context.recoveries + 1 >= context.spec.recoveryLimit,
    isInteractive: ({ context }) => context.spec.interactive,
    /** Interactive revival of a completed or stopped agent: any message but a notice about a child. */
    isRevivingMessage: ({ context, event }) => context.spec.interactive && event.type === 'agent.message' && !event.notice,
    /** The turn just finished used up the stint (checked before another turn starts). */
    isTurnLimitAfterThisTurn: ({ context }) => context.stintTurns + 1 >= context.spec.maxTurns,
    /** A parked agent waking now would exceed the stint's turns. */
    isTurnLimitReached: ({ context }) => context.stintTurns >= context.spec.maxTurns,
    /** This timeout is the idleLimit-th in a row without a real message. */
    isIdleExhausted: ({ context }) => context.idleResumes + 1 >= context.spec.idleLimit,
    isFromUser: ({ event }) => event.type === 'agent.message' && event.user,
    /** A report that a wait for all the children gathers: more are coming, so it does not wake. */
    isGatheredReport: ({ context, event }) => event.type === 'agent.message' && event.more === true && context.pendingWait?.until === 'all',
    isNewerEpoch: ({ context, event }) => event.type === 'budget.resume' && event.epoch > context.budgetEpoch,
  },
  actions: {
    /** Book-keeping common to every finished turn. */
    recordTurn: assign(({ context, event }) => {
      const outcome = outcomeOf(event);
      const kind = outcome?.kind;
      return {
        turns: context.turns + 1,
        stintTurns: context.stintTurns + 1,
        recoveries: kind === 'plainText' ? context.recoveries + 1 : kind === 'interrupted' ? context.recoveries : 0,
        lastTool:
          outcome?.kind === 'continue' && outcome.lastTool !== null
            ? outcome.lastTool
            : outcome?.kind === 'wait'
              ? outcome.tool
              : outcome?.kind === 'finish'
                ? context.spec.parentId === null
                  ? 'finish'
                  : 'agent_finish'
                : context.lastTool,
        wake: null,
        pendingWait: null,
        attempts: null,
      };
    }),
    recordAttempts: assign(({ event }) => (event.type === 'turn.recovering' ? { attempts: event.attempts } : {})),
    enterWait: assign(({ context, event }) => {
      const outcome = outcomeOf(event);
      if (outcome?.kind !== 'wait') return {};
      const timer = outcome.timeoutMs ?? context.spec.idleResumeMs;
      return {
        waitKind: outcome.waitKind,
        pendingWait:
          outcome.until === undefined ? { callId: outcome.callId, tool: outcome.tool } : { callId: outcome.callId, tool: outcome.tool, until: outcome.until },
        waitTimeoutMs: timer,
        idleTimerMs: timer,
        waitingSince: outcome.at,
      };
    }),
    recordReport: assign(({ event }) => {
      const outcome = outcomeOf(event);
      return outcome?.kind === 'finish' ? { report: outcome.report } : {};
    }),
    recordOutcomeError: assign(({ event }) => {
      const outcome = outcomeOf(event);
      return outcome?.kind === 'failed' || outcome?.kind === 'crashed' ? { error: outcome.error } : {};
    }),
    recordCycleCrash: assign(({ event }) => ({
      wake: null,
      pendingWait: null,
      error: serializeUnknown(event.type === 'xstate.error.actor.cycle' ? event.error : event),
    })),
    recordRecoveryExhausted: assign(({ context }) => ({
      error: {
        code: 'RECOVERY_EXHAUSTED',
        message: `ended ${context.spec.recoveryLimit} turns in a row without calling a tool`,
        retryable: false,
      },
    })),
    recordStop: assign((_, params: { reason: StopReason }) => ({ stopReason: params.reason, stopRequested: null })),
    /** A turn cut by a requested stop ends with the reason it was requested for (reentry, …), not a generic one. */
    recordOutcomeStop: assign(({ context, event }) => {
      const outcome = outcomeOf(event);
      if (outcome?.kind !== 'stopped') return {};
      return { stopReason: outcome.reason === 'requested' ? (context.stopRequested ?? 'requested') : outcome.reason, stopRequested: null };
    }),
    recordRequestedStop: assign(({ context }) => ({ stopReason: context.stopRequested, stopRequested: null })),
    requestStop: assign(({ context, event }) => (event.type === 'agent.stop' && context.stopRequested === null ? { stopRequested: event.reason } : {})),
    stopNow: assign(({ event }) => (event.type === 'agent.stop' ? { stopReason: event.reason, stopRequested: null } : {})),
    enterBudgetPause: assign(({ event }) => {
      const outcome = outcomeOf(event);
      return outcome?.kind === 'budgetPaused' ? { budgetEpoch: outcome.epoch } : {};
    }),
    resumeFromBudget: assign(({ event }) => (event.type === 'budget.resume' ? { budgetEpoch: event.epoch, wake: 'budgetResumed' as const } : {})),
    /** A real message ends the idle and plain-text streaks. */
    wakeByMessage: assign({
      wake: 'message' as const,
      recoveries: 0,
      idleResumes: 0,
      waitKind: null,
      waitingSince: null,
      waitTimeoutMs: null,
    }),
    wakeByDeadlock: assign(({ context }) => ({
      wake: 'deadlock' as const,
      idleResumes: context.idleResumes + 1,
      waitKind: null,
      waitingSince: null,
      waitTimeoutMs: null,
    })),
    /** A timer the agent set itself fired: not an idle timeout, so the idle streak is left as it is. */
    wakeByTimer: assign({
      wake: 'timer' as const,
      waitKind: null,
      waitingSince: null,
      waitTimeoutMs: null,
    }),
    wakeByTimeout: assign(({ context }) => ({
      wake: 'timeout' as const,
      idleResumes: context.idleResumes + 1,
      waitKind: null,
      waitingSince: null,
      waitTimeoutMs: null,
    })),
    /** The idle timer ran out for the last time: stall, keeping the wait call for the wake. */
    stallFromIdle: assign(({ context }) => ({ idleResumes: context.idleResumes + 1 })),
    /** A gathered report is not idleness: the idle streak starts again (the wait's own timer runs on). */
    gatherReport: assign(({ context }) => (context.idleResumes === 0 ? {} : { idleResumes: 0 })),
    /** A user message clears the streaks (and, through a revival, the error). */
    noteUserMessage: assign({ recoveries: 0, idleResumes: 0 }),
    /**
     * A cycle error outside `running` belongs to a cycle that was already torn down. XState errors an
     * actor on an unhandled `xstate.error.actor.*`, so it is caught here and dropped.
     */
    ignoreStaleTurnError: () => {},
    /** A new stint: a revived terminal agent starts with fresh turns and no error. */
    revive: assign({
      wake: 'revived' as const,
      stintTurns: 0,
      recoveries: 0,
      idleResumes: 0,
      error: null,
      report: null,
      stopReason: null,
      stopRequested: null,
      waitKind: null,
      waitingSince: null,
      waitTimeoutMs: null,
    }),
  },
}).createMachine({
  id: 'agent',
  // Built property by property (no spread): this runs for every agent spawned.
  context: ({ input }) => {
    const p = input.policy;
    const s = input.state ?? {};
    const idleResumeMs = p?.idleResumeMs ?? DEFAULT_IDLE_RESUME_MS;
    const waitTimeoutMs = s.waitTimeoutMs ?? null;
    return {
      spec: {
        id: input.id,
        name: input.name,
        parentId: input.parentId,
        initialStatus: input.status ?? 'running',
        interactive: p?.interactive ?? false,
        maxTurns: p?.maxTurns ?? 100,
        idleResumeMs,
        recoveryLimit: p?.recoveryLimit ?? DEFAULT_RECOVERY_LIMIT,
        idleLimit: p?.idleLimit ?? DEFAULT_IDLE_LIMIT,
      },
      turns: s.turns ?? 0,
      stintTurns: s.stintTurns ?? 0,
      recoveries: s.recoveries ?? 0,
      idleResumes: s.idleResumes ?? 0,
      waitKind: s.waitKind ?? null,
      waitTimeoutMs,
      idleTimerMs: input.idleTimerMs ?? waitTimeoutMs ?? idleResumeMs,
      waitingSince: s.waitingSince ?? null,
      pendingWait: s.pendingWait ?? null,
      stopReason: s.stopReason ?? null,
      error: s.error ?? null,
      report: s.report ?? null,
      lastTool: s.lastTool ?? null,
      budgetEpoch: s.budgetEpoch ?? 0,
      attempts: s.attempts ?? null,
      wake: null,
      stopRequested: null,
    };
  },
  initial: 'boot',
  on: {
    'xstate.error.actor.cycle': { actions: 'ignoreStaleTurnError' },
  },
  states: {
    /** Picks the starting state: `running` for a new agent, the persisted one after a restart. */
    boot: {
      always: [
        { guard: { type: 'bootsAs', params: { status: 'running' } }, target: 'running' },
        { guard: { type: 'bootsAs', params: { status: 'waiting', waitKind: 'user' } }, target: 'waiting.user' },
        { guard: { type: 'bootsAs', params: { status: 'waiting', waitKind: 'timer' } }, target: 'waiting.timer' },
        { guard: { type: 'bootsAs', params: { status: 'waiting' } }, target: 'waiting.agents' },
        { guard: { type: 'bootsAs', params: { status: 'stalled' } }, target: 'stalled' },
        { guard: { type: 'bootsAs', params: { status: 'budgetPaused' } }, target: 'budgetPaused' },
        { guard: { type: 'bootsAs', params: { status: 'completed' } }, target: 'completed' },
        { guard: { type: 'bootsAs', params: { status: 'stopped' } }, target: 'stopped' },
        { guard: { type: 'bootsAs', params: { status: 'failed' } }, target: 'failed' },
        { guard: { type: 'bootsAs', params: { status: 'crashed' } }, target: 'crashed' },
        { target: 'running' },
      ],
    },
    running: {
      invoke: {
        id: 'cycle',
        src: 'runCycle',
        input: ({ context }): CycleInput => ({ agentId: context.spec.id }),
        onError: { target: 'crashed', actions: 'recordCycleCrash' },
      },
      on: {
        'turn.done': [
          // The common case first: one guard instead of eleven (it implies none of the branches below match).
          { guard: 'isPlainNextTurn', actions: 'recordTurn' },
          { guard: { type: 'isOutcome', params: { kind: 'finish' } }, target: 'completed', actions: ['recordTurn', 'recordReport'] },
          { guard: { type: 'isOutcome', params: { kind: 'failed' } }, target: 'failed', actions: ['recordTurn', 'recordOutcomeError'] },
          { guard: { type: 'isOutcome', params: { kind: 'crashed' } }, target: 'crashed', actions: ['recordTurn', 'recordOutcomeError'] },
          { guard: { type: 'isOutcome', params: { kind: 'stopped' } }, target: 'stopped', actions: ['recordTurn', 'recordOutcomeStop'] },
          { guard: 'isStopRequested', target: 'stopped', actions: ['recordTurn', 'recordRequestedStop'] },
          { guard: { type: 'isOutcome', params: { kind: 'budgetPaused' } }, target: 'budgetPaused', actions: ['recordTurn', 'enterBudgetPause'] },
          { guard: and(['isRecoveryExhausted', 'isInteractive']), target: 'stalled', actions: 'recordTurn' },
          { guard: 'isRecoveryExhausted', target: 'crashed', actions: ['recordTurn', 'recordRecoveryExhausted'] },
          { guard: { type: 'isWaitFor', params: { waitKind: 'agents' } }, target: 'waiting.agents', actions: ['recordTurn', 'enterWait'] },
          { guard: { type: 'isWaitFor', params: { waitKind: 'user' } }, target: 'waiting.user', actions: ['recordTurn', 'enterWait'] },
          { guard: { type: 'isWaitFor', params: { waitKind: 'timer' } }, target: 'waiting.timer', actions: ['recordTurn', 'enterWait'] },
          {
            guard: 'isTurnLimitAfterThisTurn',
            target: 'stopped',
            actions: ['recordTurn', { type: 'recordStop', params: { reason: 'maxTurns' } }],
          },
          // Another turn: no target, so the cycle keeps running.
          { actions: 'recordTurn' },
        ],
        'agent.stop': { actions: 'requestStop' },
        'agent.message': { guard: 'isFromUser', actions: 'noteUserMessage' },
        'turn.recovering': { actions: 'recordAttempts' },
      },
    },
    waiting: {
      // Always entered through an explicit child target; `agents` is only the required default.
      initial: 'agents',
      on: {
        'agent.message': [
          { guard: 'isTurnLimitReached', target: 'stopped', actions: { type: 'recordStop', params: { reason: 'maxTurns' } } },
          { target: 'running', actions: 'wakeByMessage' },
        ],
        'agent.stop': { target: 'stopped', actions: 'stopNow' },
      },
      states: {
        /** Waiting on other agents: the only wait with an idle timer. */
        agents: {
          after: {
            idleResume: [
              { guard: 'isIdleExhausted', target: '#agent.stalled', actions: 'stallFromIdle' },
              {
                guard: 'isTurnLimitReached',
                target: '#agent.stopped',
                actions: { type: 'recordStop', params: { reason: 'maxTurns' } },
              },
              { target: '#agent.running', actions: 'wakeByTimeout' },
            ],
          },
          on: {
            // Before the parent state's wake: a wait for all the children stays parked while more reports are coming.
            'agent.message': { guard: 'isGatheredReport', actions: 'gatherReport' },
            'agent.idleTimeout': [
              { guard: 'isIdleExhausted', target: '#agent.stalled', actions: 'stallFromIdle' },
              {
                guard: 'isTurnLimitReached',
                target: '#agent.stopped',
                actions: { type: 'recordStop', params: { reason: 'maxTurns' } },
              },
              { target: '#agent.running', actions: 'wakeByTimeout' },
            ],
            // A dead wait ends like an idle timeout, at once: same idle limit, same stall.
            'agent.deadlock': [
              { guard: 'isIdleExhausted', target: '#agent.stalled', actions: 'stallFromIdle' },
              {
                guard: 'isTurnLimitReached',
                target: '#agent.stopped',
                actions: { type: 'recordStop', params: { reason: 'maxTurns' } },
              },
              { target: '#agent.running', actions: 'wakeByDeadlock' },
            ],
          },
        },
        /** Waiting on a human: never woken by a timer. */
        user: {},
        /**
         * Asleep until a time it chose (`sleep_until`): its deadline wakes it once, a message or a
         * stop sooner. Never a dead wait (the timer will move it), so `agent.deadlock` is not heard.
         */
        timer: {
          after: {
            idleResume: [
              {
                guard: 'isTurnLimitReached',
                target: '#agent.stopped',
                actions: { type: 'recordStop', params: { reason: 'maxTurns' } },
              },
              { target: '#agent.running', actions: 'wakeByTimer' },
            ],
          },
          on: {
            'agent.idleTimeout': [
              {
                guard: 'isTurnLimitReached',
                target: '#agent.stopped',
                actions: { type: 'recordStop', params: { reason: 'maxTurns' } },
              },
              { target: '#agent.running', actions: 'wakeByTimer' },
            ],
          },
        },
      },
    },
    /** Parked until a message arrives (never on a timer); the parent has had a stall notice. */
    stalled: {
      on: {
        'agent.message': [
          { guard: 'isTurnLimitReached', target: 'stopped', actions: { type: 'recordStop', params: { reason: 'maxTurns' } } },
          { target: 'running', actions: 'wakeByMessage' },
        ],
        'agent.stop': { target: 'stopped', actions: 'stopNow' },
      },
    },
    /** Parked before a paid call; retries the same call when the resume epoch advances. */
    budgetPaused: {
      on: {
        'budget.resume': { guard: 'isNewerEpoch', target: 'running', actions: 'resumeFromBudget' },
        'agent.stop': { target: 'stopped', actions: 'stopNow' },
      },
    },
    // A finished agent is not restarted by news of its children (which would spend budget after
    // the run ended); the notices stay queued and are read if a real message revives it.
    completed: {
      on: { 'agent.message': { guard: 'isRevivingMessage', target: 'running', actions: 'revive' } },
    },
    stopped: {
      on: { 'agent.message': { guard: 'isRevivingMessage', target: 'running', actions: 'revive' } },
    },
    /** Failed and crashed agents are user-gated: peer mail queues but never wakes them. */
    failed: {
      on: { 'agent.message': { guard: 'isFromUser', target: 'running', actions: 'revive' } },
    },
    crashed: {
      on: { 'agent.message': { guard: 'isFromUser', target: 'running', actions: 'revive' } },
    },
  },
});
