/**
 * The budget under any interleaving of parallel children (fast-check's scheduler decides the order
 * in which model calls answer): no call starts after a budget stop, no sub-agent call starts after
 * the reserve tripped, and the spend never passes the limit by more than the calls' settlement
 * errors (what they cost beyond what was reserved) — not by one whole call per child.
 */
import { fc, test } from '@fast-check/vitest';
import { expect } from 'vitest';
import { SimulatedClock } from 'xstate';
import { createCoordinator } from '../../src/host/createCoordinator.js';
import type { Model, ModelRequest, ModelTurn } from '../../src/model/types.js';

const TERMINAL = ['completed', 'failed', 'crashed', 'stopped'] as const;

interface Call {
  costUsd: number;
  reserveUsd: number;
}

const call: fc.Arbitrary<Call> = fc
  .record({ cost: fc.integer({ min: 0, max: 300 }), error: fc.integer({ min: -100, max: 100 }) })
  .map(({ cost, error }) => ({ costUsd: cost / 100, reserveUsd: Math.max(0, cost - error) / 100 }));

const scenario = fc.record({
  limitUsd: fc.integer({ min: 1, max: 12 }),
  policy: fc.constantFrom('stop' as const, 'pause' as const),
  concurrency: fc.integer({ min: 1, max: 6 }),
  children: fc.array(fc.array(call, { minLength: 1, maxLength: 5 }), { minLength: 1, maxLength: 6 }),
  root: call,
});

const tool = (name: string, args: Record<string, unknown>, id: string): ModelTurn => ({
  text: null,
  toolCalls: [{ id, name, arguments: JSON.stringify(args) }],
});

/** Replay a failure with PROPERTY_SEED=<seed> PROPERTY_PATH=<path> (both printed by fast-check). */
const replay = process.env.PROPERTY_SEED
  ? { seed: Number(process.env.PROPERTY_SEED), ...(process.env.PROPERTY_PATH ? { path: process.env.PROPERTY_PATH } : {}), endOnFailure: true }
  : {};

test.prop([scenario, fc.scheduler()], { numRuns: Number(process.env.PROPERTY_RUNS ?? 150), timeout: 5_000, ...replay })(
  'budget: no call after a stop, children never past the reserve, overshoot only by settlement errors',
  async ({ limitUsd, policy, concurrency, children, root }, s) => {
    const clock = new SimulatedClock();
    const violations: string[] = [];
    const settled: (Call & { child: boolean })[] = [];
    // Set once the coordinator exists; the model reads it when a call starts.
    const holder: { coordinator?: ReturnType<typeof createCoordinator> } = {};
    const position = new Map<string, number>();
    let ids = 0;
    /** What the agent's next call will cost, and reserve. */
    const next = (request: ModelRequest): Call | null => {
      if (request.agent.parentId === null) return root;
      const plan = children[Number(request.agent.name.slice(1))]!;
      return plan[position.get(request.agent.name) ?? 0] ?? null;
    };
    const model: Model = {
      name: 'property',
      estimateCostUsd: (request) => next(request)?.reserveUsd ?? 0,
      complete(request) {
        const budget = holder.coordinator!.budget();
        const child = request.agent.parentId !== null;
        if (budget.budgetStopped) violations.push(`${request.agent.name} started a call after the budget stop`);
        if (child && budget.reserveStopped) violations.push(`${request.agent.name} started a call after the reserve tripped`);
        const id = `call_${++ids}`;
        let turn: ModelTurn;
        let spend: Call;
        if (!child) {
          // The root spawns every child, then waits until none is active, then finishes.
          const last = request.messages.at(-1);
          const idle = last?.role === 'tool' && last.content.includes('no_active_agents');
          spend = root;
          turn =
            request.turn === 1
              ? {
                  text: null,
                  toolCalls: children.map((_, i) => ({ id: `${id}_${i}`, name: 'spawn_agent', arguments: JSON.stringify({ name: `c${i}`, task: 'spend' }) })),
                }
              : idle
                ? tool('finish', { summary: 'done' }, id)
                : tool('wait_for_agents', { reason: 'children' }, id);
        } else {
          const at = position.get(request.agent.name) ?? 0;
          const plan = children[Number(request.agent.name.slice(1))]!;
          spend = plan[at] ?? { costUsd: 0, reserveUsd: 0 };
          position.set(request.agent.name, at + 1);
          turn = at + 1 >= plan.length ? tool('agent_finish', { summary: 'spent' }, id) : tool('view_agent_graph', {}, id);
        }
        settled.push({ ...spend, child });
        return s.schedule(Promise.resolve({ ...turn, usage: { costUsd: spend.costUsd } }), `${request.agent.name}#${request.turn}`);
      },
    };
    const c = createCoordinator({
      model,
      clock,
      budget: { limitUsd, policy },
      concurrency: { model: concurrency },
      limits: { maxChildren: 8, maxTurns: 20 },
    });
    holder.coordinator = c;
    const rootId = await c.start({ name: 'root', task: 'spend' });
    // Run until nothing can move: the root ended, or every agent is parked by the pause policy.
    await s.waitFor(
      Promise.race([
        c.waitFor(rootId, TERMINAL),
        new Promise<void>((resolve) => {
          const check = () => {
            if (c.list().every((a) => a.status !== 'running')) resolve();
          };
          c.subscribe(check);
          check();
        }),
      ]),
    );
    // Calls wait for the group commit (a macrotask) before they reach the model: drain both until
    // no call is scheduled and no agent runs.
    for (let i = 0; i < 200; i++) {
      await s.waitIdle();
      await new Promise<void>((resolve) => setImmediate(resolve));
      if (s.count() === 0 && c.list().every((a) => a.status !== 'running')) break;
    }
    const budget = c.budget();
    const slackOf = (calls: Call[]) => calls.reduce((sum, x) => sum + Math.max(0, x.costUsd - x.reserveUsd), 0);
    expect(violations).toEqual([]);
    expect(budget.spentUsd).toBeLessThanOrEqual(budget.limitUsd! + slackOf(settled) + 1e-9);
    if (policy === 'stop') {
      // Children never reserve past the reserve line: what they spend beyond it is only their own settlement error.
      const childSpend = c
        .list()
        .filter((a) => a.parentId !== null)
        .reduce((sum, a) => sum + a.spentUsd, 0);
      expect(childSpend).toBeLessThanOrEqual(0.9 * limitUsd + slackOf(settled.filter((x) => x.child)) + 1e-9);
    }
    expect(budget.reservedUsd).toBe(0);
    await c.shutdown();
  },
);
