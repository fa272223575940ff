/**
 * Crash-harness child process (not a test; run by harness.ts from the compiled dist/).
 *
 *   node dist/test/integration/crash/child.js <db> <start|resume|recover-loop> <seed> [FULL|NORMAL]
 *
 * start: a root spawns workers that take a few turns of a `work` tool, message their parent and
 * finish; meanwhile this process sends user messages and prints `ACK <id>` once `send()` has
 * resolved (the message is committed). resume: resumeCoordinator and run to the end, printing
 * `DONE <status>`. recover-loop: run the recovery transaction in a loop (to be killed inside it).
 * own: try to own the file; print `LEADER` and hold it, or `REFUSED` on RUN_LOCKED.
 * With BUGGY=ack-early the ACK is printed before the message is sent: the negative control.
 * With CRASH_MCP=1 the work is the `write_note` tool of an MCP server over stdio (the test
 * fixture, a child of this process): an MCP mutation, killed mid-call like any tool.
 *
 * Progress lines, which the harness counts to time its kill (by events, not by the clock, so the
 * kill lands at the same point of the run on a quiet and on a loaded machine): `BOOT` once the
 * code is loaded, `OPEN` once the file is open, `RUN` once the run and its root exist (start) or
 * `RESUMED` once recovery and the respawn are done (resume), and `TICK` at every model call of a
 * worker (or every pass of the recovery loop).
 */
import { fileURLToPath } from 'node:url';
import { createCoordinator, type Coordinator } from '../../../src/host/createCoordinator.js';
import { recoverRun, resumeCoordinator } from '../../../src/host/resumeCoordinator.js';
import type { Model, ModelRequest, ModelTurn } from '../../../src/model/types.js';
import { openStore } from '../../../src/store/sqliteStore.js';
import { defineTool } from '../../../src/tools/defineTool.js';
import { mcpServer } from '../../../src/mcp/config.js';

const [path, mode, seedText, sync] = process.argv.slice(2) as [string, string, string, string | undefined];
const MCP = process.env.CRASH_MCP === '1';
let seed = Number(seedText) >>> 0 || 1;
const random = () => ((seed = (seed * 1664525 + 1013904223) >>> 0) / 2 ** 32);
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export const WORKERS = 4;
export const WORK_TURNS = 8;

/** The live coordinator (the delegate tool dispatches through it). */
let coordinator: Coordinator | undefined;

const delegate = defineTool({
  name: 'delegate',
  description: 'dispatch a background job whose result comes back later',
  parameters: { type: 'object', properties: { goal: { type: 'string' } }, required: ['goal'] },
  execute: ({ goal }, { agentId }) => {
    const c = coordinator!;
    const id = c.delegations.dispatch(agentId, goal as string);
    setTimeout(() => {
      // Acknowledged only once committed.
      c.delegations.complete(agentId, id, `result of ${goal as string}`).then(
        () => process.stdout.write(`DDONE ${agentId}/${id}\n`),
        // The agent or the coordinator is gone: the delegation stays running until recovery.
        () => undefined,
      );
    }, 5 + random() * 40);
    return { delegation_id: id };
  },
});

const work = defineTool({
  name: 'work',
  description: 'do a unit of work',
  parameters: { type: 'object', properties: { step: { type: 'number' } } },
  execute: async () => {
    await pause(random() * 3);
    return { ok: true };
  },
});

