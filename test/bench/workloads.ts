/**
 * The teams the benches time, in one place: fanout.bench.ts runs them through vitest, and
 * againstChild.ts runs the same ones against older builds (so they use nothing but the public
 * model interface: a request's turn, its agent's parent and its messages).
 * @module
 */

/** Turns of each child of the fan-out, the last one its agent_finish. */
export const CHILD_TURNS = 5;
/** Tool turns of the single agent. */
export const SOLO_TURNS = 1_000;
/** What the user tool `work` returns each time (a result of a realistic size). */
export const RESULT = 'r'.repeat(200);

/** The part of a model request the workloads read (every version's request has it). */
interface BenchRequest {
  turn: number;
  agent: { parentId: string | null };
  messages: readonly { role: string; content?: unknown }[];
}

export interface InstantModel {
  turns: number;
  complete(request: BenchRequest): Promise<{ text: null; toolCalls: { id: string; name: string; arguments: string }[] }>;
}

/** An instant programmatic model: each answer is a function of the request. */
function instantModel(answer: (request: BenchRequest) => { name: string; args: object }[]): InstantModel {
  let seq = 0;
  const model: InstantModel = {
    turns: 0,
    complete(request) {
      model.turns++;
      const toolCalls = answer(request).map((c) => ({ id: `c${++seq}`, name: c.name, arguments: JSON.stringify(c.args) }));
      return Promise.resolve({ text: null, toolCalls });
    },
  };
  return model;
}

/**
 * A root that spawns `children` in its first turn, each calling `work` CHILD_TURNS - 1 times and
 * then agent_finish; the root waits until no agent is active, then finishes.
 */
export const fanoutModel = (children: number) =>
  instantModel((request) => {
    if (request.agent.parentId !== null) {
      return [request.turn < CHILD_TURNS ? { name: 'work', args: {} } : { name: 'agent_finish', args: { summary: 'ok' } }];
    }
    if (request.turn === 1) return Array.from({ length: children }, (_, i) => ({ name: 'spawn_agent', args: { name: `w${i}`, task: 'work' } }));
    const last = request.messages.findLast((m) => m.role === 'tool');
    const done = typeof last?.content === 'string' && last.content.includes('no_active_agents');
    return [done ? { name: 'finish', args: { summary: 'all done' } } : { name: 'wait_for_agents', args: { reason: 'reports' } }];
  });

/** One agent: SOLO_TURNS calls to `work`, then finish. */
export const soloModel = () =>
  instantModel((request) => [request.turn < SOLO_TURNS ? { name: 'work', args: {} } : { name: 'finish', args: { summary: 'done' } }]);

/** Limits that let the fan-out's root have `n` children at once. */
export const fanLimits = (n: number) => ({ maxChildren: n, maxAgents: n + 1, maxDepth: 1 });

export const median = (xs: readonly number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
