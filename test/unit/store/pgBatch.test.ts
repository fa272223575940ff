/**
 * A PostgreSQL commit is one round trip (issue 36 item 7): its statements, values written in as
 * literals, go in one query that the server applies as one transaction. What must hold: a value
 * reads back exactly as written (whatever its quotes, backslashes or `$n`), a steady commit sends
 * one query, and a stale owner, a run that exists or a run that does not stop the whole batch in
 * that same query, nothing of it applied.
 */
import fc from 'fast-check';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inline } from '../../../src/store/postgres/batch.js';
import { openPostgresStore, type PostgresStore } from '../../../src/store/postgres/store.js';
import type { RunRow } from '../../../src/store/types.js';
import { freshSchema, PG_URL, pgAvailable, pgTitle } from '../../helpers/pg.js';
import { agentRow } from './storeContract.js';

const available = await pgAvailable();

const RUN: RunRow = {
  id: 'run1',
  createdAt: 1,
  interactive: false,
  rootId: 'a',
  budget: { limitUsd: null, budgetStopped: false, reserveStopped: false, paused: false, resumeEpoch: 0, reserveNoticeClaimed: false },
};

/** The queries the store's pooled connections send from now on (texts), until `stop()`. */
function tally(store: PostgresStore): { texts: string[]; stop: () => void } {
  const texts: string[] = [];
  const connect = store.pool.connect.bind(store.pool) as () => Promise<pg.PoolClient>;
  store.pool.connect = (async () => {
    const client = await connect();
    const query = client.query.bind(client) as (...args: unknown[]) => Promise<unknown>;
    (client as unknown as { query: (...args: unknown[]) => Promise<unknown> }).query = (...args) => {
      const config = args[0];
      texts.push(typeof config === 'string' ? config : (config as { text: string }).text);
      return query(...args);
    };
    return client;
  }) as typeof store.pool.connect;
  return { texts, stop: () => void (store.pool.connect = connect as typeof store.pool.connect) };
}

describe.skipIf(!available)(pgTitle(available, 'PostgreSQL: one round trip per commit'), () => {
  const { schema, drop } = freshSchema();
  let store: PostgresStore;
  let client: pg.Client;
  beforeAll(async () => {
    store = await openPostgresStore({ url: PG_URL, schema });
    client = new pg.Client({ connectionString: PG_URL });
    await client.connect();
  });
  afterAll(async () => {
    await client.end();
    await store.close();
    await drop();
  });

  it('a value written in as a literal reads back exactly (quotes, backslashes, `$n`, unicode, arrays with NULL and commas)', async () => {
    const text = fc.string({ unit: 'binary' }).map((s) => s.replace(/\0/g, ''));
    await fc.assert(
      fc.asyncProperty(text, fc.array(fc.option(text, { nil: null })), fc.double({ noNaN: true }), async (s, list, x) => {
        const { rows } = await client.query<{ s: string; list: (string | null)[]; x: number }>(
          `SELECT ${inline('$1::text AS s, $2::text[] AS list, $3::float8 AS x', [s, list, x])}`,
        );
        // -0 is written as 0, as pg sends it as a parameter (String(-0)).
        expect(rows[0]).toEqual({ s, list, x: x === 0 ? 0 : x });
      }),
      { numRuns: 200 },
    );
    // One pass: a value's own `$2` is text, not a placeholder.
    expect(inline('$1 || $2', ['$2', 'b'])).toBe("'$2' || 'b'");
  });

  it('a steady commit sends one query; a stale owner, a run that exists and a run that does not each stop the whole batch in it', async () => {
    const lease = await store.claim('run1', { owner: 'A', heartbeatMs: 0 });
    await lease.port.commit([
      { op: 'insertRun', run: RUN },
      { op: 'registerAgent', agent: agentRow('a'), firstInput: [{ role: 'user', content: 'task' }] },
    ]);
    const sent = tally(store);
    try {
      await lease.port.commit([
        { op: 'appendSession', agentId: 'a', items: [{ role: 'assistant', content: "it's \\ $1" }] },
        { op: 'updateAgent', id: 'a', patch: { turns: 1 } },
        { op: 'appendEvent', row: { runId: 'run1', agentId: 'a', type: 'turn', data: { n: 1 }, at: 2 } },
        { op: 'updateRun', id: 'run1', patch: { interactive: true } },
      ]);
      expect(sent.texts).toHaveLength(1);
      // A run that exists: nothing of the batch is applied (its session row neither).
      await expect(
        lease.port.commit([
          { op: 'appendSession', agentId: 'a', items: [{ role: 'assistant', content: 'lost' }] },
          { op: 'insertRun', run: RUN },
        ]),
      ).rejects.toMatchObject({ code: 'CONFIG_INVALID' });
      await expect(lease.port.commit([{ op: 'updateRun', id: 'nope', patch: { interactive: false } }])).rejects.toMatchObject({ code: 'RUN_NOT_FOUND' });
    } finally {
      sent.stop();
    }
    expect((await store.reads.loadSession('a')).map((i) => i.content)).toEqual(['task', "it's \\ $1"]);
    // The patch's columns only: the budget stays.
    expect(await store.reads.getRun('run1')).toMatchObject({ interactive: true, budget: RUN.budget });
    expect((await store.reads.listAgents('run1'))[0]).toMatchObject({ turns: 1 });

    // Another worker takes the run: the old owner's batch is refused by its fence in the query it sends.
    await store.pool.query('UPDATE run_leases SET lease_until = 0 WHERE run_id = $1', ['run1']);
    const next = await store.claim('run1', { owner: 'B', heartbeatMs: 0 });
    const stale = tally(store);
    try {
      await expect(
        lease.port.commit([
          { op: 'appendSession', agentId: 'a', items: [{ role: 'assistant', content: 'stale' }] },
          { op: 'appendEvent', row: { runId: 'run1', agentId: 'a', type: 'stale', data: {}, at: 3 } },
        ]),
      ).rejects.toMatchObject({ code: 'LEASE_LOST' });
    } finally {
      stale.stop();
    }
    // The batch, then the read that tells a lost lease from an earlier attempt that committed.
    expect(stale.texts).toHaveLength(2);
    expect((await store.reads.loadSession('a')).map((i) => i.content)).toEqual(['task', "it's \\ $1"]);
    expect((await store.reads.listEvents('run1')).map((e) => e.type)).toEqual(['turn']);
    await next.release({ state: 'done' });
  });
});