/** A model that is a pure function of the conversation, so a resumed run continues correctly. */
const model: Model = {
  name: 'crash-harness',
  async complete(request: ModelRequest): Promise<ModelTurn> {
    // The workers' calls are the run's fixed amount of work (WORKERS × (WORK_TURNS + 1)); the
    // root's wakes vary with the user messages, so they are not counted.
    if (request.agent.parentId !== null) process.stdout.write('TICK\n');
    await pause(random() * 6);
    let n = 0;
    const call = (name: string, args: object) => ({ id: `c-${request.agent.id}-${request.messages.length}-${n++}`, name, arguments: JSON.stringify(args) });
    const done = request.messages.filter((m) => m.role === 'assistant').length;
    if (request.agent.parentId === null) {
      if (done === 0) {
        return { text: null, toolCalls: Array.from({ length: WORKERS }, (_, i) => call('spawn_agent', { name: `w${i}`, task: `part ${i}` })) };
      }
      const last = request.messages.findLast((m) => m.role === 'tool');
      const idle = last?.role === 'tool' && last.content.includes('no_active_agents');
      return { text: null, toolCalls: [idle ? call('finish', { summary: 'all parts done' }) : call('wait_for_agents', { reason: 'reports' })] };
    }
    if (done < WORK_TURNS) {
      const unit = MCP ? call('write_note', { note: `${request.agent.name} step ${done}` }) : call('work', { step: done });
      const calls = [done === 2 ? call('delegate', { goal: `job of ${request.agent.name}` }) : unit];
      if (done % 3 === 1) calls.push(call('send_message', { to: request.agent.parentId, content: `progress from ${request.agent.name}` }));
      return { text: null, toolCalls: calls };
    }
    return { text: null, toolCalls: [call('agent_finish', { summary: `${request.agent.name} finished` })] };
  },
};

const fixture = fileURLToPath(new URL('../../fixtures/mcp/server.js', import.meta.url));
const tools = MCP ? [mcpServer({ name: 'fx', command: process.execPath, args: [fixture] }), delegate] : [work, delegate];
const options = { model, tools, limits: { maxTurns: 50 }, idleResumeMs: 60_000 };

async function sendUserMessages(c: Coordinator): Promise<void> {
  for (let i = 0; ; i++) {
    await pause(2 + random() * 8);
    const targets = c.list().filter((a) => a.status === 'running' || a.status === 'waiting');
    if (targets.length === 0) return;
    const target = targets[Math.floor(random() * targets.length)]!;
    const content = `user note ${seedText}-${i}`;
    if (process.env.BUGGY === 'ack-early') {
      // The planted bug: a write-behind that acknowledges at once and commits a moment later.
      process.stdout.write(`ACK ${content}\n`);
      await pause(20);
    }
    try {
      await c.send(target.id, { content });
    } catch {
      // Refused (the agent finished meanwhile): not acknowledged. The buggy mode takes back its early ACK.
      if (process.env.BUGGY === 'ack-early') process.stdout.write(`NACK ${content}\n`);
      continue;
    }
    if (process.env.BUGGY !== 'ack-early') process.stdout.write(`ACK ${content}\n`);
  }
}

/** The owning store of `own` mode, kept referenced for the life of the process. */
export let owned: unknown;

async function main(): Promise<void> {
  if (mode === 'own') {
    try {
      owned = openStore({ path }); // kept referenced: a collected connection would release the lock
    } catch (err) {
      if ((err as { code?: string }).code === 'RUN_LOCKED') {
        process.stdout.write('REFUSED\n');
        return;
      }
      throw err;
    }
    process.stdout.write('LEADER\n');
    setInterval(() => {}, 1 << 30); // stay alive, holding the lock, until killed
    return new Promise(() => {});
  }
  process.stdout.write('BOOT\n');
  const store = openStore({ path, synchronous: sync === 'NORMAL' ? 'NORMAL' : 'FULL' });
  process.stdout.write('OPEN\n');
  if (mode === 'recover-loop') {
    for (;;) {
      await recoverRun(store, undefined, {});
      process.stdout.write('TICK\n');
    }
  }
  if (mode === 'start') {
    const c = createCoordinator({ ...options, store });
    coordinator = c;
    const rootId = await c.start({ name: 'lead', task: 'split the job' });
    process.stdout.write('RUN\n');
    void sendUserMessages(c);
    await c.waitFor(rootId, ['completed', 'failed', 'crashed', 'stopped']);
    process.stdout.write(`DONE ${c.get(rootId).status}\n`);
    return;
  }
  const c = await resumeCoordinator({ ...options, store });
  coordinator = c;
  process.stdout.write('RESUMED\n');
  const root = c.list().find((a) => a.parentId === null)!;
  const end = await c.waitFor(root.id, ['completed', 'failed', 'crashed', 'stopped'], { timeoutMs: 20_000 });
  await c.whenIdle();
  process.stdout.write(`DONE ${end.status}\n`);
  await c.shutdown();
  store.close();
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`child failed: ${String((err as Error)?.stack ?? err)}\n`);
    process.exit(3);
  },
);
