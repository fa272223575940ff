/**
 * The turn loop's cancellation scope (src/cancel.ts): ports get plain AbortSignals, and a cycle
 * hands an operation's signal on to the next while nobody aborted it or listens to it. Against the
 * reference it replaces: a fresh AbortController per operation, linked to the cycle's controller
 * by a forwarding listener that is removed when the next operation opens.
 */
import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import { CycleScope } from '../../../src/cancel.js';

describe('CycleScope', () => {
  it('the first abort wins and fixes the reason: the operation’s own, or the cycle’s', () => {
    const cycle = new CycleScope();
    const call = cycle.operation();
    call.abort('interrupt');
    cycle.abort('shutdown');
    expect([call.signal.aborted, call.signal.reason]).toEqual([true, 'interrupt']);
    expect([cycle.aborted, cycle.reason]).toEqual([true, 'shutdown']);

    const other = new CycleScope();
    const tools = other.operation();
    other.abort('shutdown');
    other.abort('again');
    tools.abort('stop');
    expect([tools.signal.aborted, tools.signal.reason, other.reason]).toEqual([true, 'shutdown', 'shutdown']);
  });

  it('an operation opened after the cycle ended is aborted already, with the cycle’s reason', () => {
    const cycle = new CycleScope();
    cycle.abort('ended');
    const late = cycle.operation();
    expect([late.signal.aborted, late.signal.reason]).toEqual([true, 'ended']);
  });

  it('hands a signal on only while nobody aborted it and nobody listens to it', () => {
    const cycle = new CycleScope();
    const first = cycle.operation();
    expect(cycle.operation()).toBe(first);
    const listener = () => undefined;
    first.signal.addEventListener('abort', listener);
    const second = cycle.operation();
    expect(second).not.toBe(first);
    // The one left behind no longer follows the cycle (as a closed operation did).
    cycle.abort('shutdown');
    expect(first.signal.aborted).toBe(false);
    expect(second.signal.reason).toBe('shutdown');

    const again = new CycleScope();
    const interrupted = again.operation();
    interrupted.abort('interrupt');
    const next = again.operation();
    expect(next).not.toBe(interrupted);
    expect(next.signal.aborted).toBe(false);
  });

  // What a listener sees is the reference's: reusing a signal nobody listens to is invisible.
  test.prop([
    fc.array(
      fc.oneof(
        fc.constant({ op: 'open' as const }),
        fc.constant({ op: 'listen' as const }),
        fc.constant({ op: 'unlisten' as const }),
        fc.record({ op: fc.constant('abortOperation' as const), reason: fc.string({ maxLength: 2 }) }),
        fc.record({ op: fc.constant('abortCycle' as const), reason: fc.string({ maxLength: 2 }) }),
      ),
      { maxLength: 16 },
    ),
  ])('behaves as a fresh AbortController per operation, linked to the cycle', (ops) => {
    const refCycle = new AbortController();
    let refOp: AbortController | null = null;
    let unlinkRef: () => void = () => undefined;
    const cycle = new CycleScope();
    let op: AbortController | null = null;
    const seen = { ref: [] as unknown[], real: [] as unknown[] };
    let removers: (() => void)[] = [];
    let n = 0;
    for (const step of ops) {
      if (step.op === 'open' || op === null || refOp === null) {
        unlinkRef();
        const fresh = new AbortController();
        const parent = refCycle.signal;
        if (parent.aborted) fresh.abort(parent.reason);
        const forward = () => fresh.abort(parent.reason);
        parent.addEventListener('abort', forward, { once: true });
        unlinkRef = () => parent.removeEventListener('abort', forward);
        refOp = fresh;
        op = cycle.operation();
        if (step.op === 'open') continue;
      }
      if (step.op === 'listen') {
        const id = n++;
        const [r, q] = [refOp.signal, op.signal];
        const onRef = () => seen.ref.push([id, r.reason]);
        const onReal = () => seen.real.push([id, q.reason]);
        r.addEventListener('abort', onRef, { once: true });
        q.addEventListener('abort', onReal, { once: true });
        removers.push(() => (r.removeEventListener('abort', onRef), q.removeEventListener('abort', onReal)));
      } else if (step.op === 'unlisten') {
        for (const remove of removers) remove();
        removers = [];
      } else if (step.op === 'abortOperation') {
        refOp.abort(step.reason);
        op.abort(step.reason);
      } else {
        refCycle.abort(step.reason);
        cycle.abort(step.reason);
      }
      expect(seen.real).toEqual(seen.ref);
      expect([op.signal.aborted, op.signal.reason]).toEqual([refOp.signal.aborted, refOp.signal.reason]);
      expect([cycle.aborted, cycle.reason]).toEqual([refCycle.signal.aborted, refCycle.signal.reason]);
    }
  });
});
