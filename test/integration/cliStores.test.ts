/**
 * One CLI on every store: every command is one implementation, and the `--db` value only picks
 * the adapter.
 *
 * - `status`, `tree`, `send`, `stop` and `finish-execution` (readCommands.ts, mail.ts over
 *   hosting/runStore.ts): the same run — `lead` spawned `worker`, which reported, and lead waits
 *   on its user with an async execution linked — is seeded in a SQLite file and in a PostgreSQL
 *   schema, nobody hosting it; the same commands then give the same exit codes and the same words
 *   (ids and the database's name aside), and leave the same rows.
 * - `run`, `resume`, `demo`, `serve` and `ui` (they host or show runs): the same scenario on each
 *   store, with the same outcomes.
 */
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createCoordinator } from '../../src/host/createCoordinator.js';
import { scriptedModel } from '../../src/model/scriptedModel.js';
import type { StorePort } from '../../src/store/port.js';
import { portOf } from '../../src/store/port.js';
import { openPostgresStore } from '../../src/store/postgres/store.js';
import { openStore } from '../../src/store/sqliteStore.js';
import { createFakeOpenAIServer } from '../../src/testing/fakeOpenAIServer.js';
import { call } from '../helpers/dashboard.js';
import { spawnTroupe, statusWhere, troupe, workdir, type Result, type Spawned } from '../helpers/cli.js';
import { freshSchema, PG_URL, pgAvailable, pgTitle } from '../helpers/pg.js';

const EXECUTION = '7f1c3a52-9d4e-4b8a-a1f0-2c6d8e9b0a13';

/** Seed the run through `port` (the store's own, or a lease's); resolves once it is parked and shut down. */
async function seedRun(port: StorePort, runId?: string): Promise<{ runId: string; rootId: string }> {
  const model = scriptedModel({
    agents: {
      lead: [
        { tool: 'spawn_agent', args: { name: 'worker', task: 'check the licence' } },
        { tool: 'wait_for_agents', args: { reason: 'the worker reports' } },
        { tool: 'respond_to_user', args: { message: 'Ready when you are.' } },
      ],
      worker: [{ tool: 'agent_finish', args: { summary: 'MIT' } }],
    },
  });
  const c = createCoordinator<StorePort>({ store: port, model, interactive: true, ...(runId ? { runId } : {}) });
  const rootId = await c.start({ name: 'lead', task: 'Review the repository.' });
  await c.waitFor(rootId, ['waiting']);
  await c.whenIdle();
  await port.commit([
    { op: 'appendEvent', row: { runId: c.runId, agentId: null, type: 'cli.run', data: { limits: { maxMessageBytes: 100 } }, at: 1 } },
    { op: 'linkExecution', row: { id: EXECUTION, agentId: rootId, linkedAt: 2 } },
  ]);
  await c.shutdown();
  return { runId: c.runId, rootId };
}

/** The commands, in order, and what each printed and exited with (ids and the database replaced by names). */
async function script(db: string, cwd: string, names: Record<string, string>): Promise<Record<string, Pick<Result, 'code' | 'stdout' | 'stderr'>>> {
  const plain = (text: string) => {
    // PostgreSQL names the database by its URL without the query (the schema).
    let out = text.split(db).join('<db>').split(db.split('?')[0]!).join('<db>');
    for (const [id, name] of Object.entries(names)) out = out.split(id).join(`<${name}>`);
    return out;
  };
  const steps: [string, string[]][] = [
    ['send-too-large', ['send', 'lead', 'x'.repeat(101)]],
    ['send-nobody', ['send', 'nobody', 'hi']],
    ['send', ['send', 'lead', 'Also check the licence headers.']],
    ['finish-unknown', ['finish-execution', '00000000-0000-4000-8000-000000000000', 'completed']],
    ['finish', ['finish-execution', EXECUTION, 'completed', 'provisioned 3 hosts']],
    ['finish-again', ['finish-execution', EXECUTION, 'failed', 'late']],
    ['stop-worker', ['stop', 'worker']],
    ['tree', ['tree', '--json']],
  ];
  const out: Record<string, Pick<Result, 'code' | 'stdout' | 'stderr'>> = {};
  for (const [name, args] of steps) {
    const r = await troupe([...args, '--db', db], cwd);
    out[name] = { code: r.code, stdout: plain(r.stdout), stderr: plain(r.stderr) };
  }
  const status = JSON.parse((await troupe(['status', '--json', '--db', db], cwd)).stdout) as Record<string, unknown>;
  out.status = {
    code: 0,
    stdout: JSON.stringify({ ...status, db: '<db>', host: null, runId: '<run>', createdAt: 0, root: { ...(status.root as object), id: '<lead>' } }),
    stderr: '',
  };
  return out;
}

