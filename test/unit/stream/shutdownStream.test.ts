/**
 * A clean shutdown leaves the live stream showing every agent's stored status: the statuses of
 * commits still under way when `shutdown()` is called reach the stream before it closes (views
 * publish a status once its commit is done). Before, a shutdown a few loop turns into a run left
 * the stream behind the store (a resume had to re-announce them).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { createCoordinator } from '../../../src/host/createCoordinator.js';
import { scriptedModel, type Script } from '../../../src/model/scriptedModel.js';
import { openStore } from '../../../src/store/sqliteStore.js';

const SCRIPT: Script = {
  agents: {
    lead: [
      { tool: 'spawn_agent', args: { name: 'w', task: 'part' } },
      { tool: 'wait_for_agents', args: { reason: 'report' } },
      { tool: 'finish', args: { summary: 'ok' } },
    ],
    w: [{ tool: 'agent_finish', args: { summary: 'w done' } }],
  },
};

it.each([0, 1, 2, 3, 5, 8])('shut down %i loop turns into a run: the stream shows every stored status', async (turns) => {
  const dir = mkdtempSync(join(tmpdir(), 'troupe-shutdown-stream-'));
  const clock = new SimulatedClock();
  const store = openStore({ path: join(dir, 't.db') });
  try {
    const c = createCoordinator({ model: scriptedModel(SCRIPT, { clock }), store, clock });
    await c.start({ name: 'lead', task: 'split' });
    // Loop turns, not time: each lets the group commit and the turns move one step.
    for (let i = 0; i < turns; i++) await new Promise((resolve) => setImmediate(resolve));
    await c.shutdown();
    const stored = Object.fromEntries(store.listAgents(c.runId).map((a) => [a.id, a.status]));
    expect(Object.fromEntries(store.streamedStatuses(c.runId))).toEqual(stored);
  } finally {
    store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
