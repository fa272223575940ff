/**
 * The async-work family put together: durable approvals, async executions, delegations and the
 * re-entry budget that gates every self-wake, each given its port onto the run. With approval
 * rules the turns ask the durable approvals (one policy: a gate or rules, never both), so the
 * options the later parts read come from here.
 * @module
 */
import type { Logger } from 'pino';
import { isActive } from '../../../machines/types.js';
import type { Clock } from '../../clock.js';
import type { StorePort, WriteOp } from '../../store/port.js';
import type { TurnHost } from '../../turn/ports.js';
import type { AgentHandle, Agents } from '../agents/agents.js';
import type { CommitPort } from '../commit.js';
import type { Mailboxes } from '../mail/mailbox.js';
import type { Messaging } from '../mail/messaging.js';
import type { Sessions } from '../mail/sessions.js';
import type { ResolvedOptions } from '../options.js';
import type { Toolbox } from '../toolbox.js';
import type { Views } from '../views/views.js';
import { DurableApprovals, type ApprovalsHost } from './approvals.js';
import { Delegations, ReentryBudgets } from './delegations.js';
import { AsyncExecutions } from './executions.js';
import { SelfWakes } from './selfWakes.js';

export interface AsyncFamilyPorts {
  readonly runId: string;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly options: ResolvedOptions;
  readonly boot: StorePort['boot'];
  readonly agents: Agents;
  readonly toolbox: Pick<Toolbox, 'userTool'>;
  readonly messaging: Pick<Messaging, 'notify'>;
  readonly mailboxes: Pick<Mailboxes, 'count'>;
  readonly sessions: Pick<Sessions, 'scrub'>;
  readonly views: Pick<Views, 'emit'>;
  readonly commit: CommitPort;
  /** The turns' own runner of a user tool (the turns' host is built after the async work). */
  runTool: TurnHost['runTool'];
  usable(): boolean;
  assertUsable(): void;
  /** The dead-wait watch (waits/, built after the async work). */
  checkQuiescence(): void;
}

export function wireAsyncWork(p: AsyncFamilyPorts) {
  const { runId, clock, logger, agents, commit } = p;
  const rules = p.options.approvalRules;
  const approvals: DurableApprovals = new DurableApprovals(
    approvalsHost({
      runId,
      clock,
      logger,
      options: p.options,
      agents,
      toolbox: p.toolbox,
      messaging: p.messaging,
      views: p.views,
      commit,
      runTool: p.runTool,
      linkExecutions: (h, text) => executions.link(h, text),
    }),
    rules,
  );
  // With rules, the turns ask the durable approvals (one policy: a gate or rules, never both).
  const options: ResolvedOptions = rules ? { ...p.options, approvals } : p.options;
  const host = asyncWorkHost({
    runId,
    clock,
    options,
    boot: p.boot,
    approvals,
    agents,
    messaging: p.messaging,
    mailboxes: p.mailboxes,
    sessions: p.sessions,
    commit,
    admit: (h, source, retry, live) => selfWakes.admit(h, source, retry, live),
    assertUsable: p.assertUsable,
    checkQuiescence: p.checkQuiescence,
  });
  const executions = new AsyncExecutions(host);
  const delegations = new Delegations(host);
  const reentry = new ReentryBudgets(host);
  const selfWakes = new SelfWakes({
    runId,
    clock,
    logger,
    policy: options.reentry,
    budgets: reentry,
    status: (h) => agents.status(h),
    stop: (h) => agents.send(h, { type: 'agent.stop', reason: 'reentry' }),
    stage: (op) => commit.stage(op),
  });
  // Executions that finished outside the agent's approval window continue when one opens.
  const stopWindowListener = options.approvals?.onWindowOpen?.((agentId) => p.usable() && executions.continueFor(agentId)) ?? null;
  return { options, approvals, executions, delegations, reentry, selfWakes, stopWindowListener };
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
function asyncWorkHost(p: AsyncWorkPorts) {
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
    selfWake: (h: AgentHandle, retry: () => void, live: () => boolean) => admit(h, 'execution', retry, live) === 'now',
    scrub: (text: string) => p.sessions.scrub(text),
    assertUsable: p.assertUsable,
    assertAgent: (id: string) => void agents.get(id),
    // A delegation's result wakes its agent through the re-entry budget (a running agent needs no wake).
    notify: (agentId: string, m: { type: string; content: string; noticeKey: string }) =>
      p.messaging.notify(agentId, m, (target, wake) => {
        const go = () => {
          // Read meanwhile (the agent woke for something else): nothing left to wake it for.
          if (p.mailboxes.count(target.id) === 0) return;
          // Put off, it still wakes the agent while its result is unread and the agent active (a
          // notice revives no finished agent).
          const live = () => p.mailboxes.count(target.id) > 0 && isActive(agents.status(target));
          if (agents.status(target) === 'running' || admit(target, 'delegation', go, live) === 'now') wake();
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
function approvalsHost(p: ApprovalPorts): ApprovalsHost {
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
