/**
 * A PostgreSQL commit is one round trip (issue 36 item 7): its statements, values written in as
 * literals, go in one query that the server applies as one transaction. What must hold: a value
 * reads back exactly as written (whatever its quotes, backslashes or `$n`), a steady commit sends
 * one query, and a stale owner, a run that exists or a run that does not stop the whole batch in
 * that same query, nothing of it applied. Its statements are prepared once per connection and
 * EXECUTEd; a connection that does not hold them (a pooler between) gets plain text, applied once.
 */
import fc from 'fast-check';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inline, quoteLiteral, StatementBatch } from '../../../src/store/postgres/batch.js';
import { openPostgresStore, type PostgresStore } from '../../../src/store/postgres/store.js';
import type { WriteOp } from '../../../src/store/port.js';
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

/**
 * The queries the store's pooled connections send from now on (texts, and by connection: a commit's
 * text sets its statement timeout, a read's does not), until `stop()`.
 */
function tally(store: PostgresStore): { texts: string[]; byConnection: Map<number, string[]>; stop: () => void } {
  const texts: string[] = [];
  const byConnection = new Map<number, string[]>();
  type Query = (...args: unknown[]) => Promise<unknown>;
  // Each connection's own query, put back by stop() (a connection handed out again is wrapped once).
  const wrapped = new Map<{ query: Query }, Query>();
  const wrap = (client: pg.PoolClient) => {
    const target = client as unknown as { query: Query; processID: number };
    if (wrapped.has(target)) return;
    const query = target.query;
    wrapped.set(target, query);
    target.query = (...args) => {
      const config = args[0];
      const text = typeof config === 'string' ? config : (config as { text: string }).text;
      texts.push(text);
      byConnection.set(target.processID, [...(byConnection.get(target.processID) ?? []), text]);
      return query.apply(client, args);
    };
  };
  type Done = (err: Error | undefined, client: pg.PoolClient | undefined, release: unknown) => void;
  const connect = store.pool.connect.bind(store.pool) as (callback?: Done) => Promise<pg.PoolClient> | undefined;
  // The pool's own queries (pool.query) pass a callback.
  store.pool.connect = ((callback?: Done) =>
    callback
      ? connect((err, client, release) => {
          if (client) wrap(client);
          callback(err, client, release);
        })
      : connect()!.then((client) => (wrap(client), client))) as typeof store.pool.connect;
  const stop = () => {
    store.pool.connect = connect as typeof store.pool.connect;
    for (const [target, query] of wrapped) target.query = query;
  };
  return { texts, byConnection, stop };
}

