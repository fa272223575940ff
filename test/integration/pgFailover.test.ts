/**
 * Failover on PostgreSQL under the faults real deployments have: three worker processes, the host
 * of each run struck at random — SIGKILL, SIGSTOP until another worker took the run over (then
 * SIGCONT: a zombie), a network partition through a fault proxy (healed after the takeover), its
 * connections reset mid-commit, its machine's wall clock stepped forward (the database's with
 * it) — and, on a private cluster the test starts, the database server
 * restarted. Nothing acknowledged is lost, nothing is told or queued twice, every run completes,
 * every request sent from outside is answered, and no model or tool call is allowed (its lease
 * check passed) on a host after another one took its run over; a host SIGSTOPped between a check
 * and the call it allowed makes that one call late, at most one per stop. Negative controls:
 * acknowledging before the commit, hosting without the lease's local check, and a local check on
 * the monotonic clock alone (blind to the wall-clock step), are each caught.
 *
 * `npm test` runs a share (PG_FAILOVER_TRIALS=8, PG_RESTART_TRIALS=4); `.ci/run` runs the full
 * count (`npm run test:pg-failover`: 200 and 40).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pgAvailable, pgTitle } from '../helpers/pg.js';
import { pgClusterSuite, startPgCluster, type PgCluster } from '../helpers/pgCluster.js';
import { runFailoverTrials, takeoverFigures, VIOLATIONS, type FailoverCounts } from './pg/failover.js';

const available = await pgAvailable();
const TRIALS = Number(process.env.PG_FAILOVER_TRIALS ?? 8);
const RESTART_TRIALS = Number(process.env.PG_RESTART_TRIALS ?? 4);
const SEED = Number(process.env.PG_FAILOVER_SEED ?? 1);

function report(label: string, counts: FailoverCounts): void {
  const { takeoverMs, ...rest } = counts;
  const figures = Object.fromEntries(
    Object.entries(takeoverMs)
      .filter(([, ms]) => ms.length > 0)
      .map(([kind, ms]) => [kind, takeoverFigures(ms)]),
  );
  process.stderr.write(`\n${label}: ${JSON.stringify(rest)} takeover ms ${JSON.stringify(figures)}\n`);
}

const noViolations = (counts: FailoverCounts) =>
  expect(Object.fromEntries(VIOLATIONS.map((v) => [v, counts[v]]))).toEqual(Object.fromEntries(VIOLATIONS.map((v) => [v, 0])));

describe.skipIf(!available)(pgTitle(available, 'failover on PostgreSQL'), () => {
  it(`${TRIALS} trials, the host struck by SIGKILL, SIGSTOP/SIGCONT, a partition, reset connections or a wall-clock step: nothing lost, nothing twice, no call without a lease`, async () => {
    const counts = await runFailoverTrials({ trials: TRIALS, seed: SEED, faults: ['kill', 'stop', 'partition', 'connkill', 'clockstep'] });
    report('pg failover', counts);
    noViolations(counts);
    // A host SIGSTOPped between a lease check and the call it allowed makes that one call late: at
    // most one per stop (the check and the call are one synchronous stretch). A clock step stops its host too.
    expect(counts.callsPausedAfterCheck).toBeLessThanOrEqual(counts.faults.stop + counts.faults.clockstep);
    expect(counts.trials).toBe(TRIALS);
    // Most trials struck their fault (one waits while no other worker is healthy, and a run may
    // end first), and faults that take a host away were followed by a takeover.
    const struck = Object.values(counts.faults).reduce((a, b) => a + b, 0);
    expect(struck).toBeGreaterThanOrEqual(Math.ceil(TRIALS * 0.75));
    expect(counts.takeoverMs.kill.length + counts.takeoverMs.stop.length + counts.takeoverMs.partition.length).toBeGreaterThan(0);
    expect(counts.acked).toBeGreaterThan(TRIALS);
  }, 1_800_000);

  it('negative control: acknowledging before the commit is caught', async () => {
    const counts = await runFailoverTrials({ trials: Math.min(TRIALS, 8), seed: SEED + 100_000, buggy: 'ack-early' });
    process.stderr.write(`\npg failover negative control: lostAcks ${counts.lostAcks} of ${counts.acked}\n`);
    expect(counts.lostAcks).toBeGreaterThan(0);
  }, 600_000);

  it('negative control: a host without a local lease expiry (its lease clock frozen) makes calls for runs it lost', async () => {
    const counts = await runFailoverTrials({ trials: 16, seed: SEED + 200_000, buggy: 'unguarded', faults: ['stop'], inboxSends: 0 });
    process.stderr.write(`\npg failover negative control (unguarded): ${counts.callsWithoutLease} calls without a lease of ${counts.calls}\n`);
    expect(counts.callsWithoutLease).toBeGreaterThan(0);
  }, 600_000);

  it("negative control: a host whose lease expiry misses a step of the wall clock (the database's) makes calls for runs it lost", async () => {
    const counts = await runFailoverTrials({ trials: 12, seed: SEED + 400_000, buggy: 'monotonic', faults: ['clockstep'], inboxSends: 0 });
    process.stderr.write(`\npg failover negative control (monotonic): ${counts.callsWithoutLease} calls without a lease of ${counts.calls}\n`);
    expect(counts.faults.clockstep).toBeGreaterThan(0);
    expect(counts.callsWithoutLease).toBeGreaterThan(0);
  }, 600_000);
});

const cluster = await pgClusterSuite('database restarts on a private PostgreSQL cluster');

describe.skipIf(cluster.skip)(cluster.title, () => {
  let server: PgCluster;
  beforeAll(async () => {
    server = await startPgCluster({ maxConnections: 100 });
  }, 60_000);
  afterAll(async () => {
    await server?.destroy();
  });

  it(`${RESTART_TRIALS} trials with the server restarted (-m immediate) or connections reset under the workers: nothing lost, nothing twice`, async () => {
    const counts = await runFailoverTrials({ trials: RESTART_TRIALS, seed: SEED + 300_000, faults: ['restart', 'connkill'], cluster: server });
    report('pg failover (restarts)', counts);
    noViolations(counts);
    expect(counts.trials).toBe(RESTART_TRIALS);
    expect(counts.faults.restart).toBeGreaterThan(0);
    expect(counts.faults.restart + counts.faults.connkill).toBeGreaterThanOrEqual(Math.ceil(RESTART_TRIALS * 0.75));
  }, 1_800_000);
});
