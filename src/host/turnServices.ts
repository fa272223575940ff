/**
 * What turns use beside the model and the tools: the in-doubt ledger of tool calls (a `started` row
 * before a tool with effects runs, `finished` in the turn's commit) and background reviews, whose
 * notes are events of the run.
 * @module
 */
import { isActive } from '../../machines/types.js';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { ApprovalsHost, DurableApprovals } from './async/approvals.js';
import type { AsyncExecutions } from './async/executions.js';
import type { Toolbox } from './toolbox.js';
import type { StorePort, WriteOp } from '../store/port.js';
import type { CommitPort } from './commit.js';
import { NOTE_EVENT, noteId } from '../notes/notes.js';
import { BackgroundReviews, type ReviewHost, type ReviewNote } from '../turn/review.js';
import type { ToolLedger, TurnHost } from '../turn/ports.js';
import type { AgentHandle, Agents } from './agents/agents.js';
import type { Gateway } from './calls/gateway.js';
import type { Messaging } from './mail/messaging.js';
import type { ResolvedOptions } from './options.js';
import type { Sessions } from './mail/sessions.js';
import type { Views } from './views/views.js';
import type { Mailboxes } from './mail/mailbox.js';
import type { SelfWakes } from './async/selfWakes.js';

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

interface AsyncWorkPorts {
  readonly runId: string;
  readonly options: Pick<ResolvedOptions, 'interactive' | 'approvals' | 'approvalRules' | 'holdTurns'>;
  readonly boot: StorePort['boot'];
  readonly approvals: Pick<DurableApprovals, 'continues'>;
  readonly clock: Clock;
  readonly agents: Agents;
  readonly messaging: Pick<Messaging, 'notify'>;
  readonly mailboxes: Pick<Mailboxes, 'count'>;
  readonly sessions: Pick<Sessions, 'scrub'>;
  readonly commit: Pick<CommitPort, 'stage'>;
  /** The re-entry budget's gate on a self-wake (async/selfWakes.ts; built after the async work). */
  admit: SelfWakes['admit'];
  assertUsable(): void;
  checkQuiescence(): void;
}

/** What executions, delegations and re-entry budgets see of the run (their host ports). */
export function asyncWorkHost(p: AsyncWorkPorts) {
  const { options, agents, commit, admit } = p;
  return {
    runId: p.runId,
    interactive: options.interactive,
    holdTurns: options.holdTurns,
    // Durable rules gate a finished execution by the window only where the agent's mutations ask
    // (an execution is a mutation's effect): under the default rules it continues freely.
    approvals: options.approvalRules ? { windowOpen: (id: string) => p.approvals.continues(id) } : options.approvals,
    boot: p.boot,
    now: () => p.clock.now(),
    stage: (op: WriteOp) => commit.stage(op),
    find: (id: string) => agents.find(id),
    status: (h: AgentHandle) => agents.status(h),
    wake: (h: AgentHandle) => agents.send(h, { type: 'agent.message', from: 'system', user: false }),
    selfWake: (h: AgentHandle, retry: () => void) => admit(h, 'execution', retry) === 'now',
    scrub: (text: string) => p.sessions.scrub(text),
    assertUsable: p.assertUsable,
    assertAgent: (id: string) => void agents.get(id),
    // A delegation's result wakes its agent through the re-entry budget (a running agent needs no wake).
    notify: (agentId: string, m: { type: string; content: string; noticeKey: string }) =>
      p.messaging.notify(agentId, m, (target, wake) => {
        const go = () => {
          // Read meanwhile (the agent woke for something else): nothing left to wake it for.
          if (p.mailboxes.count(target.id) === 0) return;
          if (agents.status(target) === 'running' || admit(target, 'delegation', go) === 'now') wake();
        };
        go();
      }),
    checkQuiescence: p.checkQuiescence,
  };
}

interface ApprovalPorts {
  readonly runId: string;
  readonly options: Pick<ResolvedOptions, 'interactive' | 'holdTurns'>;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly agents: Agents;
  readonly toolbox: Pick<Toolbox, 'userTool'>;
  readonly messaging: Pick<Messaging, 'notify'>;
  readonly views: Pick<Views, 'emit'>;
  readonly commit: CommitPort;
  /** The turns' own runner of a user tool. */
  runTool: TurnHost['runTool'];
  /** Link the executions a tool result announces (async/executions.ts; built after the approvals). */
  linkExecutions: AsyncExecutions['link'];
}

/** The durable approvals' port onto the run (async/approvals.ts). */
export function approvalsHost(p: ApprovalPorts): ApprovalsHost {
  const { clock, commit, agents } = p;
  return {
    runId: p.runId,
    interactive: p.options.interactive,
    holdTurns: p.options.holdTurns,
    logger: p.logger,
    now: () => clock.now(),
    stage: (op) => commit.stage(op),
    durable: () => commit.durable(),
    find: (id) => agents.find(id),
    live: (h) => isActive(agents.status(h)),
    userTool: (h, name) => p.toolbox.userTool(h, name),
    runTool: p.runTool,
    linkExecutions: p.linkExecutions,
    tell: (agentId, content, noticeKey) => p.messaging.notify(agentId, { type: 'approval', content, noticeKey }),
    emit: (approval) => commit.after(() => p.views.emit({ type: 'approval', approval, at: clock.now() })),
  };
}
