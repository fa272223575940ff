/**
 * What a turn needs of its host (turn/ports.ts `TurnHost`), made of the runtime's parts: the
 * turn's reads of the agent and its tools, running a user tool, and what a turn reports (activity,
 * recoveries, linked executions, the end of a turn). Built from the parts it uses, once they exist:
 * the agents' cycle logic reads it when a cycle starts.
 * @module
 */
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { TroupeError } from '../errors.js';
import type PQueue from 'p-queue';
import type { BuiltinHost } from '../tools/ports.js';
import { runUserTool, type ToolRunner } from '../tools/runUserTool.js';
import type { RunTrace } from '../trace/tracer.js';
import type { ToolLedger, TurnHost } from '../turn/ports.js';
import type { BackgroundReviews } from '../turn/review.js';
import type { Agents } from './agents/agents.js';
import { recordToolFailure, type FailurePatternHost, type FailurePatterns } from './agents/failurePatterns.js';
import type { OutputChecks } from './agents/outputs.js';
import type { AsyncExecutions } from './async/executions.js';
import type { CallLog } from './calls/callLog.js';
import type { CommitPort } from './commit.js';
import type { Gateway } from './calls/gateway.js';
import type { Messaging } from './mail/messaging.js';
import type { Sessions } from './mail/sessions.js';
import type { ResolvedOptions } from './options.js';
import type { Toolbox } from './toolbox.js';
import type { Views } from './views/views.js';
import { builtinHost, type BuiltinParts } from './builtinHost.js';
import { backgroundReviews, toolLedger } from './turnServices.js';
import type { GraphHost } from './waits/graph.js';
import type { StorePort } from '../store/port.js';
import type { ReviewNote } from '../turn/review.js';

/** The ports a turn's host is made of: the parts it uses, already built. */
interface TurnHostPorts {
  readonly runId: string;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly options: ResolvedOptions;
  /** The fatal failure now (null while the run is usable). */
  failure(): TroupeError | null;
  readonly commit: CommitPort;
  readonly gateway: Gateway;
  readonly sessions: Sessions;
  readonly ledger: ToolLedger;
  readonly trace: RunTrace;
  readonly agents: Agents;
  readonly toolbox: Toolbox;
  readonly outputs: OutputChecks;
  readonly builtins: BuiltinHost;
  /** The lease's fence (PostgreSQL): an error once another host may own the run. */
  fenced(): Error | null;
  readonly toolQueue: PQueue;
  readonly executions: Pick<AsyncExecutions, 'link'>;
  readonly reviews: Pick<BackgroundReviews, 'afterTurn'> | null;
  readonly views: Pick<Views, 'hasListeners' | 'emit'>;
  readonly failurePatterns: FailurePatterns | null;
  readonly messaging: Pick<Messaging, 'notify'>;
  readonly callLog: Pick<CallLog, 'toolFailed' | 'toolEnded' | 'mailRead'>;
}

function turnHost(p: TurnHostPorts): TurnHost {
  const { runId, clock, logger, options, commit, agents, toolbox, views } = p;
  // No tool starts once the lease may be lost (checked as it leaves the queue): another host may
  // be running this turn already.
  const runner: ToolRunner = { queue: p.toolQueue, clock, defaultTimeoutMs: options.toolTimeoutMs, runId, fenced: p.fenced };
  const failures: FailurePatternHost = {
    runId,
    logger,
    failurePatterns: p.failurePatterns,
    find: (id) => agents.find(id),
    stage: (op) => commit.stage(op),
    emit: (event) => commit.after(() => views.emit(event)),
    notify: (id, m) => p.messaging.notify(id, m),
  };
  return {
    runId,
    clock,
    logger,
    options,
    get failure() {
      return p.failure();
    },
    gateway: p.gateway,
    sessions: p.sessions,
    ledger: p.ledger,
    trace: p.trace,
    agent: (id) => agents.get(id),
    toolNames: (agent) => toolbox.names(agent),
    toolSpecs: (agent) => toolbox.specs(agent),
    // A user tool the agent may call (its tool sets and its ancestors' allow it), by name.
    userTool: (agent, name) => toolbox.userTool(agent, name),
    outputCheck: (agent) => p.outputs.get(agents.get(agent.id)),
    builtinEnv: (agent, callId, state) => ({ host: p.builtins, agent, callId, state }),
    runTool: (agent, tool, args, signal, idempotencyKey) => runUserTool(runner, tool, args, agent, signal, idempotencyKey),
    linkExecutions: (agent, content) => p.executions.link(agent, content),
    durable: () => commit.durable(),
    afterTurn: (agent, outcome) => p.reviews?.afterTurn(agent, outcome),
    stopRequested: (agent) => agents.stopRequested(agents.get(agent.id)),
    activity(agent, activity) {
      if (activity.kind === 'tool')
        commit.stage({ op: 'appendEvent', row: { runId, agentId: agent.id, type: 'tool.call', data: { tool: activity.tool }, at: clock.now() } });
      if (views.hasListeners) views.emit({ type: 'agent.activity', agentId: agent.id, name: agent.name, activity, at: clock.now() });
    },
    mailRead: (agent, read, taken) => p.callLog.mailRead(agent.id, read, taken),
    nobodyToAnswer: (agent) => p.builtins.nobodyToAnswer(agent),
    toolEnded: (agent, call, startedAt) => p.callLog.toolEnded(agent.id, call.id, startedAt),
    toolFailed: (agent, call, errorCode) => {
      p.callLog.toolFailed(agent.id, call.id, errorCode);
      recordToolFailure(failures, agent.id, call.name, call.arguments, errorCode, clock.now());
    },
    recovering: (agent, recovery) =>
      commit.stage({ op: 'appendEvent', row: { runId, agentId: agent.id, type: 'model.recovery', data: { ...recovery }, at: clock.now() } }),
  };
}

/** What the turns' side of a run is made from: the parts, and what it builds of its own. */
export type TurnFamilyPorts = Omit<TurnHostPorts, 'ledger' | 'builtins' | 'reviews' | 'fenced'> &
  BuiltinParts & {
    /** The in-doubt ledger's reads, and the lease's fence (PostgreSQL). */
    readonly port: Pick<StorePort, 'startedToolCalls' | 'guard'>;
    readonly graph: GraphHost;
    /** Where the run's proposed notes are kept (restored at resume). */
    readonly notes: ReviewNote[];
  };

/** The turns' host and what it owns: the tool-call ledger, background reviews, the built-ins' port. */
export function wireTurns(p: TurnFamilyPorts): { turns: TurnHost; reviews: BackgroundReviews | null } {
  const { runId, clock, commit, port, gateway, trace, sessions, views } = p;
  const ledger = toolLedger({ clock, port, commit });
  const review = p.options.review;
  const reviews = review ? backgroundReviews({ runId, clock, commit, gateway, trace, sessions, views, notes: p.notes }, review) : null;
  const builtins = builtinHost(p, p.graph);
  const turns = turnHost({ ...p, ledger, builtins, reviews, fenced: () => port.guard?.check() ?? null });
  return { turns, reviews };
}
