/**
 * The CLI on PostgreSQL (`--db postgres://…`, issue 17): `troupe worker` hosts runs; `run` submits
 * one for the workers; `status`, `tree`, `send` and `stop` work from any machine (send and stop
 * post to the run's inbox, which the hosting worker — or the next to claim the run — applies).
 * @module
 */
import { toTree } from '../host/registry.js';
import { ConfigError, TroupeError } from '../errors.js';
import type { InboxKind, InboxResult } from '../store/inbox.js';
import { openPostgresStore, type PostgresStore } from '../store/postgres/store.js';
import type { RunRow } from '../store/types.js';
import { postRequest, readRequest } from '../worker/inbox.js';
import { submitRun } from '../worker/submit.js';
import { startWorker } from '../worker/worker.js';
import { number, type Io } from './args.js';
import { coordinatorOptions, LOG_FILE, modelFor, secrets } from './setup.js';
import { defined, fromEnv, loadConfigFile, mergeConfig, toSaved } from './config.js';
import { EXIT, exitCodeFor } from './exitCodes.js';
import { cliLogger } from './logs.js';
import { parse, postgresDb } from './pgArgs.js';
import { agentViews, latestMainRun } from './runs.js';
import { forTerminal, jsonLine } from './terminal.js';
import { budgetBar, treeLines } from './view.js';

function urlOf(argv: string[]): string {
  const url = postgresDb(argv);
  if (!url) throw new ConfigError('Expected --db postgres://user@host:port/database');
  return url;
}

const open = (argv: string[], io: Io): Promise<PostgresStore> => openPostgresStore({ url: urlOf(argv), ...secrets(io) });

async function findRun(store: PostgresStore, runId: string | undefined): Promise<RunRow> {
  const runs = await store.reads.listRuns();
  const run = runId === undefined ? (latestMainRun({ listRuns: () => runs }) ?? runs.at(-1)) : runs.find((r) => r.id === runId);
  if (!run) throw new TroupeError('RUN_NOT_FOUND', runId === undefined ? `${store.url} holds no run` : `${store.url} holds no run ${runId}`);
  return run;
}

async function run(argv: string[], io: Io): Promise<number> {
  const { values, positionals } = parse('run', argv, ['db', 'json', 'verbose', 'model', 'base-url', 'api-key', 'budget', 'interactive', 'config'], 1);
  const task = positionals[0];
  if (!task || task.trim() === '') throw new ConfigError('Usage: troupe run "<task>" --db postgres://…  (the task is missing)');
  const budgetUsd = number('budget', values.budget);
  const config = mergeConfig(
    loadConfigFile(values.config),
    fromEnv(io.env),
    defined({ model: values.model, baseURL: values['base-url'], apiKey: values['api-key'], interactive: values.interactive, ...(budgetUsd === undefined ? {} : { budget: { limitUsd: budgetUsd } }) }),
  );
  const store = await open(argv, io);
  try {
    const { runId, rootId } = await submitRun(store, {
      root: { name: 'lead', task },
      ...defined({ interactive: config.interactive, budget: config.budget, limits: config.limits }),
      event: { type: 'cli.run', data: { ...toSaved(config, false) } },
    });
    io.out.write(
      values.json ? `${jsonLine({ type: 'run.submitted', runId, rootId, db: store.url })}\n` : `submitted run ${forTerminal(runId)} to ${forTerminal(store.url)}: a worker hosts it (troupe worker --db …)\n`,
    );
    return EXIT.OK;
  } finally {
    await store.close();
  }
}

async function worker(argv: string[], io: Io): Promise<number> {
  const { values } = parse('worker', argv, ['db', 'verbose', 'concurrency', 'model', 'base-url', 'api-key', 'config'], 0);
  const concurrency = number('concurrency', values.concurrency, true);
  urlOf(argv);
  const config = mergeConfig(loadConfigFile(values.config), fromEnv(io.env), defined({ model: values.model, baseURL: values['base-url'], apiKey: values['api-key'] }));
  const model = modelFor(config);
  secrets(io, config);
  const store = await open(argv, io);
  const logger = cliLogger(LOG_FILE, values.verbose, io.redactor);
  // Each run keeps its own interactive flag and budget (from its row); the rest is this worker's.
  const { interactive: _interactive, budget: _budget, ...hostOptions } = coordinatorOptions(config);
  const w = await startWorker({ store, logger, ...defined({ concurrency }), hostOptions: () => ({ ...hostOptions, model, logger }) });
  io.out.write(`worker ${forTerminal(w.id)} hosting runs of ${forTerminal(store.url)} (Ctrl-C stops it; its runs are released to other workers)\n`);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await w.stop();
  await store.close();
  return EXIT.OK;
}

async function status(argv: string[], io: Io): Promise<number> {
  const { values } = parse('status', argv, ['db', 'json', 'run'], 0);
  const store = await open(argv, io);
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

async function tree(argv: string[], io: Io): Promise<number> {
  const { values } = parse('tree', argv, ['db', 'json', 'run'], 0);
  const store = await open(argv, io);
  try {
    const run = await findRun(store, values.run);
    const views = agentViews(await store.reads.listAgents(run.id), await store.reads.listUsage(run.id));
    const nodes = toTree(new Map(views.map((v) => [v.id, v])));
    io.out.write(values.json ? `${jsonLine({ runId: run.id, tree: nodes })}\n` : `${treeLines(nodes).join('\n')}\n`);
    return EXIT.OK;
  } finally {
    await store.close();
  }
}

const pause = () => new Promise((resolve) => setTimeout(resolve, 100));

/** Post to the run's inbox (waking it) and wait up to `waitMs` for a worker's answer. */
async function post(command: InboxKind, argv: string[], io: Io, payload: (positionals: string[]) => Record<string, unknown>, waitMs = 15_000): Promise<number> {
  const { values, positionals } = parse(command, argv, ['db', 'run'], command === 'send' ? 2 : 1);
  const store = await open(argv, io);
  try {
    const run = await findRun(store, values.run);
    const id = await postRequest(store, { runId: run.id, kind: command, payload: payload(positionals), at: Date.now() });
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

export async function pgCommand(command: string, argv: string[], io: Io): Promise<number> {
  switch (command) {
    case 'worker':
      return worker(argv, io);
    case 'run':
      return run(argv, io);
    case 'status':
      return status(argv, io);
    case 'tree':
      return tree(argv, io);
    case 'send':
      return post('send', argv, io, ([agent, text]) => {
        if (!agent || !text) throw new ConfigError('Usage: troupe send <agent> "<text>" --db postgres://…');
        return { agent, content: text };
      });
    case 'stop':
      return post('stop', argv, io, ([agent]) => {
        if (!agent) throw new ConfigError('Usage: troupe stop <agent> --db postgres://…');
        return { agent };
      });
    default:
      throw new ConfigError(`troupe ${command} does not work with a PostgreSQL --db`);
  }
}
