/**
 * The shared model and tool queues (p-queue, as host/calls/gateway.ts and host/runtime.ts make
 * them). What troupe relies on from p-queue, pinned here so an
 * upgrade that changes it fails: never more than its concurrency, FIFO within a priority, higher
 * priority first, each caller settled as its task did, a task started synchronously in `add` when a
 * slot is free, and the next task handed its slot before the previous caller resumes (the budget's
 * queued-call rules). And the model queue's default size.
 */
import { fc, test } from '@fast-check/vitest';
import PQueue from 'p-queue';
import { describe, expect, it } from 'vitest';
import { createCoordinator } from '../../../src/host/createCoordinator.js';
import { DEFAULT_LIMITS, type CoordinatorOptions } from '../../../src/host/options.js';
import { scriptedModel } from '../../../src/model/scriptedModel.js';

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

describe("the model queue's default concurrency", () => {
  const model = scriptedModel({ agents: {} });
  const concurrency = async (options: Partial<CoordinatorOptions>) => {
    const c = createCoordinator({ model, ...options });
    try {
      return c.health().modelQueue.concurrency;
    } finally {
      await c.shutdown();
    }
  };

  it('follows limits.maxAgents (one call in flight per agent the limits allow) unless concurrency.model is set', async () => {
    expect(await concurrency({})).toBe(DEFAULT_LIMITS.maxAgents);
    expect(await concurrency({ limits: { maxAgents: 1_000, maxChildren: 1_000 } })).toBe(1_000);
    expect(await concurrency({ limits: { maxAgents: 1_000 }, concurrency: { model: 3 } })).toBe(3);
  });
});
