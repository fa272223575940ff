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
  // Weighted: the wake rules below act on waits (one in 14 events would leave a wait for all and a report after it rare).
  {
    weight: 3,
    arbitrary: fc
      .record({
        kind: fc.constant('wait' as const),
        waitKind: fc.constantFrom('agents' as const, 'user' as const),
        callId: fc.constant('c'),
        tool: fc.constant('wait_for_agents' as const),
        timeoutMs: fc.option(fc.integer({ min: 1_000, max: 300_000 }), { nil: null }),
        at: fc.nat(),
        all: fc.boolean(),
      })
      .map(({ all, ...wait }): TurnOutcome => (all ? { ...wait, until: 'all' } : wait)),
  },
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
  // A child's report; `more`: another child is still active.
  { weight: 2, arbitrary: fc.boolean().map((more): AgentEvent => ({ type: 'agent.message', from: 'child', user: false, notice: true, more })) },
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

  // A wait on agents: every message wakes it (or stops it at its turn limit) but a report a wait for all gathers.
  if (before.matches({ waiting: 'agents' }) && e.type === 'agent.message') {
    const gathered = e.more === true && before.context.pendingWait?.until === 'all';
    expect(to === 'waiting').toBe(gathered);
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

test.prop([fc.array(event, { maxLength: 8 }), fc.array(fc.boolean(), { minLength: 1, maxLength: 10 })], {
  numRuns: Number(process.env.PROPERTY_RUNS ?? 200),
  ...replay,
})('a wait for all stays parked on reports while more are coming, and the first without more wakes it', (prefix, mores) => {
  let [snap] = initialTransition(agentMachine, baseInput({ policy: { maxTurns: 1_000 } }));
  for (const e of prefix) snap = transition(agentMachine, snap, e)[0];
  fc.pre(statusOf(snap) === 'running' && snap.context.stopRequested === null);
  const waitAll: TurnOutcome = { kind: 'wait', waitKind: 'agents', callId: 'c', tool: 'wait_for_agents', timeoutMs: null, at: 0, until: 'all' };
  snap = transition(agentMachine, snap, { type: 'turn.done', outcome: waitAll })[0];
  for (const more of mores) {
    const [next] = transition(agentMachine, snap, { type: 'agent.message', from: 'child', user: false, notice: true, more });
    expect(statusOf(next)).toBe(more ? 'waiting' : 'running');
    if (!more) return;
    expect(next.context.idleResumes).toBe(0);
    snap = next;
  }
});
