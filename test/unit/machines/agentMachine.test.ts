import { describe, expect, it } from 'vitest';
import { initialTransition, transition } from 'xstate';
import { agentMachine, turnInputOf, type AgentEvent } from '../../../machines/agentMachine.js';
import type { AgentStatus, TurnOutcome } from '../../../machines/types.js';
import {
  baseInput,
  CONTINUE,
  CRASHED,
  done,
  FAILED,
  FINISH,
  flush,
  fold,
  liveAgent,
  message,
  PLAIN,
  statusOf,
  stop,
  cycleError,
  waitAgents,
  WAIT_USER,
} from '../../helpers/machines.js';

const interactive = baseInput({ policy: { interactive: true } });
const sleepFor = (timeoutMs: number): TurnOutcome => ({ kind: 'wait', waitKind: 'timer', callId: 'c1', tool: 'sleep_until', timeoutMs, at: 0 });
const autonomous = baseInput();

describe('agent machine: turns', () => {
  it('starts running and invokes one turn with its input', () => {
    const [snap, actions] = initialTransition(agentMachine, autonomous);
    expect(statusOf(snap)).toBe('running');
    const spawn = actions.find((a) => a.type === 'xstate.spawnChild');
    expect(spawn).toBeDefined();
    expect(snap.context.stintTurns).toBe(0);
  });

  it('keeps its context under 20 top-level keys, with the fixed fields under spec (XState copies it on every assign)', () => {
    // Restored with every lifecycle field set: the widest context an agent can have.
    const [snap] = initialTransition(
      agentMachine,
      baseInput({ status: 'waiting', state: { waitKind: 'agents', waitTimeoutMs: 1_000, waitingSince: 5, lastTool: 'x' }, idleTimerMs: 10 }),
    );
    expect(Object.keys(snap.context).length).toBeLessThan(20);
    expect(snap.context.spec).toMatchObject({ id: autonomous.id, initialStatus: 'waiting', interactive: false });
    const next = fold(autonomous, [done(CONTINUE)]);
    expect(Object.keys(next.context).length).toBeLessThan(20);
  });

  it('a tool turn starts another turn and counts it', () => {
    const snap = fold(autonomous, [done(CONTINUE), done(CONTINUE)]);
    expect(statusOf(snap)).toBe('running');
    expect(snap.context.turns).toBe(2);
    expect(snap.context.lastTool).toBe('search');
  });

  it.each([
    [FINISH, 'completed'],
    [FAILED, 'failed'],
    [CRASHED, 'crashed'],
    [waitAgents(), 'waiting'],
    [WAIT_USER, 'waiting'],
  ] as const)('outcome %o settles the status %s', (outcome, status) => {
    const snap = fold(autonomous, [done(outcome)]);
    expect(statusOf(snap)).toBe(status);
  });

  it('records the wait kind, the pending call and the report', () => {
    expect(fold(autonomous, [done(waitAgents(5000))]).context).toMatchObject({
      waitKind: 'agents',
      pendingWait: { callId: 'c1', tool: 'wait_for_agents' },
      idleTimerMs: 5000,
    });
    expect(fold(autonomous, [done(WAIT_USER)]).value).toEqual({ waiting: 'user' });
    expect(fold(autonomous, [done(FINISH)]).context.report?.summary).toBe('s');
    expect(fold(autonomous, [done(FAILED)]).context.error?.code).toBe('PROVIDER_AUTH');
  });

  it('anything escaping the cycle crashes the agent', () => {
    const snap = fold(autonomous, [done(CONTINUE), cycleError(new Error('bug'))]);
    expect(statusOf(snap)).toBe('crashed');
    expect(snap.context.error).toEqual({ code: 'INTERNAL', message: 'bug', retryable: false });
    expect(snap.context.turns).toBe(1);
  });

  it('a late turn error outside running never errors the actor (found by the property test)', () => {
    const snap = fold(autonomous, [done(waitAgents()), cycleError(new Error('late'))]);
    expect(snap.status).toBe('active');
    expect(statusOf(snap)).toBe('waiting');
  });

  it('stops at the turn limit after the turn that reached it', () => {
    const input = baseInput({ policy: { maxTurns: 2 } });
    expect(statusOf(fold(input, [done(CONTINUE)]))).toBe('running');
    const snap = fold(input, [done(CONTINUE), done(CONTINUE)]);
    expect(statusOf(snap)).toBe('stopped');
    expect(snap.context.stopReason).toBe('maxTurns');
  });
});

