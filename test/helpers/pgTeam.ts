/**
 * A small team for the PostgreSQL worker tests, the failover harness and the benchmark: a model that
 * is a pure function of the conversation (so a run resumed on another worker continues correctly).
 * The root spawns `workers` sub-agents, waits for them and finishes; each sub-agent does `turns`
 * turns of `work` and finishes. Interactive roots first answer the user and park until they reply.
 */
import type { Model, ModelRequest, ModelTurn } from '../../src/model/types.js';
import { defineTool } from '../../src/tools/defineTool.js';

export interface TeamShape {
  workers: number;
  turns: number;
  /** Simulated model latency per call (ms). */
  latencyMs?: number;
  /** Told at every model call (the harness counts them to time its kills). */
  onCall?: (request: ModelRequest) => void;
}

export const workTool = defineTool({
  name: 'work',
  description: 'do a unit of work',
  parameters: { type: 'object', properties: { step: { type: 'number' } } },
  execute: () => ({ ok: true }),
});

export function teamModel(shape: TeamShape): Model {
  return {
    name: 'pg-team',
    async complete(request: ModelRequest, { signal }): Promise<ModelTurn> {
      shape.onCall?.(request);
      if (shape.latencyMs) {
        await new Promise<void>((resolve, reject) => {
          const timer = setTimeout(resolve, shape.latencyMs);
          signal.addEventListener('abort', () => (clearTimeout(timer), reject(new Error('aborted'))), { once: true });
        });
      }
      let n = 0;
      const call = (name: string, args: object) => ({ id: `c-${request.agent.id}-${request.messages.length}-${n++}`, name, arguments: JSON.stringify(args) });
      const done = request.messages.filter((m) => m.role === 'assistant').length;
      if (request.agent.parentId === null) {
        const offered = new Set(request.tools.map((t) => t.name));
        const users = request.messages.filter((m) => m.role === 'user').length;
        // Interactive: greet the user first and park until they write.
        if (offered.has('respond_to_user') && users < 2) return { text: null, toolCalls: [call('respond_to_user', { message: 'ready when you are' })] };
        const spawned = request.messages.some((m) => m.role === 'assistant' && m.toolCalls?.some((t) => t.name === 'spawn_agent'));
        if (!spawned && shape.workers > 0) {
          return { text: null, toolCalls: Array.from({ length: shape.workers }, (_, i) => call('spawn_agent', { name: `w${i}`, task: `part ${i}` })) };
        }
        const last = request.messages.findLast((m) => m.role === 'tool');
        const idle = shape.workers === 0 || (last?.role === 'tool' && last.content.includes('no_active_agents'));
        return {
          text: null,
          toolCalls: [idle ? call('finish', { summary: `all ${shape.workers} parts done` }) : call('wait_for_agents', { reason: 'reports' })],
        };
      }
      if (done < shape.turns) return { text: null, toolCalls: [call('work', { step: done })] };
      return { text: null, toolCalls: [call('agent_finish', { summary: `${request.agent.name} finished` })] };
    },
  };
}
