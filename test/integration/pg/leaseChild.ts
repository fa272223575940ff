/**
 * Lease-fencing child (not a test; run compiled from dist/ by pgLease.test.ts).
 *
 *   node dist/test/integration/pg/leaseChild.js <url> <schema> <runId> <ttlMs>
 *
 * Claims the run and commits one event row after another through its fenced port, printing
 * `WROTE <n>` after each commit resolved. When a commit is refused it prints `STOPPED <code>` and
 * exits: LEASE_LOST once its lease is lost (another worker claimed the run, or its local expiry
 * passed while it was stopped). A commit the server cut meanwhile is retried within the lease.
 */
import { openPostgresStore } from '../../../src/store/postgres/store.js';

const [url, schema, runId, ttl] = process.argv.slice(2) as [string, string, string, string];

async function main(): Promise<void> {
  // The server's own timeouts stay at their defaults: troupe bounds its transactions by the lease.
  const store = await openPostgresStore({ url, schema });
  const lease = await store.claim(runId, { owner: `child:${process.pid}`, ttlMs: Number(ttl), heartbeatMs: Math.floor(Number(ttl) / 3) });
  for (let n = 1; ; n++) {
    try {
      await lease.port.commit([{ op: 'appendEvent', row: { runId, agentId: null, type: 'child.write', data: { n }, at: Date.now() } }]);
    } catch (err) {
      process.stdout.write(`STOPPED ${(err as { code?: string }).code ?? 'unknown'}\n`);
      await store.close().catch(() => undefined);
      return;
    }
    process.stdout.write(`WROTE ${n}\n`);
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`lease child failed: ${String((err as Error)?.stack ?? err)}\n`);
    process.exit(3);
  },
);
