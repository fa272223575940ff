/**
 * The failover test helpers against real PostgreSQL: the fault proxy (test/helpers/faultProxy.ts)
 * in front of the shared server holds, drops, refuses and delays traffic as it says; a private
 * cluster (test/helpers/pgCluster.ts) keeps committed rows across a crash restart, cuts the
 * connections of before, and serves new ones.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startFaultProxy, type FaultProxy } from '../helpers/faultProxy.js';
import { adminQuery, PG_URL, pgAvailable, pgTitle } from '../helpers/pg.js';
import { pgClusterSuite, startPgCluster, type PgCluster } from '../helpers/pgCluster.js';

const available = await pgAvailable();
const cluster = await pgClusterSuite('a private PostgreSQL cluster: stop, start, restart -m immediate');

const noop = () => undefined;
const clients: pg.Client[] = [];
const proxies: FaultProxy[] = [];

/** A client that never throws asynchronously (its 'error' event is handled), ended after the test. */
function client(url: string, config: pg.ClientConfig = {}): pg.Client {
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000, ...config });
  c.on('error', noop);
  clients.push(c);
  return c;
}

async function proxyTo(target: Parameters<typeof startFaultProxy>[0]): Promise<FaultProxy> {
  const proxy = await startFaultProxy(target);
  proxies.push(proxy);
  return proxy;
}

/** A promise, and whether it has settled yet. */
function watch<T>(promise: Promise<T>): { promise: Promise<T>; settled: () => boolean } {
  let settled = false;
  promise.then(
    () => (settled = true),
    () => (settled = true),
  );
  return { promise, settled: () => settled };
}

const elapse = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

afterEach(async () => {
  // Proxies first: a client behind a partition could not say goodbye.
  await Promise.all(proxies.splice(0).map((p) => p.close()));
  await Promise.all(clients.splice(0).map((c) => c.end().catch(noop)));
});

