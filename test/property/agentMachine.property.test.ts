/**
 * Random event sequences folded through the agent machine's pure transition function: the agent
 * never leaves the state set, failed/crashed agents never wake without a user message, terminal
 * agents revive only as DESIGN §2 allows, and the recovery and idle counters never pass their caps.
 */
import { fc, test } from '@fast-check/vitest';
import { expect } from 'vitest';
import { initialTransition, transition } from 'xstate';
import { agentMachine, type AgentEvent } from '../../machines/agentMachine.js';
import { AGENT_STATUSES, type AgentStatus, type StopReason, type TurnOutcome } from '../../machines/types.js';
import { baseInput, statusOf, type AgentSnap } from '../helpers/machines.js';

/** The idle timer as the scheduler delivers it (only the waiting-on-agents state handles it). */
const IDLE_TIMER = { type: 'xstate.after.idleResume.agent.waiting.agents' } as unknown as AgentEvent;

const outcome: fc.Arbitrary<TurnOutcome> = fc.oneof(
  fc.constant<TurnOutcome>({ kind: 'continue', lastTool: 'search' }),
  fc.constant<TurnOutcome>({ kind: 'plainText' }),
  fc.constant<TurnOutcome>({ kind: 'interrupted' }),
  fc.record({
    kind: fc.constant('wait' as const),
    waitKind: fc.constantFrom('agents' as const, 'user' as const),
    callId: fc.constant('c'),
    tool: fc.constant('wait_for_agents' as const),
    timeoutMs: fc.option(fc.integer({ min: 1_000, max: 300_000 }), { nil: null }),
    at: fc.nat(),
  }),
  fc.constant<TurnOutcome>({ kind: 'finish', report: { summary: 's', findings: [], openItems: [], success: true } }),
  fc.constantFrom<StopReason>('budget', 'reserve').map((reason): TurnOutcome => ({ kind: 'stopped', reason })),
  fc.nat({ max: 5 }).map((epoch): TurnOutcome => ({ kind: 'budgetPaused', epoch })),
  fc.constant<TurnOutcome>({ kind: 'failed', error: { code: 'PROVIDER_AUTH', message: 'x', retryable: false } }),
  fc.constant<TurnOutcome>({ kind: 'crashed', error: { code: 'INTERNAL', message: 'x', retryable: false } }),
);

const event: fc.Arbitrary<AgentEvent> = fc.oneof(
  outcome.map((outcome): AgentEvent => ({ type: 'turn.done', outcome })),
  fc.constant<AgentEvent>({ type: 'xstate.error.actor.cycle', error: new Error('bug'), actorId: 'cycle' }),
  fc.boolean().map((user): AgentEvent => ({ type: 'agent.message', from: user ? 'user' : 'peer', user })),
  fc.constantFrom<StopReason>('requested', 'budget', 'reserve').map((reason): AgentEvent => ({ type: 'agent.stop', reason })),
  fc.nat({ max: 6 }).map((epoch): AgentEvent => ({ type: 'budget.resume', epoch })),
  fc.constant(IDLE_TIMER),
);

const TERMINAL_OUTCOME: Partial<Record<AgentStatus, TurnOutcome['kind'][]>> = {
  completed: ['finish'],
  failed: ['failed'],
};

function checkStep(before: AgentSnap, e: AgentEvent, after: AgentSnap, interactive: boolean) {
  const from = statusOf(before);
  const to = statusOf(after);
  expect(AGENT_STATUSES).toContain(to);
  expect(after.status).toBe('active');
  const ctx = after.context;
  expect(ctx.recoveries).toBeLessThanOrEqual(ctx.spec.recoveryLimit);
  expect(ctx.idleResumes).toBeLessThanOrEqual(ctx.spec.idleLimit);
  if (to === 'waiting') {
    expect(ctx.waitKind).not.toBeNull();
    expect(after.value).toEqual({ waiting: ctx.waitKind });
  }

  if (from === to) return;
  const isUserMessage = e.type === 'agent.message' && e.user;
  if ((from === 'failed' || from === 'crashed') && to !== from) expect(isUserMessage).toBe(true);
  if (from === 'completed' || from === 'stopped') {
    expect(e.type).toBe('agent.message');
    expect(interactive).toBe(true);
  }
  if (from === 'stalled' || (from === 'waiting' && before.matches({ waiting: 'user' }))) expect(e).not.toBe(IDLE_TIMER);
  if (from === 'budgetPaused' && to === 'running') {
    expect(e.type === 'budget.resume' && e.epoch > before.context.budgetEpoch).toBe(true);
  }
  const allowed = TERMINAL_OUTCOME[to];
  if (allowed && from === 'running') {
    expect(e.type === 'turn.done' && allowed.includes(e.outcome.kind)).toBe(true);
  }
  if (to === 'running' && from !== 'running') expect(after.context.stopRequested).toBeNull();
}

/** Replay a failure with PROPERTY_SEED=<seed> PROPERTY_PATH=<path> (both printed by fast-check), as the other suites do. */
const replay = process.env.PROPERTY_SEED
  ? { seed: Number(process.env.PROPERTY_SEED), ...(process.env.PROPERTY_PATH ? { path: process.env.PROPERTY_PATH } : {}), endOnFailure: true }
  : {};

test.prop([fc.boolean(), fc.array(event, { maxLength: 60 })], { numRuns: Number(process.env.PROPERTY_RUNS ?? 300), ...replay })(
  'random event sequences keep the lifecycle rules',
  (interactive, events) => {
    let [snap] = initialTransition(agentMachine, baseInput({ policy: { interactive, maxTurns: 20 } }));
    for (const e of events) {
      const [next] = transition(agentMachine, snap, e);
      checkStep(snap, e, next, interactive);
      snap = next;
    }
  },
);

test.prop([fc.boolean(), fc.array(event, { maxLength: 60 })], { numRuns: Number(process.env.PROPERTY_RUNS ?? 200), ...replay })(
  'the stall comes exactly at the 3rd idle timeout or plain-text turn in a row',
  (interactive, events) => {
    let [snap] = initialTransition(agentMachine, baseInput({ policy: { interactive, maxTurns: 1_000 } }));
    for (const e of events) {
      const [next] = transition(agentMachine, snap, e);
      if (statusOf(next) === 'stalled' && statusOf(snap) !== 'stalled') {
        const fromIdle = e === IDLE_TIMER;
        const fromText = e.type === 'turn.done' && e.outcome.kind === 'plainText';
        expect(fromIdle || fromText).toBe(true);
        if (fromIdle) expect(next.context.idleResumes).toBe(3);
        if (fromText) {
          expect(interactive).toBe(true);
          expect(next.context.recoveries).toBe(3);
        }
      }
      snap = next;
    }
  },
);
