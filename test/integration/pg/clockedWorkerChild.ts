/**
 * A worker process on a simulated clock (not a test; run compiled from dist/ by
 * pgSleepUntilWorkers.test.ts). Its hosted runs' clock is driven by the test through stdin
 * (test/helpers/drivenClock.ts, a test hook); its lease is on real time, so another worker takes
 * its run over a real TTL after it dies.
 *
 *   node dist/test/integration/pg/clockedWorkerChild.js <url> <schema> <runId> <baseURL> <startMs>
 *
 * It hosts run `runId` as kept (as `troupe serve` keeps its main run: hosted even while idle,
 * claimed as soon as another worker's lease on it runs out), its model the real `openai` client
 * against the test's fake server. Prints `HOST <runId> <epoch>` at each claim and
 * `CALL <simulated ms>` before each model call (on which clock the call was made), `READY` once claiming.
 */
import type { Model } from '../../../src/model/types.js';
import { openaiModel } from '../../../src/model/openaiModel.js';
import { openPostgresStore } from '../../../src/store/postgres/store.js';
import { startWorker, type Worker } from '../../../src/worker/worker.js';
import { drivenClock } from '../../helpers/drivenClock.js';

const [url, schema, runId, baseURL, startMs] = process.argv.slice(2) as [string, string, string, string, string];

let calls = 0;
let inFlight = 0;
const turn = () => new Promise((resolve) => setImmediate(resolve));

/**
 * Settled: every hosted run idle and no model call in flight, three rounds in a row each with a
 * database round trip in it (a wake's commit and the call after it need more than one turn).
 */
async function settle(): Promise<void> {
  for (let quiet = 0; quiet < 3;) {
    const before = calls;
    await Promise.all(worker.coordinators().map((c) => c.whenIdle().catch(() => undefined)));
    await store.pool.query('SELECT 1');
    for (let i = 0; i < 5; i++) await turn();
    quiet = inFlight === 0 && calls === before ? quiet + 1 : 0;
  }
}

const clock = drivenClock(Number(startMs), settle);
const wire = openaiModel({ model: 'fake-model', baseURL, apiKey: 'k' });
const model: Model = {
  ...wire,
  async complete(request, options) {
    calls += 1;
    inFlight += 1;
    process.stdout.write(`CALL ${clock.now()}\n`);
    try {
      return await wire.complete(request, options);
    } finally {
      inFlight -= 1;
    }
  },
};

const store = await openPostgresStore({ url, schema });
// The test moves the clock only after this worker said HOST: `settle` never runs before it exists.
const worker: Worker = await startWorker({
  store,
  concurrency: 1,
  ttlMs: 1_500,
  pollMs: 200,
  hostOptions: () => ({ model, clock }),
  onHost: (_c, lease) => process.stdout.write(`HOST ${lease.runId} ${lease.epoch}\n`),
});
void worker.keep(runId);
process.stdout.write('READY\n');