describe('agent machine: plain-text recovery', () => {
  it('autonomous: the 3rd plain-text turn in a row crashes the agent', () => {
    expect(statusOf(fold(autonomous, [done(PLAIN), done(PLAIN)]))).toBe('running');
    const snap = fold(autonomous, [done(PLAIN), done(PLAIN), done(PLAIN)]);
    expect(statusOf(snap)).toBe('crashed');
    expect(snap.context.error?.code).toBe('RECOVERY_EXHAUSTED');
  });

  it('interactive: the 3rd plain-text turn in a row stalls the agent', () => {
    expect(statusOf(fold(interactive, [done(PLAIN), done(PLAIN), done(PLAIN)]))).toBe('stalled');
  });

  it('a tool turn ends the streak; an interrupted turn neither counts nor resets it', () => {
    const afterTool = fold(autonomous, [done(PLAIN), done(PLAIN), done(CONTINUE), done(PLAIN), done(PLAIN)]);
    expect(statusOf(afterTool)).toBe('running');
    const interrupted = fold(autonomous, [done(PLAIN), done({ kind: 'interrupted' }), done(PLAIN)]);
    expect(interrupted.context.recoveries).toBe(2);
    expect(statusOf(interrupted)).toBe('running');
  });

  it('the next turn is asked to persist a nudge naming the attempt', () => {
    const snap = fold(autonomous, [done(PLAIN)]);
    expect(snap.context.recoveries).toBe(1);
    expect(turnInputOf(snap.context).nudge).toEqual({ attempt: 1, limit: 3 });
    expect(turnInputOf(fold(autonomous, [done(PLAIN), done(CONTINUE)]).context).nudge).toBeNull();
  });

  it('a tool turn keeps the same cycle running: no new actor per turn', () => {
    const [, actions] = transition(agentMachine, fold(autonomous, []), done(CONTINUE));
    expect(actions.some((a) => ['xstate.spawnChild', 'xstate.stopChild'].includes(a.type as string))).toBe(false);
  });
});

describe('agent machine: stops', () => {
  it('a stop while running waits for the end of the turn', () => {
    const mid = fold(autonomous, [stop]);
    expect(statusOf(mid)).toBe('running');
    const snap = fold(autonomous, [stop, done(CONTINUE)]);
    expect(statusOf(snap)).toBe('stopped');
    expect(snap.context.stopReason).toBe('requested');
  });

  it('a turn that finished wins over a stop requested during it', () => {
    expect(statusOf(fold(autonomous, [stop, done(FINISH)]))).toBe('completed');
  });

  it.each([[[done(waitAgents())]], [[done(WAIT_USER)]], [[done(PLAIN), done(PLAIN), done(PLAIN)]]])('parked agents stop at once', (events) => {
    const snap = fold(interactive, [...events, stop]);
    expect(statusOf(snap)).toBe('stopped');
  });

  it('terminal agents ignore stops', () => {
    for (const outcome of [FINISH, FAILED, CRASHED]) {
      const before = fold(autonomous, [done(outcome)]);
      const [after] = transition(agentMachine, before, stop);
      expect(statusOf(after)).toBe(statusOf(before));
    }
  });
});

describe('agent machine: wake rules', () => {
  it('any message wakes waiting and stalled agents', () => {
    expect(statusOf(fold(autonomous, [done(waitAgents()), message()]))).toBe('running');
    expect(statusOf(fold(autonomous, [done(WAIT_USER), message()]))).toBe('running');
    const stalled = fold(interactive, [done(PLAIN), done(PLAIN), done(PLAIN), message()]);
    expect(statusOf(stalled)).toBe('running');
    expect(stalled.context.recoveries).toBe(0);
  });

  it.each(['failed', 'crashed'] as const)('%s wakes only on a user message, in both modes', (status) => {
    for (const input of [autonomous, interactive]) {
      const parked = fold(input, [done(status === 'failed' ? FAILED : CRASHED)]);
      expect(statusOf(transition(agentMachine, parked, message(false))[0])).toBe(status);
      const [woken] = transition(agentMachine, parked, message(true));
      expect(statusOf(woken)).toBe('running');
      expect(woken.context.error).toBeNull();
      expect(woken.context.wake).toBe('revived');
    }
  });

  it.each(['completed', 'stopped'] as const)('%s revives on any message but a notice, in interactive mode only', (status) => {
    const events = status === 'completed' ? [done(FINISH)] : [done(waitAgents()), stop];
    expect(statusOf(fold(autonomous, [...events, message(true)]))).toBe(status);
    const notice: AgentEvent = { type: 'agent.message', from: 'child', user: false, notice: true };
    expect(statusOf(fold(interactive, [...events, notice]))).toBe(status);
    const revived = fold(interactive, [...events, notice, message(false)]);
    expect(statusOf(revived)).toBe('running');
    expect(revived.context.stintTurns).toBe(0);
  });

  it('a revived agent owes a fresh stint of turns', () => {
    const input = baseInput({ policy: { interactive: true, maxTurns: 2 } });
    const snap = fold(input, [done(CONTINUE), done(CONTINUE), message(true), done(CONTINUE)]);
    expect(statusOf(snap)).toBe('running');
  });

  it('a waiting agent at its turn limit stops instead of waking', () => {
    const input = baseInput({ policy: { maxTurns: 1 } });
    const snap = fold(input, [done(waitAgents()), message()]);
    expect(statusOf(snap)).toBe('stopped');
    expect(snap.context.stopReason).toBe('maxTurns');
  });

  it('budgetPaused resumes only on a newer epoch and stops at once', () => {
    const paused = fold(autonomous, [done({ kind: 'budgetPaused', epoch: 2 })]);
    expect(statusOf(paused)).toBe('budgetPaused');
    expect(statusOf(transition(agentMachine, paused, message(true))[0])).toBe('budgetPaused');
    expect(statusOf(transition(agentMachine, paused, { type: 'budget.resume', epoch: 2 })[0])).toBe('budgetPaused');
    const [resumed] = transition(agentMachine, paused, { type: 'budget.resume', epoch: 3 });
    expect(statusOf(resumed)).toBe('running');
    expect(resumed.context.wake).toBe('budgetResumed');
    expect(statusOf(transition(agentMachine, paused, stop)[0])).toBe('stopped');
  });
});

