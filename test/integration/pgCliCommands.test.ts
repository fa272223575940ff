/**
 * What the CLI does on PostgreSQL (`--db postgres://…`) beyond what it does on every store
 * (cliStores.test.ts runs the same commands on both): a run carries the settings its submitter
 * chose to whichever worker hosts it (the worker's key, never the submitter's), a worker's own
 * flags override them; `resume --detach` hands a run back with new settings; bad URLs and
 * unreachable servers are typed errors, and a flag the PostgreSQL form does not honour is refused,
 * not ignored.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { createFakeOpenAIServer, type FakeRequest } from '../../src/testing/fakeOpenAIServer.js';
import { expectOneLine, spawnTroupe, statusWhere, troupe, workdir, type Spawned } from '../helpers/cli.js';
import { adminQuery, freshSchema, PG_URL, pgAvailable, pgTitle } from '../helpers/pg.js';

const available = await pgAvailable();

/** The model a request asked for, and the key it carried. */
const seen = (r: FakeRequest) => ({ model: (r.body as { model?: string }).model, key: r.headers.authorization });

// Each test starts several CLI processes, on 2 cores shared with other jobs: a generous bound on a hang.
describe.skipIf(!available)(pgTitle(available, 'every CLI command on PostgreSQL'), { timeout: 180_000 }, () => {
  const schemas: (() => Promise<void>)[] = [];
  const running: Spawned[] = [];
  const dbOf = () => {
    const { schema, drop } = freshSchema();
    schemas.push(drop);
    return `${PG_URL}?schema=${schema}`;
  };
  afterAll(async () => {
    for (const r of running) if (r.child.exitCode === null && r.child.signalCode === null) r.child.kill('SIGKILL');
    await Promise.all(schemas.map((drop) => drop()));
  });

  it("a run is hosted with the settings it was submitted with; the key is the worker's; resume --model changes them for the next host", async () => {
    await using server = await createFakeOpenAIServer((request) =>
      request.index === 0
        ? { message: { toolCalls: [{ name: 'respond_to_user', arguments: { message: 'Ready.' } }] } }
        : { message: { toolCalls: [{ name: 'finish', arguments: { summary: 'done' } }] } },
    );
    const db = dbOf();
    const cwd = workdir();
    // The submitter's key is its own business: it is never saved, so no worker can use it.
    const submitted = await troupe(
      ['run', 'Wait for the user', '--detach', '--interactive', '--model', 'chosen-model', '--base-url', server.url, '--api-key', 'submitter-key', '--db', db],
      cwd,
    );
    expect(submitted.code, submitted.stderr).toBe(0);
    // The worker knows neither model nor server: both come from the run.
    const worker = spawnTroupe(['worker', '--db', db], cwd, { OPENAI_API_KEY: 'worker-key' });
    running.push(worker);
    await worker.line(/^worker .* hosting runs of/);
    await statusWhere(db, cwd, (s) => s.host?.state === 'parked');
    expect(server.requests.map(seen)).toEqual([{ model: 'chosen-model', key: 'Bearer worker-key' }]);

    // Resume on PostgreSQL hands the run back with a new model for whoever hosts it next.
    const resumed = await troupe(['resume', '--detach', '--db', db, '--model', 'second-model', '--json'], cwd);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(JSON.parse(resumed.stdout)).toMatchObject({ type: 'run.resumed' });
    const sent = await troupe(['send', 'lead', 'finish now', '--db', db], cwd);
    expect(sent.code, sent.stderr).toBe(0);
    await statusWhere(db, cwd, (s) => s.root?.status === 'completed' && s.host?.owner === null);
    expect(server.requests.slice(1).map(seen)).toEqual([{ model: 'second-model', key: 'Bearer worker-key' }]);
    worker.child.kill('SIGTERM');
    expect(await worker.exited).toEqual({ code: 0, signal: null });
  });

  it("a worker's own --model overrides the run's", async () => {
    await using server = await createFakeOpenAIServer(() => ({ message: { toolCalls: [{ name: 'finish', arguments: { summary: 'done' } }] } }));
    const db = dbOf();
    const cwd = workdir();
    expect((await troupe(['run', 'Say done', '--detach', '--model', 'chosen-model', '--base-url', server.url, '--db', db], cwd)).code).toBe(0);
    const worker = spawnTroupe(['worker', '--db', db, '--model', 'pinned-model', '--api-key', 'k'], cwd);
    running.push(worker);
    await statusWhere(db, cwd, (s) => s.host?.state === 'done');
    expect(server.requests.map(seen)).toEqual([{ model: 'pinned-model', key: 'Bearer k' }]);
    worker.child.kill('SIGTERM');
    await worker.exited;
  });

  it('status, tree and ui on an empty schema, or one that does not exist: RUN_NOT_FOUND (exit 4), one line, and nothing is created', async () => {
    const cwd = workdir();
    const tablesIn = async (schema: string) =>
      Number((await adminQuery('SELECT count(*) AS n FROM information_schema.tables WHERE table_schema = $1', [schema])).rows[0].n);
    const schemaExists = async (schema: string) =>
      (await adminQuery('SELECT 1 FROM information_schema.schemata WHERE schema_name = $1', [schema])).rowCount === 1;
    const empty = freshSchema();
    const missing = freshSchema();
    schemas.push(empty.drop, missing.drop);
    await adminQuery(`CREATE SCHEMA ${empty.schema}`);
    for (const schema of [empty.schema, missing.schema]) {
      const db = `${PG_URL}?schema=${schema}`;
      for (const args of [['status'], ['status', '--json'], ['tree'], ['ui', '--port', '0']]) {
        const r = await troupe([...args, '--db', db], cwd);
        expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(4);
        expectOneLine(r, 'RUN_NOT_FOUND');
        expect(r.stderr).toContain(`schema ${schema} holds no troupe tables`);
      }
    }
    expect(await tablesIn(empty.schema)).toBe(0);
    expect(await schemaExists(missing.schema)).toBe(false);
  });

  it('typed errors: an unreachable server on every command, a flag the PostgreSQL form does not honour, a worker without a PostgreSQL --db', async () => {
    const cwd = workdir();
    const nowhere = 'postgres://root@127.0.0.1:1/test';
    const commands = [
      ['status'],
      ['tree'],
      ['resume'],
      ['resume', '--detach'],
      ['run', 'x', '--model', 'm', '--api-key', 'k'],
      ['run', 'x', '--detach'],
      ['send', 'lead', 'hi'],
      ['stop', 'lead'],
      ['worker'],
      ['demo'],
      ['serve', '--model', 'm', '--api-key', 'k'],
    ];
    const results = await Promise.all(commands.map((args) => troupe([...args, '--db', nowhere], cwd)));
    results.forEach((r, i) => {
      expect(r.code, `${commands[i]![0]}: ${r.stderr}`).toBe(5);
      expect(r.stderr).toMatch(/STORE_UNREACHABLE/);
    });
    const ui = await troupe(['run', 'x', '--db', PG_URL, '--ui'], cwd);
    expect(ui.code).toBe(2);
    expect(ui.stderr).toMatch(/does not take --ui with a PostgreSQL --db/);
    // --detach hands a run to the workers: a file has none.
    for (const args of [
      ['run', 'x', '--detach', '--model', 'm'],
      ['resume', '--detach'],
    ]) {
      const detached = await troupe([...args, '--db', 'x.db'], cwd);
      expect(detached.code, detached.stderr).toBe(2);
      expect(detached.stderr).toMatch(/--detach needs a PostgreSQL --db/);
    }
    const worker = await troupe(['worker', '--db', 'x.db'], cwd);
    expect(worker.code).toBe(2);
    expect(worker.stderr).toMatch(/postgres:\/\//);
  });
});
