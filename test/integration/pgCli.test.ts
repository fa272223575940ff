/**
 * The CLI on PostgreSQL: `troupe run --db postgres://…` submits, a `troupe worker` process hosts
 * the run, and `status`, `tree`, `send` work from another process (another machine, in real use).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { createFakeOpenAIServer } from '../../src/testing/fakeOpenAIServer.js';
import { spawnTroupe, statusWhere as statusOn, troupe, workdir, type Spawned } from '../helpers/cli.js';
import { freshSchema, PG_URL, pgAvailable, pgTitle } from '../helpers/pg.js';

const available = await pgAvailable();

describe.skipIf(!available)(pgTitle(available, 'the CLI on PostgreSQL'), () => {
  const { schema, drop } = freshSchema();
  const db = `${PG_URL}?schema=${schema}`;
  const running: Spawned[] = [];
  afterAll(async () => {
    for (const r of running) if (r.child.exitCode === null && r.child.signalCode === null) r.child.kill('SIGKILL');
    await drop();
  });

  /** `troupe status --json` on this test's database until `ok` (the run's progress is seen from another process). */
  const statusWhere = (cwd: string, ok: Parameters<typeof statusOn>[2]) => statusOn(db, cwd, ok);

  it('run submits, a worker hosts it, send reaches its root from another process, status and tree read it', async () => {
    await using server = await createFakeOpenAIServer((request) =>
      request.index === 0
        ? { message: { toolCalls: [{ name: 'respond_to_user', arguments: { message: 'Ready when you are.' } }] } }
        : { message: { toolCalls: [{ name: 'finish', arguments: { summary: 'answered the user' } }] } },
    );
    const cwd = workdir();
    const submitted = await troupe(['run', 'Wait for the user', '--detach', '--interactive', '--db', db, '--json'], cwd);
    expect(submitted.code, submitted.stderr).toBe(0);
    expect(JSON.parse(submitted.stdout)).toMatchObject({ type: 'run.submitted' });

    const worker = spawnTroupe(['worker', '--db', db, '--concurrency', '2', '--model', 'm', '--base-url', server.url, '--api-key', 'k'], cwd);
    running.push(worker);
    await worker.line(/^worker .* hosting runs of/);
    const parked = await statusWhere(cwd, (s) => s.host?.state === 'parked');
    expect(parked.root).toMatchObject({ status: 'waiting' });

    const sent = await troupe(['send', 'lead', 'hello', '--db', db], cwd);
    expect(sent.code, sent.stderr).toBe(0);
    expect(sent.stdout).toMatch(/^(queued for|delivered to) lead \(\w+\)/);
    const done = await statusWhere(cwd, (s) => s.root?.status === 'completed' && s.host?.owner === null);
    expect(done.host?.state).toBe('done');

    const tree = await troupe(['tree', '--db', db], cwd);
    expect(tree.code, tree.stderr).toBe(0);
    expect(tree.stdout).toMatch(/lead/);
    const nobody = await troupe(['send', 'nobody', 'hi', '--db', db], cwd);
    expect(nobody.code, nobody.stderr).toBe(4);

    worker.child.kill('SIGTERM');
    expect(await worker.exited).toEqual({ code: 0, signal: null });
  });

  it('a worker needs a PostgreSQL --db', async () => {
    const r = await troupe(['worker', '--model', 'm'], workdir());
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/postgres:\/\//);
  });
});
