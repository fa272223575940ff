/**
 * Model-based tests of whole teams with `troupe/testing`: random behaviours for every agent, and a
 * random sequence of operator steps — clock advances, user messages, stops, budget pauses and
 * resumes, restarts — with every invariant checked after every step. The model is deliberately
 * simple (what was started, how many restarts); the invariants carry the weight.
 *
 * Replay a failure: PROPERTY_SEED=<seed> PROPERTY_PATH=<path> npm run test:property
 */
import { fc, test } from '@fast-check/vitest';
import { behaviours } from '../../src/testing/arbitraries.js';
import { assertInvariants } from '../../src/testing/invariants.js';
import { simulateTeam, type Simulation } from '../../src/testing/simulate.js';

const NAMES = ['lead', 'ana', 'ben', 'cal'] as const;

interface Model {
  restarts: number;
}

type Command = fc.AsyncCommand<Model, Simulation>;

const idOf = (sim: Simulation, name: string) => sim.coordinator.list().find((a) => a.name === name)?.id;

class Advance implements Command {
  constructor(readonly ms: number) {}
  check = () => true;
  async run(_m: Model, sim: Simulation) {
    await sim.advance(this.ms, 5_000);
    assertInvariants(sim);
  }
  toString = () => `advance(${this.ms})`;
}

class Send implements Command {
  constructor(
    readonly name: string,
    readonly text: string,
  ) {}
  check = () => true;
  async run(_m: Model, sim: Simulation) {
    const id = idOf(sim, this.name);
    if (id) await sim.send(id, this.text);
    await sim.settle();
    assertInvariants(sim);
  }
  toString = () => `send(${this.name}, ${JSON.stringify(this.text)})`;
}

class Stop implements Command {
  constructor(readonly name: string) {}
  check = () => true;
  async run(_m: Model, sim: Simulation) {
    const id = idOf(sim, this.name);
    if (id) sim.coordinator.stop(id).catch(() => undefined);
    await sim.settle();
    assertInvariants(sim);
  }
  toString = () => `stop(${this.name})`;
}

class Budget implements Command {
  constructor(readonly action: 'pause' | { resume: number }) {}
  check = () => true;
  async run(_m: Model, sim: Simulation) {
    if (this.action === 'pause') await sim.coordinator.pauseBudget().catch(() => undefined);
    else await sim.coordinator.resumeBudget(this.action.resume).catch(() => undefined);
    await sim.settle();
    assertInvariants(sim);
  }
  toString = () => (this.action === 'pause' ? 'pauseBudget()' : `resumeBudget(${this.action.resume})`);
}

class Restart implements Command {
  check = (m: Readonly<Model>) => m.restarts < 3;
  async run(m: Model, sim: Simulation) {
    await sim.restart();
    m.restarts += 1;
    await sim.settle();
    assertInvariants(sim);
  }
  toString = () => 'restart()';
}

const commands = fc.commands(
  [
    fc.integer({ min: 1_000, max: 400_000 }).map((ms) => new Advance(ms)),
    fc.tuple(fc.constantFrom(...NAMES), fc.constantFrom('go on', 'status?', 'stop that')).map(([n, t]) => new Send(n, t)),
    fc.constantFrom(...NAMES).map((n) => new Stop(n)),
    fc
      .oneof(
        fc.constant('pause' as const),
        fc.integer({ min: 1, max: 20 }).map((resume) => ({ resume })),
      )
      .map((a) => new Budget(a)),
    fc.constant(new Restart()),
  ],
  { maxCommands: 12 },
);

const replay = process.env.PROPERTY_SEED
  ? { seed: Number(process.env.PROPERTY_SEED), ...(process.env.PROPERTY_PATH ? { path: process.env.PROPERTY_PATH } : {}), endOnFailure: true }
  : {};

test.prop(
  [
    behaviours({ names: NAMES, maxPerAgent: 6, maxCostUsd: 1.5 }),
    fc.record({
      interactive: fc.boolean(),
      policy: fc.constantFrom('stop' as const, 'pause' as const),
      limitUsd: fc.integer({ min: 1, max: 8 }),
      store: fc.constantFrom('memory' as const, 'memory' as const, 'sqlite' as const),
      review: fc.option(fc.record({ everyTurns: fc.integer({ min: 1, max: 3 }), maxSteps: fc.integer({ min: 1, max: 2 }) }), { nil: undefined }),
    }),
    commands,
  ],
  { numRuns: Number(process.env.PROPERTY_RUNS ?? 200), timeout: 20_000, ...replay },
)('teams under random behaviours and operator steps keep every lifecycle invariant', async (plan, config, cmds) => {
  const sim = await simulateTeam({
    behaviours: plan,
    interactive: config.interactive,
    budget: { limitUsd: config.limitUsd, policy: config.policy },
    limits: { maxDepth: 2, maxChildren: 2, maxAgents: 5, maxTurns: 12 },
    store: config.store,
    // Reviewers propose a note at a real cost: their calls count toward every budget invariant.
    ...(config.review ? { review: config.review } : {}),
    fallback: (agent) =>
      agent.name.endsWith(':review')
        ? { kind: 'tool', name: 'propose_note', args: { title: 'A lesson', content: 'Do it twice.' }, costUsd: 0.4 }
        : agent.parentId === null
          ? { kind: 'tool', name: 'finish', args: { summary: 'done' } }
          : { kind: 'tool', name: 'agent_finish', args: { summary: 'done' } },
  });
  try {
    await sim.start();
    await sim.settle();
    assertInvariants(sim);
    await fc.asyncModelRun(() => ({ model: { restarts: 0 }, real: sim }), cmds);
    await sim.advance(700_000, 100_000);
    assertInvariants(sim);
  } finally {
    await sim.close();
  }
});