describe('a value quoted as a literal', () => {
  it("is quoted as pg's escapeLiteral quotes it, whatever its quotes and backslashes", () => {
    // Any string, and strings made mostly of the characters that need escaping.
    const tricky = fc.string({ unit: fc.constantFrom("'", '\\', '"', 'a', 'é', '\n', '$', '😀'), maxLength: 40 });
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit: 'binary' }), tricky), (s) => {
        expect(quoteLiteral(s)).toBe(pg.escapeLiteral(s));
      }),
      { numRuns: 2_000 },
    );
  });
});

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
        // The same values as an EXECUTE's arguments (a commit's statements are prepared).
        const batch = new StatementBatch();
        batch.add('SELECT $1::text AS s, $2::text[] AS list, $3::float8 AS x', [s, list, x]);
        const { text, prepared } = batch.on(client);
        const results = (await client.query(text)) as unknown as pg.QueryResult | pg.QueryResult[];
        prepared();
        expect((Array.isArray(results) ? results.at(-1)! : results).rows[0]).toEqual({ s, list, x: x === 0 ? 0 : x });
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

  /** One commit of every write op (rows of run `runId`, agent `agentId`, ids made unique by `n`). */
  function everyOp(runId: string, agentId: string, n: number): WriteOp[] {
    const at = 10 + n;
    const mail = {
      runId,
      to: agentId,
      from: 'user',
      fromName: 'user',
      type: 'instruction',
      priority: 'normal' as const,
      content: `m${n}`,
      interrupt: false,
      createdAt: at,
    };
    const delegation = {
      sessionId: `${runId}-s${n}`,
      delegationId: `d${n}`,
      runId,
      goal: 'g',
      status: 'running' as const,
      dispatchedAt: at,
      completedAt: null,
      resultText: null,
      startedBoot: 1,
    };
    return [
      { op: 'updateRun', id: runId, patch: { interactive: n % 2 === 0 } },
      { op: 'registerAgent', agent: agentRow(`${agentId}${n}`, { runId }), firstInput: [{ role: 'user', content: 'task' }] },
      { op: 'updateAgent', id: agentId, patch: { turns: n } },
      { op: 'enqueueMessage', message: { ...mail, id: `${runId}-m${n}` } },
      { op: 'markDelivered', agentId, upToId: `${runId}-m${n}`, at },
      { op: 'appendSession', agentId, items: [{ role: 'assistant', content: `a${n}` }] },
      { op: 'recordUsage', row: { runId, agentId, purpose: 'main', model: 'm', inputTokens: 1, outputTokens: 2, cachedInputTokens: 0, costUsd: 0.5, at } },
      { op: 'appendEvent', row: { runId, agentId, type: 'turn', data: { n }, at } },
      { op: 'appendStream', rows: [{ runId, seq: n, agentId, type: 'agent.status', data: { to: 'running' }, at }] },
      { op: 'insertDelegation', row: delegation },
      { op: 'finishDelegation', sessionId: `${runId}-s${n}`, delegationId: `d${n}`, end: { status: 'completed', at, resultText: 'r' } },
      { op: 'putReentryBudget', row: { sessionId: `${runId}-s${n}`, count: 1, lastWakeAt: at } },
      { op: 'dropReentryBudgets', before: 0 },
      { op: 'linkExecution', row: { id: `${runId}-e${n}`, agentId, linkedAt: at } },
      { op: 'finishExecution', id: `${runId}-e${n}`, end: { status: 'completed', result: 'ok', at } },
      { op: 'markExecutionContinued', id: `${runId}-e${n}`, at },
      { op: 'startToolCall', row: { agentId, turn: n, callId: 'c', tool: 't', argsHash: 'h', startedAt: at } },
      { op: 'finishToolCalls', agentId, turn: n, callIds: ['c'], at },
      { op: 'answerRequest', id: -1, result: { ok: true, message: 'done' }, at },
      { op: 'replaceSession', agentId: `${agentId}${n}`, items: [{ role: 'user', content: 'again' }] },
    ];
  }

  it('every statement is prepared once per connection: a commit EXECUTEs what that connection prepared, in the same query or an earlier one', async () => {
    // Its own pool: connections that have prepared nothing yet.
    const fresh = await openPostgresStore({ url: PG_URL, schema });
    const sent = tally(fresh);
    const lease = await fresh.claim('prepared', { owner: 'A', heartbeatMs: 0 });
    try {
      await lease.port.commit([
        { op: 'insertRun', run: { ...RUN, id: 'prepared' } },
        { op: 'registerAgent', agent: agentRow('p', { runId: 'prepared' }), firstInput: [{ role: 'user', content: 'task' }] },
      ]);
      for (let n = 1; n <= 3; n++) await lease.port.commit(everyOp('prepared', 'p', n));
    } finally {
      sent.stop();
    }
    const commits = (texts: string[]) => texts.filter((text) => text.includes('SET LOCAL statement_timeout'));
    expect(commits(sent.texts)).toHaveLength(4);
    for (const texts of sent.byConnection.values()) {
      const prepared = new Set<string>();
      for (const text of commits(texts)) {
        for (const [, name] of text.matchAll(/^PREPARE (\w+) AS /gm)) {
          expect(prepared.has(name!)).toBe(false);
          prepared.add(name!);
        }
        for (const [, name] of text.matchAll(/^EXECUTE (\w+)/gm)) expect(prepared.has(name!)).toBe(true);
        // Only the timeout is sent as it is: every statement with values is an EXECUTE.
        expect(text.split(';\n').filter((line) => !/^(PREPARE|EXECUTE|SET LOCAL statement_timeout)/.test(line))).toEqual([]);
      }
    }
    // The connection that ran them all prepared the ops' statements in the first commit of every op, once.
    const [only] = [...sent.byConnection.values()];
    expect(sent.byConnection.size).toBe(1);
    expect(commits(only!)[1]).toMatch(/^PREPARE /m);
    expect(
      commits(only!)
        .slice(2)
        .some((text) => text.includes('PREPARE')),
    ).toBe(false);
    expect((await store.reads.loadSession('p')).map((i) => i.content)).toEqual(['task', 'a1', 'a2', 'a3']);
    expect((await store.reads.listAgents('prepared')).find((a) => a.id === 'p')).toMatchObject({ turns: 3 });
    expect((await store.reads.listEvents('prepared')).filter((e) => e.type === 'turn').map((e) => e.data)).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
    await lease.release({ state: 'done' });
    await fresh.close();
  });

  it('a connection without the statements this process prepared on it (a pooler between) commits with plain statements from then on, applied once', async () => {
    const warned: unknown[] = [];
    const logger = { warn: (...args: unknown[]) => void warned.push(args) };
    const lease = await store.claim('pooled', { owner: 'A', heartbeatMs: 0, logger });
    await lease.port.commit([
      { op: 'insertRun', run: { ...RUN, id: 'pooled' } },
      { op: 'registerAgent', agent: agentRow('q', { runId: 'pooled' }), firstInput: [{ role: 'user', content: 'task' }] },
    ]);
    await lease.port.commit(everyOp('pooled', 'q', 1));
    // What a pooler in transaction mode does: the next transaction meets a server connection that
    // never saw these PREPAREs.
    const idle = await Promise.all(Array.from({ length: store.pool.idleCount }, () => store.pool.connect()));
    for (const client of idle) await client.query('DEALLOCATE ALL');
    for (const client of idle) client.release();
    const sent = tally(store);
    try {
      await lease.port.commit(everyOp('pooled', 'q', 2));
      await lease.port.commit(everyOp('pooled', 'q', 3));
    } finally {
      sent.stop();
    }
    // The EXECUTE that failed, then the same batch as plain statements; the next commit plain at once.
    const commits = sent.texts.filter((text) => text.includes('SET LOCAL statement_timeout'));
    expect(commits).toHaveLength(3);
    expect(commits[0]).toMatch(/^EXECUTE /m);
    expect(commits.slice(1).some((text) => /^(EXECUTE|PREPARE) /m.test(text))).toBe(false);
    expect((await store.reads.loadSession('q')).map((i) => i.content)).toEqual(['task', 'a1', 'a2', 'a3']);
    expect((await store.reads.listEvents('pooled')).filter((e) => e.type === 'turn').map((e) => e.data)).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
    await lease.release({ state: 'done' });
    // The switch is the store's: a later lease of it sends plain statements from its first commit (no failed attempt of its own).
    const next = await store.claim('pooled2', { owner: 'A', heartbeatMs: 0, logger });
    const later = tally(store);
    try {
      await next.port.commit([
        { op: 'insertRun', run: { ...RUN, id: 'pooled2' } },
        { op: 'registerAgent', agent: agentRow('r', { runId: 'pooled2' }), firstInput: [{ role: 'user', content: 'task' }] },
      ]);
      await next.port.commit(everyOp('pooled2', 'r', 1));
    } finally {
      later.stop();
    }
    const nextCommits = later.texts.filter((text) => text.includes('SET LOCAL statement_timeout'));
    expect(nextCommits).toHaveLength(2);
    expect(nextCommits.some((text) => /^(EXECUTE|PREPARE) /m.test(text))).toBe(false);
    await next.release({ state: 'done' });
    // Told once, by the lease that found it out.
    expect(warned).toHaveLength(1);
    expect(warned[0]).toEqual([{ runId: 'pooled', code: '26000' }, expect.stringMatching(/pooler/)]);
  });
});
