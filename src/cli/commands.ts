/**
 * The `troupe` commands: demo, run, resume, status, tree (send and stop are in mail.ts, serve in
 * serve.ts). Each returns an exit code; output goes through the given streams so tests can run
 * them in-process too.
 * @module
 */
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { createCoordinator, type Coordinator } from '../host/createCoordinator.js';
import type { BudgetOptions, CoordinatorOptions } from '../host/options.js';
import { toTree } from '../host/registry.js';
import { resumeCoordinator } from '../host/resumeCoordinator.js';
import { ConfigError, errorMessage, TroupeError } from '../errors.js';
import { openaiModel } from '../model/openaiModel.js';
import type { Script } from '../model/scriptedModel.js';
import type { Model, ModelPrice } from '../model/types.js';
import { ensureParentDir } from '../store/files.js';
import { openStore, type OpenStoreOptions, type SqliteStore } from '../store/sqliteStore.js';
import { createFakeOpenAIServer, type FakeOpenAIServer } from '../testing/fakeOpenAIServer.js';
import { repliesFromScript, routeByAgent } from '../testing/wireScript.js';
import { number, parse, USAGE, VIEW_FLAGS, type Io } from './args.js';
import { DEFAULT_DB, defined, fromEnv, loadConfigFile, mergeConfig, MODEL_HINT, toSaved, type CliConfig } from './config.js';
import { EXIT } from './exitCodes.js';
import { PG_COMMANDS, postgresDb } from './pgArgs.js';
import { cliLogger } from './logs.js';
import { send, serveInbox, stop } from './mail.js';
import { DEMO_DB, defaultReadDb, latestRun, readRun, requireDatabase, savedConfig, views } from './runs.js';
import { forTerminal, jsonLine } from './terminal.js';
import { attachView, budgetBar, treeLines, type ViewMode } from './view.js';

const TERMINAL = ['completed', 'stopped', 'failed', 'crashed'] as const;
export const LOG_FILE = '.troupe/troupe.log';
const DEMO_MODEL = 'troupe-demo';
const DEMO_PRICE: ModelPrice = { inputPer1M: 2, cachedInputPer1M: 0.5, outputPer1M: 8 };
const DEMO_BUDGET: BudgetOptions = { limitUsd: 0.5, prices: { [DEMO_MODEL]: DEMO_PRICE } };

/** The bundled demo scenario (works from src/cli and dist/src/cli). */
function demoScript(): Script {
  for (const up of ['../../fixtures', '../../../fixtures']) {
    const path = fileURLToPath(new URL(`${up}/scenarios/demo.json`, import.meta.url));
    if (existsSync(path)) return JSON.parse(readFileSync(path, 'utf8')) as Script;
  }
  throw new TroupeError('INTERNAL', 'The demo scenario fixtures/scenarios/demo.json is missing from this install');
}

function viewMode(json: boolean, io: Io): ViewMode {
  return json ? 'json' : io.tty ? 'tty' : 'lines';
}

/**
 * The API key a command ends up with becomes a secret of `io.redactor` (scrubbed from the output
 * streams); returns the options that scrub it from the database and the log too.
 */
export function secrets(io: Io, config?: Pick<CliConfig, 'apiKey'>): Pick<OpenStoreOptions, 'redactor'> {
  io.redactor?.add(config?.apiKey);
  return io.redactor ? { redactor: io.redactor } : {};
}

// ── running a team ─────────────────────────────────────────────────────────────────────────────

export async function inspector(flags: { inspect?: boolean; 'inspect-port'?: string }, io: Io): Promise<{ inspect?: CoordinatorOptions['inspect']; close: () => Promise<void> }> {
  if (!flags.inspect) return { close: () => Promise.resolve() };
  const port = flags['inspect-port'] === undefined ? 8080 : number('inspect', flags['inspect-port'], true);
  const { startInspector } = await import('../inspect/server.js');
  const handle = await startInspector({ port: port ?? 8080 });
  io.err.write(`${handle.hint}\n`);
  return { inspect: handle.inspect, close: () => handle.close() };
}

