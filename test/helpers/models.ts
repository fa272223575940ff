/** Small models for tests that drive a coordinator directly. */
import type { Model, ModelRequest, ModelTurn } from '../../src/model/types.js';

const respond = (id: string): ModelTurn => ({ text: null, toolCalls: [{ id, name: 'respond_to_user', arguments: '{"message":"ok"}' }] });

/** An interactive root that answers its user and parks: every message wakes it for one turn. */
export const parks: Model = {
  name: 'm',
  estimateCostUsd: () => 0,
  complete: async (): Promise<ModelTurn> => respond(`c${Math.random()}`),
};

/** `parks`, recording what each call saw (every message's text, joined). */
export function recording(): { model: Model; seen: string[] } {
  const seen: string[] = [];
  const model: Model = {
    name: 'm',
    estimateCostUsd: () => 0,
    complete: async (request: ModelRequest): Promise<ModelTurn> => {
      seen.push(request.messages.map((m) => (typeof m.content === 'string' ? m.content : '')).join('\n'));
      return respond(`c${seen.length}`);
    },
  };
  return { model, seen };
}
