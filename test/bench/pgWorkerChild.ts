/**
 * The PostgreSQL throughput bench's worker (postgres.bench.ts): one `troupe worker` process hosting
 * the bench team's runs from a shared schema. Compiled to dist/ by the bench project's setup.
 *
 *   node dist/test/bench/pgWorkerChild.js <url> <schema> <concurrency> <latencyMs>
 *
 * Prints `READY` once claiming; on SIGTERM prints `CALLS <n>` (model calls it made) and exits.
 */
import { openPostgresStore } from '../../src/store/postgres/store.js';
import { startWorker } from '../../src/worker/worker.js';
import { teamModel, workTool } from '../helpers/pgTeam.js';

const [url, schema, concurrency, latencyMs] = process.argv.slice(2) as [string, string, string, string];
let calls = 0;
const store = await openPostgresStore({ url, schema });
await startWorker({
  store,
  concurrency: Number(concurrency),
  pollMs: 1_000,
  hostOptions: () => ({ model: teamModel({ workers: 3, turns: 3, latencyMs: Number(latencyMs), onCall: () => void calls++ }), tools: [workTool] }),
});
process.on('SIGTERM', () => {
  process.stdout.write(`CALLS ${calls}\n`, () => process.exit(0));
});
process.stdout.write('READY\n');
