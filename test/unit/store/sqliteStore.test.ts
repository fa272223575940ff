import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { newAgentRow } from '../../../src/store/rows.js';
import { openStore } from '../../../src/store/sqliteStore.js';
import { describeStoreContract } from './storeContract.js';

describeStoreContract('sqliteStore (:memory:)', () => openStore({ path: ':memory:' }));
describeStoreContract('sqliteStore (file, FULL)', () => openStore({ path: join(mkdtempSync(join(tmpdir(), 'troupe-')), 't.db') }));

describe('sqliteStore agent updates', () => {
  it('writes every field an update changes, as a fresh open reads it back', () => {
    const path = join(mkdtempSync(join(tmpdir(), 'troupe-')), 't.db');
    const budget = { limitUsd: null, budgetStopped: false, reserveStopped: false, paused: false, resumeEpoch: 0, reserveNoticeClaimed: false };
    const store = openStore({ path });
    store.transaction(() => {
      store.insertRun({ id: 'r', createdAt: 0, interactive: false, rootId: 'a', budget });
      store.registerAgent(newAgentRow({ id: 'a', runId: 'r', name: 'solo', parentId: null, depth: 0, task: 'work', skills: ['s'] }, 1), []);
    });
    const patch = {
      status: 'waiting' as const,
      noticeClaimed: true,
      stint: 3,
      turns: 7,
      stintTurns: 2,
      lastTool: 'noop',
      waitKind: 'agents' as const,
      waitingSince: 5,
      updatedAt: 9,
    };
    store.updateAgent('a', patch);
    const cached = store.getAgent('a');
    store.close();
    const reopened = openStore({ path });
    const row = reopened.getAgent('a');
    reopened.close();
    expect(row).toEqual(cached);
    expect(row).toMatchObject({ ...patch, name: 'solo', task: 'work', skills: ['s'], createdAt: 1 });
  });
});

describe("sqliteStore: an owner's open hands its verified agent rows to the first listAgents", () => {
  const budget = { limitUsd: null, budgetStopped: false, reserveStopped: false, paused: false, resumeEpoch: 0, reserveNoticeClaimed: false };
  /** Two runs, agents registered out of created_at order, with ties: listAgents orders by created_at, then rowid. */
  function seeded(): string {
    const path = join(mkdtempSync(join(tmpdir(), 'troupe-')), 't.db');
    const store = openStore({ path });
    store.transaction(() => {
      for (const run of ['r1', 'r2']) store.insertRun({ id: run, createdAt: 0, interactive: false, rootId: `${run}-a`, budget });
      const at = [5, 1, 5, 3, 1, 9];
      at.forEach((createdAt, i) => {
        const runId = i % 2 === 0 ? 'r1' : 'r2';
        store.registerAgent(
          newAgentRow({ id: `${runId}-${i}`, runId, name: `n${i}`, parentId: null, depth: 0, task: `t${i}`, skills: [`s${i}`] }, createdAt),
          [],
        );
      });
    });
    store.updateAgent('r1-2', { status: 'waiting', waitKind: 'agents', waitingSince: 4, turns: 2, lastTool: 'x' });
    store.close();
    return path;
  }
  /** What the file holds, read without the handoff (a reader never has one). */
  function fromFile(path: string, runId: string) {
    const store = openStore({ path, readonly: true });
    try {
      return store.listAgents(runId);
    } finally {
      store.close();
    }
  }

  it('lists exactly what the file holds, in its order, for every run', () => {
    const path = seeded();
    const expected = { r1: fromFile(path, 'r1'), r2: fromFile(path, 'r2') };
    expect(expected.r1.map((a) => a.id)).toEqual(['r1-4', 'r1-0', 'r1-2']);
    expect(expected.r2.map((a) => a.id)).toEqual(['r2-1', 'r2-3', 'r2-5']);
    const store = openStore({ path });
    expect(store.listAgents('r2')).toEqual(expected.r2);
    expect(store.listAgents('r1')).toEqual(expected.r1);
    store.close();
  });

  it('hands each list out once: a caller changing its rows changes nothing the next listAgents returns', () => {
    const path = seeded();
    const store = openStore({ path });
    const first = store.listAgents('r1');
    first[0]!.name = 'changed';
    expect(store.listAgents('r1')).toEqual(fromFile(path, 'r1'));
    store.close();
  });

  it('is dropped by the first write: listAgents then reads the write back', () => {
    const path = seeded();
    const store = openStore({ path });
    store.updateAgent('r1-0', { status: 'stopped', stopReason: 'requested', updatedAt: 7 });
    expect(store.listAgents('r1').find((a) => a.id === 'r1-0')).toMatchObject({ status: 'stopped', stopReason: 'requested', updatedAt: 7 });
    store.close();
  });
});