/** What the rows say after the script: the lead's pending mail, statuses, the execution. */
async function rowsOf(port: Pick<StorePort, 'listAgents' | 'listMessages' | 'getExecution'>, runId: string) {
  const agents = await port.listAgents(runId);
  const name = (id: string) => agents.find((a) => a.id === id)?.name ?? id;
  const messages = await port.listMessages(runId);
  return {
    statuses: Object.fromEntries(agents.map((a) => [a.name, a.status])),
    pending: messages.filter((m) => m.deliveredAt === null).map((m) => `${name(m.to)}: ${m.type}: ${m.content.slice(0, 40)}`),
    execution: (({ status, result, continuedAt }) => ({ status, result, continuedAt }))((await port.getExecution(EXECUTION))!),
  };
}

const available = await pgAvailable();
const results: Record<string, Awaited<ReturnType<typeof script>>> = {};
const rows: Record<string, Awaited<ReturnType<typeof rowsOf>>> = {};

describe('the CLI on SQLite', () => {
  it('send, stop, finish-execution, tree and status on a run nobody hosts', async () => {
    const cwd = workdir();
    const db = join(cwd, 'team.db');
    const store = openStore({ path: db });
    const { runId, rootId } = await seedRun(portOf(store));
    const workerId = store.listAgents(runId).find((a) => a.name === 'worker')!.id;
    store.close();
    results.sqlite = await script(db, cwd, { [runId]: 'run', [rootId]: 'lead', [workerId]: 'worker' });
    const reader = openStore({ path: db, readonly: true });
    rows.sqlite = await rowsOf(portOf(reader), runId);
    reader.close();
    // What the script is about, on its own terms (the PostgreSQL run must then say the same).
    const r = results.sqlite;
    expect(r['send-too-large']).toMatchObject({ code: 7, stdout: '' });
    expect(r['send-nobody']).toMatchObject({ code: 4 });
    expect(r.send!.stdout).toMatch(
      /^queued for lead \(<lead>\): no process is running this run; the agent reads it once troupe resume --db <db> hosts the run\n$/,
    );
    expect(r['finish-unknown']).toMatchObject({ code: 4 });
    expect(r.finish!.stdout).toMatch(/^execution \S+ completed: lead \(<lead>\) continues with its result, once troupe resume --db <db> hosts the run\n$/);
    expect(r['finish-again']!.stdout).toMatch(/had already completed; nothing changed\n$/);
    expect(r['stop-worker']).toMatchObject({ code: 0, stdout: 'stopped (already terminal)\n' });
    expect(rows.sqlite).toEqual({
      statuses: { lead: 'running', worker: 'completed' },
      pending: ['lead: instruction: Also check the licence headers.'],
      execution: { status: 'completed', result: 'provisioned 3 hosts', continuedAt: null },
    });
  });
});

describe.skipIf(!available)(pgTitle(available, 'the same CLI on PostgreSQL'), () => {
  const { schema, drop } = freshSchema();
  afterAll(async () => {
    await drop();
  });

  it('gives the same exit codes and words, and leaves the same rows', async () => {
    expect(results.sqlite, 'the SQLite half ran first').toBeDefined();
    const cwd = workdir();
    const db = `${PG_URL}?schema=${schema}`;
    const store = await openPostgresStore({ url: db });
    let runId: string;
    let names: Record<string, string>;
    try {
      const lease = await store.claim('run_cli_stores', { owner: 'seed', heartbeatMs: 0 });
      const seeded = await seedRun(lease.port, 'run_cli_stores');
      runId = seeded.runId;
      const workerId = (await store.reads.listAgents(runId)).find((a) => a.name === 'worker')!.id;
      names = { [runId]: 'run', [seeded.rootId]: 'lead', [workerId]: 'worker' };
      await lease.release({ state: 'parked', wakeAt: null });
    } finally {
      await store.close();
    }
    const pg = await script(db, cwd, names);
    const reader = await openPostgresStore({ url: db, readOnly: true });
    try {
      rows.pg = await rowsOf(reader.reads, runId);
    } finally {
      await reader.close();
    }
    // Where a store's words differ by design: how its next host comes.
    const same = (text: string) => text.replace('troupe resume --db <db>', '<next host>').replace('a worker (troupe worker --db …)', '<next host>');
    for (const [step, sqlite] of Object.entries(results.sqlite ?? {})) {
      expect({ step, code: pg[step]!.code, stdout: same(pg[step]!.stdout), stderr: same(pg[step]!.stderr) }).toEqual({
        step,
        code: sqlite.code,
        stdout: same(sqlite.stdout),
        stderr: same(sqlite.stderr),
      });
    }
    expect(rows.pg).toEqual(rows.sqlite);
  });
});

/** Every store the hosting commands run on: a file in a fresh folder, a fresh PostgreSQL schema. */
const stores = [
  { name: 'a SQLite file', skip: false, db: () => join(workdir(), 'team.db') },
  {
    name: pgTitle(available, 'PostgreSQL'),
    skip: !available,
    db: () => {
      const { schema, drop } = freshSchema();
      drops.push(drop);
      return `${PG_URL}?schema=${schema}`;
    },
  },
];
const drops: (() => Promise<void>)[] = [];
const spawned: Spawned[] = [];
afterAll(async () => {
  for (const r of spawned) if (r.child.exitCode === null && r.child.signalCode === null) r.child.kill('SIGKILL');
  await Promise.all(drops.map((drop) => drop()));
});

