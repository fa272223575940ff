/**
 * The group committer: writes staged in one tick commit together; effects run only after the
 * commit that holds the writes before them; one commit in flight; a failed commit stops it all.
 */
import { describe, expect, it } from 'vitest';
import { GroupCommitter } from '../../../src/host/commit.js';
import type { StorePort, WriteOp } from '../../../src/store/port.js';

const event = (n: number): WriteOp => ({ op: 'appendEvent', row: { runId: 'r', agentId: null, type: `e${n}`, data: {}, at: n } });
const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

/** A port whose commits are recorded and can be held open. */
function heldPort() {
  const batches: string[][] = [];
  const held: { release: () => void; fail: (err: Error) => void }[] = [];
  let hold = false;
  const port = {
    boot: 1,
    commit(ops: readonly WriteOp[]) {
      const names = ops.map((o) => (o.op === 'appendEvent' ? o.row.type : o.op));
      if (!hold) {
        batches.push(names);
        return Promise.resolve();
      }
      return new Promise<void>((resolve, reject) => {
        held.push({
          release: () => {
            batches.push(names);
            resolve();
          },
          fail: reject,
        });
      });
    },
  } as unknown as StorePort;
  return { port, batches, held, holdCommits: (on: boolean) => (hold = on) };
}

describe('GroupCommitter', () => {
  it('an in-memory port commits at the end of the microtask drain, yet lets the event loop turn every few commits', async () => {
    const { port, batches } = heldPort();
    const c = new GroupCommitter(Object.assign(port, { inMemory: true }), () => undefined);
    let loopTurned = false;
    setImmediate(() => (loopTurned = true));
    let commits = 0;
    // A turn loop that never waits on I/O (an instant model): stage, wait for the commit, again.
    while (!loopTurned && commits < 1_000) {
      c.stage(event(commits));
      await c.durable();
      commits++;
    }
    // Several commits per loop turn (no loop turn per commit), but timers and I/O are not starved.
    expect(commits).toBeGreaterThan(1);
    expect(commits).toBeLessThanOrEqual(32);
    expect(batches).toHaveLength(commits);
  });

  it('commits everything staged in one tick as one batch, then runs the effects in order', async () => {
    const { port, batches } = heldPort();
    const c = new GroupCommitter(port, () => undefined);
    const seen: string[] = [];
    c.stage(event(1));
    c.after(() => seen.push('a'));
    await Promise.resolve();
    c.stage(event(2), event(3)); // a later microtask of the same tick
    c.after(() => seen.push('b'));
    expect(seen).toEqual([]);
    expect(batches).toEqual([]);
    await c.durable();
    expect(batches).toEqual([['e1', 'e2', 'e3']]);
    expect(seen).toEqual(['a', 'b']);
    expect(c.stats).toEqual({ commits: 1, ops: 3 });
  });

  it('runs an effect at once when nothing is staged; durable() resolves at once then', async () => {
    const { port, batches } = heldPort();
    const c = new GroupCommitter(port, () => undefined);
    let ran = false;
    c.after(() => (ran = true));
    expect(ran).toBe(true);
    await c.durable();
    expect(batches).toEqual([]);
  });

  it('holds effects and barriers while the commit is open; writes staged meanwhile go to the next batch', async () => {
    const { port, batches, held, holdCommits } = heldPort();
    const c = new GroupCommitter(port, () => undefined);
    holdCommits(true);
    c.stage(event(1));
    let acked = false;
    const ack = c.durable().then(() => (acked = true));
    await tick();
    expect(held).toHaveLength(1);
    c.stage(event(2)); // staged while the first commit is in flight
    let late = false;
    c.after(() => (late = true));
    await tick();
    expect(held).toHaveLength(1); // one commit in flight at a time
    expect(acked).toBe(false);
    holdCommits(false);
    held[0]!.release();
    await ack;
    expect(acked).toBe(true);
    await c.durable();
    expect(late).toBe(true);
    expect(batches).toEqual([['e1'], ['e2']]);
  });

  it('a failed commit rejects every barrier, drops the effects, reports once and accepts nothing more', async () => {
    const { port, held, holdCommits } = heldPort();
    const fatal: unknown[] = [];
    const c = new GroupCommitter(port, (err) => void fatal.push(err));
    holdCommits(true);
    c.stage(event(1));
    let effect = false;
    c.after(() => (effect = true));
    const first = c.durable();
    await tick();
    c.stage(event(2));
    const second = c.durable();
    held[0]!.fail(new Error('disk gone'));
    await expect(first).rejects.toThrow('disk gone');
    await expect(second).rejects.toThrow('disk gone');
    expect(effect).toBe(false);
    expect(fatal).toHaveLength(1);
    c.stage(event(3));
    await expect(c.durable()).rejects.toThrow('disk gone');
    expect(c.pending).toBe(0);
  });

  it('counts the commits that carried writes and every write they carried (riders too), not the empty flushes that only ran effects', async () => {
    const { port, batches, held, holdCommits } = heldPort();
    const c = new GroupCommitter(port, () => undefined);
    let rider = true;
    c.beforeCommit(() => (rider ? ((rider = false), event(99)) : null));
    holdCommits(true);
    c.stage(event(1));
    const first = c.durable();
    await tick();
    // While the commit is open: an effect and a barrier with no writes of their own.
    const ran: string[] = [];
    c.after(() => ran.push('effect'));
    const second = c.durable();
    held[0]!.release();
    await first;
    await second;
    await tick();
    expect(ran).toEqual(['effect']);
    expect(batches).toEqual([['e1', 'e99']]);
    expect(c.flushes).toBe(2);
    expect(c.stats).toEqual({ commits: 1, ops: 2 });
  });
});
