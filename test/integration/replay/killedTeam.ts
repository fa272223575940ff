/**
 * The teams of the replay-after-kill test, shared by its child (which runs them) and the test
 * (which replays them with the same tools, limits and model name).
 *
 * - `single`: a root and one worker that takes six turns of the crash harness's in-doubt tools
 *   (crash/teams.ts: `append`, not idempotent, and `append_idem`, each an fsynced line in a
 *   side-effect file), then finishes. One worker, no user messages: the run's course is a function
 *   of its conversation, not of how its timings interleave.
 * - `team`: the crash harness's in-doubt team in real time — a root and four workers whose tools
 *   take a few milliseconds, messaging their parent — with user messages sent to running agents
 *   while their tools run (`senders`): the tools' ends interleave with other agents' answers and
 *   the inputs as the timings fell.
 */
import type { Model, ModelRequest, ModelTurn, ToolCall } from '../../../src/model/types.js';
import type { Tool } from '../../../src/tools/defineTool.js';
import { team, type TeamIO } from '../crash/teams.js';

export type KilledTeamName = 'single' | 'team';

const TURNS = 6;

export interface KilledTeam {
  model: Model;
  tools: Tool[];
  limits: { maxTurns: number; maxChildren?: number };
  idleResumeMs: number;
  /** User messages sent side by side while the run goes on, and the most a sender pauses between two (ms). */
  senders: number;
  sendGapMs: number;
}

export function killedTeam(io: TeamIO, name: KilledTeamName = 'single'): KilledTeam {
  const crash = team('in-doubt', io, 1);
  const tools = crash.tools as Tool[];
  if (name === 'team') return { model: crash.model, tools, limits: crash.limits, idleResumeMs: 60_000, senders: 2, sendGapMs: 6 };
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
  return { model, tools, limits: crash.limits, idleResumeMs: 60_000, senders: 0, sendGapMs: 0 };
}
