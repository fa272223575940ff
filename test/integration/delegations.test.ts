import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { createCoordinator } from '../../src/host/createCoordinator.js';
import { RESULT_TEXT_CAP } from '../../src/host/async/delegations.js';
import { recoverRun, resumeCoordinator } from '../../src/host/resumeCoordinator.js';
import { createLogger } from '../../src/logging/createLogger.js';
import { scriptedModel } from '../../src/model/scriptedModel.js';
import { memoryStore } from '../../src/store/memoryStore.js';
import { openStore } from '../../src/store/sqliteStore.js';
import type { Store } from '../../src/store/types.js';

const dbPath = () => join(mkdtempSync(join(tmpdir(), 'troupe-')), 'run.db');
/** The lead parks on the user (interactive), so it stays put until a message arrives. */
const parked = { agents: { lead: [{ tool: 'respond_to_user', args: { message: 'parked' } }] } };

describe('delegations', () => {
  it('dispatch → running; complete → the result (capped) comes back to the agent as one message', async () => {
    const clock = new SimulatedClock();
    const c = createCoordinator({
      model: scriptedModel(
        {
          agents: {
            lead: [
              { tool: 'respond_to_user', args: { message: 'waiting for the delegation' } },
              { tool: 'finish', args: { summary: 'got it' } },
            ],
          },
        },
        { clock },
      ),
      clock,
      interactive: true,
    });
    const root = await c.start({ name: 'lead', task: 'delegate' });
    await c.waitFor(root, ['waiting']);
    const id = c.delegations.dispatch(root, 'crawl the docs');
    expect(id).toBe('deleg_0001');
    expect(c.delegations.list(root)).toMatchObject([{ delegationId: 'deleg_0001', status: 'running', goal: 'crawl the docs' }]);
    await c.delegations.complete(root, id, 'r'.repeat(RESULT_TEXT_CAP + 500));
    expect(c.delegations.list(root)[0]).toMatchObject({ status: 'completed' });
    expect(c.delegations.list(root)[0]!.resultText).toHaveLength(RESULT_TEXT_CAP);
    await c.waitFor(root, ['completed']);
    const results = c.store.listMessages(c.runId).filter((m) => m.type === 'delegation_result');
    expect(results).toHaveLength(1);
    expect(results[0]!.content).toMatch(/^Delegation deleg_0001 \(crawl the docs\) completed: r{100}/);
    await expect(c.delegations.complete(root, id, 'again')).rejects.toMatchObject(expect.objectContaining({ code: 'TOOL_NOT_ALLOWED' }));
    await expect(c.delegations.fail(root, 'deleg_0042', 'x')).rejects.toMatchObject(expect.objectContaining({ code: 'AGENT_NOT_FOUND' }));
    expect(() => c.delegations.dispatch('ghost', 'x')).toThrow(expect.objectContaining({ code: 'AGENT_NOT_FOUND' }));
    expect(() => c.delegations.dispatch(root, '')).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID' }));
    await c.shutdown();
  });

  it('after a crash, a running delegation becomes interrupted, its agent is told once, and ids are never reissued', async () => {
    const path = dbPath();
    const clock = new SimulatedClock();
    let store = openStore({ path });
    const c = createCoordinator({ model: scriptedModel(parked, { clock }), store, clock, interactive: true });
    const root = await c.start({ name: 'lead', task: 'delegate' });
    await c.waitFor(root, ['waiting']);
    const done = c.delegations.dispatch(root, 'first job');
    const lost = c.delegations.dispatch(root, 'second job');
    await c.delegations.complete(root, done, 'finished');
    await c.shutdown();
    store.close();

    store = openStore({ path });
    const c2 = await resumeCoordinator({
      store,
      clock,
      model: scriptedModel(parked, { clock }),
    });
    expect(c2.delegations.list(root).map((d) => [d.delegationId, d.status])).toEqual([
      [done, 'completed'],
      [lost, 'interrupted'],
    ]);
    const interrupted = () => store.listMessages(c2.runId).filter((m) => m.type === 'delegation_interrupted');
    expect(interrupted()).toHaveLength(1);
    expect(interrupted()[0]!.content).toContain('deleg_0002 (second job) was interrupted by a process restart and did NOT complete');
    // The agent read it (it was woken by it).
    await c2.whenIdle();
    expect(JSON.stringify(store.loadSession(root))).toContain('did NOT complete');
    await recoverRun(store, undefined, {});
    expect(interrupted()).toHaveLength(1);
    expect(c2.delegations.dispatch(root, 'third job')).toBe('deleg_0003');
    await c2.shutdown();
    store.close();
  });

  it('a store that cannot keep a delegation stops the coordinator (crash-only, like the mailbox): nothing is acknowledged', async () => {
    const base = memoryStore();
    const broken: Store = {
      ...base,
      insertDelegation: () => {
        throw new Error('no such table: delegations');
      },
    };
    const lines: string[] = [];
    const logger = createLogger({ level: 'warn' }, new Writable({ write: (chunk, _e, cb) => (lines.push(String(chunk)), cb()) }));
    const clock = new SimulatedClock();
    const c = createCoordinator({ model: scriptedModel(parked, { clock }), store: broken, clock, logger });
    const root = await c.start({ name: 'lead', task: 'x' });
    const id = c.delegations.dispatch(root, 'cannot be kept');
    // The dispatch's commit fails: its completion is never acknowledged, and no more work is accepted.
    await expect(c.delegations.complete(root, id, 'ok')).rejects.toMatchObject({ code: 'STORE_IO' });
    expect(c.health()).toMatchObject({ ok: false, error: { code: 'STORE_IO' } });
    await expect(c.send(root, { content: 'hello?' })).rejects.toMatchObject({ code: 'STORE_IO' });
    expect(base.listDelegations(c.runId)).toEqual([]);
    expect(lines.join('')).toContain('the coordinator stopped accepting work');
    await c.shutdown();
  });
});

describe('re-entry budgets', () => {
  it('count self-wakes durably; rows older than 7 days are dropped on resume', async () => {
    const path = dbPath();
    const clock = new SimulatedClock();
    let store = openStore({ path });
    const c = createCoordinator({ model: scriptedModel(parked, { clock }), store, clock });
    const root = await c.start({ name: 'lead', task: 'x' });
    c.reentry.record(root);
    clock.increment(1_000);
    expect(c.reentry.record(root)).toEqual({ sessionId: root, count: 2, lastWakeAt: 1_000 });
    await c.shutdown();
    store.close();

    store = openStore({ path });
    const soon = await resumeCoordinator({ store, clock, model: scriptedModel(parked, { clock }) });
    expect(soon.reentry.get(root)?.count).toBe(2);
    await soon.shutdown();
    store.close();

    clock.increment(8 * 24 * 3_600_000);
    store = openStore({ path });
    const later = await resumeCoordinator({ store, clock, model: scriptedModel(parked, { clock }) });
    expect(later.reentry.get(root)).toBeUndefined();
    await later.shutdown();
    store.close();
  });
});
