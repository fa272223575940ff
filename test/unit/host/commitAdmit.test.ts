/**
 * The group committer's hold (commit.ts `admit`): while a commit is out off the event loop (a
 * SQLite file in FULL syncing on the thread pool), what comes from outside waits until that
 * commit's effects have run, and then comes in order before the next flush — the order a commit
 * that blocked the loop in fsync gave, which the call log and a replay of a latent run rest on.
 */
import { describe, expect, it } from 'vitest';
import { admitted, GroupCommitter } from '../../../src/host/commit.js';
import type { StorePort, WriteOp } from '../../../src/store/port.js';

const event = (name: string): WriteOp => ({ op: 'appendEvent', row: { runId: 'r', agentId: null, type: name, data: {}, at: 0 } });
const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

/** A port whose commits stay out until released (as a sync on the thread pool), off the loop or not. */
function slowPort(offLoop: boolean) {
  const batches: string[][] = [];
  const out: { release: () => void; fail: (err: Error) => void }[] = [];
  const port = {
    boot: 1,
    commitsOffLoop: offLoop,
    commit(ops: readonly WriteOp[]) {
      const names = ops.map((o) => (o.op === 'appendEvent' ? o.row.type : o.op));
      return new Promise<void>((resolve, reject) => {
        out.push({
          release: () => {
            batches.push(names);
            resolve();
          },
          fail: reject,
        });
      });
    },
  } as unknown as StorePort;
  return { port, batches, out };
}

describe('GroupCommitter admit', () => {
  it('holds an arrival while a commit is out off the loop; it comes after that commit\u2019s effects, its writes in the next group with theirs', async () => {
    const { port, batches, out } = slowPort(true);
    const c = new GroupCommitter(port, () => undefined);
    const seen: string[] = [];
    c.stage(event('a'));
    c.after(() => {
      seen.push('effect of a');
      c.stage(event('effect'));
      // The effect's own microtasks run before any held arrival, as after a blocking sync.
      queueMicrotask(() => seen.push('microtask of the effect'));
    });
    await tick();
    expect(out).toHaveLength(1);
    expect(c.holding).toBe(true);
    // Two answers land while the sync is out (two timer callbacks).
    c.admit(() => {
      seen.push('answer 1');
      c.stage(event('answer 1'));
    });
    c.admit(() => {
      seen.push('answer 2');
      c.stage(event('answer 2'));
    });
    const input = c.admission();
    expect(input).not.toBeNull();
    void input!.then(() => seen.push('input'));
    await tick();
    expect(seen).toEqual([]);
    out[0]!.release();
    await tick();
    await tick();
    expect(seen).toEqual(['effect of a', 'microtask of the effect', 'answer 1', 'answer 2', 'input']);
    // One group after the first: the effect's writes and the answers', as one blocking sync grouped them.
    expect(out).toHaveLength(2);
    out[1]!.release();
    await tick();
    expect(batches).toEqual([['a'], ['effect', 'answer 1', 'answer 2']]);
  });

  it('admits at once when nothing is out, and on a port whose commits end within the loop turn even while one is', async () => {
    for (const offLoop of [true, false]) {
      const { port, out } = slowPort(offLoop);
      const c = new GroupCommitter(port, () => undefined);
      const seen: string[] = [];
      c.admit(() => seen.push('idle'));
      expect(c.admission()).toBeNull();
      c.stage(event('a'));
      await tick();
      expect(out).toHaveLength(1);
      c.admit(() => seen.push('during'));
      expect(c.admission() === null).toBe(!offLoop);
      expect(seen).toEqual(offLoop ? ['idle'] : ['idle', 'during']);
      out[0]!.release();
      await tick();
      await tick();
      expect(seen).toEqual(['idle', 'during']);
    }
  });

  it('admits what it held when the commit fails (nothing waits forever), and `admitted` passes values and throws through', async () => {
    const { port, out } = slowPort(true);
    const failures: unknown[] = [];
    const c = new GroupCommitter(port, (err) => failures.push(err));
    c.stage(event('a'));
    await tick();
    const value = admitted(c, () => 42);
    const thrown = admitted(c, () => {
      throw new Error('boom');
    });
    expect(value).toBeInstanceOf(Promise);
    out[0]!.fail(new Error('disk'));
    await expect(value).resolves.toBe(42);
    await expect(thrown).rejects.toThrow('boom');
    expect(failures).toHaveLength(1);
    // Not held: the value itself, no promise (no extra hop on a store whose commits end in the loop turn).
    expect(admitted(c, () => 7)).toBe(7);
  });
});
