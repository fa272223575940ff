import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import {
  activeAgentsExcept,
  coordinatorMachine,
  getAgentRecord,
  spawnRejection,
  type AgentChange,
  type CoordinatorEmitted,
  type SpawnLimits,
} from '../../../machines/coordinatorMachine.js';
import type { AgentStatus } from '../../../machines/types.js';

const LIMITS: SpawnLimits = { maxDepth: 2, maxChildren: 2, maxAgents: 5 };

function coordinator(limits: SpawnLimits = LIMITS) {
  const actor = createActor(coordinatorMachine, { input: { runId: 'r', limits } });
  const emitted: CoordinatorEmitted[] = [];
  actor.on('*', (e) => emitted.push(e as CoordinatorEmitted));
  actor.start();
  const ctx = () => actor.getSnapshot().context;
  return {
    actor,
    emitted,
    ctx,
    register: (id: string, parentId: string | null) => actor.send({ type: 'agent.register', id, name: `n-${id}`, parentId }),
    change: (id: string, status: AgentStatus, extra: Partial<AgentChange> = {}) =>
      actor.send({
        type: 'agent.changed',
        id,
        status,
        waitKind: null,
        error: null,
        stopReason: null,
        report: null,
        task: 'the task',
        at: 0,
        ...extra,
      }),
    notices: () => emitted.filter((e): e is Extract<CoordinatorEmitted, { type: 'notice' }> => e.type === 'notice'),
  };
}

describe('coordinator machine: registration and limits', () => {
  it('registers the root and children with depth and parent links', () => {
    const c = coordinator();
    c.register('root', null);
    c.register('a', 'root');
    c.register('b', 'a');
    expect(c.ctx().rootId).toBe('root');
    expect(getAgentRecord(c.ctx(), 'b')).toMatchObject({ parentId: 'a', depth: 2, status: 'running' });
    expect(getAgentRecord(c.ctx(), 'root')).toMatchObject({ aliveChildren: 1, spawnedChildren: 1 });
    expect(c.ctx().agentCount).toBe(3);
    expect(c.ctx().activeNonRoot).toBe(2);
  });

  it('refuses past maxDepth, maxChildren (alive) and maxAgents, changing nothing', () => {
    const c = coordinator();
    c.register('root', null);
    c.register('a', 'root');
    c.register('b', 'a');
    expect(spawnRejection(c.ctx(), 'b')?.code).toBe('MAX_DEPTH_EXCEEDED');
    c.register('a2', 'root');
    expect(spawnRejection(c.ctx(), 'root')?.code).toBe('MAX_CHILDREN_EXCEEDED');
    const before = c.ctx();
    c.register('x', 'root');
    expect(c.ctx()).toBe(before);
    expect(c.emitted.at(-1)).toMatchObject({ type: 'register.rejected', id: 'x', code: 'MAX_CHILDREN_EXCEEDED' });
    // A finished child frees its slot: the cap counts children alive, not ever spawned.
    c.change('a2', 'completed');
    expect(spawnRejection(c.ctx(), 'root')).toBeNull();
    c.register('a3', 'root');
    c.change('a3', 'completed');
    c.register('a4', 'root');
    expect(c.ctx().agentCount).toBe(5);
    c.change('a4', 'completed');
    expect(spawnRejection(c.ctx(), 'root')?.code).toBe('MAX_AGENTS_EXCEEDED');
  });

  it('refuses a second root and an unknown parent', () => {
    const c = coordinator();
    c.register('root', null);
    expect(spawnRejection(c.ctx(), null)?.code).toBe('ROOT_EXISTS');
    expect(spawnRejection(c.ctx(), 'ghost')?.code).toBe('AGENT_NOT_FOUND');
  });
});