describe.skipIf(!available)(pgTitle(available, 'the fault proxy in front of PostgreSQL'), () => {
  it('forwards queries, and counts connections and bytes', async () => {
    const proxy = await proxyTo(PG_URL);
    expect(proxy.url(PG_URL)).toContain(`127.0.0.1:${proxy.port}`);
    const c = client(proxy.url(PG_URL));
    await c.connect();
    expect((await c.query('SELECT 1 AS v')).rows).toEqual([{ v: 1 }]);
    expect(proxy.stats()).toMatchObject({ open: 1, accepted: 1, refused: 0 });
    expect(proxy.stats().bytes).toBeGreaterThan(0);
  });

  it('blackhole() holds a query and a new connection until pass(), then delivers both', async () => {
    const proxy = await proxyTo(PG_URL);
    const c = client(proxy.url(PG_URL));
    await c.connect();
    proxy.blackhole();
    const query = watch(c.query('SELECT 2 AS v'));
    const late = client(proxy.url(PG_URL));
    const connecting = watch(late.connect());
    // Not a synchronisation: the assertion is that nothing arrives in this time (a query takes ~1 ms).
    await elapse(300);
    expect(query.settled()).toBe(false);
    expect(connecting.settled()).toBe(false);
    expect(proxy.stats()).toMatchObject({ open: 2, accepted: 2 });
    expect(proxy.stats().held).toBeGreaterThan(0);
    proxy.pass();
    expect((await query.promise).rows).toEqual([{ v: 2 }]);
    await connecting.promise;
    expect((await late.query('SELECT 3 AS v')).rows).toEqual([{ v: 3 }]);
  });

  it('dropAll() fails a query in flight with a connection error; a new client connects again', async () => {
    const proxy = await proxyTo(PG_URL);
    const app = `fault-${randomBytes(4).toString('hex')}`;
    const c = client(proxy.url(PG_URL), { application_name: app });
    await c.connect();
    const query = c.query('SELECT pg_sleep(30)');
    query.catch(noop);
    try {
      // In flight: the server is running it.
      await expect
        .poll(
          async () => (await adminQuery(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND state = 'active'`, [app])).rows[0].n,
        )
        .toBe(1);
      proxy.dropAll();
      await expect(query).rejects.toThrow(/ECONNRESET|terminated unexpectedly/);
      const again = client(proxy.url(PG_URL));
      await again.connect();
      expect((await again.query('SELECT 4 AS v')).rows).toEqual([{ v: 4 }]);
      expect(proxy.stats().accepted).toBe(2);
    } finally {
      // The backend does not notice the reset while it sleeps.
      await adminQuery('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [app]);
    }
  });

  it('refuse() fails new connections while open ones still forward; pass() accepts again', async () => {
    const proxy = await proxyTo(PG_URL);
    const open = client(proxy.url(PG_URL));
    await open.connect();
    proxy.refuse();
    await expect(client(proxy.url(PG_URL)).connect()).rejects.toThrow(/ECONNRESET|terminated unexpectedly/);
    expect(proxy.stats()).toMatchObject({ accepted: 1, refused: 1 });
    expect((await open.query('SELECT 5 AS v')).rows).toEqual([{ v: 5 }]);
    proxy.pass();
    const again = client(proxy.url(PG_URL));
    await again.connect();
    expect((await again.query('SELECT 6 AS v')).rows).toEqual([{ v: 6 }]);
  });

  it('delay(ms) adds ms each way: a round trip takes at least 2 × ms', async () => {
    const proxy = await proxyTo(PG_URL);
    const c = client(proxy.url(PG_URL));
    await c.connect();
    const ms = 150;
    proxy.delay(ms);
    const started = performance.now();
    expect((await c.query('SELECT 7 AS v')).rows).toEqual([{ v: 7 }]);
    expect(performance.now() - started).toBeGreaterThanOrEqual(2 * ms);
  });

  it('close() fails the connections and releases every handle and timer', async () => {
    const kinds = ['TCPServerWrap', 'TCPSocketWrap', 'Timeout'];
    const handles = () => Object.fromEntries(kinds.map((k) => [k, process.getActiveResourcesInfo().filter((r) => r === k).length]));
    const baseline = handles();
    const proxy = await startFaultProxy(PG_URL);
    const c = new pg.Client({ connectionString: proxy.url(PG_URL) });
    c.on('error', noop);
    await c.connect();
    proxy.delay(60_000); // a timer in the proxy
    const query = c.query('SELECT 8 AS v');
    query.catch(noop);
    await expect.poll(() => proxy.stats().held).toBeGreaterThan(0);
    expect(handles()).not.toEqual(baseline);
    await proxy.close();
    await expect(query).rejects.toThrow();
    await c.end().catch(noop);
    await proxy.close(); // idempotent
    await new Promise(setImmediate); // the sockets' handles are released in the loop's close phase
    // At most the baseline: a timer of an earlier test may expire meanwhile (CI saw Timeout 1 → 0),
    // but none of the proxy's sockets or timers may remain.
    const after = handles();
    for (const k of kinds) expect(after[k], k).toBeLessThanOrEqual(baseline[k]!);
  });
});

describe.skipIf(cluster.skip)(cluster.title, () => {
  let db: PgCluster;
  beforeAll(async () => {
    const started = performance.now();
    db = await startPgCluster({ maxConnections: 20 });
    process.stderr.write(`private cluster: initdb + start ${Math.round(performance.now() - started)} ms\n`);
  });
  afterAll(async () => {
    await db?.destroy();
  });

  it('keeps a committed row across restart(immediate); a connection from before gets an error, a new one works', async () => {
    const before = client(db.url);
    await before.connect();
    await before.query('CREATE TABLE kept (v int)');
    await before.query('INSERT INTO kept VALUES (42)');
    const started = performance.now();
    await db.restart('immediate');
    process.stderr.write(`private cluster: restart -m immediate ${Math.round(performance.now() - started)} ms\n`);
    await expect(before.query('SELECT 1')).rejects.toThrow();
    const after = client(db.url);
    await after.connect();
    expect((await after.query('SELECT v FROM kept')).rows).toEqual([{ v: 42 }]);
  });

  it('stop() refuses connections, directly and through a proxy; start() serves them again on the same port', async () => {
    const proxy = await proxyTo({ host: '127.0.0.1', port: db.port });
    await db.stop('fast');
    await expect(client(db.url).connect()).rejects.toThrow(/ECONNREFUSED/);
    await expect(client(proxy.url(db.url)).connect()).rejects.toThrow(/ECONNRESET|terminated unexpectedly/);
    await db.start();
    for (const url of [db.url, proxy.url(db.url)]) {
      const c = client(url);
      await c.connect();
      expect((await c.query('SELECT v FROM kept')).rows).toEqual([{ v: 42 }]);
    }
  });

  it('destroy() stops the server and removes its directory', async () => {
    expect(existsSync(db.dir)).toBe(true);
    await db.destroy();
    expect(existsSync(db.dir)).toBe(false);
    await expect(client(db.url).connect()).rejects.toThrow(/ECONNREFUSED/);
  });
});