/** Drive a started (or resumed) run to the end of its root, with the live view; returns the exit code. */
async function drive(
  c: Coordinator,
  start: () => Promise<string>,
  options: { mode: ViewMode; io: Io; store: SqliteStore; killAfterTurns?: number | undefined; interactive: boolean },
): Promise<number> {
  const { mode, io } = options;
  // The view listens before the run starts: its first transitions may commit with its registration.
  const detach = attachView(c, mode, io.out);
  const rootId = await start();
  const stopInbox = serveInbox(c, options.store);
  let stopKill: (() => void) | undefined;
  if (options.killAfterTurns !== undefined) {
    const limit = options.killAfterTurns;
    // Abrupt, like a crash: no shutdown, no flush beyond what each commit already made durable.
    const sub = c.registry.subscribe(({ context }) => {
      let turns = 0;
      for (const view of context.agents.values()) turns += view.turns;
      if (turns >= limit) process.kill(process.pid, 'SIGKILL');
    });
    stopKill = () => sub.unsubscribe();
  }
  // A human is attached: each line typed goes to the root.
  const input = options.interactive && mode !== 'json' && process.stdin.isTTY ? createInterface({ input: process.stdin }) : undefined;
  input?.on('line', (line) => {
    if (line.trim() !== '') c.send(rootId, { content: line }).catch((err: unknown) => io.err.write(`${forTerminal(errorMessage(err))}\n`));
  });
  const root = await c.waitFor(rootId, TERMINAL);
  await c.whenIdle();
  // Background reviews (config `review`) are bounded: let the ones running propose their note.
  await c.reviews.settled();
  input?.close();
  stopKill?.();
  stopInbox();
  detach();
  if (mode === 'json') {
    io.out.write(`${jsonLine({ type: 'run.finished', runId: c.runId, status: root.status, report: root.report, error: root.error, budget: c.budget(), tree: c.tree() })}\n`);
  } else {
    io.out.write(`\nTeam:\n${treeLines(c.tree()).join('\n')}\n${budgetBar(c.budget())}\n`);
    const body = root.report?.summary ?? (root.error ? `${root.error.code}: ${root.error.message}` : '(none)');
    io.out.write(`\nReport (${root.status}):\n${forTerminal(body, true)}\n`);
  }
  return root.status === 'completed' ? EXIT.OK : EXIT.RUN_NOT_COMPLETED;
}

export function modelFor(config: CliConfig): Model {
  if (!config.model) throw new ConfigError(MODEL_HINT);
  return openaiModel({
    model: config.model,
    ...defined({ baseURL: config.baseURL, apiKey: config.apiKey, stream: config.stream, maxOutputTokens: config.maxOutputTokens, timeoutMs: config.timeoutMs }),
  });
}

export function coordinatorOptions(config: CliConfig): Omit<CoordinatorOptions, 'model' | 'store'> {
  return defined({
    interactive: config.interactive,
    budget: config.budget,
    limits: config.limits,
    concurrency: config.concurrency,
    rateLimit: config.rateLimit,
    idleResumeMs: config.idleResumeMs,
    review: config.review,
  });
}

/** The demo's model: the real openai client against the bundled fake server, replaying the scenario. */
async function demoModel(script: Script, answered: Record<string, number> = {}): Promise<{ model: Model; server: FakeOpenAIServer }> {
  const server = await createFakeOpenAIServer(routeByAgent(repliesFromScript(script, answered)).script, { model: DEMO_MODEL });
  const model = openaiModel({ model: DEMO_MODEL, baseURL: server.url, apiKey: 'demo-key', stream: true, maxOutputTokens: 1024 });
  return { model, server };
}

const DEMO_CONFIG: CliConfig = { model: DEMO_MODEL, interactive: true, budget: DEMO_BUDGET, stream: true, maxOutputTokens: 1024, idleResumeMs: 20_000 };

