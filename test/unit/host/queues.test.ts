/**
 * The shared model and tool queues (p-queue, as host/calls/gateway.ts and host/runtime.ts make
 * them) and lazy cancellation (src/cancel.ts). What troupe relies on from p-queue, pinned here so an
 * upgrade that changes it fails: never more than its concurrency, FIFO within a priority, higher
 * priority first, each caller settled as its task did, a task started synchronously in `add` when a
 * slot is free, and the next task handed its slot before the previous caller resumes (the budget's
 * queued-call rules). A LazyAbort behaves as an AbortController linked to its parent would.
 */
import { fc, test } from '@fast-check/vitest';
import PQueue from 'p-queue';
import { describe, expect, it } from 'vitest';
import { cancellationOf, LazyAbort } from '../../../src/cancel.js';

/** A task the test settles by hand. */
function gate() {
  let open!: () => void;
  let fail!: (err: Error) => void;
  const done = new Promise<void>((resolve, reject) => ((open = resolve), (fail = reject)));
  return { done, open: () => open(), fail: (err: Error) => fail(err) };
}

const flush = async () => {
  for (let i = 0; i < 20; i++) await Promise.resolve();
};

describe('the shared queues (p-queue)', () => {
  test.prop([fc.integer({ min: 1, max: 4 }), fc.array(fc.boolean(), { minLength: 1, maxLength: 30 }), fc.array(fc.nat(), { maxLength: 60 })])(
    'at most `concurrency` run, in FIFO order, each caller settled as its task',
    async (concurrency, failing, order) => {
      const queue = new PQueue({ concurrency });
      const started: number[] = [];
      let running = 0;
      let peak = 0;
      const gates = failing.map(() => gate());
      const results = failing.map((fails, i) =>
        queue
          .add(async () => {
            started.push(i);
            running++;
            peak = Math.max(peak, running);
            try {
              await gates[i]!.done;
              return i;
            } finally {
              running--;
            }
          })
          .then(
            (v: number) => ({ ok: v }),
            (err: Error) => ({ err: err.message }),
          ),
      );
      expect(started).toEqual(failing.map((_, i) => i).slice(0, concurrency));
      expect(queue.pending).toBe(Math.min(concurrency, failing.length));
      expect(queue.size).toBe(Math.max(0, failing.length - concurrency));
      // Settle running tasks in an order the arbitrary picks.
      const settled = new Set<number>();
      for (const pick of [...order, ...failing.map((_, i) => i)]) {
        const runningNow = started.filter((i) => !settled.has(i));
        if (runningNow.length === 0) break;
        const i = runningNow[pick % runningNow.length]!;
        settled.add(i);
        if (failing[i]) gates[i]!.fail(new Error(`e${i}`));
        else gates[i]!.open();
        await flush();
      }
      expect(started).toEqual(failing.map((_, i) => i));
      expect(peak).toBeLessThanOrEqual(concurrency);
      expect(await Promise.all(results)).toEqual(failing.map((fails, i) => (fails ? { err: `e${i}` } : { ok: i })));
      expect(queue.pending).toBe(0);
      expect(queue.size).toBe(0);
    },
  );

  it('starts a task synchronously when a slot is free, and a thrown error rejects only its caller', async () => {
    const queue = new PQueue({ concurrency: 1 });
    let ran = false;
    const a = queue.add(() => {
      ran = true;
      throw new Error('boom');
    });
    expect(ran).toBe(true);
    await expect(a).rejects.toThrow('boom');
    await expect(queue.add(() => 7)).resolves.toBe(7);
  });

  it('the next waiting task has started by the time the previous caller resumes', async () => {
    const queue = new PQueue({ concurrency: 1 });
    const first = gate();
    const log: string[] = [];
    const a = queue.add(() => first.done).then(() => log.push('caller A resumes'));
    void queue.add(() => void log.push('B starts'));
    first.open();
    await a;
    expect(log).toEqual(['B starts', 'caller A resumes']);
  });

  it('clear drops waiting tasks and a bad concurrency is refused', async () => {
    const queue = new PQueue({ concurrency: 1 });
    const first = gate();
    let dropped = false;
    void queue.add(() => first.done);
    void queue.add(() => (dropped = true));
    queue.clear();
    expect(queue.size).toBe(0);
    first.open();
    await flush();
    expect(dropped).toBe(false);
    expect(() => new PQueue({ concurrency: 0 })).toThrow(TypeError);
  });
});

