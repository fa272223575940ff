/**
 * `troupe status` and `troupe tree`: a run read from its database (read-only, no lock: the run may
 * be live). Status also says whether a process hosts the run now.
 * @module
 */
import { toTree } from '../host/registry.js';
import { ownerAlive } from '../store/ownerLock.js';
import type { Io } from './args.js';
import { EXIT } from './exitCodes.js';
import { defaultReadDb, readRun, views } from './runs.js';
import type { Values } from './spec.js';
import { forTerminal, jsonLine } from './terminal.js';
import { budgetBar, treeLines } from './view.js';

export function tree(_args: string[], values: Values, io: Io): Promise<number> {
  const { store, run } = readRun(defaultReadDb(values.db), values.run);
  try {
    const nodes = toTree(new Map(views(store, run.id).map((v) => [v.id, v])));
    io.out.write(values.json ? `${jsonLine({ runId: run.id, tree: nodes })}\n` : `${treeLines(nodes).join('\n')}\n`);
    return Promise.resolve(EXIT.OK);
  } finally {
    store.close();
  }
}

export function status(_args: string[], values: Values, io: Io): Promise<number> {
  const db = defaultReadDb(values.db);
  const { store, run } = readRun(db, values.run);
  try {
    const agents = views(store, run.id);
    const counts: Record<string, number> = {};
    for (const a of agents) counts[a.status] = (counts[a.status] ?? 0) + 1;
    const root = agents.find((a) => a.id === run.rootId);
    const spentUsd = agents.reduce((sum, a) => sum + a.spentUsd, 0);
    const budget = { spentUsd, limitUsd: run.budget.limitUsd ?? null, reserveStopped: run.budget.reserveStopped, budgetStopped: run.budget.budgetStopped, paused: run.budget.paused };
    const pending = store.listMessages(run.id).filter((m) => m.deliveredAt === null).length;
    const report = root ? (store.getAgent(root.id)?.report ?? null) : null;
    // A run whose agents are active but which no process hosts is waiting for `troupe resume`.
    const hosted = ownerAlive(db);
    const active = agents.some((a) => a.status === 'running' || a.status === 'waiting' || a.status === 'stalled' || a.status === 'budgetPaused');
    if (values.json) {
      io.out.write(
        `${jsonLine({ runId: run.id, db, createdAt: run.createdAt, interactive: run.interactive, hosted, root: root ? { id: root.id, name: root.name, status: root.status } : null, agents: counts, pendingMessages: pending, budget, report })}\n`,
      );
    } else {
      const host = hosted ? 'a troupe process hosts this run now' : active ? `no process hosts it: its agents stand still until troupe resume${values.db ? ` --db ${forTerminal(db)}` : ''}` : 'no process hosts it';
      const lines = [
        `run      ${forTerminal(run.id)}  (${forTerminal(db)})`,
        `root     ${root ? `${forTerminal(root.name)} (${forTerminal(root.id)}) ${root.status}` : '(none)'}`,
        `host     ${host}`,
        `agents   ${Object.entries(counts).map(([s, n]) => `${n} ${s}`).join(', ') || 'none'}`,
        `mail     ${pending} undelivered`,
        `budget   ${budgetBar(budget)}`,
      ];
      if (report) lines.push(`report   ${forTerminal(report.summary, true)}`);
      io.out.write(`${lines.join('\n')}\n`);
    }
    return Promise.resolve(EXIT.OK);
  } finally {
    store.close();
  }
}
