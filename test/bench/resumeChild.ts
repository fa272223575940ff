/**
 * The resume benchmark's child (store.bench.ts): a fresh process that opens a database and resumes
 * its run, as `troupe resume` does. Prints one JSON line: wall ms from opening the store until the
 * resume resolved, and heap per agent after a full GC (run with --expose-gc). Compiled to
 * dist/ by the bench project's setup and run with plain node.
 */
import { resumeCoordinator } from '../../src/host/resumeCoordinator.js';
import type { Model } from '../../src/model/types.js';
import { openStore } from '../../src/store/sqliteStore.js';

const [path, count] = process.argv.slice(2);
const n = Number(count);
const gc = (globalThis as { gc?: () => void }).gc;
if (!path || !Number.isInteger(n) || !gc) {
  process.stderr.write('usage: node --expose-gc resumeChild.js <db> <agents>\n');
  process.exit(2);
}
const model: Model = { complete: () => Promise.reject(new Error('no model call expected while parked')) };
gc();
const before = process.memoryUsage().heapUsed;
const t0 = performance.now();
const store = openStore({ path });
const c = await resumeCoordinator({ store, model, limits: { maxAgents: n + 1, maxChildren: n } });
const ms = performance.now() - t0;
gc();
const kbPerAgent = (process.memoryUsage().heapUsed - before) / n / 1024;
if (c.tree().length === 0) throw new Error('nothing was resumed');
process.stdout.write(`${JSON.stringify({ ms, kbPerAgent })}\n`);
await c.shutdown();
store.close();
