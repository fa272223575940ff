/**
 * A durable timer across a failover on a real PostgreSQL (issue 33 item 5): an agent asleep until
 * a simulated day from now makes no model call until then, whichever host holds its run; host A
 * loses its lease in the middle (unrenewed, on the database and locally), host B claims the run
 * and wakes the agent at the deadline, exactly once — A, still alive, wakes nobody.
 */
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { createCoordinator } from '../../src/host/createCoordinator.js';
import { resumeCoordinator } from '../../src/host/resumeCoordinator.js';
import { scriptedModel, type ScriptStep } from '../../src/model/scriptedModel.js';
import type { StorePort } from '../../src/store/port.js';
import type { PostgresStore } from '../../src/store/postgres/store.js';
import { adminQuery, pgAvailable, pgTitle, twoHostsOnOneSchema } from '../helpers/pg.js';
import { flush } from '../helpers/team.js';

const available = await pgAvailable();
const DAY = 86_400_000;
const HOUR = 3_600_000;
const sleep: ScriptStep = { tool: 'sleep_until', args: { seconds: 86_400, reason: 'look again tomorrow' } };
const finish: ScriptStep = { tool: 'finish', args: { summary: 'looked again' } };

describe.skipIf(!available)(pgTitle(available, 'a durable timer across a failover on PostgreSQL'), () => {
  let a: PostgresStore;
  let b: PostgresStore;
  const { schema } = twoHostsOnOneSchema((x, y) => ([a, b] = [x, y]));

  it('a timer one simulated day away: 0 model calls until the deadline, then exactly one wake, across a failover in the middle', async () => {
    const runId = 'sleeper';
    const clock = new SimulatedClock();
    /** Move the run's clock to `at` in steps, letting due work (and its commits) settle between them. */
    const until = async (at: number) => {
      while (clock.now() < at) {
        clock.increment(Math.min(HOUR, at - clock.now()));
        await flush();
      }
    };
    const rootRow = async () => (await b.reads.listAgents(runId)).find((r) => r.parentId === null);

    // Host A: its lease is measured on the run's clock, so half a simulated day outlives it locally too.
    const heldA = await a.claim(runId, { owner: 'A', ttlMs: 60_000, heartbeatMs: 0, now: () => clock.now() });
    const modelA = scriptedModel({ agents: { lead: [sleep, finish] } }, { clock });
    const hostA = createCoordinator<StorePort>({ store: heldA.port, runId, clock, model: modelA });
    const rootId = await hostA.start({ name: 'lead', task: 'Look again tomorrow.' });
    await hostA.waitFor(rootId, ['waiting']);
    await expect.poll(rootRow, { timeout: 10_000 }).toMatchObject({ status: 'waiting', waitKind: 'timer', waitingSince: 0, waitTimeoutMs: DAY });
    await until(12 * HOUR);
    expect(modelA.calls).toHaveLength(1);

    // A stops renewing: its lease runs out on the database, and B claims the run.
    await adminQuery(`UPDATE ${schema}.run_leases SET lease_until = 0 WHERE run_id = $1`, [runId]);
    // B's lease is on the process's own clock (the default), long enough for the test.
    const heldB = await b.claim(runId, { owner: 'B', ttlMs: 600_000, heartbeatMs: 0 });
    expect(heldB.epoch).toBe(2);
    const modelB = scriptedModel({ agents: { lead: [finish] } }, { clock });
    const hostB = await resumeCoordinator<StorePort>({ store: heldB.port, runId, clock, model: modelB });
    await flush();

    // Not a moment before the deadline, on either host.
    await until(DAY - 1);
    expect(modelA.calls).toHaveLength(1);
    expect(modelB.calls).toHaveLength(0);
    await until(DAY);
    await expect.poll(rootRow, { timeout: 10_000 }).toMatchObject({ status: 'completed' });
    expect(modelB.calls.map((c) => c.at)).toEqual([DAY]);
    // A's timer fired too, into a lease it had lost: no model call, nothing committed.
    expect(modelA.calls).toHaveLength(1);
    expect(hostA.health().error).toMatchObject({ code: 'LEASE_LOST' });
    const results = (await b.reads.loadSession(rootId)).filter((i) => i.role === 'tool').map((i) => JSON.parse(i.content as string) as unknown);
    expect(results).toEqual([
      { wait_outcome: 'timer_fired', note: expect.any(String) },
      { success: true, run_completed: true },
    ]);

    await until(3 * DAY);
    expect(modelA.calls.length + modelB.calls.length).toBe(2);
    await hostA.shutdown();
    await hostB.shutdown();
    await heldB.release({ state: 'done' });
  });
});
