/**
 * Benchmark (not part of `npm test`; run `npm run bench`): replay against the run it replays.
 *
 * A run of 1,000 model turns — a lead and three children, 250 turns each of one no-op user tool —
 * is recorded on a SQLite file with a model that answers after a real latency (100 ms, far below a
 * hosted model's), then replayed from that file offline. The bar: the replay takes under
 * 1 % of the recorded wall time. Figures: the recorded wall time (the baseline, from this same
 * run), each replay's wall time, and their ratio.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, bench, describe } from 'vitest';
import type { Store } from '../../src/store/types.js';
import { latentModel } from '../helpers/latentModel.js';
import { compiled } from './compiled.js';
import { runs } from './runs.js';

const { createCoordinator } = await compiled<typeof import('../../src/host/createCoordinator.js')>('src/host/createCoordinator.js');
const { defineTool } = await compiled<typeof import('../../src/tools/defineTool.js')>('src/tools/defineTool.js');
const { openStore } = await compiled<typeof import('../../src/store/sqliteStore.js')>('src/store/sqliteStore.js');
const { replayRun } = await compiled<typeof import('../../src/replay/replayRun.js')>('src/replay/replayRun.js');

const CHILDREN = ['ana', 'ben', 'cal'];
const TURNS = 250;
const LATENCY_MS = 100;

const noop = defineTool({ name: 'noop', description: 'does nothing', parameters: { type: 'object' }, execute: () => 'ok' });

const dir = mkdtempSync(join(tmpdir(), 'troupe-replay-bench-'));
const store: Store = openStore({ path: join(dir, 'run.db') });
const c = createCoordinator({
  store,
  model: latentModel({ children: CHILDREN, turns: TURNS, latencyMs: LATENCY_MS }),
  tools: [noop],
  limits: { maxTurns: TURNS + 10 },
});
const started = performance.now();
const root = await c.start({ name: 'lead', task: 'Run the team.' });
for (const name of CHILDREN) {
  // Every child finished: the lead's wait returns, and it is stopped by its turn cap or finishes.
  while (!c.list().some((a) => a.name === name && a.status === 'completed')) await new Promise((r) => setTimeout(r, 50));
}
const recordedMs = performance.now() - started;
await c.stop(root).catch(() => undefined);
await c.shutdown();
const calls = store.historyOf(c.runId).filter((e) => e.type === 'replay.call').length;
const ratios: number[] = [];

describe(`replay of a ${calls}-call run recorded in ${(recordedMs / 1000).toFixed(1)} s (${LATENCY_MS} ms a call)`, () => {
  bench(
    'replayRun from the SQLite file',
    async () => {
      const t = performance.now();
      const result = await replayRun(store, c.runId, { coordinator: { tools: [noop], limits: { maxTurns: TURNS + 10 } }, model: { name: 'latent' } });
      ratios.push((performance.now() - t) / recordedMs);
      if (result.divergence) throw new Error(`diverged: ${JSON.stringify(result.divergence)}`);
    },
    runs(5, 1),
  );
});

afterAll(() => {
  const sorted = [...ratios].sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)] ?? NaN;
  process.stdout.write(`replay / recorded wall time: median ${(median * 100).toFixed(3)} % over ${ratios.length} replays (bar: < 1 %)\n`);
  store.close();
  rmSync(dir, { recursive: true, force: true });
});
