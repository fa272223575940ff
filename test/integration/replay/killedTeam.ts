/**
 * The team of the replay-after-kill test, shared by its child (which runs it) and the test (which
 * replays it with the same tools, limits and model name): a root and one worker that takes six
 * turns of the crash harness's in-doubt tools (crash/teams.ts: `append`, not idempotent, and
 * `append_idem`, each an fsynced line in a side-effect file), then finishes. One worker, no user
 * messages: the run's course is a function of its conversation, not of how its timings interleave.
 */
import type { Model, ModelRequest, ModelTurn, ToolCall } from '../../../src/model/types.js';
import { team, type TeamIO } from '../crash/teams.js';

const TURNS = 6;

export function killedTeam(io: TeamIO) {
  const { tools, limits } = team('in-doubt', io, 1);
  const model: Model = {
    name: 'replay-after-kill',
    async complete(request: ModelRequest): Promise<ModelTurn> {
      io.print('TICK');
      await io.pause(io.random() * 4);
      const done = request.messages.filter((m) => m.role === 'assistant').length;
      let n = 0;
      const call = (name: string, args: object): ToolCall => ({ id: `c-${request.agent.id}-${done}-${n++}`, name, arguments: JSON.stringify(args) });
      if (request.agent.parentId === null) {
        if (done === 0) return { text: null, toolCalls: [call('spawn_agent', { name: 'w0', task: 'append the lines' })] };
        const last = request.messages.findLast((m) => m.role === 'tool');
        const idle = last?.role === 'tool' && last.content.includes('no_active_agents');
        return { text: null, toolCalls: [idle ? call('finish', { summary: 'all done' }) : call('wait_for_agents', { reason: 'the worker' })] };
      }
      if (done >= TURNS) return { text: null, toolCalls: [call('agent_finish', { summary: 'appended' })] };
      const op = (i: number) => `${request.agent.name}-${done}-${i}`;
      // Each call carries its own id in its arguments, for the side-effect line.
      const append = (tool: string, i: number): ToolCall => {
        const c = call(tool, {});
        return { ...c, arguments: JSON.stringify({ op: op(i), call: c.id }) };
      };
      return { text: null, toolCalls: [append('append_idem', 0), append('append', 1)] };
    },
  };
  return { model, tools, limits, idleResumeMs: 60_000 };
}
