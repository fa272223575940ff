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

interface LedgerParts {
  readonly clock: Clock;
  readonly port: Pick<StorePort, 'startedToolCalls'>;
  stage(op: WriteOp): void;
}

interface ReviewParts extends LedgerParts {
  readonly runId: string;
  readonly gateway: Gateway;
  readonly trace: ReviewHost['trace'];
  readonly sessions: Sessions;
  readonly views: Pick<Views, 'emit'>;
  readonly reviewNotes: ReviewNote[];
  after(effect: () => void): void;
}

export function toolLedger(rt: LedgerParts): ToolLedger {
  return {
    start: (agent, call) =>
      rt.stage({
        op: 'startToolCall',
        row: { agentId: agent.id, turn: call.turn, callId: call.callId, tool: call.tool, argsHash: call.argsHash, startedAt: rt.clock.now() },
      }),
    finish: (agent, turn, callIds) => rt.stage({ op: 'finishToolCalls', agentId: agent.id, turn, callIds, at: rt.clock.now() }),
    started: async (agent) => (await rt.port.startedToolCalls(agent.id)).map((r) => ({ turn: r.turn, callId: r.callId })),
  };
}

export function backgroundReviews(rt: ReviewParts, options: { everyTurns: number; maxSteps: number; subAgents: boolean }): BackgroundReviews {
  return new BackgroundReviews(
    {
      gateway: rt.gateway,
      trace: rt.trace,
      sessions: rt.sessions,
      now: () => rt.clock.now(),
      countTurn: (agent) => rt.stage({ op: 'appendEvent', row: { runId: rt.runId, agentId: agent.id, type: 'review.turn', data: {}, at: rt.clock.now() } }),
      proposeNote: (agent, note) => {
        // The id is kept with the proposal: what the store scrubs of its text does not change it.
        const id = noteId(note);
        rt.stage({
          op: 'appendEvent',
          row: {
            runId: rt.runId,
            agentId: agent.id,
            type: NOTE_EVENT,
            data: { id, agentName: agent.name, title: note.title, content: note.content },
            at: note.at,
          },
        });
        rt.reviewNotes.push({ id, agentId: agent.id, agentName: agent.name, ...note });
        rt.after(() => rt.views.emit({ type: 'review.note', id, agentId: agent.id, name: agent.name, ...note }));
      },
    },
    options,
  );
}

interface AsyncWorkParts {
  readonly runId: string;
  readonly options: Pick<ResolvedOptions, 'interactive' | 'approvals' | 'approvalRules' | 'holdTurns'>;
  readonly port: Pick<StorePort, 'boot'>;
  readonly approvals: Pick<DurableApprovals, 'continues'>;
  readonly clock: Clock;
  readonly agents: Agents;
  readonly messaging: Pick<Messaging, 'notify'>;
  readonly selfWakes: Pick<SelfWakes, 'admit'>;
  readonly mailboxes: Pick<Mailboxes, 'count'>;
  readonly sessions: Pick<Sessions, 'scrub'>;
  stage(op: WriteOp): void;
  assertUsable(): void;
  checkQuiescence(): void;
}

/** What executions, delegations and re-entry budgets see of the run (their host ports). */
export function asyncWorkHost(rt: AsyncWorkParts) {
  return {
    runId: rt.runId,
    interactive: rt.options.interactive,
    holdTurns: rt.options.holdTurns,
    // Durable rules gate a finished execution by the window only where the agent's mutations ask
    // (an execution is a mutation's effect): under the default rules it continues freely.
    approvals: rt.options.approvalRules ? { windowOpen: (id: string) => rt.approvals.continues(id) } : rt.options.approvals,
    boot: rt.port.boot,
    now: () => rt.clock.now(),
    stage: (op: WriteOp) => rt.stage(op),
    find: (id: string) => rt.agents.find(id),
    status: (h: AgentHandle) => rt.agents.status(h),
    wake: (h: AgentHandle) => rt.agents.send(h, { type: 'agent.message', from: 'system', user: false }),
    selfWake: (h: AgentHandle, retry: () => void) => rt.selfWakes.admit(h, 'execution', retry) === 'now',
    scrub: (text: string) => rt.sessions.scrub(text),
    assertUsable: () => rt.assertUsable(),
    assertAgent: (id: string) => void rt.agents.get(id),
    // A delegation's result wakes its agent through the re-entry budget (a running agent needs no wake).
    notify: (agentId: string, m: { type: string; content: string; noticeKey: string }) =>
      rt.messaging.notify(agentId, m, (target, wake) => {
        const go = () => {
          // Read meanwhile (the agent woke for something else): nothing left to wake it for.
          if (rt.mailboxes.count(target.id) === 0) return;
          if (rt.agents.status(target) === 'running' || rt.selfWakes.admit(target, 'delegation', go) === 'now') wake();
        };
        go();
      }),
    checkQuiescence: () => rt.checkQuiescence(),
  };
}

interface ApprovalParts {
  readonly runId: string;
  readonly options: Pick<ResolvedOptions, 'interactive' | 'holdTurns'>;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly agents: Agents;
  readonly toolbox: Pick<Toolbox, 'userTool'>;
  readonly messaging: Pick<Messaging, 'notify'>;
  readonly views: Pick<Views, 'emit'>;
  readonly executions: Pick<AsyncExecutions, 'link'>;
  stage(op: WriteOp): void;
  after(effect: () => void): void;
  durable(): Promise<void>;
}

/** The durable approvals' port onto the run (async/approvals.ts); `runTool` is the turns' own. */
export function approvalsHost(rt: ApprovalParts, runTool: TurnHost['runTool']): ApprovalsHost {
  return {
    runId: rt.runId,
    get interactive() {
      return rt.options.interactive;
    },
    get holdTurns() {
      return rt.options.holdTurns;
    },
    logger: rt.logger,
    now: () => rt.clock.now(),
    stage: (op) => rt.stage(op),
    durable: () => rt.durable(),
    find: (id) => rt.agents.find(id),
    live: (h) => isActive(rt.agents.status(h)),
    userTool: (h, name) => rt.toolbox.userTool(h, name),
    runTool: (h, tool, args, signal, key) => runTool(h, tool, args, signal, key),
    linkExecutions: (h, text) => rt.executions.link(h, text),
    tell: (agentId, content, noticeKey) => rt.messaging.notify(agentId, { type: 'approval', content, noticeKey }),
    emit: (approval) => rt.after(() => rt.views.emit({ type: 'approval', approval, at: rt.clock.now() })),
  };
}
