/**
 * Benchmark (not part of `npm test`; run `npm run bench`): coordination overhead per turn.
 *
 * - fan-out: a root spawns 1,000 children in one turn; each child takes 5 turns (4 calls to a
 *   no-op user tool, then agent_finish); the root waits until none is active and finishes.
 * - single agent: one agent takes 1,000 no-op tool turns, then finishes (no spawning).
 * - baseline, in the same run: bare `actor.send` calls on the agent machine.
 *
 * The model answers instantly, so all the time is troupe's: machine transitions, the model and
 * tool queues, the in-memory store, the coordinator, the read model, notices. Figures are printed
 * as µs per turn and as a ratio to one bare send (this VM is noisy: compare ratios, not µs).
 */
import { afterAll, bench, describe } from 'vitest';
import { createActor, fromCallback } from 'xstate';
import { agentMachine, type AgentEvent, type CycleInput } from '../../machines/agentMachine.js';
import { createCoordinator } from '../../src/host/createCoordinator.js';
import type { Model, ModelRequest, ModelTurn } from '../../src/model/types.js';
import { defineTool } from '../../src/tools/defineTool.js';

const CHILDREN = 1_000;
const CHILD_TURNS = 5;
const SOLO_TURNS = 1_000;
const BASELINE_SENDS = 5_000;

const noop = defineTool({ name: 'noop', description: 'does nothing', parameters: { type: 'object' }, execute: () => 'ok' });

/** An instant programmatic model: each answer is a function of the request. */
function instantModel(answer: (request: ModelRequest) => { name: string; args: object }[]): Model & { turns: number } {
  let seq = 0;
  const model = {
    turns: 0,
    complete(request: ModelRequest): Promise<ModelTurn> {
      model.turns++;
      const toolCalls = answer(request).map((c) => ({ id: `c${++seq}`, name: c.name, arguments: JSON.stringify(c.args) }));
      return Promise.resolve({ text: null, toolCalls });
    },
  };
  return model;
}

const fanoutModel = () =>
  instantModel((request) => {
    if (request.agent.parentId !== null) {
      return [request.turn < CHILD_TURNS ? { name: 'noop', args: {} } : { name: 'agent_finish', args: { summary: 'ok' } }];
    }
    if (request.turn === 1) return Array.from({ length: CHILDREN }, (_, i) => ({ name: 'spawn_agent', args: { name: `w${i}`, task: 'work' } }));
    const last = request.messages.findLast((m) => m.role === 'tool');
    const done = last?.role === 'tool' && last.content.includes('no_active_agents');
    return [done ? { name: 'finish', args: { summary: 'all done' } } : { name: 'wait_for_agents', args: { reason: 'reports' } }];
  });

const soloModel = () =>
  instantModel((request) => [request.turn < SOLO_TURNS ? { name: 'noop', args: {} } : { name: 'finish', args: { summary: 'done' } }]);

const samples = { fanoutUs: [] as number[], fanoutTurns: 0, soloUs: [] as number[], sendUs: [] as number[] };

async function run(model: Model & { turns: number }, limits: object): Promise<number> {
  const coordinator = createCoordinator({ model, tools: [noop], limits, concurrency: { model: 64, tools: 64 } });
  const t0 = performance.now();
  const rootId = await coordinator.start({ name: 'lead', task: 'work' });
  const root = await coordinator.waitFor(rootId, ['completed', 'failed', 'crashed', 'stopped']);
  const us = (performance.now() - t0) * 1_000;
  if (root.status !== 'completed') throw new Error(`root ended ${root.status}: ${root.error?.message}`);
  await coordinator.shutdown();
  return us / model.turns;
}

describe('coordination overhead per turn (in memory, instant model)', () => {
  bench(
    `fan-out: root + ${CHILDREN} children × ${CHILD_TURNS} turns`,
    async () => {
      const model = fanoutModel();
      samples.fanoutUs.push(await run(model, { maxChildren: CHILDREN, maxAgents: CHILDREN + 1, maxDepth: 1 }));
      samples.fanoutTurns = model.turns;
    },
    { iterations: 10, warmupIterations: 3, time: 0 },
  );

  bench(
    `single agent × ${SOLO_TURNS} turns`,
    async () => {
      samples.soloUs.push(await run(soloModel(), { maxTurns: SOLO_TURNS + 1 }));
    },
    { iterations: 20, warmupIterations: 5, time: 0 },
  );

  bench(
    `baseline: ${BASELINE_SENDS} bare actor.send on the agent machine`,
    () => {
      const logic = agentMachine.provide({ actors: { runCycle: fromCallback<AgentEvent, CycleInput>(() => () => {}) } });
      const actor = createActor(logic, { input: { id: 'a', name: 'a', parentId: null } }).start();
      const event = { type: 'agent.message', from: 'user', user: true } as const;
      const t0 = performance.now();
      for (let i = 0; i < BASELINE_SENDS; i++) actor.send(event);
      samples.sendUs.push(((performance.now() - t0) * 1_000) / BASELINE_SENDS);
      actor.stop();
    },
    { iterations: 20, warmupIterations: 5, time: 0 },
  );

});

// Top level: vitest's bench runner does not print from a describe-level afterAll.
afterAll(() => {
  // Warm-up iterations are in the samples too: the median keeps them from mattering.
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
  const send = median(samples.sendUs);
  const line = (label: string, us: number) => `${label.padEnd(34)} ${us.toFixed(1).padStart(7)} µs/turn  = ${(us / send).toFixed(1)} bare sends`;
  process.stderr.write(
    [
      '',
      `bare actor.send (baseline)         ${send.toFixed(2).padStart(7)} µs`,
      line(`fan-out (${samples.fanoutTurns} turns per run)`, median(samples.fanoutUs)),
      line(`single agent (${SOLO_TURNS} turns)`, median(samples.soloUs)),
      '',
    ].join('\n'),
  );
});
