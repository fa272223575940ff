/**
 * The hosting port of a SQLite file this process owns: what wants a host (a request in the inbox,
 * a run let go runnable or parked until a deadline, a wake) is what `claimNext` hands out — once,
 * and never a run hosted already. `troupe serve` finds its work through it.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { sqliteHosting } from '../../../src/hosting/sqliteHosting.js';
import { openStore } from '../../../src/store/sqliteStore.js';
import { submitRun } from '../../../src/worker/submit.js';
import { workdir } from '../../helpers/cli.js';

const lease = { owner: 'test', ttlMs: 15_000 };

async function fileWithRun() {
  const store = openStore({ path: join(workdir(), 'runs.db') });
  let now = 1_000;
  const hosting = sqliteHosting(store, () => now);
  // A submit lets its run go runnable: the file's host is to pick it up.
  const { runId, rootId } = await submitRun(hosting, { runId: 'run_a', root: { name: 'lead', task: 'Review.' }, interactive: true });
  return { store, hosting, runId, rootId, setNow: (at: number) => (now = at) };
}

describe('sqliteHosting', () => {
  it('a run let go runnable is handed out once; a claimed run is not handed out again, nor claimed twice', async () => {
    const { store, hosting, runId } = await fileWithRun();
    try {
      const claimed = await hosting.claimNext(lease);
      expect(claimed?.runId).toBe(runId);
      expect(await hosting.claimNext(lease)).toBeNull();
      await expect(hosting.claim(runId, lease)).rejects.toMatchObject({ code: 'RUN_LOCKED' });
      expect(await claimed!.release({ state: 'done' })).toBe(true);
      expect(await hosting.claimNext(lease)).toBeNull();
    } finally {
      store.close();
    }
  });

  it('a posted request wakes the listeners and makes its run wanted; it holds the run while open', async () => {
    const { store, hosting, runId, rootId } = await fileWithRun();
    try {
      const first = (await hosting.claimNext(lease))!;
      expect(await first.release({ state: 'parked', wakeAt: null })).toBe(true);
      expect(await hosting.claimNext(lease)).toBeNull();
      const woke: string[] = [];
      const stop = await hosting.listen((id) => woke.push(id), undefined as never);
      const id = await hosting.post({ runId, kind: 'send', payload: { agent: rootId, content: 'hello' }, at: 5 });
      expect(woke).toEqual([runId]);
      expect((await hosting.openRequests(runId)).map((r) => r.id)).toEqual([id]);
      const again = (await hosting.claimNext(lease))!;
      expect(again.runId).toBe(runId);
      // Not let go while its request is open; answered, it is.
      expect(await again.release({ state: 'parked', wakeAt: null })).toBe(false);
      store.answerInbox(id, { ok: true, message: 'delivered' }, 6);
      expect(await again.release({ state: 'parked', wakeAt: null })).toBe(true);
      expect(await hosting.claimNext(lease)).toBeNull();
      await stop();
    } finally {
      store.close();
    }
  });

  it('a release is conditional on the wake sequence: a wake told since it was read keeps the run; one read before is not handed out again', async () => {
    const { store, hosting, runId, rootId } = await fileWithRun();
    try {
      const held = (await hosting.claimNext(lease))!;
      // Posted while hosted: the host applies it, then reads the sequence and lets the run go.
      const id = await hosting.post({ runId, kind: 'send', payload: { agent: rootId, content: 'hello' }, at: 5 });
      store.answerInbox(id, { ok: true, message: 'delivered' }, 6);
      const seq = await hosting.wakeSeq(runId);
      await hosting.wake(runId);
      expect(await held.release({ state: 'parked', wakeAt: null }, seq)).toBe(false);
      expect(await held.release({ state: 'parked', wakeAt: null }, await hosting.wakeSeq(runId))).toBe(true);
      // The wakes were looked at before the release: nothing wants the run now.
      expect(await hosting.claimNext(lease)).toBeNull();
    } finally {
      store.close();
    }
  });

  it('a request another process posted (found in the file) makes its run wanted', async () => {
    const { store, hosting, runId, rootId } = await fileWithRun();
    try {
      expect(await (await hosting.claimNext(lease))!.release({ state: 'done' })).toBe(true);
      // Not through this port: as `troupe send` from another process writes it.
      store.postInbox({ runId, kind: 'send', payload: { agent: rootId, content: 'hi' }, at: 6 });
      expect((await hosting.claimNext(lease))?.runId).toBe(runId);
    } finally {
      store.close();
    }
  });

  it('a run parked until a deadline is wanted from the deadline on, not before', async () => {
    const { store, hosting, runId, setNow } = await fileWithRun();
    try {
      expect(await hosting.nextWakeIn()).toBeNull();
      expect(await (await hosting.claimNext(lease))!.release({ state: 'parked', wakeAt: 5_000 })).toBe(true);
      // The worker arms its timer for it (4 s from now), rather than waiting for its next poll.
      expect(await hosting.nextWakeIn()).toBe(4_000);
      setNow(4_999);
      expect(await hosting.nextWakeIn()).toBe(1);
      expect(await hosting.claimNext(lease)).toBeNull();
      setNow(5_000);
      expect(await hosting.nextWakeIn()).toBeNull();
      expect((await hosting.claimNext(lease))?.runId).toBe(runId);
    } finally {
      store.close();
    }
  });
});
