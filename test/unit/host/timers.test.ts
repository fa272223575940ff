/**
 * The run's one idle timer for dormant waits (timers.ts): a heap of deadlines with lazy removal and
 * one clock timeout for the earliest. Checked against a plain map of deadlines on a simulated clock.
 */
import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { IdleTimers } from '../../../src/host/agents/timers.js';

type Op = { kind: 'set'; id: string; inMs: number } | { kind: 'delete'; id: string } | { kind: 'advance'; ms: number };

const ids = ['a', 'b', 'c', 'd', 'e', 'f'];
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant('set' as const), id: fc.constantFrom(...ids), inMs: fc.integer({ min: 0, max: 1_000 }) }),
  fc.record({ kind: fc.constant('delete' as const), id: fc.constantFrom(...ids) }),
  fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 0, max: 600 }) }),
);

describe('IdleTimers', () => {
  // Each id fires once when the clock reaches its latest deadline, never after a delete; a fire
  // may park the agent again (set from inside the callback), as a woken agent that waits again does.
  test.prop([fc.array(op, { maxLength: 60 }), fc.array(fc.option(fc.integer({ min: 1, max: 800 }), { nil: null }), { minLength: 1, maxLength: 20 })])(
    'fires exactly the deadlines a map of deadlines says are due, in deadline order',
    (ops, reparks) => {
      const clock = new SimulatedClock();
      const model = new Map<string, number>();
      let fired: { id: string; at: number }[] = [];
      let n = 0;
      const timers = new IdleTimers(clock, (id) => {
        fired.push({ id, at: clock.now() });
        const again = reparks[n++ % reparks.length];
        if (again != null) timers.set(id, clock.now() + again);
      });
      for (const o of ops) {
        if (o.kind === 'set') {
          timers.set(o.id, clock.now() + o.inMs);
          model.set(o.id, clock.now() + o.inMs);
        } else if (o.kind === 'delete') {
          timers.delete(o.id);
          model.delete(o.id);
        } else {
          fired = [];
          const firstRepark = n;
          clock.increment(o.ms);
          const now = clock.now();
          const due = [...model].filter(([, at]) => at <= now);
          // Deadline order (ties in any order), each due id once, at the time the clock reached.
          expect(fired.map((f) => f.id).sort()).toEqual(due.map(([id]) => id).sort());
          const dueAt = new Map(due);
          const order = fired.map((f) => dueAt.get(f.id)!);
          expect(order).toEqual([...order].sort((x, y) => x - y));
          for (const f of fired) expect(f.at).toBe(now);
          for (const [id] of due) model.delete(id);
          // The same re-parks the callback made, in firing order.
          fired.forEach((f, i) => {
            const again = reparks[(firstRepark + i) % reparks.length];
            if (again != null) model.set(f.id, now + again);
          });
        }
        expect(timers.size).toBe(model.size);
        for (const id of ids) expect(timers.has(id)).toBe(model.has(id));
      }
      timers.close();
      fired = [];
      clock.increment(10_000);
      expect(fired).toEqual([]);
    },
  );

  it('keeps one clock timeout for the earliest deadline, re-armed only when an earlier one arrives', () => {
    const clock = new SimulatedClock();
    const timers = new IdleTimers(clock, () => undefined);
    const pending = () => (clock as unknown as { timeouts: Map<number, unknown> }).timeouts.size;
    for (let i = 0; i < 100; i++) timers.set(`a${i}`, 1_000 + i);
    expect(pending()).toBe(1);
    timers.set('early', 10);
    expect(pending()).toBe(1);
    timers.delete('early');
    timers.close();
    expect(pending()).toBe(0);
  });
});
