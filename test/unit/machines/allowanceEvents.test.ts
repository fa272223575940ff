/**
 * The coordinator's part of budgets per subtree (issue 35): an allowance's reserve trips once per
 * owner — its subtree but the owner stops, the owner alone is told, under a key of its own — and
 * a spent allowance stops its whole subtree with the reason `allowance`.
 */
import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { coordinatorMachine, type CoordinatorEmitted, type CoordinatorInput } from '../../../machines/coordinatorMachine.js';

const LIMITS = { maxDepth: 3, maxChildren: 4, maxAgents: 10 };

function coordinator(input: Partial<CoordinatorInput> = {}) {
  const actor = createActor(coordinatorMachine, { input: { runId: 'r', limits: LIMITS, ...input } });
  const emitted: CoordinatorEmitted[] = [];
  actor.on('*', (e) => emitted.push(e as CoordinatorEmitted));
  actor.start();
  for (const [id, parentId] of [
    ['root', null],
    ['a', 'root'],
    ['b', 'a'],
  ] as const) {
    actor.send({ type: 'agent.register', id, name: id, parentId });
  }
  return { actor, emitted };
}

describe('allowance events', () => {
  it("a reserve trip stops the ids given and tells the owner once, keyed reserve:<owner>; the run's flags stay as they were", () => {
    const { actor, emitted } = coordinator();
    actor.send({ type: 'allowance.reserveTrip', ownerId: 'a', allowanceUsd: 4, ids: ['b'] });
    actor.send({ type: 'allowance.reserveTrip', ownerId: 'a', allowanceUsd: 4, ids: ['b'] });
    expect(emitted).toEqual([
      { type: 'agents.stop', ids: ['b'], reason: 'reserve' },
      expect.objectContaining({
        type: 'notice',
        to: 'a',
        from: 'system',
        key: 'reserve:a',
        kind: 'budget_reserve_stop',
        content: expect.stringContaining('$4.00 allowance'),
      }),
    ]);
    expect(actor.getSnapshot().context.reservesTripped).toEqual({ a: true });
    expect(actor.getSnapshot().context.budget).toMatchObject({ reserveStopped: false, reserveNoticeClaimed: false });
  });

  it('a trip restored from its notice key is not announced again', () => {
    const { actor, emitted } = coordinator({ reservesTripped: ['a'] });
    actor.send({ type: 'allowance.reserveTrip', ownerId: 'a', allowanceUsd: 4, ids: ['b'] });
    expect(emitted).toEqual([]);
  });

  it('an owner that already ended is not woken by a notice', () => {
    const { actor, emitted } = coordinator();
    actor.send({ type: 'agent.changed', id: 'a', status: 'completed', waitKind: null, error: null, stopReason: null, report: null, task: 't', at: 0 });
    emitted.length = 0;
    actor.send({ type: 'allowance.reserveTrip', ownerId: 'a', allowanceUsd: 4, ids: ['b'] });
    expect(emitted).toEqual([{ type: 'agents.stop', ids: ['b'], reason: 'reserve' }]);
  });

  it('a spent allowance stops its whole subtree, reason allowance', () => {
    const { actor, emitted } = coordinator();
    actor.send({ type: 'allowance.stop', ids: ['b', 'a'] });
    expect(emitted).toEqual([{ type: 'agents.stop', ids: ['b', 'a'], reason: 'allowance' }]);
  });
});