async function demo(argv: string[], io: Io): Promise<number> {
  const { values } = parse('demo', argv, [...VIEW_FLAGS, 'kill-after'], 0);
  const killAfterTurns = number('kill-after', values['kill-after'], true);
  const db = values.db ?? DEMO_DB;
  // Each demo starts from an empty database, so status and tree show just this run.
  for (const suffix of ['', '-wal', '-shm', '.lock']) {
    try {
      rmSync(`${db}${suffix}`, { force: true });
    } catch (err) {
      throw new TroupeError('STORE_OPEN_FAILED', `Cannot replace ${db}${suffix}: ${errorMessage(err)}`, { cause: err });
    }
  }
  ensureParentDir(db);
  const script = demoScript();
  const mode = viewMode(values.json, io);
  if (mode !== 'json') io.out.write(`${script.description ?? ''}\n\n`);
  const { model, server } = await demoModel(script);
  const inspect = await inspector(values, io);
  const logger = cliLogger(LOG_FILE, values.verbose, io.redactor);
  const store = openStore({ path: db, ...secrets(io) });
  const c = createCoordinator({ model, store, logger, ...coordinatorOptions(DEMO_CONFIG), retry: { baseDelayMs: 200 }, ...(inspect.inspect ? { inspect: inspect.inspect } : {}) });
  try {
    const start = async () => {
      const rootId = await c.start({ name: 'lead', task: 'Review this repository with a small team.' });
      store.appendEvent({ runId: c.runId, agentId: null, type: 'cli.run', data: { ...toSaved(DEMO_CONFIG, true) }, at: Date.now() });
      return rootId;
    };
    return await drive(c, start, { mode, io, store, killAfterTurns, interactive: false });
  } finally {
    await c.shutdown();
    store.close();
    await server.close();
    await inspect.close();
  }
}

async function run(argv: string[], io: Io): Promise<number> {
  const { values, positionals } = parse('run', argv, [...VIEW_FLAGS, 'model', 'base-url', 'api-key', 'budget', 'interactive', 'config', 'stream'], 1);
  const task = positionals[0];
  if (!task || task.trim() === '') throw new ConfigError('Usage: troupe run "<task>" [--model <id>] …  (the task is missing)');
  const budgetUsd = number('budget', values.budget);
  const config = mergeConfig(
    loadConfigFile(values.config),
    fromEnv(io.env),
    defined({
      model: values.model,
      baseURL: values['base-url'],
      apiKey: values['api-key'],
      interactive: values.interactive,
      stream: values.stream,
      db: values.db,
      ...(budgetUsd === undefined ? {} : { budget: { limitUsd: budgetUsd } }),
    }),
  );
  const model = modelFor(config);
  const stored = secrets(io, config);
  const db = config.db ?? DEFAULT_DB;
  ensureParentDir(db);
  const mode = viewMode(values.json, io);
  const inspect = await inspector(values, io);
  const logger = cliLogger(LOG_FILE, values.verbose, io.redactor);
  const store = openStore({ path: db, ...stored });
  const c = createCoordinator({ model, store, logger, ...coordinatorOptions(config), ...(inspect.inspect ? { inspect: inspect.inspect } : {}) });
  try {
    const start = async () => {
      const rootId = await c.start({ name: 'lead', task });
      store.appendEvent({ runId: c.runId, agentId: null, type: 'cli.run', data: { ...toSaved(config, false) }, at: Date.now() });
      return rootId;
    };
    return await drive(c, start, { mode, io, store, interactive: config.interactive ?? false });
  } finally {
    await c.shutdown();
    store.close();
    await inspect.close();
  }
}

/** Calls each agent's model has answered, by agent name (what a resumed demo must not replay). */
function answeredCalls(store: SqliteStore, runId: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const agent of store.listAgents(runId)) {
    out[agent.name] = store.loadSession(agent.id).filter((i) => i.role === 'assistant').length;
  }
  return out;
}

