/**
 * What a turn needs of its host (turn/ports.ts `TurnHost`), made of the runtime's parts: the
 * turn's reads of the agent and its tools, running a user tool, and what a turn reports (activity,
 * recoveries, linked executions, the end of a turn). The parts are read when a turn asks (the
 * runtime builds the cycle logic before its gateway exists).
 * @module
 */
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { TroupeError } from '../errors.js';
import type PQueue from 'p-queue';
import type { StorePort, WriteOp } from '../store/port.js';
import type { BuiltinHost } from '../tools/ports.js';
import { runUserTool, type ToolRunner } from '../tools/runUserTool.js';
import type { RunTrace } from '../trace/tracer.js';
import type { ToolLedger, TurnHost } from '../turn/ports.js';
import type { BackgroundReviews } from '../turn/review.js';
import type { Agents } from './agents/agents.js';
import { recordToolFailure, type FailurePatterns } from './agents/failurePatterns.js';
import type { OutputChecks } from './agents/outputs.js';
import type { AsyncExecutions } from './async/executions.js';
import type { CallLog } from './calls/callLog.js';
import type { Gateway } from './calls/gateway.js';
import type { Messaging } from './mail/messaging.js';
import type { Sessions } from './mail/sessions.js';
import type { ResolvedOptions } from './options.js';
import type { Toolbox } from './toolbox.js';
import type { Views } from './views/views.js';

export interface TurnHostParts {
  readonly runId: string;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly options: ResolvedOptions;
  readonly failure: TroupeError | null;
  readonly gateway: Gateway;
  readonly sessions: Sessions;
  readonly ledger: ToolLedger;
  readonly trace: RunTrace;
  readonly agents: Agents;
  readonly toolbox: Toolbox;
  readonly outputs: OutputChecks;
  readonly builtins: BuiltinHost;
  readonly port: Pick<StorePort, 'guard'>;
  readonly toolQueue: PQueue;
  readonly executions: Pick<AsyncExecutions, 'link'>;
  readonly reviews: Pick<BackgroundReviews, 'afterTurn'> | null;
  readonly views: Pick<Views, 'hasListeners' | 'emit'>;
  readonly failurePatterns: FailurePatterns | null;
  readonly messaging: Pick<Messaging, 'notify'>;
  readonly callLog: Pick<CallLog, 'toolFailed'>;
  stage(op: WriteOp): void;
  after(effect: () => void): void;
  durable(): Promise<void>;
}

export function turnHost(rt: TurnHostParts): TurnHost {
  let runner: ToolRunner | null = null;
  return {
    runId: rt.runId,
    clock: rt.clock,
    logger: rt.logger,
    options: rt.options,
    get failure() {
      return rt.failure;
    },
    get gateway() {
      return rt.gateway;
    },
    get sessions() {
      return rt.sessions;
    },
    get ledger() {
      return rt.ledger;
    },
    get trace() {
      return rt.trace;
    },
    agent: (id) => rt.agents.get(id),
    toolNames: (agent) => rt.toolbox.names(agent),
    toolSpecs: (agent) => rt.toolbox.specs(agent),
    // A user tool the agent may call (its tool sets and its ancestors' allow it), by name.
    userTool: (agent, name) => rt.toolbox.userTool(agent, name),
    outputCheck: (agent) => rt.outputs.get(rt.agents.get(agent.id)),
    builtinEnv: (agent, callId, state) => ({ host: rt.builtins, agent, callId, state }),
    runTool(agent, tool, args, signal, idempotencyKey) {
      // No tool starts once the lease may be lost (checked as it leaves the queue): another host may
      // be running this turn already.
      runner ??= {
        queue: rt.toolQueue,
        clock: rt.clock,
        defaultTimeoutMs: rt.options.toolTimeoutMs,
        runId: rt.runId,
        fenced: () => rt.port.guard?.check() ?? null,
      };
      return runUserTool(runner, tool, args, agent, signal, idempotencyKey);
    },
    linkExecutions: (agent, content) => rt.executions.link(agent, content),
    durable: () => rt.durable(),
    afterTurn: (agent, outcome) => rt.reviews?.afterTurn(agent, outcome),
    stopRequested: (agent) => rt.agents.stopRequested(rt.agents.get(agent.id)),
    activity(agent, activity) {
      if (activity.kind === 'tool')
        rt.stage({ op: 'appendEvent', row: { runId: rt.runId, agentId: agent.id, type: 'tool.call', data: { tool: activity.tool }, at: rt.clock.now() } });
      if (rt.views.hasListeners) rt.views.emit({ type: 'agent.activity', agentId: agent.id, name: agent.name, activity, at: rt.clock.now() });
    },
    toolFailed: (agent, call, errorCode) => {
      rt.callLog.toolFailed(agent.id, call.id, errorCode);
      recordToolFailure(
        {
          runId: rt.runId,
          logger: rt.logger,
          failurePatterns: rt.failurePatterns,
          find: (id) => rt.agents.find(id),
          stage: (op) => rt.stage(op),
          emit: (event) => rt.after(() => rt.views.emit(event)),
          notify: (id, m) => rt.messaging.notify(id, m),
        },
        agent.id,
        call.name,
        call.arguments,
        errorCode,
        rt.clock.now(),
      );
    },
    recovering: (agent, recovery) =>
      rt.stage({ op: 'appendEvent', row: { runId: rt.runId, agentId: agent.id, type: 'model.recovery', data: { ...recovery }, at: rt.clock.now() } }),
  };
}
