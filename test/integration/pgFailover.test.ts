/**
 * kill -9 failover on PostgreSQL: three worker processes, the host of each run killed at random;
 * another worker takes the run over after its lease and finishes it, losing nothing acknowledged
 * and telling nothing twice. A negative control (acknowledging before the commit) is caught.
 * `npm test` runs 8 trials; `.ci/run` runs 200 (`npm run test:pg-failover`, PG_FAILOVER_TRIALS).
 */
import { describe, expect, it } from 'vitest';
import { pgAvailable, pgTitle } from '../helpers/pg.js';
import { runFailoverTrials, takeoverFigures, VIOLATIONS } from './pg/failover.js';

const available = await pgAvailable();
const TRIALS = Number(process.env.PG_FAILOVER_TRIALS ?? 8);
const SEED = Number(process.env.PG_FAILOVER_SEED ?? 1);

describe.skipIf(!available)(pgTitle(available, 'kill -9 failover on PostgreSQL'), () => {
  it(`${TRIALS} trials with 3 workers killed at random: nothing acknowledged lost, nothing told twice or not at all, every run completes`, async () => {
    const counts = await runFailoverTrials({ trials: TRIALS, seed: SEED });
    const { takeoverMs, ...rest } = counts;
    process.stderr.write(`\npg failover: ${JSON.stringify(rest)} takeover ms ${JSON.stringify(takeoverFigures(takeoverMs))}\n`);
    expect(Object.fromEntries(VIOLATIONS.map((v) => [v, counts[v]]))).toEqual(Object.fromEntries(VIOLATIONS.map((v) => [v, 0])));
    expect(counts.trials).toBe(TRIALS);
    expect(counts.kills).toBeGreaterThanOrEqual(TRIALS);
    expect(counts.acked).toBeGreaterThan(TRIALS);
    // Every killed run was taken over by another worker (its sub-agents called the model again).
    expect(counts.takeoverMs.length).toBeGreaterThan(TRIALS / 2);
  }, 1_200_000);

  it('negative control: acknowledging before the commit is caught', async () => {
    const counts = await runFailoverTrials({ trials: Math.min(TRIALS, 8), seed: SEED + 100_000, buggy: true });
    process.stderr.write(`\npg failover negative control: lostAcks ${counts.lostAcks} of ${counts.acked}\n`);
    expect(counts.lostAcks).toBeGreaterThan(0);
  }, 600_000);
});
