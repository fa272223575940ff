/**
 * `troupe finish-execution`: the end of an async execution a tool started, reported from another
 * process. A tool result saying `execution <uuid> running` (here the MCP fixture's echo) links the
 * execution to the agent; the report reaches a live run through its inbox — on SQLite the process
 * driving it, on PostgreSQL whichever worker hosts it — and the agent continues with the result,
 * once. A run no process drives records the end, and the agent continues when it resumes.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createFakeOpenAIServer, type FakeOpenAIServer } from '../../src/testing/fakeOpenAIServer.js';
import { expectOneLine, fileHashes, spawnTroupe, troupe, workdir, type Spawned } from '../helpers/cli.js';
import { FIXTURE } from '../helpers/mcp.js';
import { freshSchema, PG_URL, pgAvailable, pgTitle } from '../helpers/pg.js';

const EXECUTION = '7f1c3a52-9d4e-4b8a-a1f0-2c6d8e9b0a13';

/** The root starts the execution, tells its user, and finishes once the execution's end is in its conversation. */
async function model(): Promise<FakeOpenAIServer> {
  return createFakeOpenAIServer((request) => {
    const body = request.body as { messages: { role: string; content: string | null }[] };
    const said = body.messages.map((m) => m.content ?? '').join('\n');
    if (said.includes(`execution ${EXECUTION} completed: provisioned 3 hosts`)) {
      return { message: { toolCalls: [{ name: 'finish', arguments: { summary: 'the hosts are up' } }] } };
    }
    if (said.includes('echo: execution'))
      return { message: { toolCalls: [{ name: 'respond_to_user', arguments: { message: 'Provisioning; I will tell you.' } }] } };
    return { message: { toolCalls: [{ name: 'echo', arguments: { text: `execution ${EXECUTION} running` } }] } };
  });
}

const finishedWith = (server: FakeOpenAIServer) =>
  server.requests.some((r) => JSON.stringify(r.body).includes(`execution ${EXECUTION} completed: provisioned 3 hosts`));

const running: Spawned[] = [];
afterEach(() => {
  for (const r of running.splice(0)) if (r.child.exitCode === null && r.child.signalCode === null) r.child.kill('SIGKILL');
});

function project(server: FakeOpenAIServer): string {
  const cwd = workdir();
  writeFileSync(
    join(cwd, 'troupe.config.json'),
    JSON.stringify({ model: 'm', baseURL: server.url, apiKey: 'k', mcpServers: { fx: { command: process.execPath, args: [FIXTURE] } } }),
  );
  return cwd;
}

/** A run whose root started the execution and parked, then whose process was killed: nobody drives it. */
async function abandonedRun(server: FakeOpenAIServer): Promise<string> {
  const cwd = project(server);
  const run = spawnTroupe(['run', 'Provision the hosts', '--interactive'], cwd);
  running.push(run);
  await run.line(/lead +running → waiting/);
  run.child.kill('SIGKILL');
  await run.exited;
  return cwd;
}

describe('troupe finish-execution on SQLite', () => {
  it('a live run: the process driving it applies the report and the agent continues with the result', async () => {
    await using server = await model();
    const cwd = project(server);
    const run = spawnTroupe(['run', 'Provision the hosts', '--interactive'], cwd);
    running.push(run);
    await run.line(/lead +running → waiting/);
    const r = await troupe(['finish-execution', EXECUTION, 'completed', 'provisioned 3 hosts'], cwd);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^execution ${EXECUTION} completed: lead \\(\\w+\\) continues with its result\\n$`));
    expect(await run.exited).toEqual({ code: 0, signal: null });
    expect(finishedWith(server)).toBe(true);
    // Reported again: nothing changes, and it says so.
    const again = await troupe(['finish-execution', EXECUTION, 'failed', 'late'], cwd);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(/had already completed; nothing changed/);
  });

  it('a run no process drives: the end is recorded, and the agent continues when the run resumes', async () => {
    await using server = await model();
    const cwd = await abandonedRun(server);
    const r = await troupe(['finish-execution', EXECUTION, 'completed', 'provisioned 3 hosts'], cwd);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^execution ${EXECUTION} completed: lead \\(\\w+\\) continues with its result, once troupe resume hosts the run\\n$`));
    expect(finishedWith(server)).toBe(false);
    const resumed = await troupe(['resume', '--json'], cwd);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(finishedWith(server)).toBe(true);
  });

  it('an execution no agent linked is EXECUTION_NOT_FOUND (exit 4), a status other than completed or failed a usage error; nothing written', async () => {
    await using server = await model();
    const cwd = await abandonedRun(server);
    const db = join(cwd, '.troupe/troupe.db');
    const before = fileHashes(db);
    const unknown = await troupe(['finish-execution', '00000000-0000-4000-8000-000000000000', 'completed'], cwd);
    expect(unknown.code, unknown.stderr).toBe(4);
    expectOneLine(unknown, 'EXECUTION_NOT_FOUND');
    const bad = await troupe(['finish-execution', EXECUTION, 'done'], cwd);
    expect(bad.code, bad.stderr).toBe(2);
    expect(fileHashes(db)).toEqual(before);
  });
});

const available = await pgAvailable();

describe.skipIf(!available)(pgTitle(available, 'troupe finish-execution on PostgreSQL'), () => {
  const { schema, drop } = freshSchema();
  const db = `${PG_URL}?schema=${schema}`;
  afterAll(async () => {
    await drop();
  });

  it('a run hosted by a worker: the report reaches whichever worker hosts it, and the agent continues', async () => {
    await using server = await model();
    const cwd = project(server);
    const submitted = await troupe(['run', 'Provision the hosts', '--detach', '--interactive', '--db', db, '--json'], cwd);
    expect(submitted.code, submitted.stderr).toBe(0);
    const worker = spawnTroupe(['worker', '--db', db, '--model', 'm', '--base-url', server.url, '--api-key', 'k'], cwd);
    running.push(worker);
    await worker.line(/^worker .* hosting runs of/);
    const { runId } = JSON.parse(submitted.stdout) as { runId: string };
    // A line per run it hosts and lets go (issue 38: the worker said nothing per run).
    await worker.line(new RegExp(`^hosting   run ${runId} \\(lease epoch \\d+\\)$`));
    // The execution is linked once the echo's result is committed (polled from another process).
    for (const deadline = Date.now() + 30_000; ;) {
      const status = JSON.parse((await troupe(['status', '--db', db, '--json'], cwd)).stdout) as { root: { status: string } | null };
      if (status.root?.status === 'waiting') break;
      if (Date.now() > deadline) throw new Error('the root never parked');
    }
    const r = await troupe(['finish-execution', EXECUTION, 'completed', 'provisioned 3 hosts', '--db', db], cwd);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^execution ${EXECUTION} completed: lead \\(\\w+\\) continues with its result\\n$`));
    for (const deadline = Date.now() + 30_000; ;) {
      const status = JSON.parse((await troupe(['status', '--db', db, '--json'], cwd)).stdout) as { root: { status: string } | null };
      if (status.root?.status === 'completed') break;
      if (Date.now() > deadline) throw new Error('the root never completed');
    }
    expect(finishedWith(server)).toBe(true);
    await worker.line(new RegExp(`^done      run ${runId}$`));
    const unknown = await troupe(['finish-execution', '00000000-0000-4000-8000-000000000000', 'completed', '--db', db], cwd);
    expect(unknown.code, unknown.stderr).toBe(4);
    expectOneLine(unknown, 'EXECUTION_NOT_FOUND');
  });
});
