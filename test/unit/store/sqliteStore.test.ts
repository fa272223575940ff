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
