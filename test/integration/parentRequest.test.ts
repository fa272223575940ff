/**
 * A parent's request stays small however many children it spawned (issue 36, item 3): what each
 * child adds to its parent's request — its spawn call and result, its completion report, its line in
 * the last wait's result — measured in bytes over 200 children, spawned 50 per turn.
 *
 * The bound is on the overhead: the bytes per child beyond the words the model wrote itself (its
 * spawn entry, as the arguments carry it) and the child's summary, which no format can shrink.
 * What is left with spawn_agents: the child's id in the result (13 bytes), the report as a message
 * of its own (~30 bytes of JSON), its mail header naming the child (~66) and its status line (~26),
 * ~150 bytes in all: the bound is 160. One spawn_agent call per child adds a call and a result of
 * their own (~270 more): the bound is 450. Measured when this test was written: 879 bytes per
 * child before (spawn_agent, with the result and report texts of then); 543 with spawn_agent and
 * 269 with spawn_agents now, of which 118 are the model's and the child's words.
 */
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { createCoordinator } from '../../src/host/createCoordinator.js';
import type { Model, ModelRequest } from '../../src/model/types.js';
import { memoryStore } from '../../src/store/memoryStore.js';
import { TERMINAL } from '../helpers/team.js';

const CHILDREN = 200;
const BATCH = 50;

/** Bytes of a request's conversation (its system prompt and tool list do not grow). */
const bytes = (request: ModelRequest) => Buffer.byteLength(JSON.stringify(request.messages));
/** Bytes of a value once it sits JSON-encoded in a tool call's arguments, themselves a JSON string. */
const inArguments = (value: unknown) => Buffer.byteLength(JSON.stringify(JSON.stringify(value))) - 2;

const entry = (i: number) => ({ name: `w${i}`, task: `Review src/module${i}.ts for unchecked errors and list them.` });
const summary = (name: string) => `No unchecked errors in ${name}.`;

/**
 * A root that spawns CHILDREN children, BATCH per turn (one spawn_agent call each, or one
 * spawn_agents call per batch), then waits until none is active and finishes; each child finishes
 * at once with a one-line summary.
 */
function teamModel(form: 'single' | 'batch') {
  const roots: ModelRequest[] = [];
  let seq = 0;
  const call = (name: string, args: object) => ({ id: `call_${++seq}`, name, arguments: JSON.stringify(args) });
  const model: Model = {
    name: 'parent-request',
    complete(request) {
      if (request.agent.parentId !== null) {
        return Promise.resolve({ text: null, toolCalls: [call('agent_finish', { summary: summary(request.agent.name) })] });
      }
      roots.push(request);
      const spawned = (request.turn - 1) * BATCH;
      if (spawned < CHILDREN) {
        const batch = Array.from({ length: BATCH }, (_, i) => entry(spawned + i));
        const toolCalls = form === 'batch' ? [call('spawn_agents', { agents: batch })] : batch.map((a) => call('spawn_agent', a));
        return Promise.resolve({ text: null, toolCalls });
      }
      const last = request.messages.findLast((m) => m.role === 'tool');
      const done = last?.role === 'tool' && last.content.includes('no_active_agents');
      return Promise.resolve({ text: null, toolCalls: [done ? call('finish', { summary: 'done' }) : call('wait_for_agents', { reason: 'reports' })] });
    },
  };
  return { model, roots };
}

/** What the root's request grew by per child, from its first request to its last, and how much of that the model wrote. */
async function perChild(form: 'single' | 'batch') {
  const { model, roots } = teamModel(form);
  const c = createCoordinator({ model, store: memoryStore(), clock: new SimulatedClock(), limits: { maxChildren: CHILDREN, maxAgents: CHILDREN + 1 } });
  const rootId = await c.start({ name: 'lead', task: 'Review every module.' });
  const root = await c.waitFor(rootId, TERMINAL);
  await c.shutdown();
  expect(root.status).toBe('completed');
  const last = roots.at(-1)!;
  // Every child's report reached the root, each naming its child (in the mail header) and its summary.
  const reports = last.messages.filter((m) => m.role === 'user' && typeof m.content === 'string' && m.content.includes('type=completion'));
  expect(reports).toHaveLength(CHILDREN);
  expect(reports[7]!.content).toMatch(/^\[Message from w7 \(\w+\) \| type=completion[^\n]*\]\nStatus: SUCCESS\nSummary: No unchecked errors in w7\.$/);
  let own = 0;
  for (let i = 0; i < CHILDREN; i++) own += inArguments(entry(i)) + Buffer.byteLength(summary(`w${i}`));
  return { total: (bytes(last) - bytes(roots[0]!)) / CHILDREN, own: own / CHILDREN };
}

describe("a parent's request, per child it spawned", () => {
  it('grows by the words the model and the child wrote and ≤ 160 bytes more with spawn_agents (≤ 450 with one spawn_agent call each)', async () => {
    const batch = await perChild('batch');
    const single = await perChild('single');
    process.stderr.write(
      `bytes per child in the parent's request: spawn_agents ${batch.total.toFixed(0)}, spawn_agent ${single.total.toFixed(0)} (the model's and the child's own words: ${batch.own.toFixed(0)})\n`,
    );
    expect(batch.total - batch.own).toBeLessThanOrEqual(160);
    expect(single.total - single.own).toBeLessThanOrEqual(450);
    // A batch costs a parent less than one call per child.
    expect(batch.total).toBeLessThan(single.total);
  });
});
