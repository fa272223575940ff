/** Helpers to drive the pure machines in tests. */
import { createActor, fromCallback, initialTransition, SimulatedClock, transition, type Actor, type SnapshotFrom } from 'xstate';
import { agentMachine, turnInputOf, type AgentEvent, type AgentInput, type CycleInput, type TurnInput } from '../../machines/agentMachine.js';
import type { AgentStatus, TurnOutcome } from '../../machines/types.js';

export type AgentSnap = SnapshotFrom<typeof agentMachine>;

export const done = (outcome: TurnOutcome): AgentEvent => ({ type: 'turn.done', outcome });
export const cycleError = (error: unknown): AgentEvent => ({ type: 'xstate.error.actor.cycle', error, actorId: 'cycle' });
export const message = (user = false): AgentEvent => ({ type: 'agent.message', from: user ? 'user' : 'peer', user });
export const stop: AgentEvent = { type: 'agent.stop', reason: 'requested' };

export const CONTINUE: TurnOutcome = { kind: 'continue', lastTool: 'search' };
export const PLAIN: TurnOutcome = { kind: 'plainText' };
export const waitAgents = (timeoutMs: number | null = null): TurnOutcome => ({
  kind: 'wait',
  waitKind: 'agents',
  callId: 'c1',
  tool: 'wait_for_agents',
  timeoutMs,
  at: 0,
});
export const WAIT_USER: TurnOutcome = { kind: 'wait', waitKind: 'user', callId: 'c2', tool: 'respond_to_user', timeoutMs: null, at: 0 };
export const FINISH: TurnOutcome = { kind: 'finish', report: { summary: 's', findings: [], openItems: [], success: true } };
export const FAILED: TurnOutcome = { kind: 'failed', error: { code: 'PROVIDER_AUTH', message: '401', retryable: false } };
export const CRASHED: TurnOutcome = { kind: 'crashed', error: { code: 'INTERNAL', message: 'boom', retryable: false } };

export const baseInput = (over: Partial<AgentInput> = {}): AgentInput => ({
  id: 'a1',
  name: 'alice',
  parentId: 'root',
  ...over,
  policy: { interactive: false, maxTurns: 100, idleResumeMs: 300_000, ...over.policy },
});

export function statusOf(snap: AgentSnap): AgentStatus {
  return typeof snap.value === 'string' ? (snap.value as AgentStatus) : 'waiting';
}

/** Fold events through the pure transition function. */
export function fold(input: AgentInput, events: AgentEvent[]): AgentSnap {
  let [snap] = initialTransition(agentMachine, input);
  for (const e of events) [snap] = transition(agentMachine, snap, e);
  return snap;
}

/**
 * A live agent actor on a simulated clock whose turns are resolved by the test: each turn the
 * cycle starts is pushed to `turns` with its input and a `resolve` that reports its outcome.
 */
export function liveAgent(input: AgentInput) {
  const clock = new SimulatedClock();
  const turns: { input: TurnInput; resolve: (o: TurnOutcome) => void }[] = [];
  const logic = agentMachine.provide({
    actors: {
      runCycle: fromCallback<AgentEvent, CycleInput>(({ sendBack }) => {
        let closed = false;
        const next = () => {
          if (closed) return;
          turns.push({
            // Read when the test looks, like the real cycle reads it when the turn starts.
            get input() {
              return turnInputOf(actor.getSnapshot().context);
            },
            resolve: (outcome) => {
              if (closed) return;
              sendBack({ type: 'turn.done', outcome });
              next();
            },
          });
        };
        next();
        return () => {
          closed = true;
        };
      }),
    },
  });
  // The cycle callback runs during start(), after `actor` is initialised.
  const actor: Actor<typeof agentMachine> = createActor(logic, { input, clock });
  actor.start();
  return { actor, clock, turns, status: () => statusOf(actor.getSnapshot()) };
}

/** Let promise callbacks (turn resolution → done event) run. */
export const flush = () => new Promise<void>((resolve) => setImmediate(resolve));
