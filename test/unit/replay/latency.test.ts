/**
 * Replay (issue 37) of a run recorded on a file with a model that answers after a latency, on the
 * system clock: children whose answers land in one timer phase (their effects' commit not yet
 * done when the next answer comes), a stop applied before that commit, and a model that answers a
 * call the stop cancelled (it does not listen to the signal). The replay answers windowed calls
 * and inputs in the same commit window (`window` in the call log), groups commits as the file did,
 * and keeps a recorded answer coming after a cancel — so the run replays identically.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { createCoordinator } from '../../../src/host/createCoordinator.js';
import { replayRun } from '../../../src/replay/replayRun.js';
import { openStore } from '../../../src/store/sqliteStore.js';
import type { Store } from '../../../src/store/types.js';
import { defineTool } from '../../../src/tools/defineTool.js';
import { latentModel } from '../../helpers/latentModel.js';

const CHILDREN = ['ana', 'ben', 'cal'];
const TURNS = 12;
const noop = defineTool({ name: 'noop', description: 'does nothing', parameters: { type: 'object' }, execute: () => 'ok' });

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** Record the team on a file; the lead is stopped as soon as every child is seen completed. */
async function record(latencyMs: number): Promise<{ store: Store; runId: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'troupe-replay-latency-'));
  dirs.push(dir);
  const store = openStore({ path: join(dir, 'run.db') });
  const c = createCoordinator({ store, model: latentModel({ children: CHILDREN, turns: TURNS, latencyMs }), tools: [noop], limits: { maxTurns: TURNS + 10 } });
  const root = await c.start({ name: 'lead', task: 'Run the team.' });
  // The stop comes from a timer (as a user's would) once the last child is seen completed:
  // decided, its commit maybe not done. Polled: the timing of an outside input is the point here.
  while (!CHILDREN.every((name) => c.list().some((a) => a.name === name && a.status === 'completed'))) {
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  await c.stop(root).catch(() => undefined);
  await c.shutdown();
  return { store, runId: c.runId };
}

it.each([3, 8])('a team answered after %i ms a call, stopped as its children complete, replays identically', async (latencyMs) => {
  const { store, runId } = await record(latencyMs);
  try {
    const windowed = store.historyOf(runId).filter((e) => (e.type === 'replay.call' || e.type === 'replay.input') && e.data.window === true);
    // The children's last answers share a timer phase: the case this test is about happened.
    expect(windowed.length).toBeGreaterThan(0);
    const result = await replayRun(store, runId, { coordinator: { tools: [noop], limits: { maxTurns: TURNS + 10 } }, model: { name: 'latent' } });
    expect(result.divergence).toBeNull();
    expect(result.outcome).toBe('identical');
    for (const agent of store.listAgents(runId)) {
      expect(result.store.loadSession(agent.id)).toEqual(store.loadSession(agent.id));
      expect(result.statuses[agent.id]).toBe(agent.status);
    }
  } finally {
    store.close();
  }
});
