/**
 * Replay of a latent run recorded on a store whose commits end off the event loop (a SQLite file
 * in FULL syncing its WAL on the thread pool, StorePort.commitsOffLoop), with a sync slower than
 * the model: every answer lands while a commit is out. The committer holds it until that commit's
 * effects have run (commit.ts `admit`), the order a blocking sync gave — so the run replays
 * identically. Without the hold the answers run before the effects of the commit before them,
 * which the replay (commits done within their loop turn) cannot reproduce.
 */
import { expect, it } from 'vitest';
import { createCoordinator } from '../../../src/host/createCoordinator.js';
import { replayRun } from '../../../src/replay/replayRun.js';
import { memoryStore } from '../../../src/store/memoryStore.js';
import { portOf, type StorePort } from '../../../src/store/port.js';
import { defineTool } from '../../../src/tools/defineTool.js';
import { latentModel } from '../../helpers/latentModel.js';

const CHILDREN = ['ana', 'ben', 'cal', 'dan'];
const TURNS = 8;
const noop = defineTool({ name: 'noop', description: 'does nothing', parameters: { type: 'object' }, execute: () => 'ok' });

/** A durable-looking store whose every commit's sync takes `syncMs` off the loop (a timer stands for the thread pool). */
function slowSyncPort(syncMs: number): { store: ReturnType<typeof memoryStore>; port: StorePort } {
  const store = memoryStore({ groupAsOnDisk: true });
  const inner = portOf(store);
  const port = Object.create(inner) as StorePort & { commitsOffLoop: boolean };
  Object.defineProperty(port, 'commitsOffLoop', { value: true });
  port.commit = (ops) => inner.commit(ops).then(() => new Promise<void>((resolve) => setTimeout(resolve, syncMs)));
  return { store, port };
}

it('a team answered after 2 ms a call, its commits synced in 5 ms off the loop, replays identically', async () => {
  const { store, port } = slowSyncPort(5);
  const c = createCoordinator({
    store: port,
    model: latentModel({ children: CHILDREN, turns: TURNS, latencyMs: 2 }),
    tools: [noop],
    limits: { maxTurns: TURNS + 10 },
  });
  const root = await c.start({ name: 'lead', task: 'Run the team.' });
  await c.result(root);
  await c.shutdown();
  const result = await replayRun(store, c.runId, { coordinator: { tools: [noop], limits: { maxTurns: TURNS + 10 } }, model: { name: 'latent' } });
  expect(result.divergence).toBeNull();
  expect(result.outcome).toBe('identical');
  for (const agent of store.listAgents(c.runId)) expect(result.store.loadSession(agent.id)).toEqual(store.loadSession(agent.id));
});
