/**
 * One process of `npm run bench:against` (against.ts): loads a compiled troupe from the dist/
 * folder it is given — this checkout's, or an older commit's — and measures it through the public
 * API, with fanout.bench.ts's teams (workloads.ts): `solo`, µs per in-memory turn of one agent in
 * the steady state after 100 runs, median of 40 runs; `durable`, µs per turn of the same agent on
 * SQLite FULL after a warm-up (and in the process's first run); or `fanout`, ms for a durable team
 * of 1,000 children × 5 turns at default concurrency, median of 3 runs after one; or `resume`, ms
 * from opening the file of that team's finished run to `resumeCoordinator` resolving (what
 * `troupe resume` waits for), median of 5 fresh opens after one. Prints one
 * JSON line. Only entry points that every version since the first has are used (the coordinator
 * lived in src/coordinator/ before it moved to src/host/).
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { fanLimits, fanoutModel, median, RESULT, SOLO_TURNS, soloModel, type InstantModel } from './workloads.js';

interface Coordinator {
  readonly runId: string;
  start(spec: { name: string; task: string }): Promise<string>;
  waitFor(id: string, statuses: string[]): Promise<{ status: string }>;
  shutdown(): Promise<void>;
}

const [dist, metric] = process.argv.slice(2);
if (!dist || (metric !== 'solo' && metric !== 'fanout' && metric !== 'durable' && metric !== 'resume' && metric !== 'loop')) {
  process.stderr.write('usage: node againstChild.js <dist folder> solo|fanout|durable|resume|loop\n');
  process.exit(2);
}
const load = async (path: string) => (await import(pathToFileURL(join(dist, path)).href)) as Record<string, (...args: never[]) => unknown>;
const hostPath = existsSync(join(dist, 'src/host/createCoordinator.js')) ? 'src/host/createCoordinator.js' : 'src/coordinator/createCoordinator.js';
const createCoordinator = (await load(hostPath)).createCoordinator as unknown as (options: object) => Coordinator;
const resumeCoordinator = (await load(hostPath.replace('createCoordinator', 'resumeCoordinator'))).resumeCoordinator as unknown as (
  options: object,
) => Promise<Coordinator>;
const defineTool = (await load('src/tools/defineTool.js')).defineTool as unknown as (tool: object) => object;
const openStore = (await load('src/store/sqliteStore.js')).openStore as unknown as (o: { path: string; synchronous?: 'FULL' | 'NORMAL' }) => { close(): void };

/** Close a store its coordinator may already have closed (versions whose shutdown closes the store it was given). */
function closeQuietly(store: { close(): void }): void {
  try {
    store.close();
  } catch {
    // Already closed.
  }
}

const work = defineTool({ name: 'work', description: 'does a step', parameters: { type: 'object' }, execute: () => RESULT });

async function team(model: InstantModel, limits: object, store?: object, ran?: (runId: string) => void): Promise<number> {
  const c = createCoordinator({ model, tools: [work], limits, ...(store ? { store } : {}) });
  ran?.(c.runId);
  const t0 = performance.now();
  const id = await c.start({ name: 'lead', task: 'work' });
  const root = await c.waitFor(id, ['completed', 'failed', 'crashed', 'stopped']);
  const ms = performance.now() - t0;
  if (root.status !== 'completed') throw new Error(`root ended ${root.status}`);
  await c.shutdown();
  return ms;
}

if (metric === 'solo') {
  const perTurn: number[] = [];
  for (let i = 0; i < 140; i++) {
    const model = soloModel();
    perTurn.push(((await team(model, { maxTurns: SOLO_TURNS + 1 })) * 1_000) / model.turns);
  }
  process.stdout.write(`${JSON.stringify({ metric, value: median(perTurn.slice(100)), cold: median(perTurn.slice(0, 25)) })}\n`);
} else if (metric === 'durable') {
  // One agent on a fresh file: the median µs between its model calls after the first 100 turns.
  // Cold is the process's first run; then the warm-up store.bench uses (V8 takes tens of runs to
  // tier a turn up), then the median of 5 runs.
  const run = async (sync: 'FULL' | 'NORMAL' | 'memory') => {
    const model = soloModel();
    const starts: number[] = [];
    const complete = model.complete;
    model.complete = (request) => (starts.push(performance.now()), complete(request));
    const dir = mkdtempSync(join(tmpdir(), 'troupe-against-'));
    const store = sync === 'memory' ? undefined : openStore({ path: join(dir, 'b.db'), synchronous: sync });
    await team(model, { maxTurns: SOLO_TURNS + 1 }, store);
    if (store) closeQuietly(store);
    rmSync(dir, { recursive: true, force: true });
    return median(starts.slice(101).map((t, i) => (t - starts[i + 100]!) * 1_000));
  };
  const cold = await run('FULL');
  for (let i = 0; i < 60; i++) await run('memory');
  for (let i = 0; i < 3; i++) await run('NORMAL');
  const warm: number[] = [];
  for (let i = 0; i < 5; i++) warm.push(await run('FULL'));
  process.stdout.write(`${JSON.stringify({ metric, value: median(warm), cold })}\n`);
} else if (metric === 'loop') {
  // How long the event loop waits while a durable FULL team of 200 children × 5 turns runs: the
  // p99 of its delay (a commit that syncs on the main thread makes every timer and answer wait for
  // the disk). Median of 3 runs after one; cold is the first.
  const p99: number[] = [];
  for (let i = 0; i < 4; i++) {
    const dir = mkdtempSync(join(tmpdir(), 'troupe-against-'));
    const store = openStore({ path: join(dir, 'b.db') });
    const delay = monitorEventLoopDelay({ resolution: 1 });
    delay.enable();
    await team(fanoutModel(200), fanLimits(200), store);
    delay.disable();
    p99.push(delay.percentile(99) / 1e6);
    closeQuietly(store);
    rmSync(dir, { recursive: true, force: true });
  }
  process.stdout.write(`${JSON.stringify({ metric, value: median(p99.slice(1)), cold: p99[0] })}\n`);
} else if (metric === 'resume') {
  const dir = mkdtempSync(join(tmpdir(), 'troupe-against-'));
  const path = join(dir, 'b.db');
  let runId = '';
  const first = openStore({ path, synchronous: 'NORMAL' });
  await team(fanoutModel(1_000), fanLimits(1_000), first, (id) => (runId = id));
  closeQuietly(first);
  const ms: number[] = [];
  for (let i = 0; i < 6; i++) {
    const t0 = performance.now();
    const store = openStore({ path });
    const c = await resumeCoordinator({ store, runId, model: fanoutModel(1_000), tools: [work], limits: fanLimits(1_000) });
    ms.push(performance.now() - t0);
    await c.shutdown();
    closeQuietly(store);
  }
  rmSync(dir, { recursive: true, force: true });
  process.stdout.write(`${JSON.stringify({ metric, value: median(ms.slice(1)), cold: ms[0] })}\n`);
} else {
  const ms: number[] = [];
  for (let i = 0; i < 4; i++) {
    const dir = mkdtempSync(join(tmpdir(), 'troupe-against-'));
    const store = openStore({ path: join(dir, 'b.db') });
    ms.push(await team(fanoutModel(1_000), fanLimits(1_000), store));
    closeQuietly(store);
    rmSync(dir, { recursive: true, force: true });
  }
  process.stdout.write(`${JSON.stringify({ metric, value: median(ms.slice(1)), cold: ms[0] })}\n`);
}
