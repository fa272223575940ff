/**
 * The commit journal names the session items a commit appends by position (v3) and keeps what a
 * rewrite removed; read back against the session rows, every entry gives the writes it recorded.
 * Entries written before (v2, no `v`), which copied their items, are still read and forked as written.
 */
import { describe, expect, it } from 'vitest';
import { forkRun } from '../../../src/fork/fork.js';
import { commitsOf, journalFor, writesOf, type CommitEntry } from '../../../src/fork/journal.js';
import type { SessionItem } from '../../../src/model/types.js';
import { memoryStore } from '../../../src/store/memoryStore.js';
import { portOf, type StorePort, type WriteOp } from '../../../src/store/port.js';
import { COMMIT_EVENT, type RunRow } from '../../../src/store/types.js';
import { agentRow } from '../store/storeContract.js';

const RUN: RunRow = {
  id: 'run1',
  createdAt: 1,
  interactive: false,
  rootId: 'ag1',
  budget: { limitUsd: null, budgetStopped: false, reserveStopped: false, paused: false, resumeEpoch: 0, reserveNoticeClaimed: false },
};
const said = (text: string): SessionItem => ({ role: 'assistant', content: text });
const NOTHING = new Set<string>();

/** What the host does (mail/sessions.ts, commit.ts): sessions in memory, each write staged with where it goes, every commit journaled. */
function owner() {
  const port = portOf(memoryStore());
  // The journal of a durable store (the memory store keeps none).
  const journal = journalFor({ inMemory: false } as StorePort, 'run1', () => 7)!;
  const sessions = new Map<string, SessionItem[]>();
  /** Every op committed, as a store applies it (what the journal must give back). */
  const committed: WriteOp[][] = [];
  return {
    port,
    committed,
    async commit(...ops: WriteOp[]) {
      committed.push(ops.map(({ ...w }) => (delete (w as { from?: number }).from, delete (w as { replaced?: unknown }).replaced, w as WriteOp)));
      await port.commit([...ops, journal(ops)!]);
    },
    register(id: string): WriteOp {
      // Not the id itself: a fork renames ids wherever they occur.
      const first = [{ role: 'user' as const, content: `the task of ${id.replace('ag', 'agent ')}` }];
      sessions.set(id, [...first]);
      return { op: 'registerAgent', agent: agentRow(id), firstInput: first };
    },
    append(id: string, ...texts: string[]): WriteOp {
      const list = sessions.get(id)!;
      const items = texts.map(said);
      const from = list.length;
      list.push(...items);
      return { op: 'appendSession', agentId: id, items, from };
    },
    replace(id: string, rewrite: (old: SessionItem[]) => SessionItem[]): WriteOp {
      const old = sessions.get(id)!;
      const items = rewrite(old);
      sessions.set(id, [...items]);
      return { op: 'replaceSession', agentId: id, items, replaced: old };
    },
    turn: (id: string, turns: number): WriteOp => ({ op: 'updateAgent', id, patch: { turns } }),
  };
}

type Owner = ReturnType<typeof owner>;

/** Two agents; ag1's session compacted (a summary, its last item kept), grown, stripped of an item in its middle, grown again. */
async function rewritten(o: Owner) {
  await o.commit({ op: 'insertRun', run: RUN }, o.register('ag1'), o.register('ag2'));
  await o.commit(o.append('ag1', 'one', 'two'), o.append('ag2', 'two says one'), o.turn('ag1', 1));
  await o.commit(o.append('ag1', 'three'), o.turn('ag1', 2));
  await o.commit(
    o.replace('ag1', (old) => [said('summary of one and two'), ...old.slice(-1)]),
    o.append('ag1', 'four'),
    o.turn('ag1', 3),
  );
  await o.commit(o.append('ag1', 'five', 'six'), o.append('ag2', 'two says two'), o.turn('ag1', 4));
  await o.commit(
    o.replace('ag1', (old) => old.map((item, i) => (i === 2 ? said('[four, stripped]') : item))),
    o.turn('ag1', 5),
  );
  await o.commit(o.append('ag1', 'seven'), o.turn('ag1', 6));
}

