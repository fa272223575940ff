/**
 * What a resume of parked agents must hand back, whatever it skips to be fast (issue 36 item 5):
 * the agent rows the open's verify pass decoded (read as arrays), the spend of the agents that
 * spent and the zero spend of those that did not, each view's status and wait kind read from the
 * coordinator's records, and no notice told twice.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import type { AgentStatus } from '../../machines/types.js';
import { resumeCoordinator } from '../../src/host/resumeCoordinator.js';
import type { Model } from '../../src/model/types.js';
import { newAgentRow } from '../../src/store/rows.js';
import { openStore } from '../../src/store/sqliteStore.js';
import { flush } from '../helpers/team.js';

const model: Model = { complete: () => Promise.reject(new Error('no model call expected while parked')) };

interface Seeded {
  id: string;
  parentId: string | null;
  status: AgentStatus;
  waitKind: 'user' | 'agents' | null;
  noticeClaimed: boolean;
}

const AGENTS: Seeded[] = [
  { id: 'root', parentId: null, status: 'waiting', waitKind: 'user', noticeClaimed: false },
  { id: 'w1', parentId: 'root', status: 'waiting', waitKind: 'agents', noticeClaimed: false },
  { id: 'w2', parentId: 'w1', status: 'stalled', waitKind: null, noticeClaimed: false },
  { id: 'w3', parentId: 'w1', status: 'completed', waitKind: null, noticeClaimed: true },
  { id: 'w4', parentId: 'root', status: 'waiting', waitKind: 'agents', noticeClaimed: false },
];

/** A file of parked agents; w4 and w2 spent (w4 on two purposes), the others nothing. */
function seed(): string {
  const path = join(mkdtempSync(join(tmpdir(), 'troupe-')), 'parked.db');
  const store = openStore({ path, synchronous: 'NORMAL' });
  store.transaction(() => {
    const budget = { limitUsd: null, budgetStopped: false, reserveStopped: false, paused: false, resumeEpoch: 0, reserveNoticeClaimed: false };
    store.insertRun({ id: 'run', createdAt: 0, interactive: true, rootId: 'root', budget });
    AGENTS.forEach((a, i) => {
      const depth = a.parentId === null ? 0 : a.parentId === 'root' ? 1 : 2;
      const row = newAgentRow({ id: a.id, runId: 'run', name: `n-${a.id}`, parentId: a.parentId, depth, task: `task ${a.id}`, skills: [] }, i);
      const waiting = a.status === 'waiting';
      store.registerAgent(
        {
          ...row,
          status: a.status,
          waitKind: a.waitKind,
          waitingSince: waiting ? 0 : null,
          waitTimeoutMs: waiting ? 300_000 : null,
          noticeClaimed: a.noticeClaimed,
          turns: i,
        },
        [{ role: 'user', content: `task ${a.id}` }],
      );
    });
    const usage = { runId: 'run', model: 'm', inputTokens: 1, outputTokens: 1, cachedInputTokens: 0, at: 1 };
    store.recordUsage({ ...usage, agentId: 'w4', purpose: 'main', costUsd: 0.25 });
    store.recordUsage({ ...usage, agentId: 'w4', purpose: 'compaction', costUsd: 0.125 });
    store.recordUsage({ ...usage, agentId: 'w2', purpose: 'main', costUsd: 0.5 });
  });
  store.close();
  return path;
}

describe('resuming parked agents', () => {
  it('every agent comes back parked with its status, wait kind, turns, place in the tree and spend; nothing is told again', async () => {
    const store = openStore({ path: seed() });
    const messagesBefore = store.listMessages('run').length;
    const c = await resumeCoordinator({ store, model, clock: new SimulatedClock() });
    await flush();
    const views = new Map(c.list().map((a) => [a.id, a]));
    for (const [i, a] of AGENTS.entries()) {
      expect(views.get(a.id), a.id).toMatchObject({ status: a.status, waitKind: a.waitKind, parentId: a.parentId, turns: i });
    }
    expect(views.get('w4')).toMatchObject({ spentUsd: 0.375, spentByPurpose: { main: 0.25, compaction: 0.125 } });
    expect(views.get('w2')).toMatchObject({ spentUsd: 0.5, spentByPurpose: { main: 0.5 } });
    for (const id of ['root', 'w1', 'w3']) expect(views.get(id), id).toMatchObject({ spentUsd: 0, spentByPurpose: {} });
    expect(c.tree().map((n) => [n.id, n.children.map((k) => k.id)])).toEqual([['root', ['w1', 'w4']]]);
    expect(c.tree()[0]!.children[0]!.children.map((k) => [k.id, k.status, k.waitKind])).toEqual([
      ['w2', 'stalled', null],
      ['w3', 'completed', null],
    ]);
    // w3's end was told before the restart (its claim is kept): no message is written for it again.
    expect(store.listMessages('run')).toHaveLength(messagesBefore);
    await c.shutdown();
    store.close();
  });
});