async function resume(argv: string[], io: Io): Promise<number> {
  const { values } = parse('resume', argv, [...VIEW_FLAGS, 'api-key', 'model', 'base-url', 'budget', 'run'], 0);
  const db = defaultReadDb(values.db);
  requireDatabase(db, ': start a run with troupe run or troupe demo first');
  // The key may come from flags or the environment: known before anything is written.
  const store = openStore({ path: db, ...secrets(io, mergeConfig(fromEnv(io.env), defined({ apiKey: values['api-key'] }))) });
  let server: FakeOpenAIServer | undefined;
  let closeInspector = () => Promise.resolve();
  let c: Coordinator | undefined;
  try {
    const run = latestRun(store, values.run);
    if (!run) throw new TroupeError('RUN_NOT_FOUND', `${db} holds no run to resume`);
    const saved = savedConfig(store, run);
    const budgetUsd = number('budget', values.budget);
    const config = mergeConfig(
      saved,
      fromEnv(io.env),
      defined({ model: values.model, baseURL: values['base-url'], apiKey: values['api-key'], ...(budgetUsd === undefined ? {} : { budget: { limitUsd: budgetUsd } }) }),
    );
    secrets(io, config);
    let model: Model;
    if (saved.demo) ({ model, server } = await demoModel(demoScript(), answeredCalls(store, run.id)));
    else model = modelFor(config);
    const mode = viewMode(values.json, io);
    const inspect = await inspector(values, io);
    closeInspector = inspect.close;
    const logger = cliLogger(LOG_FILE, values.verbose, io.redactor);
    c = await resumeCoordinator({ store, model, logger, runId: run.id, ...coordinatorOptions(config), ...(inspect.inspect ? { inspect: inspect.inspect } : {}) });
    const rootId = run.rootId;
    if (rootId === null) throw new TroupeError('RUN_NOT_FOUND', `Run ${run.id} has no root agent`);
    if (mode !== 'json') io.out.write(`Resuming run ${forTerminal(run.id)} from ${forTerminal(db)}\n`);
    return await drive(c, () => Promise.resolve(rootId), { mode, io, store, interactive: config.interactive ?? false });
  } finally {
    await c?.shutdown();
    store.close();
    await server?.close();
    await closeInspector();
  }
}

// ── reading a database ─────────────────────────────────────────────────────────────────────────

function tree(argv: string[], io: Io): number {
  const { values } = parse('tree', argv, ['db', 'json', 'run'], 0);
  const { store, run } = readRun(defaultReadDb(values.db), values.run);
  try {
    const nodes = toTree(new Map(views(store, run.id).map((v) => [v.id, v])));
    io.out.write(values.json ? `${jsonLine({ runId: run.id, tree: nodes })}\n` : `${treeLines(nodes).join('\n')}\n`);
    return EXIT.OK;
  } finally {
    store.close();
  }
}

function status(argv: string[], io: Io): number {
  const { values } = parse('status', argv, ['db', 'json', 'run'], 0);
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
    const report = root ? store.getAgent(root.id)?.report ?? null : null;
    if (values.json) {
      io.out.write(`${jsonLine({ runId: run.id, db, createdAt: run.createdAt, interactive: run.interactive, root: root ? { id: root.id, name: root.name, status: root.status } : null, agents: counts, pendingMessages: pending, budget, report })}\n`);
    } else {
      const lines = [
        `run      ${forTerminal(run.id)}  (${forTerminal(db)})`,
        `root     ${root ? `${forTerminal(root.name)} (${forTerminal(root.id)}) ${root.status}` : '(none)'}`,
        `agents   ${Object.entries(counts).map(([s, n]) => `${n} ${s}`).join(', ') || 'none'}`,
        `mail     ${pending} undelivered`,
        `budget   ${budgetBar(budget)}`,
      ];
      if (report) lines.push(`report   ${forTerminal(report.summary, true)}`);
      io.out.write(`${lines.join('\n')}\n`);
    }
    return EXIT.OK;
  } finally {
    store.close();
  }
}

export async function runCli(argv: string[], io: Io): Promise<number> {
  const [command, ...rest] = argv;
  // PostgreSQL (scale-out): its own commands, in pg.ts.
  if (command === 'worker' || (command !== undefined && PG_COMMANDS.has(command) && postgresDb(rest))) {
    return (await import('./pg.js')).pgCommand(command, rest, io);
  }
  switch (command) {
    case 'demo':
      return demo(rest, io);
    case 'run':
      return run(rest, io);
    case 'resume':
      return resume(rest, io);
    case 'status':
      return status(rest, io);
    case 'tree':
      return tree(rest, io);
    case 'send':
      return send(rest, io);
    case 'stop':
      return stop(rest, io);
    case 'serve':
      return (await import('./serve.js')).serve(rest, io);
    case undefined:
    case '--help':
    case '-h':
    case 'help':
      io.out.write(`${USAGE}\n`);
      return command === undefined ? EXIT.USAGE : EXIT.OK;
    default:
      throw new ConfigError(`Unknown command "${command}"\n\n${USAGE}`);
  }
}
