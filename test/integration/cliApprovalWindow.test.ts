/**
 * The approval window across a real kill -9 (issue 33 item 3's must-show): an interactive run's
 * mutation asks, is approved from another process and starts an async execution; the run's process
 * is killed with SIGKILL; the execution finishes while no process drives the run; a new process
 * resumes it. Inside the window the execution's end continues the agent with 0 user messages;
 * outside it, the agent waits for its user.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createFakeOpenAIServer, type FakeOpenAIServer } from '../../src/testing/fakeOpenAIServer.js';
import { spawnTroupe, troupe, workdir, type Spawned } from '../helpers/cli.js';
import { FIXTURE } from '../helpers/mcp.js';

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
 * A run whose mutation (the fixture's echo, made one) was approved from another process and ran,
 * starting the execution, then whose process was killed with SIGKILL after its agent told its user.
 */
async function approvedThenKilled(server: FakeOpenAIServer, windowMs: number): Promise<string> {
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
  const run = spawnTroupe(['run', 'Provision the hosts', '--interactive'], cwd);
  running.push(run);
  await run.line(/lead +running → waiting/);
  const approved = await troupe(['approve', 'ap-1'], cwd);
  expect(approved.code, approved.stderr).toBe(0);
  // Parked again once it told its user (its second wait), the execution linked to it.
  await until(() => run.lines.filter((l) => /lead +running → waiting/.test(l)).length >= 2, 'the lead parked after the approval');
  run.child.kill('SIGKILL');
  expect(await run.exited).toEqual({ code: null, signal: 'SIGKILL' });
  const ended = await troupe(['finish-execution', EXECUTION, 'completed', 'provisioned 3 hosts'], cwd);
  expect(ended.code, ended.stderr).toBe(0);
  return cwd;
}

const userMessages = (server: FakeOpenAIServer) =>
  server.requests.filter((r) => (r.body as { messages: { role: string; content: string | null }[] }).messages.some((m) => m.content?.includes(USER)));

describe('the approval window across kill -9 (SQLite)', () => {
  it('inside the window: the execution that ended while no process ran continues the agent on resume, with 0 user messages', async () => {
    await using server = await model();
    const cwd = await approvedThenKilled(server, 30 * 60_000);
    const before = server.requests.length;
    const resumed = await troupe(['resume', '--json'], cwd);
    expect(resumed.code, resumed.stderr).toBe(0);
    // One model call, with the execution's end and no user message: the agent finished on it.
    expect(server.requests.slice(before).map((r) => JSON.stringify(r.body).includes(ENDED))).toEqual([true]);
    expect(userMessages(server)).toEqual([]);
  });

  it('outside the window: the resumed run makes no model call until its user writes', async () => {
    await using server = await model();
    // A window of 1 ms: closed long before the execution ends.
    const cwd = await approvedThenKilled(server, 1);
    const before = server.requests.length;
    const resumed = spawnTroupe(['resume', '--json'], cwd);
    running.push(resumed);
    await resumed.line(/"type":"run.started"/);
    const sent = await troupe(['send', 'lead', USER], cwd);
    expect(sent.code, sent.stderr).toBe(0);
    await until(() => userMessages(server).length > 0, 'a model call for the user');
    // Every call after the resume is one the user's message caused: the execution's end alone woke nothing.
    expect(server.requests.slice(before).every((r) => JSON.stringify(r.body).includes(USER))).toBe(true);
    expect(resumed.child.exitCode).toBe(null);
  });
});
