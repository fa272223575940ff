/**
 * `troupe approvals`, `approve` and `deny` (issue 33 item 1's must-show): a destructive MCP tool in
 * `troupe run --interactive` asks; its process is killed with SIGKILL and the run resumed; a second
 * process approves it with edited arguments, and it runs once with them. Denied, the model sees the
 * reason. A run without a user refuses such a step (the CLI's default rules). The same on a
 * PostgreSQL schema (`--db`), and a run a worker hosts.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createFakeOpenAIServer, type FakeOpenAIServer } from '../../src/testing/fakeOpenAIServer.js';
import { expectOneLine, spawnTroupe, troupe, workdir, type Spawned } from '../helpers/cli.js';
import { FIXTURE } from '../helpers/mcp.js';
import { adminQuery, freshSchema, PG_URL, pgAvailable, pgTitle } from '../helpers/pg.js';

/** The root asks to drop `users`, waits for the answer, and finishes saying what it was told. */
async function model(): Promise<FakeOpenAIServer> {
  return createFakeOpenAIServer((request) => {
    const body = request.body as { messages: { role: string; content: string | null }[] };
    const told = body.messages.map((m) => m.content ?? '').find((c) => c.includes('Approval ap-1:'));
    if (told) return { message: { toolCalls: [{ name: 'finish', arguments: { summary: told } }] } };
    if (body.messages.some((m) => (m.content ?? '').includes('"approval":"pending"'))) {
      return { message: { toolCalls: [{ name: 'wait_for_agents', arguments: { reason: 'the approval' } }] } };
    }
    if (body.messages.some((m) => (m.content ?? '').includes('APPROVAL_DENIED'))) {
      return { message: { toolCalls: [{ name: 'finish', arguments: { summary: 'refused' } }] } };
    }
    return { message: { toolCalls: [{ name: 'drop_table', arguments: { table: 'users' } }] } };
  });
}

const running: Spawned[] = [];
afterEach(() => {
  for (const r of running.splice(0)) if (r.child.exitCode === null && r.child.signalCode === null) r.child.kill('SIGKILL');
});

function project(server: FakeOpenAIServer): { cwd: string; drops: () => string[] } {
  const cwd = workdir();
  const log = join(cwd, 'fixture.log');
  writeFileSync(
    join(cwd, 'troupe.config.json'),
    JSON.stringify({
      model: 'm',
      baseURL: server.url,
      apiKey: 'k',
      mcpServers: { fx: { command: process.execPath, args: [FIXTURE], env: { FIXTURE_LOG: log } } },
    }),
  );
  const drops = () =>
    existsSync(log)
      ? readFileSync(log, 'utf8')
          .split('\n')
          .filter((l) => l.startsWith('DROP '))
      : [];
  return { cwd, drops };
}

const told = (server: FakeOpenAIServer, text: string) => server.requests.some((r) => JSON.stringify(r.body).includes(text));

/**
 * Where the run lives: the project's file (no flag), or a PostgreSQL schema (`--db`), where a killed
 * process's lease is made to run out at once (as its 15 s TTL would) before the run is resumed.
 */
interface Place {
  db: string[];
  leaseRanOut: () => Promise<void>;
}
const ON_FILE: Place = { db: [], leaseRanOut: () => Promise.resolve() };

/** Must-show: asked in `troupe run --interactive`, SIGKILLed, resumed, approved from another process with edited arguments: runs once with them. */
async function askedKilledResumedApproved({ db, leaseRanOut }: Place): Promise<void> {
  await using server = await model();
  const { cwd, drops } = project(server);
  const first = spawnTroupe(['run', 'Clean up the database', '--interactive', ...db], cwd);
  running.push(first);
  // The live view says what is asked and how to answer it.
  await first.line(
    /^ {2}lead +asks approval ap-1 for drop_table \{"table":"users"\} \(destructive\): troupe approve ap-1 \[--args <json>\], or troupe deny ap-1/,
  );
  await first.line(/lead +running → waiting/);
  first.child.kill('SIGKILL');
  await first.exited;
  await leaseRanOut();
  expect(drops()).toEqual([]);

  const listed = await troupe(['approvals', ...db], cwd);
  expect(listed.code, listed.stderr).toBe(0);
  expect(listed.stdout).toMatch(/^ap-1 {2}pending {3}lead {2}drop_table \(destructive\) {2}\{"table":"users"\}\n$/);
  // status and tree say it too, read from the rows while no process hosts the run.
  const status = await troupe(['status', ...db], cwd);
  expect(status.stdout).toMatch(/^approval ap-1 pending: lead asks to run drop_table \{"table":"users"\} \(destructive\)$/m);
  const tree = await troupe(['tree', ...db], cwd);
  expect(tree.stdout).toMatch(/^… lead \(\w+\) {2}waiting \(asks approval ap-1\) {2}turns=2 /m);
  const treeJson = JSON.parse((await troupe(['tree', '--json', ...db], cwd)).stdout) as { pendingApprovals: unknown[] };
  expect(treeJson.pendingApprovals).toMatchObject([{ id: 'ap-1', agentName: 'lead', tool: 'drop_table', args: { table: 'users' }, state: 'pending' }]);

  const resumed = spawnTroupe(['resume', '--json', ...db], cwd);
  running.push(resumed);
  await resumed.line(/"type":"run.started"/);
  const r = await troupe(['approve', 'ap-1', '--args', '{"table":"users_tmp"}', ...db], cwd);
  expect(r.code, r.stderr).toBe(0);
  expect(r.stdout).toMatch(/^approval ap-1 approved with edited arguments: drop_table runs for lead \(\w+\)\n$/);
  expect(await resumed.exited).toEqual({ code: 0, signal: null });
  expect(drops()).toEqual(['DROP users_tmp']);
  expect(told(server, 'drop_table was approved with edited arguments and ran. Its result: dropped users_tmp')).toBe(true);

  // Answered again, from anywhere: nothing runs again.
  const again = await troupe(['approve', 'ap-1', ...db], cwd);
  expect(again.code, again.stderr).toBe(0);
  expect(again.stdout).toMatch(/already approved; nothing changed/);
  expect(drops()).toEqual(['DROP users_tmp']);
  const after = JSON.parse((await troupe(['approvals', '--json', ...db], cwd)).stdout) as { approvals: { state: string; answer: { args: unknown } }[] };
  expect(after.approvals).toMatchObject([{ state: 'ran', answer: { args: { table: 'users_tmp' } } }]);
}

