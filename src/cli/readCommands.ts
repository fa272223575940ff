/**
 * `troupe status` and `troupe tree`: a run read from its database without hosting it (the run may
 * be live), the same on every store. Status also says who hosts the run now.
 * @module
 */
import { approvalsFromEvents, APPROVAL_EVENT } from '../host/async/approvals.js';
import { allowanceLine, allowanceViews } from '../host/views/allowanceViews.js';
import { agentViews, toTree } from '../host/views/registry.js';
import type { HostView, RunStore } from '../hosting/runStore.js';
import type { Io } from './args.js';
import { EXIT } from './exitCodes.js';
import { findRun, nextHost, openRuns } from './runs.js';
import type { Values } from './flags.js';
import { forTerminal, jsonLine } from './terminal.js';
import { budgetBar, pendingAsks, treeLines } from './view.js';

/** The agent tree of a run, as lines (or one JSON line), with the approvals its agents wait on. */
export async function treeText(runs: Pick<RunStore, 'reads'>, runId: string, json: boolean | undefined): Promise<string> {
  const [agents, usage, approvalRows] = await Promise.all([
    runs.reads.listAgents(runId),
    runs.reads.listUsage(runId),
    runs.reads.eventsOf(runId, APPROVAL_EVENT),
  ]);
  const views = agentViews(agents, usage);
  const nodes = toTree(new Map(views.map((v) => [v.id, v])));
  const names = new Map(agents.map((a) => [a.id, a.name]));
  const pending = approvalsFromEvents(approvalRows, (id) => names.get(id) ?? id).filter((a) => a.state === 'pending');
  if (json) return `${jsonLine({ runId, tree: nodes, pendingApprovals: pending })}\n`;
  return `${treeLines(nodes, '', pendingAsks(pending)).join('\n')}\n`;
}

export async function tree(_args: string[], values: Values, io: Io): Promise<number> {
  const runs = await openRuns(values, io, { readOnly: true });
  try {
    io.out.write(await treeText(runs, (await findRun(runs, values.run)).id, values.json));
    return EXIT.OK;
  } finally {
    await runs.close();
  }
}

/** Who hosts the run, in words. A run with active agents that nobody hosts waits for its next host. */
function hostText(host: HostView, active: boolean, next: string): string {
  const claim = host.epoch === null ? '' : ` (${host.state}, epoch ${host.epoch})`;
  if (host.hosted) return `${host.owner === null ? 'a process' : forTerminal(host.owner)} hosts this run now${claim}`;
  return `no process hosts it${claim}${active ? `: its agents stand still until ${forTerminal(next)} hosts it` : ''}`;
}

export async function status(_args: string[], values: Values, io: Io): Promise<number> {
  const runs = await openRuns(values, io, { readOnly: true });
  try {
    const run = await findRun(runs, values.run);
    const [agents, usage, messages, host, approvalRows] = await Promise.all([
      runs.reads.listAgents(run.id),
      runs.reads.listUsage(run.id),
      runs.reads.listMessages(run.id),
      runs.hostOf(run.id),
      runs.reads.eventsOf(run.id, APPROVAL_EVENT),
    ]);
    const names = new Map(agents.map((a) => [a.id, a.name]));
    const approvals = approvalsFromEvents(approvalRows, (id) => names.get(id) ?? id).filter((a) => a.state === 'pending');
    const views = agentViews(agents, usage);
    const spentOf = new Map(views.map((v) => [v.id, v.spentUsd]));
    const counts: Record<string, number> = {};
    for (const a of views) counts[a.status] = (counts[a.status] ?? 0) + 1;
    const root = agents.find((a) => a.id === run.rootId);
    const budget = {
      spentUsd: views.reduce((sum, a) => sum + a.spentUsd, 0),
      limitUsd: run.budget.limitUsd ?? null,
      reserveStopped: run.budget.reserveStopped,
      budgetStopped: run.budget.budgetStopped,
      paused: run.budget.paused,
      allowances: allowanceViews(agents, (id) => spentOf.get(id) ?? 0),
    };
    const pending = messages.filter((m) => m.deliveredAt === null).length;
    const report = root?.report ?? null;
    const ended = root && (root.status === 'failed' || root.status === 'crashed' || root.status === 'stopped');
    const outcome = ended
      ? `${root.status}: ${root.error ? `${root.error.code}: ${root.error.message}` : root.stopReason ? `stopped (${root.stopReason})` : 'no reason recorded'}`
      : null;
    const active = agents.some((a) => a.status === 'running' || a.status === 'waiting' || a.status === 'stalled' || a.status === 'budgetPaused');
    if (values.json) {
      // Why the root ended short of done: it has no parent to tell, so the run says it here.
      const rootView = root
        ? { id: root.id, name: root.name, status: root.status, ...(outcome ? { error: root.error, stopReason: root.stopReason } : {}) }
        : null;
      io.out.write(
        `${jsonLine({ runId: run.id, db: runs.label, createdAt: run.createdAt, interactive: run.interactive, hosted: host.hosted, host, root: rootView, agents: counts, pendingMessages: pending, pendingApprovals: approvals, budget, report })}\n`,
      );
    } else {
      const lines = [
        `run      ${forTerminal(run.id)}  (${forTerminal(runs.label)})`,
        `root     ${root ? `${forTerminal(root.name)} (${forTerminal(root.id)}) ${root.status}` : '(none)'}`,
        ...(outcome ? [`outcome  ${forTerminal(outcome)}`] : []),
        `host     ${hostText(host, active, nextHost(values))}`,
        `agents   ${
          Object.entries(counts)
            .map(([s, n]) => `${n} ${s}`)
            .join(', ') || 'none'
        }`,
        `mail     ${pending} undelivered`,
        // What waits for a person: troupe approve / deny answer it from here.
        ...approvals.map((a) => `approval ${forTerminal(`${a.id} pending: ${a.agentName} asks to run ${a.tool} ${JSON.stringify(a.args)} (${a.risk})`)}`),
        `budget   ${budgetBar(budget)}`,
        // Spend against each allowance a spawn gave (its owner's whole subtree).
        ...budget.allowances.map((a) => `         ${forTerminal(allowanceLine(a))}`),
      ];
      if (report) lines.push(`report   ${forTerminal(report.summary, true)}`);
      io.out.write(`${lines.join('\n')}\n`);
    }
    return EXIT.OK;
  } finally {
    await runs.close();
  }
}
