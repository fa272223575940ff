/**
 * A model that answers after a real latency (one timer per call, whatever the signal says): the
 * root spawns `children` on its first turn, every agent calls `noop` until its last turn, then the
 * root waits for its team and each child finishes. The replay bench and the replay latency test
 * record teams with it.
 */
import type { Model, ModelRequest, ModelTurn } from '../../src/model/types.js';

export function latentModel(options: { children: readonly string[]; turns: number; latencyMs: number }): Model {
  const { children, turns, latencyMs } = options;
  let seq = 0;
  return {
    name: 'latent',
    complete(request: ModelRequest): Promise<ModelTurn> {
      const root = request.agent.parentId === null;
      const calls =
        root && request.turn === 1
          ? children.map((name) => ({ name: 'spawn_agent', args: { name, task: 'work' } }))
          : request.turn < turns
            ? [{ name: 'noop', args: {} }]
            : root
              ? [{ name: 'wait_for_agents', args: { reason: 'the team' } }]
              : [{ name: 'agent_finish', args: { summary: 'done' } }];
      const turn: ModelTurn = {
        text: null,
        toolCalls: calls.map((c) => ({ id: `c${++seq}`, name: c.name, arguments: JSON.stringify(c.args) })),
        usage: { inputTokens: 100, outputTokens: 10, costUsd: 0 },
      };
      return new Promise((resolve) => setTimeout(() => resolve(turn), latencyMs));
    },
  };
}