const jsonOf = (stdout: string) =>
  stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { type?: string; status?: string; resumed?: boolean; tree?: unknown[] });

for (const store of stores) {
  // Each test starts several CLI processes on 2 cores: a generous bound on a hang.
  describe.skipIf(store.skip)(`the hosting commands on ${store.name}`, { timeout: 120_000 }, () => {
    it('run hosts its run here until its root ends and lets it go; resume hosts it again and finds nothing to do', async () => {
      await using server = await createFakeOpenAIServer(() => ({ message: { toolCalls: [{ name: 'finish', arguments: { summary: 'done here' } }] } }));
      const db = store.db();
      const cwd = workdir();
      const model = ['--model', 'm', '--base-url', server.url, '--api-key', 'k', '--db', db, '--json'];
      const r = await troupe(['run', 'Say done', ...model], cwd);
      expect(r.code, r.stderr).toBe(0);
      const lines = jsonOf(r.stdout);
      expect(lines[0]).toMatchObject({ type: 'run.started', resumed: false });
      expect(lines.at(-1)).toMatchObject({ type: 'run.finished', status: 'completed' });
      expect(server.requests).toHaveLength(1);
      // Let go as its rows say: on PostgreSQL its lease is done (no worker hosts it for nothing).
      expect(await statusWhere(db, cwd, () => true)).toMatchObject({
        hosted: false,
        host: { state: db.startsWith('postgres') ? 'done' : 'free' },
        root: { status: 'completed' },
      });
      const again = await troupe(['resume', ...model], cwd);
      expect(again.code, again.stderr).toBe(0);
      expect(jsonOf(again.stdout)[0]).toMatchObject({ type: 'run.started', resumed: true });
      expect(server.requests).toHaveLength(1);
    });

    it('demo runs its team here to the end', async () => {
      const db = store.db();
      const cwd = workdir();
      const r = await troupe(['demo', '--db', db, '--json'], cwd);
      expect(r.code, r.stderr).toBe(0);
      const lines = jsonOf(r.stdout);
      expect(lines[0]).toMatchObject({ type: 'run.started', resumed: false });
      expect(lines.at(-1)).toMatchObject({ type: 'run.finished', status: 'completed' });
      expect(lines.find((l) => l.tree)?.tree?.length).toBeGreaterThan(0);
      expect(await statusWhere(db, cwd, () => true)).toMatchObject({ hosted: false, root: { status: 'completed' } });
    });

    it('serve keeps its main run while it waits on the user; send from another process reaches it; ui shows it live and its actions reach it', async () => {
      let calls = 0;
      await using server = await createFakeOpenAIServer(() =>
        calls++ === 0
          ? { message: { toolCalls: [{ name: 'respond_to_user', arguments: { message: 'Ready.' } }] } }
          : { message: { toolCalls: [{ name: 'finish', arguments: { summary: 'served' } }] } },
      );
      const db = store.db();
      const cwd = workdir();
      const serving = spawnTroupe(['serve', 'Wait for the user', '--db', db, '--model', 'm', '--base-url', server.url, '--api-key', 'k'], cwd);
      spawned.push(serving);
      await serving.line(/^ready +serving .* main run run_\S+ \(root \S+\)/);
      // Its root waits on the user: serve keeps the run hosted (a plain worker would let it go).
      await statusWhere(db, cwd, (s) => s.root?.status === 'waiting' && s.hosted);

      const ui = spawnTroupe(['ui', '--db', db, '--port', '0'], cwd);
      spawned.push(ui);
      await ui.line(/^serving run run_\S+ of /);
      await expect.poll(() => ui.stderr(), { timeout: 10_000 }).toMatch(/token=/);
      const [, port, token] = /127\.0\.0\.1:(\d+)\/\?token=([\w-]+)/.exec(ui.stderr())!;
      const team = JSON.parse((await call(Number(port), `/api/team?token=${token}`)).body) as { live: boolean; run: { id: string } };
      expect(team.live).toBe(true);
      const paused = await call(Number(port), `/api/action?token=${token}`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Host: `127.0.0.1:${port}` },
        body: JSON.stringify({ run: team.run.id, kind: 'pause' }),
      });
      expect(JSON.parse(paused.body)).toMatchObject({ ok: true });
      const resumed = await call(Number(port), `/api/action?token=${token}`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Host: `127.0.0.1:${port}` },
        body: JSON.stringify({ run: team.run.id, kind: 'resume' }),
      });
      expect(JSON.parse(resumed.body)).toMatchObject({ ok: true });
      ui.child.kill('SIGINT');
      expect(await ui.exited).toEqual({ code: 0, signal: null });

      const sent = await troupe(['send', 'lead', 'go', '--db', db], cwd);
      expect(sent.code, sent.stderr).toBe(0);
      expect(sent.stdout).toMatch(/^delivered to lead/);
      await statusWhere(db, cwd, (s) => s.root?.status === 'completed');
      serving.child.kill('SIGTERM');
      expect(await serving.exited).toEqual({ code: 0, signal: null });
      expect(await statusWhere(db, cwd, () => true)).toMatchObject({ hosted: false, root: { status: 'completed' } });
    });
  });
}