describe('LazyAbort', () => {
  it('makes no AbortSignal until one is read, and then one that follows it', () => {
    const parent = new AbortController();
    const lazy = new LazyAbort(parent.signal);
    expect(lazy.aborted).toBe(false);
    const signal = lazy.signal;
    expect(signal.aborted).toBe(false);
    lazy.abort('stop');
    expect(signal.aborted).toBe(true);
    expect(signal.reason).toBe('stop');
    expect(lazy.reason).toBe('stop');
  });

  it('follows its parent, and the first abort decides the reason', () => {
    const parent = new AbortController();
    const early = new LazyAbort(parent.signal);
    const signalBefore = early.signal;
    const late = new LazyAbort(parent.signal);
    parent.abort('shutdown');
    expect(signalBefore.aborted).toBe(true);
    expect(signalBefore.reason).toBe('shutdown');
    expect(late.aborted).toBe(true);
    late.abort('stop');
    expect(late.reason).toBe('shutdown');
    expect(late.signal.reason).toBe('shutdown');
  });

  it('an abort before the signal is read still reaches the signal made later', () => {
    const lazy = new LazyAbort(null);
    lazy.abort('interrupt');
    lazy.abort('second');
    expect(lazy.signal.aborted).toBe(true);
    expect(lazy.signal.reason).toBe('interrupt');
  });

  it('close stops listening to the parent', () => {
    const parent = new AbortController();
    const lazy = new LazyAbort(parent.signal);
    const signal = lazy.signal;
    lazy.close();
    parent.abort('late');
    expect(signal.aborted).toBe(false);
  });

  it('cancellationOf reads through to its signal', () => {
    const controller = new AbortController();
    const c = cancellationOf(controller.signal);
    expect(c.aborted).toBe(false);
    controller.abort('x');
    expect([c.aborted, c.reason, c.signal]).toEqual([true, 'x', controller.signal]);
  });

  it('chains under a LazyAbort parent without making any AbortSignal until one is read', () => {
    const cycle = new LazyAbort(null);
    const call = new LazyAbort(cycle);
    const tool = new LazyAbort(call);
    expect([cycle.aborted, call.aborted, tool.aborted]).toEqual([false, false, false]);
    cycle.abort('stopped');
    expect([call.aborted, call.reason, tool.aborted, tool.reason]).toEqual([true, 'stopped', true, 'stopped']);
    tool.abort('late');
    expect(tool.reason).toBe('stopped');
    expect(tool.signal.reason).toBe('stopped');
  });

  // A chain of three scopes against the reference: AbortControllers linked by forwarding listeners.
  test.prop([
    fc.array(
      fc.oneof(
        fc.record({ op: fc.constant('abort' as const), level: fc.integer({ min: 0, max: 2 }), reason: fc.string({ maxLength: 2 }) }),
        fc.record({ op: fc.constant('read' as const), level: fc.integer({ min: 0, max: 2 }) }),
      ),
      { maxLength: 12 },
    ),
  ])('a chain of LazyAborts behaves as AbortControllers linked by listeners', (ops) => {
    const ref = [new AbortController(), new AbortController(), new AbortController()];
    for (const level of [1, 2]) {
      const parent = ref[level - 1]!.signal;
      parent.addEventListener('abort', () => ref[level]!.abort(parent.reason), { once: true });
    }
    const root = new LazyAbort(null);
    const mid = new LazyAbort(root);
    const lazy = [root, mid, new LazyAbort(mid)];
    const read: (AbortSignal | null)[] = [null, null, null];
    for (const step of ops) {
      if (step.op === 'abort') {
        ref[step.level]!.abort(step.reason);
        lazy[step.level]!.abort(step.reason);
      } else {
        read[step.level] ??= lazy[step.level]!.signal;
      }
      // Every scope agrees with its reference, and so does every signal made from one.
      for (const level of [0, 1, 2]) {
        const expected = ref[level]!.signal;
        expect([lazy[level]!.aborted, lazy[level]!.reason]).toEqual([expected.aborted, expected.aborted ? expected.reason : undefined]);
        const made = read[level];
        if (made) expect([made.aborted, made.reason]).toEqual([expected.aborted, expected.reason]);
      }
    }
  });
});