describe('coordinator machine: exactly-once notices', () => {
  function team() {
    const c = coordinator({ maxDepth: 3, maxChildren: 8, maxAgents: 64 });
    c.register('root', null);
    c.register('a', 'root');
    return c;
  }

  it('a terminal change sends the parent one notice, once', () => {
    const c = team();
    c.change('a', 'failed', { error: { code: 'PROVIDER_AUTH', message: '401', retryable: false } });
    c.change('a', 'failed');
    expect(c.notices()).toHaveLength(1);
    expect(c.notices()[0]).toMatchObject({ to: 'root', from: 'a', kind: 'failed' });
    expect(c.notices()[0]!.content).toContain('will not send a report');
    expect(getAgentRecord(c.ctx(), 'a')?.noticeClaimed).toBe(true);
  });

  it('a completion with a report sends the report instead of a notice', () => {
    const c = team();
    c.change('a', 'completed', { report: { summary: 'found it', findings: ['x'], openItems: [], success: true } });
    expect(c.notices()).toHaveLength(1);
    expect(c.notices()[0]!.kind).toBe('completion');
    // Who sent it is the mail header's (from: a); the task is in the parent's spawn call.
    expect(c.notices()[0]).toMatchObject({ from: 'a', data: { agentId: 'a', name: 'n-a', status: 'completed', success: true } });
    expect(c.notices()[0]!.content).toBe('Status: SUCCESS\nSummary: found it\nFindings:\n- x');
  });

  it('running again releases the claim: a new stint owes its own notice', () => {
    const c = team();
    c.change('a', 'crashed');
    c.change('a', 'running');
    expect(getAgentRecord(c.ctx(), 'a')).toMatchObject({ noticeClaimed: false, stint: 1 });
    c.change('a', 'stopped', { stopReason: 'maxTurns' });
    expect(c.notices().map((n) => [n.kind, n.key])).toEqual([
      ['crashed', 'notice:a:0'],
      ['stopped', 'notice:a:1'],
    ]);
    expect(c.notices()[1]!.content).toContain('its turn limit');
  });

  it('a stall notice does not take the claim', () => {
    const c = team();
    c.change('a', 'waiting', { waitKind: 'agents' });
    c.change('a', 'stalled');
    c.change('a', 'stopped');
    expect(c.notices().map((n) => n.kind)).toEqual(['stalled', 'stopped']);
    expect(c.notices()[0]!.content).toContain('without hearing from any');
  });

  it('the root has no parent to notify', () => {
    const c = team();
    c.change('root', 'completed', { report: { summary: 'done', findings: [], openItems: [], success: true } });
    expect(c.notices()).toHaveLength(0);
  });

  it('tracks children alive per parent and the active agents the root waits on', () => {
    const c = team();
    c.register('b', 'root');
    expect(getAgentRecord(c.ctx(), 'root')?.aliveChildren).toBe(2);
    c.change('a', 'completed');
    expect(getAgentRecord(c.ctx(), 'root')?.aliveChildren).toBe(1);
    expect(activeAgentsExcept(c.ctx(), 'root').map((r) => r.id)).toEqual(['b']);
    c.change('a', 'running');
    expect(getAgentRecord(c.ctx(), 'root')?.aliveChildren).toBe(2);
    expect(c.ctx().activeNonRoot).toBe(2);
  });
});

describe('coordinator machine: budget flags', () => {
  it('the reserve trips once per run: children stopped, one notice to the root', () => {
    const c = coordinator({ maxDepth: 3, maxChildren: 8, maxAgents: 64 });
    c.register('root', null);
    c.register('a', 'root');
    c.register('b', 'root');
    c.actor.send({ type: 'budget.reserveTrip' });
    c.actor.send({ type: 'budget.reserveTrip' });
    const stops = c.emitted.filter((e) => e.type === 'agents.stop');
    expect(stops).toEqual([{ type: 'agents.stop', ids: expect.arrayContaining(['a', 'b']), reason: 'reserve' }]);
    expect(c.notices()).toHaveLength(1);
    expect(c.notices()[0]).toMatchObject({ to: 'root', from: 'system', kind: 'budget_reserve_stop' });
    expect(c.ctx().budget).toMatchObject({ reserveStopped: true, reserveNoticeClaimed: true });
    expect(spawnRejection(c.ctx(), 'root')?.code).toBe('BUDGET_RESERVE_REACHED');
  });

  it('a restored run whose reserve notice was claimed never announces it again', () => {
    const actor = createActor(coordinatorMachine, {
      input: { runId: 'r', limits: LIMITS, budget: { reserveStopped: false, reserveNoticeClaimed: true } },
    });
    const emitted: string[] = [];
    actor.on('*', (e) => emitted.push(e.type));
    actor.start();
    actor.send({ type: 'budget.reserveTrip' });
    expect(emitted).toEqual(['agents.stop']);
  });

  it('the budget stop stops every active agent, root included, once', () => {
    const c = coordinator();
    c.register('root', null);
    c.register('a', 'root');
    c.change('a', 'completed');
    c.actor.send({ type: 'budget.stop' });
    c.actor.send({ type: 'budget.stop' });
    expect(c.emitted.filter((e) => e.type === 'agents.stop')).toEqual([{ type: 'agents.stop', ids: ['root'], reason: 'budget' }]);
  });

  it('resume advances the epoch', () => {
    const c = coordinator();
    c.actor.send({ type: 'budget.pause' });
    expect(c.ctx().budget.paused).toBe(true);
    c.actor.send({ type: 'budget.resume' });
    expect(c.ctx().budget).toMatchObject({ paused: false, resumeEpoch: 1 });
    expect(c.emitted).toContainEqual({ type: 'budget.resumed', epoch: 1 });
  });
});

describe('coordinator machine: the running count is derived from the status changes it sees', () => {
  it('counts registrations, every change into and out of running, and a restore from records', () => {
    const c = coordinator();
    c.register('root', null);
    c.register('a', 'root');
    c.register('b', 'root');
    expect(c.ctx().running).toBe(3);
    c.change('a', 'waiting', { waitKind: 'agents' });
    c.change('b', 'completed');
    expect(c.ctx().running).toBe(1);
    // A change that keeps the status (a wait kind, a repeat) moves nothing.
    c.change('a', 'waiting', { waitKind: 'user' });
    c.change('root', 'running');
    expect(c.ctx().running).toBe(1);
    c.change('a', 'running');
    c.change('b', 'running');
    expect(c.ctx().running).toBe(3);
    const records = ['root', 'a', 'b'].map((id) => getAgentRecord(c.ctx(), id)!);
    const restored = createActor(coordinatorMachine, {
      input: { runId: 'r', limits: LIMITS, agents: records.map((r, i) => ({ ...r, status: (['running', 'waiting', 'stalled'] as const)[i]! })) },
    }).start();
    expect(restored.getSnapshot().context.running).toBe(1);
  });
});