describe('commit journal v3', () => {
  it('names appended items instead of copying them, and gives back every write across two rewrites', async () => {
    const o = owner();
    await rewritten(o);
    const commits = commitsOf(await o.port.historyOf('run1'), NOTHING);
    expect(commits.map((c) => (c.entry.data as unknown as CommitEntry).v)).toEqual(Array(7).fill(3));
    const text = JSON.stringify(commits.map((c) => c.entry.data));
    // Appended and never removed: only named.
    for (const kept of ['the task of agent 2', 'two says one', 'two says two', 'five', 'six', 'seven', 'summary of one and two'])
      expect(text).not.toContain(kept);
    // The compaction kept what it removed and named the item it kept; the strip kept only the item it replaced.
    const rewrites = commits.flatMap((c) => c.ops.filter((w) => w.op === 'replaceSession'));
    expect(rewrites).toEqual([
      {
        op: 'replaceSession',
        agentId: 'ag1',
        count: 2,
        removed: { head: 0, items: ['the task of agent 1', 'one', 'two'].map((t, i) => (i === 0 ? { role: 'user', content: t } : said(t))), tail: 1 },
      },
      { op: 'replaceSession', agentId: 'ag1', count: 5, removed: { head: 2, items: [said('four')], tail: 2 } },
    ]);

    const read = await writesOf(commits, (id) => o.port.loadSession(id));
    expect(read).toEqual({ ok: true, writes: o.committed.map((ops) => ops.filter((w) => w.op !== 'appendEvent')) });
  });

  it('forks at a turn before each rewrite, between them and after them, and a fork of a fork, with the sessions as they were', async () => {
    const o = owner();
    const asOf: SessionItem[][] = [];
    const snapshot = async () => void asOf.push(await o.port.loadSession('ag1'));
    // The session right after each of ag1's turns, read from the rows as they were then.
    const commit = o.commit.bind(o);
    o.commit = async (...ops) => {
      await commit(...ops);
      if (ops.some((w) => w.op === 'updateAgent' || w.op === 'insertRun')) await snapshot();
    };
    await rewritten(o);
    for (const turn of [0, 2, 3, 5, 6]) {
      const forked = await forkRun(o.port, 'run1', { at: { agent: 'n-ag1', turn }, runId: `run_at${turn}`, now: 9 });
      if (!forked.ok) throw forked.error;
      const [a1] = await o.port.listAgents(`run_at${turn}`);
      expect(await o.port.loadSession(a1!.id), `turn ${turn}`).toEqual(asOf[turn]);
    }
    // The fork at turn 6 copied the entries (renamed): forked again before the first rewrite.
    const [renamed] = await o.port.listAgents('run_at6');
    const again = await forkRun(o.port, 'run_at6', { at: { agent: renamed!.id, turn: 2 }, runId: 'run_again', now: 10 });
    if (!again.ok) throw again.error;
    const [a1] = await o.port.listAgents('run_again');
    expect(await o.port.loadSession(a1!.id)).toEqual(asOf[2]);
  });

  it('an item the session no longer holds is STORE_CORRUPT, not a fork with a hole', async () => {
    const o = owner();
    await rewritten(o);
    const commits = commitsOf(await o.port.historyOf('run1'), NOTHING);
    const read = await writesOf(commits, async (id) => (await o.port.loadSession(id)).slice(0, -1));
    expect(read).toMatchObject({ ok: false, error: { code: 'STORE_CORRUPT' } });
  });

  it('an append named anywhere but after the items before it is STORE_CORRUPT, not the wrong items', async () => {
    const o = owner();
    await rewritten(o);
    // One item too early: the rows hold it at the end, the entry names the item before.
    await o.commit({ ...(o.append('ag2', 'two says three') as Extract<WriteOp, { op: 'appendSession' }>), from: 2 });
    const commits = commitsOf(await o.port.historyOf('run1'), NOTHING);
    const read = await writesOf(commits, (id) => o.port.loadSession(id));
    expect(read).toMatchObject({ ok: false, error: { code: 'STORE_CORRUPT', message: expect.stringContaining('at item 2, where it held 3') } });
  });
});

describe('entries written before v3', () => {
  /**
   * A run journaled by three troupes in turn: entries without `v` (the commit's events among its
   * ops), then v2 (events the rows before the entry), both copying their items, then v3.
   */
  async function threeVersions() {
    const port = portOf(memoryStore());
    const task: SessionItem = { role: 'user', content: 'the task' };
    const entry = (data: Record<string, unknown>): WriteOp => ({ op: 'appendEvent', row: { runId: 'run1', agentId: null, type: COMMIT_EVENT, data, at: 2 } });
    const event: WriteOp = { op: 'appendEvent', row: { runId: 'run1', agentId: 'ag1', type: 'agent.status', data: { status: 'running' }, at: 2 } };
    const first: WriteOp[] = [{ op: 'insertRun', run: RUN }, { op: 'registerAgent', agent: agentRow('ag1'), firstInput: [task] }, event];
    await port.commit([...first, entry({ ops: first })]);
    const second: WriteOp[] = [
      { op: 'appendSession', agentId: 'ag1', items: [said('one')] },
      { op: 'updateAgent', id: 'ag1', patch: { turns: 1 } },
    ];
    await port.commit([...second, event, entry({ ops: second, v: 2 })]);
    // A newer troupe resumed it: its entries name items where the older ones left the session.
    const journal = journalFor({ inMemory: false } as StorePort, 'run1', () => 3)!;
    const third: WriteOp[] = [
      { op: 'appendSession', agentId: 'ag1', items: [said('two')], from: 2 },
      { op: 'updateAgent', id: 'ag1', patch: { turns: 2 } },
    ];
    await port.commit([...third, journal(third)!]);
    return { port, first, second, task };
  }

  it('reads entries without v and v2 as written, and v3 entries after them', async () => {
    const { port, first, second } = await threeVersions();
    const commits = commitsOf(await port.historyOf('run1'), NOTHING);
    // Without v the event is among the entry's ops (its row is a copy); v2 names the row before it.
    expect(commits.map((c) => c.events.map((e) => e.type))).toEqual([[], ['agent.status'], []]);
    const read = await writesOf(commits, (id) => port.loadSession(id));
    expect(read).toEqual({
      ok: true,
      writes: [
        first,
        second,
        [
          { op: 'appendSession', agentId: 'ag1', items: [said('two')] },
          { op: 'updateAgent', id: 'ag1', patch: { turns: 2 } },
        ],
      ],
    });
  });

  it('forks at a turn of each version with the session as it was', async () => {
    const { port, task } = await threeVersions();
    const sessions: SessionItem[][] = [];
    for (const turn of [0, 1, 2]) {
      const forked = await forkRun(port, 'run1', { at: { agent: 'ag1', turn }, runId: `run_v${turn}`, now: 9 });
      if (!forked.ok) throw forked.error;
      const [a1] = await port.listAgents(`run_v${turn}`);
      sessions.push(await port.loadSession(a1!.id));
    }
    expect(sessions).toEqual([[task], [task, said('one')], [task, said('one'), said('two')]]);
    // Each fork carries its events: the old entry's among its ops, the v2 entry's as the row before it.
    expect((await port.historyOf('run_v1')).filter((e) => e.type === 'agent.status')).toHaveLength(2);
  });
});
