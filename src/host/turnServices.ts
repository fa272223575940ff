/**
 * What turns use beside the model and the tools: the in-doubt ledger of tool calls (a `started` row
 * before a tool with effects runs, `finished` in the turn's commit) and background reviews, whose
 * notes are events of the run.
 * @module
 */
import type { Clock } from '../clock.js';
import type { StorePort } from '../store/port.js';
import type { CommitPort } from './commit.js';
import { NOTE_EVENT, noteId } from '../notes/notes.js';
import { BackgroundReviews, type ReviewHost, type ReviewNote } from '../turn/review.js';
import type { ToolLedger } from '../turn/ports.js';
import type { Gateway } from './calls/gateway.js';
import type { Sessions } from './mail/sessions.js';
import type { Views } from './views/views.js';

interface LedgerPorts {
  readonly clock: Clock;
  readonly port: Pick<StorePort, 'startedToolCalls'>;
  readonly commit: Pick<CommitPort, 'stage'>;
}

interface ReviewPorts {
  readonly runId: string;
  readonly clock: Clock;
  readonly commit: Pick<CommitPort, 'stage' | 'after'>;
  readonly gateway: Gateway;
  readonly trace: ReviewHost['trace'];
  readonly sessions: Sessions;
  readonly views: Pick<Views, 'emit'>;
  /** Where the run's proposed notes are kept (restored at resume). */
  readonly notes: ReviewNote[];
}

export function toolLedger({ clock, port, commit }: LedgerPorts): ToolLedger {
  return {
    start: (agent, call) =>
      commit.stage({
        op: 'startToolCall',
        row: { agentId: agent.id, turn: call.turn, callId: call.callId, tool: call.tool, argsHash: call.argsHash, startedAt: clock.now() },
      }),
    finish: (agent, turn, callIds) => commit.stage({ op: 'finishToolCalls', agentId: agent.id, turn, callIds, at: clock.now() }),
    started: async (agent) => (await port.startedToolCalls(agent.id)).map((r) => ({ turn: r.turn, callId: r.callId })),
  };
}

export function backgroundReviews(p: ReviewPorts, options: { everyTurns: number; maxSteps: number; subAgents: boolean }): BackgroundReviews {
  const { runId, clock, commit } = p;
  return new BackgroundReviews(
    {
      gateway: p.gateway,
      trace: p.trace,
      sessions: p.sessions,
      now: () => clock.now(),
      countTurn: (agent) => commit.stage({ op: 'appendEvent', row: { runId, agentId: agent.id, type: 'review.turn', data: {}, at: clock.now() } }),
      proposeNote: (agent, note) => {
        // The id is kept with the proposal: what the store scrubs of its text does not change it.
        const id = noteId(note);
        commit.stage({
          op: 'appendEvent',
          row: {
            runId,
            agentId: agent.id,
            type: NOTE_EVENT,
            data: { id, agentName: agent.name, title: note.title, content: note.content },
            at: note.at,
          },
        });
        p.notes.push({ id, agentId: agent.id, agentName: agent.name, ...note });
        commit.after(() => p.views.emit({ type: 'review.note', id, agentId: agent.id, name: agent.name, ...note }));
      },
    },
    options,
  );
}
