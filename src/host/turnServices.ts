/**
 * What turns use beside the model and the tools: the in-doubt ledger of tool calls (a `started` row
 * before a tool with effects runs, `finished` in the turn's commit) and background reviews, whose
 * notes are events of the run.
 * @module
 */
import { BackgroundReviews } from '../turn/review.js';
import type { ToolLedger } from '../turn/ports.js';
import type { Runtime } from './runtime.js';

export function toolLedger(rt: Runtime): ToolLedger {
  return {
    start: (agent, call) => rt.stage({ op: 'startToolCall', row: { agentId: agent.id, turn: call.turn, callId: call.callId, tool: call.tool, argsHash: call.argsHash, startedAt: rt.clock.now() } }),
    finish: (agent, turn, callIds) => rt.stage({ op: 'finishToolCalls', agentId: agent.id, turn, callIds, at: rt.clock.now() }),
    started: async (agent) => (await rt.port.startedToolCalls(agent.id)).map((r) => ({ turn: r.turn, callId: r.callId })),
  };
}

export function backgroundReviews(rt: Runtime, options: { everyTurns: number; maxSteps: number }): BackgroundReviews {
  return new BackgroundReviews(
    {
      gateway: rt.gateway,
      trace: rt.trace,
      sessions: rt.sessions,
      now: () => rt.clock.now(),
      proposeNote: (agent, note) => {
        rt.stage({ op: 'appendEvent', row: { runId: rt.runId, agentId: agent.id, type: 'review.note', data: { agentName: agent.name, title: note.title, content: note.content }, at: note.at } });
        rt.reviewNotes.push({ agentId: agent.id, agentName: agent.name, ...note });
        rt.after(() => rt.views.emit({ type: 'review.note', agentId: agent.id, name: agent.name, ...note }));
      },
    },
    options,
  );
}
