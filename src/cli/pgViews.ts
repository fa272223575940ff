/**
 * The read and mail commands on PostgreSQL (`--db postgres://…`): `status`, `tree`, `send` and
 * `stop` work from any machine. `send` and `stop` post to the run's inbox, which the hosting
 * worker — or the next one to claim the run — applies and answers.
 * @module
 */
import { toTree } from '../host/registry.js';
import { ConfigError, TroupeError } from '../errors.js';
import type { InboxKind, InboxResult } from '../store/inbox.js';
import { openPostgresStore, type PostgresStore } from '../store/postgres/store.js';
import type { RunRow } from '../store/types.js';
import { postRequest, readRequest } from '../worker/inbox.js';
import type { Io } from './args.js';
import { EXIT, exitCodeFor } from './exitCodes.js';
import { secrets } from './setup.js';
import { agentViews, latestMainRun } from './runs.js';
import type { FlagName, Values } from './spec.js';
import { forTerminal, jsonLine } from './terminal.js';
import { budgetBar, treeLines } from './view.js';

/** A flag given that the PostgreSQL form of `command` does not honour is a usage error, never ignored. */
export function only(command: string, values: Values, allowed: readonly FlagName[]): void {
  for (const [name, value] of Object.entries(values)) {
    if (value === undefined || (allowed as readonly string[]).includes(name)) continue;
    const flag = `--${name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
    throw new ConfigError(`troupe ${command} does not take ${flag} with a PostgreSQL --db (see "Scale out" in the README)`);
  }
}

export const openPg = (values: Values, io: Io): Promise<PostgresStore> => openPostgresStore({ url: values.db!, ...secrets(io) });

/** `--run <id>`, else the latest main run, else the latest run. */
export async function findRun(store: PostgresStore, runId: string | undefined): Promise<RunRow> {
  const runs = await store.reads.listRuns();
  const run = runId === undefined ? (latestMainRun({ listRuns: () => runs }) ?? runs.at(-1)) : runs.find((r) => r.id === runId);
  if (!run) throw new TroupeError('RUN_NOT_FOUND', runId === undefined ? `${store.url} holds no run` : `${store.url} holds no run ${runId}`);
  return run;
}

export async function status(_args: string[], values: Values, io: Io): Promise<number> {
  only('status', values, ['db', 'json', 'run']);
  const store = await openPg(values, io);
  try {
    const run = await findRun(store, values.run);
    const [agents, usage, messages, leases] = await Promise.all([
      store.reads.listAgents(run.id),
      store.reads.listUsage(run.id),
      store.reads.pendingMessagesOf(run.id),
      store.leases(),
    ]);
    const views = agentViews(agents, usage);
    const lease = leases.find((l) => l.run_id === run.id);
    const counts: Record<string, number> = {};
    for (const a of views) counts[a.status] = (counts[a.status] ?? 0) + 1;
    const root = agents.find((a) => a.id === run.rootId);
    const spentUsd = views.reduce((sum, a) => sum + a.spentUsd, 0);
    const budget = { spentUsd, limitUsd: run.budget.limitUsd ?? null, reserveStopped: run.budget.reserveStopped, budgetStopped: run.budget.budgetStopped, paused: run.budget.paused };
    const host = lease ? { state: lease.state, owner: lease.owner, epoch: lease.epoch } : null;
    if (values.json) {
      const rootView = root ? { id: root.id, name: root.name, status: root.status } : null;
      io.out.write(`${jsonLine({ runId: run.id, db: store.url, createdAt: run.createdAt, interactive: run.interactive, host, root: rootView, agents: counts, pendingMessages: messages.length, budget, report: root?.report ?? null })}\n`);
    } else {
      const lines = [
        `run      ${forTerminal(run.id)}  (${forTerminal(store.url)})`,
        `host     ${host ? `${host.state}${host.owner ? ` on ${forTerminal(host.owner)}` : ''} (epoch ${host.epoch})` : '(none)'}`,
        `root     ${root ? `${forTerminal(root.name)} (${forTerminal(root.id)}) ${root.status}` : '(none)'}`,
        `agents   ${Object.entries(counts).map(([s, n]) => `${n} ${s}`).join(', ') || 'none'}`,
        `mail     ${messages.length} undelivered`,
        `budget   ${budgetBar(budget)}`,
      ];
      if (root?.report) lines.push(`report   ${forTerminal(root.report.summary, true)}`);
      io.out.write(`${lines.join('\n')}\n`);
    }
    return EXIT.OK;
  } finally {
    await store.close();
  }
}

/** The agent tree of a run, as lines (or one JSON line). */
export async function treeText(store: PostgresStore, runId: string, json: boolean | undefined): Promise<string> {
  const views = agentViews(await store.reads.listAgents(runId), await store.reads.listUsage(runId));
  const nodes = toTree(new Map(views.map((v) => [v.id, v])));
  return json ? `${jsonLine({ runId, tree: nodes })}\n` : `${treeLines(nodes).join('\n')}\n`;
}

export async function tree(_args: string[], values: Values, io: Io): Promise<number> {
  only('tree', values, ['db', 'json', 'run']);
  const store = await openPg(values, io);
  try {
    io.out.write(await treeText(store, (await findRun(store, values.run)).id, values.json));
    return EXIT.OK;
  } finally {
    await store.close();
  }
}

const pause = () => new Promise((resolve) => setTimeout(resolve, 100));

/** Post to the run's inbox (waking it) and wait up to `waitMs` for a worker's answer. */
async function post(command: InboxKind, values: Values, io: Io, payload: Record<string, unknown>, waitMs = 15_000): Promise<number> {
  only(command, values, ['db', 'run']);
  const store = await openPg(values, io);
  try {
    const run = await findRun(store, values.run);
    const id = await postRequest(store, { runId: run.id, kind: command, payload, at: Date.now() });
    const deadline = Date.now() + waitMs;
    let result: InboxResult | null = null;
    while (result === null && Date.now() < deadline) {
      result = (await readRequest(store, id))?.result ?? null;
      if (result === null) await pause();
    }
    if (result === null) {
      io.out.write(`posted to run ${forTerminal(run.id)}; no worker answered within ${waitMs / 1000} s (the next worker to host the run applies it)\n`);
      return EXIT.OK;
    }
    if (!result.ok) {
      io.err.write(`troupe: ${forTerminal(result.message)}\n`);
      return exitCodeFor(result.code);
    }
    io.out.write(`${forTerminal(result.message)}\n`);
    return EXIT.OK;
  } finally {
    await store.close();
  }
}

export const send = (args: string[], values: Values, io: Io) => post('send', values, io, { agent: args[0], content: args[1] });
export const stop = (args: string[], values: Values, io: Io) => post('stop', values, io, { agent: args[0] });