describe('agent machine: a wait for all the children (until: all)', () => {
  const waitAll: TurnOutcome = { ...waitAgents(), until: 'all' } as TurnOutcome;
  const report = (more: boolean): AgentEvent => ({ type: 'agent.message', from: 'child', user: false, notice: true, more });

  it('keeps the wait (and its mode) in context, to be persisted', () => {
    const snap = fold(autonomous, [done(waitAll)]);
    expect(snap.context.pendingWait).toEqual({ callId: 'c1', tool: 'wait_for_agents', until: 'all' });
    expect(fold(autonomous, [done(waitAgents())]).context.pendingWait).toEqual({ callId: 'c1', tool: 'wait_for_agents' });
  });

  it('a report while more are coming leaves it parked; the last one, or any other message, wakes it', () => {
    const parked = fold(autonomous, [done(waitAll), report(true), report(true)]);
    expect(parked.value).toEqual({ waiting: 'agents' });
    expect(parked.context.pendingWait).toMatchObject({ until: 'all' });
    const woken = transition(agentMachine, parked, report(false))[0];
    expect(statusOf(woken)).toBe('running');
    expect(woken.context.wake).toBe('message');
    expect(statusOf(transition(agentMachine, parked, message())[0])).toBe('running');
    expect(statusOf(transition(agentMachine, parked, message(true))[0])).toBe('running');
  });

  it('a wait for the first message wakes on any report', () => {
    expect(statusOf(fold(autonomous, [done(waitAgents()), report(true)]))).toBe('running');
  });

  it('a gathered report ends the idle streak: it is news, not idleness', () => {
    const input = baseInput({ policy: { idleLimit: 2 } });
    const timedOut = fold(input, [done(waitAll), { type: 'agent.idleTimeout' }, done(waitAll)]);
    expect(timedOut.context.idleResumes).toBe(1);
    const gathered = transition(agentMachine, timedOut, report(true))[0];
    expect(gathered.context.idleResumes).toBe(0);
    // So the next timeout wakes it again instead of stalling it (idleLimit 2).
    expect(statusOf(transition(agentMachine, gathered, { type: 'agent.idleTimeout' })[0])).toBe('running');
    expect(statusOf(transition(agentMachine, timedOut, { type: 'agent.idleTimeout' })[0])).toBe('stalled');
  });

  it('a stalled agent wakes on any report (it waits for no one)', () => {
    const input = baseInput({ policy: { idleLimit: 1 } });
    const stalled = fold(input, [done(waitAll), { type: 'agent.idleTimeout' }]);
    expect(statusOf(stalled)).toBe('stalled');
    expect(statusOf(transition(agentMachine, stalled, report(true))[0])).toBe('running');
  });
});

describe('agent machine: restore', () => {
  it.each([
    ['running', undefined],
    ['waiting', 'agents'],
    ['waiting', 'user'],
    ['waiting', 'timer'],
    ['stalled', undefined],
    ['budgetPaused', undefined],
    ['completed', undefined],
    ['stopped', undefined],
    ['failed', undefined],
    ['crashed', undefined],
  ] as const)('boots into %s %s', (status, waitKind) => {
    const [snap] = initialTransition(agentMachine, baseInput({ status, state: { waitKind: waitKind ?? null } }));
    expect(statusOf(snap)).toBe(status as AgentStatus);
    if (waitKind) expect(snap.value).toEqual({ waiting: waitKind });
  });
});