/** Must-show: denied from another process while the run is live, it never runs and the model sees the reason. */
async function deniedWhileLive({ db }: Place): Promise<void> {
  await using server = await model();
  const { cwd, drops } = project(server);
  const run = spawnTroupe(['run', 'Clean up the database', '--interactive', ...db], cwd);
  running.push(run);
  await run.line(/lead +running → waiting/);
  const r = await troupe(['deny', 'ap-1', '--reason', 'users is the production table', ...db], cwd);
  expect(r.code, r.stderr).toBe(0);
  expect(r.stdout).toMatch(/^approval ap-1 denied: lead \(\w+\) is told why\n$/);
  expect(await run.exited).toEqual({ code: 0, signal: null });
  expect(drops()).toEqual([]);
  expect(told(server, 'drop_table was not approved: users is the production table. It did not run.')).toBe(true);
}

describe('troupe approve / deny on SQLite', () => {
  it('asked in an interactive run, killed, resumed, approved from another process with edited arguments: it runs once with them', async () => {
    await askedKilledResumedApproved(ON_FILE);
  });

  it('denied from another process while the run is live: it never runs, and the model sees the reason', async () => {
    await deniedWhileLive(ON_FILE);
  });

  it('a run without a user refuses the step; an unknown approval is APPROVAL_NOT_FOUND (exit 4); deny needs a reason', async () => {
    await using server = await model();
    const { cwd, drops } = project(server);
    const r = await troupe(['run', 'Clean up the database', '--json'], cwd);
    expect(r.code, r.stderr).toBe(0);
    expect(drops()).toEqual([]);
    expect(told(server, 'no user to ask')).toBe(true);
    const unknown = await troupe(['approve', 'ap-7'], cwd);
    expect(unknown.code, unknown.stderr).toBe(4);
    expectOneLine(unknown, 'APPROVAL_NOT_FOUND');
    const bare = await troupe(['deny', 'ap-1'], cwd);
    expect(bare.code, bare.stderr).toBe(2);
  });
});

const available = await pgAvailable();

describe.skipIf(!available)(pgTitle(available, 'troupe approve on PostgreSQL'), () => {
  const { schema, drop } = freshSchema();
  const db = `${PG_URL}?schema=${schema}`;
  afterAll(async () => {
    await drop();
  });
  const onPg: Place = {
    db: ['--db', db],
    leaseRanOut: async () => void (await adminQuery(`UPDATE ${schema}.run_leases SET lease_until = 0 WHERE owner IS NOT NULL`)),
  };

  it('asked in troupe run --interactive, killed with SIGKILL, resumed, approved from another process with edited arguments: it runs once with them', async () => {
    await askedKilledResumedApproved(onPg);
  });

  it('denied from another process while the run is live: it never runs, and the model sees the reason', async () => {
    await deniedWhileLive(onPg);
  });

  it('a run hosted by a worker asks; approved from another process, it runs once on whichever worker hosts the run', async () => {
    await using server = await model();
    const { cwd, drops } = project(server);
    const submitted = await troupe(['run', 'Clean up the database', '--detach', '--interactive', '--db', db, '--json'], cwd);
    expect(submitted.code, submitted.stderr).toBe(0);
    const worker = spawnTroupe(['worker', '--db', db, '--model', 'm', '--base-url', server.url, '--api-key', 'k'], cwd);
    running.push(worker);
    const { runId } = JSON.parse(submitted.stdout) as { runId: string };
    await worker.line(new RegExp(`^hosting   run ${runId} \\(lease epoch \\d+\\)$`));
    for (const deadline = Date.now() + 30_000; ;) {
      const listed = JSON.parse((await troupe(['approvals', '--db', db, '--json'], cwd)).stdout) as { approvals: { state: string }[] };
      if (listed.approvals[0]?.state === 'pending') break;
      if (Date.now() > deadline) throw new Error('nothing asked');
    }
    const status = await troupe(['status', '--db', db], cwd);
    expect(status.stdout).toMatch(/^approval ap-1 pending: lead asks to run drop_table \{"table":"users"\} \(destructive\)$/m);
    const r = await troupe(['approve', 'ap-1', '--args', '{"table":"users_tmp"}', '--db', db], cwd);
    expect(r.code, r.stderr).toBe(0);
    // A worker lets a parked run go: the answer is applied by whoever holds the run then (this
    // command, which records it for the next worker), and the tool runs on the worker.
    expect(r.stdout).toMatch(/^approval ap-1 approved with edited arguments: drop_table runs for lead \(\w+\)( once a worker .* hosts the run)?\n$/);
    await worker.line(new RegExp(`^done      run ${runId}$`));
    expect(drops()).toEqual(['DROP users_tmp']);
    expect(told(server, 'dropped users_tmp')).toBe(true);
  });
});
