/**
 * The approval window across a real kill -9 (issue 33 item 3's must-show): an interactive run's
 * mutation asks, is approved from another process and starts an async execution; the run's process
 * is killed with SIGKILL; the execution finishes while no process drives the run; a new process
 * resumes it. Inside the window the execution's end continues the agent with 0 user messages;
 * outside it, the agent waits for its user. On a SQLite file and on a PostgreSQL schema.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createFakeOpenAIServer, type FakeOpenAIServer } from '../../src/testing/fakeOpenAIServer.js';
import { spawnTroupe, troupe, workdir, type Spawned } from '../helpers/cli.js';
import { FIXTURE } from '../helpers/mcp.js';
import { adminQuery, freshSchema, PG_URL, pgAvailable, pgTitle } from '../helpers/pg.js';

const EXECUTION = '3b8e1f0a-5c2d-4e7f-9a1b-6d4c2e8f0b57';
const ENDED = `execution ${EXECUTION} completed: provisioned 3 hosts`;
const USER = 'Any news on the hosts?';

/** The root asks to start the execution, waits for the approval, tells its user, and finishes once the end is in its conversation. */
async function model(): Promise<FakeOpenAIServer> {
  return createFakeOpenAIServer((request) => {
    const body = request.body as { messages: { role: string; content: string | null }[] };
    const said = body.messages.map((m) => m.content ?? '').join('\n');
    if (said.includes(ENDED)) return { message: { toolCalls: [{ name: 'finish', arguments: { summary: 'the hosts are up' } }] } };
    if (said.includes('Approval ap-1:')) {
      return { message: { toolCalls: [{ name: 'respond_to_user', arguments: { message: 'Provisioning; I will tell you.' } }] } };
    }
    if (said.includes('"approval":"pending"')) return { message: { toolCalls: [{ name: 'wait_for_agents', arguments: { reason: 'the approval' } }] } };
    return { message: { toolCalls: [{ name: 'echo', arguments: { text: `execution ${EXECUTION} running` } }] } };
  });
}

const running: Spawned[] = [];
afterEach(() => {
  for (const r of running.splice(0)) if (r.child.exitCode === null && r.child.signalCode === null) r.child.kill('SIGKILL');
});

/** Polls until `ok` (another process's output), failing after 30 s. */
async function until(ok: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (const deadline = Date.now() + 30_000; !(await ok());) {
    if (Date.now() > deadline) throw new Error(`never: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * Where the run lives: the project's file (no flag), or a PostgreSQL schema (`--db`), where a killed
 * process's lease is made to run out at once (as its 15 s TTL would): no process drives the run.
 */
interface Place {
  db: string[];
  leaseRanOut: () => Promise<void>;
}
const ON_FILE: Place = { db: [], leaseRanOut: () => Promise.resolve() };

/**
 * A run whose mutation (the fixture's echo, made one) was approved from another process and ran,
 * starting the execution, then whose process was killed with SIGKILL after its agent told its user.
 */
async function approvedThenKilled(server: FakeOpenAIServer, windowMs: number, { db, leaseRanOut }: Place): Promise<string> {
  const cwd = workdir();
  writeFileSync(
    join(cwd, 'troupe.config.json'),
    JSON.stringify({
      model: 'm',
      baseURL: server.url,
      apiKey: 'k',
      approvals: { ask: ['mutation', 'destructive'], windowMs },
      mcpServers: { fx: { command: process.execPath, args: [FIXTURE], tools: { echo: { risk: 'mutation' } } } },
    }),
  );
  const run = spawnTroupe(['run', 'Provision the hosts', '--interactive', ...db], cwd);
  running.push(run);
  await run.line(/lead +running → waiting/);
  const approved = await troupe(['approve', 'ap-1', ...db], cwd);
  expect(approved.code, approved.stderr).toBe(0);
  // Parked again once it told its user (its second wait), the execution linked to it.
  await until(() => run.lines.filter((l) => /lead +running → waiting/.test(l)).length >= 2, 'the lead parked after the approval');
  run.child.kill('SIGKILL');
  expect(await run.exited).toEqual({ code: null, signal: 'SIGKILL' });
  await leaseRanOut();
  const ended = await troupe(['finish-execution', EXECUTION, 'completed', 'provisioned 3 hosts', ...db], cwd);
  expect(ended.code, ended.stderr).toBe(0);
  return cwd;
}

const userMessages = (server: FakeOpenAIServer) =>
  server.requests.filter((r) => (r.body as { messages: { role: string; content: string | null }[] }).messages.some((m) => m.content?.includes(USER)));

/** Inside the window: the execution that ended while no process ran continues the agent on resume, with 0 user messages. */
async function insideTheWindow(place: Place): Promise<void> {
  await using server = await model();
  const cwd = await approvedThenKilled(server, 30 * 60_000, place);
  const before = server.requests.length;
  const resumed = await troupe(['resume', '--json', ...place.db], cwd);
  expect(resumed.code, resumed.stderr).toBe(0);
  // One model call, with the execution's end and no user message: the agent finished on it.
  expect(server.requests.slice(before).map((r) => JSON.stringify(r.body).includes(ENDED))).toEqual([true]);
  expect(userMessages(server)).toEqual([]);
}

/** Outside the window: the resumed run makes no model call until its user writes. */
async function outsideTheWindow(place: Place): Promise<void> {
  await using server = await model();
  // A window of 1 ms: closed long before the execution ends.
  const cwd = await approvedThenKilled(server, 1, place);
  const before = server.requests.length;
  const resumed = spawnTroupe(['resume', '--json', ...place.db], cwd);
  running.push(resumed);
  await resumed.line(/"type":"run.started"/);
  const sent = await troupe(['send', 'lead', USER, ...place.db], cwd);
  expect(sent.code, sent.stderr).toBe(0);
  await until(() => userMessages(server).length > 0, 'a model call for the user');
  // Every call after the resume is one the user's message caused: the execution's end alone woke nothing.
  expect(server.requests.slice(before).every((r) => JSON.stringify(r.body).includes(USER))).toBe(true);
  // Nor did it ride along with the user's message (a wake racing the send would merge the two):
  // outside its window a finished execution continues nobody until an approval opens one.
  expect(server.requests.slice(before).some((r) => JSON.stringify(r.body).includes(ENDED))).toBe(false);
  expect(resumed.child.exitCode).toBe(null);
}

describe('the approval window across kill -9 (SQLite)', () => {
  it('inside the window: the execution that ended while no process ran continues the agent on resume, with 0 user messages', async () => {
    await insideTheWindow(ON_FILE);
  });

  it('outside the window: the resumed run makes no model call until its user writes', async () => {
    await outsideTheWindow(ON_FILE);
  });
});

const available = await pgAvailable();

describe.skipIf(!available)(pgTitle(available, 'the approval window across kill -9 (PostgreSQL)'), () => {
  const { schema, drop } = freshSchema();
  afterAll(async () => {
    await drop();
  });
  const onPg: Place = {
    db: ['--db', `${PG_URL}?schema=${schema}`],
    leaseRanOut: async () => void (await adminQuery(`UPDATE ${schema}.run_leases SET lease_until = 0 WHERE owner IS NOT NULL`)),
  };

  it('inside the window: the execution that ended while no process ran continues the agent on resume, with 0 user messages', async () => {
    await insideTheWindow(onPg);
  });

  it('outside the window: the resumed run makes no model call until its user writes', async () => {
    await outsideTheWindow(onPg);
  });
});