describe('agent machine: idle timers (SimulatedClock)', () => {
  it('a wait on agents auto-resumes twice, then stalls on the third timeout', async () => {
    const a = liveAgent(autonomous);
    const resumes: (string | null)[] = [];
    for (let i = 0; i < 3; i++) {
      a.turns.at(-1)!.resolve(waitAgents());
      await flush();
      expect(a.status()).toBe('waiting');
      a.clock.increment(299_999);
      expect(a.status()).toBe('waiting');
      a.clock.increment(1);
      if (i < 2) {
        expect(a.status()).toBe('running');
        resumes.push(a.turns.at(-1)!.input.wake);
      }
    }
    expect(resumes).toEqual(['timeout', 'timeout']);
    expect(a.status()).toBe('stalled');
    expect(a.actor.getSnapshot().context.idleResumes).toBe(3);
    // A stalled agent never wakes on a timer.
    a.clock.increment(10 * 300_000);
    expect(a.status()).toBe('stalled');
    a.actor.stop();
  });

  it('a real message resets the idle streak', async () => {
    const a = liveAgent(autonomous);
    a.turns.at(-1)!.resolve(waitAgents());
    await flush();
    a.clock.increment(300_000);
    a.turns.at(-1)!.resolve(waitAgents());
    await flush();
    a.actor.send(message());
    expect(a.actor.getSnapshot().context.idleResumes).toBe(0);
    expect(a.turns.at(-1)!.input.wake).toBe('message');
    a.actor.stop();
  });

  it('the wait timeout the model asked for arms the timer', async () => {
    const a = liveAgent(autonomous);
    a.turns.at(-1)!.resolve(waitAgents(1_000));
    await flush();
    a.clock.increment(999);
    expect(a.status()).toBe('waiting');
    a.clock.increment(1);
    expect(a.status()).toBe('running');
    a.actor.stop();
  });

  it('a wait on the user never times out', async () => {
    const a = liveAgent(interactive);
    a.turns.at(-1)!.resolve(WAIT_USER);
    await flush();
    a.clock.increment(100 * 300_000);
    expect(a.status()).toBe('waiting');
    a.actor.stop();
  });

  it('a sleep_until timer wakes it once at its deadline, as often as it sleeps: never a stall, never an idle timeout', async () => {
    const a = liveAgent(autonomous);
    const wakes: (string | null)[] = [];
    for (let i = 0; i < 4; i++) {
      a.turns.at(-1)!.resolve(sleepFor(86_400_000));
      await flush();
      expect(a.actor.getSnapshot().value).toEqual({ waiting: 'timer' });
      // A dead-wait report is for waits on agents: a timer moves the agent by itself.
      a.actor.send({ type: 'agent.deadlock' });
      a.clock.increment(86_399_999);
      expect(a.status()).toBe('waiting');
      a.clock.increment(1);
      expect(a.status()).toBe('running');
      wakes.push(a.turns.at(-1)!.input.wake);
    }
    expect(wakes).toEqual(['timer', 'timer', 'timer', 'timer']);
    expect(a.actor.getSnapshot().context).toMatchObject({ idleResumes: 0, waitKind: null, waitingSince: null, pendingWait: { tool: 'sleep_until' } });
    a.actor.stop();
  });

  it('a sleeping agent wakes sooner for a message, stops at once for a stop, and boots asleep after a restart', async () => {
    const a = liveAgent(autonomous);
    a.turns.at(-1)!.resolve(sleepFor(60_000));
    await flush();
    a.actor.send(message());
    expect(a.turns.at(-1)!.input.wake).toBe('message');
    a.turns.at(-1)!.resolve(sleepFor(60_000));
    await flush();
    a.actor.send(stop);
    expect(a.status()).toBe('stopped');
    a.clock.increment(120_000);
    expect(a.status()).toBe('stopped');
    a.actor.stop();
    const restored = liveAgent(baseInput({ status: 'waiting', state: { waitKind: 'timer', waitTimeoutMs: 86_400_000, waitingSince: 0 }, idleTimerMs: 1_000 }));
    expect(restored.actor.getSnapshot().value).toEqual({ waiting: 'timer' });
    restored.clock.increment(1_000);
    expect(restored.turns.at(-1)!.input.wake).toBe('timer');
    restored.actor.stop();
  });

  it('a restored wait re-arms the timer with the remaining delay', () => {
    const a = liveAgent(baseInput({ status: 'waiting', state: { waitKind: 'agents', waitTimeoutMs: 300_000 }, idleTimerMs: 1_000 }));
    a.clock.increment(999);
    expect(a.status()).toBe('waiting');
    a.clock.increment(1);
    expect(a.status()).toBe('running');
    a.actor.stop();
  });
});
