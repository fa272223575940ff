/**
 * The `troupe` commands: demo, run, resume, status, tree, send, stop. Each returns an exit code;
 * output goes through the given streams so tests can run them in-process too.
 * @module
 */
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { isProactiveRunId } from '../autonomy/proactiveRouter.js';
import { createCoordinator, type Coordinator } from '../coordinator/createCoordinator.js';
import type { BudgetOptions, CoordinatorOptions } from '../coordinator/options.js';
import { toTree, type AgentView } from '../coordinator/registry.js';
import { resumeCoordinator } from '../coordinator/resumeCoordinator.js';
import { ConfigError, isTroupeError, toError, TroupeError } from '../errors.js';
import { openaiModel } from '../model/openaiModel.js';
import type { Script } from '../model/scriptedModel.js';
import type { Model, ModelPrice } from '../model/types.js';
import { postToInbox, readInbox, type InboxKind, type InboxResult } from '../store/inbox.js';
import { openStore, type SqliteStore } from '../store/sqliteStore.js';
import type { RunRow } from '../store/types.js';
import { createFakeOpenAIServer, type FakeOpenAIServer } from '../testing/fakeOpenAIServer.js';
import { repliesFromScript, routeByAgent } from '../testing/wireScript.js';
import {
  DEFAULT_DB,
  defined,
  fromEnv,
  loadConfigFile,
  mergeConfig,
  MODEL_HINT,
  toSaved,
  type CliConfig,
  type SavedRunConfig,
} from './config.js';
import { EXIT } from './exitCodes.js';
import { cliLogger } from './logs.js';
import { attachView, budgetBar, treeLines, type Output, type ViewMode } from './view.js';

export interface Io {
  out: Output;
  err: Output;
  env: NodeJS.ProcessEnv;
  /** Whether stdout is a terminal (the live tree redraws in place). */
  tty: boolean;
}

const TERMINAL = ['completed', 'stopped', 'failed', 'crashed'] as const;
const DEMO_DB = '.troupe/demo.db';
export const LOG_FILE = '.troupe/troupe.log';
const DEMO_MODEL = 'troupe-demo';
const DEMO_PRICE: ModelPrice = { inputPer1M: 2, cachedInputPer1M: 0.5, outputPer1M: 8 };
const DEMO_BUDGET: BudgetOptions = { limitUsd: 0.5, prices: { [DEMO_MODEL]: DEMO_PRICE } };

export const USAGE = `troupe — a durable coordinator for teams of LLM agents

Usage:
  troupe demo [--json] [--kill-after <turns>] [--inspect[=port]] [-v]
                                         the offline demo team (SQLite, the real openai client, a local fake server)
  troupe run "<task>" [--model <id>] [--base-url <url>] [--api-key <key>] [--budget <usd>]
                      [--interactive] [--db <file>] [--config <file>] [--json] [--inspect[=port]] [-v]
  troupe resume [--db <file>] [--api-key <key>] [--json] [--inspect[=port]] [-v]
  troupe status [--db <file>] [--json]   the run's state, read from the database
  troupe tree   [--db <file>] [--json]   the agent tree, read from the database
  troupe send <agent> "<text>" [--db <file>]   message an agent (a live run gets it at once; otherwise on resume)
  troupe stop <agent> [--db <file>]            stop an agent and its descendants (live or not)
  troupe serve ["<task>" | --resume] [--model <id>] [--base-url <url>] [--api-key <key>] [--budget <usd>]
               [--db <file>] [--config <file>] [--stream] [--json] [--inspect[=port]] [-v]
                                         long-running: proactive triggers (config "proactive") start or
                                         message runs, a watchdog checks the store, model and queues;
                                         with a task (or --resume) it also hosts an interactive main run

  resume, status, tree, send and stop take --run <id> (default: the latest run no trigger started).

Environment: OPENAI_API_KEY, OPENAI_BASE_URL. Config file: ./troupe.config.json or --config.
Logs: .troupe/troupe.log (-v also prints them).`;

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

/** `--inspect=9000` → `--inspect --inspect-port 9000` (parseArgs has no optional values). */
function splitInspect(argv: string[]): string[] {
  return argv.flatMap((a) => (a.startsWith('--inspect=') ? ['--inspect', '--inspect-port', a.slice('--inspect='.length)] : [a]));
}

const FLAGS = {
  db: { type: 'string' },
  json: { type: 'boolean', default: false },
  verbose: { type: 'boolean', short: 'v', default: false },
  inspect: { type: 'boolean', default: false },
  'inspect-port': { type: 'string' },
  'kill-after': { type: 'string' },
  model: { type: 'string' },
  'base-url': { type: 'string' },
  'api-key': { type: 'string' },
  budget: { type: 'string' },
  interactive: { type: 'boolean' },
  config: { type: 'string' },
  stream: { type: 'boolean' },
  resume: { type: 'boolean' },
  run: { type: 'string' },
} as const;

export type Flag = keyof typeof FLAGS;

/** Parse one command's arguments; a flag the command does not take is a usage error. */
export function parse(command: string, argv: string[], allowed: readonly Flag[], positionals: number) {
  let parsed;
  try {
    parsed = parseArgs({ args: splitInspect(argv), options: FLAGS, allowPositionals: positionals > 0, strict: true });
  } catch (err) {
    throw new ConfigError(`${(err as Error).message}\n\n${USAGE}`);
  }
  const given = argv.filter((a) => a.startsWith('-')).map((a) => a.replace(/^--?/, '').split('=')[0]!);
  for (const flag of given) {
    const name = flag === 'v' ? 'verbose' : flag;
    if (!(allowed as readonly string[]).includes(name)) throw new ConfigError(`troupe ${command} does not take --${flag}\n\n${USAGE}`);
  }
  if (parsed.positionals.length > positionals) throw new ConfigError(`Unexpected argument "${parsed.positionals[positionals]}"`);
  return parsed;
}

const VIEW_FLAGS: Flag[] = ['db', 'json', 'verbose', 'inspect', 'inspect-port'];

export function number(name: string, value: string | undefined, integer = false): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || n <= 0 || (integer && !Number.isInteger(n))) {
    throw new ConfigError(`Expected --${name} to be ${integer ? 'a whole number' : 'a number'} > 0, got "${value}"`);
  }
  return n;
}

// ── running a team ─────────────────────────────────────────────────────────────────────────────

export async function inspector(flags: { inspect?: boolean; 'inspect-port'?: string }, io: Io): Promise<{ inspect?: CoordinatorOptions['inspect']; close: () => Promise<void> }> {
  if (!flags.inspect) return { close: () => Promise.resolve() };
  const port = flags['inspect-port'] === undefined ? 8080 : number('inspect', flags['inspect-port'], true);
  const { startInspector } = await import('./inspector.js');
  const handle = await startInspector({ port: port ?? 8080 });
  io.err.write(`${handle.hint}\n`);
  return { inspect: handle.inspect, close: () => handle.close() };
}

/** Drive a started (or resumed) run to the end of its root, with the live view; returns the exit code. */
async function drive(
  c: Coordinator,
  rootId: string,
  options: { mode: ViewMode; io: Io; store: SqliteStore; killAfterTurns?: number | undefined; interactive: boolean },
): Promise<number> {
  const { mode, io } = options;
  const detach = attachView(c, mode, io.out);
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
    if (line.trim() !== '') c.send(rootId, { content: line }).catch((err: unknown) => io.err.write(`${String(err)}\n`));
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
    io.out.write(`${JSON.stringify({ type: 'run.finished', runId: c.runId, status: root.status, report: root.report, error: root.error, budget: c.budget(), tree: c.tree() })}\n`);
  } else {
    io.out.write(`\nTeam:\n${treeLines(c.tree()).join('\n')}\n${budgetBar(c.budget())}\n`);
    io.out.write(`\nReport (${root.status}):\n${root.report?.summary ?? (root.error ? `${root.error.code}: ${root.error.message}` : '(none)')}\n`);
  }
  return root.status === 'completed' ? EXIT.OK : EXIT.RUN_NOT_COMPLETED;
}

/** Apply what `troupe send` / `troupe stop` in other processes posted to this live run. */
export function serveInbox(c: Coordinator, store: SqliteStore, everyMs = 200): () => void {
  let busy = false;
  const poll = async () => {
    if (busy) return;
    busy = true;
    try {
      for (const request of store.openInbox(c.runId)) {
        let result: InboxResult;
        try {
          const agent = c.get(String(request.payload.agent));
          if (request.kind === 'send') {
            await c.send(agent.id, { content: String(request.payload.content) });
            result = { ok: true, message: `delivered to ${agent.name} (${agent.id})` };
          } else {
            const stopped = await c.stop(agent.id);
            result = { ok: true, message: `stopped ${stopped.map((id) => c.get(id).name).join(', ') || '(already terminal)'}` };
          }
        } catch (err) {
          result = { ok: false, message: isTroupeError(err) ? `${err.code}: ${err.message}` : String(err) };
        }
        store.answerInbox(request.id, result, Date.now());
      }
    } finally {
      busy = false;
    }
  };
  // Not unref'd: while a run is driven (even with every agent parked on a human), the process lives.
  const timer = setInterval(() => void poll().catch(() => undefined), everyMs);
  return () => clearInterval(timer);
}

/** Post a request to the live run that owns `db` and wait (up to `waitMs`) for its answer. */
async function postAndWait(db: string, runId: string, kind: InboxKind, payload: Record<string, unknown>, io: Io, waitMs = 15_000): Promise<number> {
  const id = postToInbox(db, { runId, kind, payload, at: Date.now() });
  const deadline = Date.now() + waitMs;
  while (Date.now() < deadline) {
    const request = readInbox(db, id);
    if (request?.result) {
      (request.result.ok ? io.out : io.err).write(`${request.result.message}\n`);
      return request.result.ok ? EXIT.OK : request.result.message.startsWith('AGENT_NOT_FOUND') ? EXIT.NOT_FOUND : EXIT.INTERNAL;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  io.out.write(`posted to the live run; it has not answered within ${waitMs / 1000} s (it applies requests while it runs)\n`);
  return EXIT.OK;
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
  for (const suffix of ['', '-wal', '-shm', '.lock']) rmSync(`${db}${suffix}`, { force: true });
  mkdirSync(dirname(db), { recursive: true });
  const script = demoScript();
  const mode = viewMode(values.json, io);
  if (mode !== 'json') io.out.write(`${script.description ?? ''}\n\n`);
  const { model, server } = await demoModel(script);
  const inspect = await inspector(values, io);
  const logger = cliLogger(LOG_FILE, values.verbose);
  const store = openStore({ path: db });
  const c = createCoordinator({ model, store, logger, ...coordinatorOptions(DEMO_CONFIG), retry: { baseDelayMs: 200 }, ...(inspect.inspect ? { inspect: inspect.inspect } : {}) });
  try {
    const rootId = await c.start({ name: 'lead', task: 'Review this repository with a small team.' });
    store.appendEvent({ runId: c.runId, agentId: null, type: 'cli.run', data: { ...toSaved(DEMO_CONFIG, true) }, at: Date.now() });
    return await drive(c, rootId, { mode, io, store, killAfterTurns, interactive: false });
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
  const db = config.db ?? DEFAULT_DB;
  mkdirSync(dirname(db), { recursive: true });
  const mode = viewMode(values.json, io);
  const inspect = await inspector(values, io);
  const logger = cliLogger(LOG_FILE, values.verbose);
  const store = openStore({ path: db });
  const c = createCoordinator({ model, store, logger, ...coordinatorOptions(config), ...(inspect.inspect ? { inspect: inspect.inspect } : {}) });
  try {
    const rootId = await c.start({ name: 'lead', task });
    store.appendEvent({ runId: c.runId, agentId: null, type: 'cli.run', data: { ...toSaved(config, false) }, at: Date.now() });
    return await drive(c, rootId, { mode, io, store, interactive: config.interactive ?? false });
  } finally {
    await c.shutdown();
    store.close();
    await inspect.close();
  }
}

/** The latest run no proactive trigger started (`troupe serve` keeps `proactive-<name>` runs in the same database). */
export function latestMainRun(store: Pick<SqliteStore, 'listRuns'>): RunRow | undefined {
  return store.listRuns().filter((r) => !isProactiveRunId(r.id)).at(-1);
}

/**
 * The run resume, status, tree, send and stop act on: `--run <id>` if given (RUN_NOT_FOUND if the
 * database has no such run), else the latest main run, else the latest run.
 */
export function latestRun(store: Pick<SqliteStore, 'listRuns'>, runId?: string): RunRow | undefined {
  if (runId !== undefined) {
    const run = store.listRuns().find((r) => r.id === runId);
    if (!run) throw new TroupeError('RUN_NOT_FOUND', `The database holds no run ${runId}`);
    return run;
  }
  return latestMainRun(store) ?? store.listRuns().at(-1);
}

export function savedConfig(store: SqliteStore, run: RunRow): SavedRunConfig {
  const event = store.listEvents(run.id).find((e) => e.type === 'cli.run');
  return (event?.data ?? {}) as SavedRunConfig;
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
  if (!existsSync(db)) throw new TroupeError('RUN_NOT_FOUND', `No database at ${db}: start a run with troupe run or troupe demo first`);
  const store = openStore({ path: db });
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
    let model: Model;
    if (saved.demo) ({ model, server } = await demoModel(demoScript(), answeredCalls(store, run.id)));
    else model = modelFor(config);
    const mode = viewMode(values.json, io);
    const inspect = await inspector(values, io);
    closeInspector = inspect.close;
    const logger = cliLogger(LOG_FILE, values.verbose);
    c = await resumeCoordinator({ store, model, logger, runId: run.id, ...coordinatorOptions(config), ...(inspect.inspect ? { inspect: inspect.inspect } : {}) });
    const rootId = run.rootId;
    if (rootId === null) throw new TroupeError('RUN_NOT_FOUND', `Run ${run.id} has no root agent`);
    if (mode !== 'json') io.out.write(`Resuming run ${run.id} from ${db}\n`);
    return await drive(c, rootId, { mode, io, store, interactive: config.interactive ?? false });
  } finally {
    await c?.shutdown();
    store.close();
    await server?.close();
    await closeInspector();
  }
}

// ── reading a database ─────────────────────────────────────────────────────────────────────────

function readRun(db: string, runId: string | undefined): { store: SqliteStore; run: RunRow } {
  if (!existsSync(db)) throw new TroupeError('RUN_NOT_FOUND', `No database at ${db}`);
  const store = openStore({ path: db, readonly: true });
  let run: RunRow | undefined;
  try {
    run = latestRun(store, runId);
    if (!run) throw new TroupeError('RUN_NOT_FOUND', `${db} holds no run`);
  } catch (err) {
    store.close();
    throw err;
  }
  return { store, run };
}

function views(store: SqliteStore, runId: string): AgentView[] {
  const spent = new Map<string, number>();
  for (const u of store.listUsage(runId)) spent.set(u.agentId, (spent.get(u.agentId) ?? 0) + u.costUsd);
  return store.listAgents(runId).map((a) => ({
    id: a.id,
    name: a.name,
    parentId: a.parentId,
    depth: a.depth,
    status: a.status,
    waitKind: a.waitKind,
    turns: a.turns,
    lastTool: a.lastTool,
    spentUsd: spent.get(a.id) ?? 0,
  }));
}

const defaultReadDb = (db: string | undefined) => db ?? (existsSync(DEFAULT_DB) || !existsSync(DEMO_DB) ? DEFAULT_DB : DEMO_DB);

function tree(argv: string[], io: Io): number {
  const { values } = parse('tree', argv, ['db', 'json', 'run'], 0);
  const { store, run } = readRun(defaultReadDb(values.db), values.run);
  try {
    const nodes = toTree(new Map(views(store, run.id).map((v) => [v.id, v])));
    io.out.write(values.json ? `${JSON.stringify({ runId: run.id, tree: nodes })}\n` : `${treeLines(nodes).join('\n')}\n`);
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
      io.out.write(`${JSON.stringify({ runId: run.id, db, createdAt: run.createdAt, interactive: run.interactive, root: root ? { id: root.id, name: root.name, status: root.status } : null, agents: counts, pendingMessages: pending, budget, report })}\n`);
    } else {
      const lines = [
        `run      ${run.id}  (${db})`,
        `root     ${root ? `${root.name} (${root.id}) ${root.status}` : '(none)'}`,
        `agents   ${Object.entries(counts).map(([s, n]) => `${n} ${s}`).join(', ') || 'none'}`,
        `mail     ${pending} undelivered`,
        `budget   ${budgetBar(budget)}`,
      ];
      if (report) lines.push(`report   ${report.summary}`);
      io.out.write(`${lines.join('\n')}\n`);
    }
    return EXIT.OK;
  } finally {
    store.close();
  }
}

/**
 * Run `idle` on a run no process is driving (this process owns the database meanwhile), or `live`
 * with the run's id when another process owns it (RUN_LOCKED): that process applies the request.
 */
async function onRun(
  db: string,
  runId: string | undefined,
  idle: (store: SqliteStore, run: RunRow) => Promise<number>,
  live: (runId: string) => Promise<number>,
): Promise<number> {
  if (!existsSync(db)) throw new TroupeError('RUN_NOT_FOUND', `No database at ${db}`);
  let store: SqliteStore;
  try {
    store = openStore({ path: db });
  } catch (err) {
    if (!(isTroupeError(err) && err.code === 'RUN_LOCKED')) throw err;
    const { store: reader, run } = readRun(db, runId);
    reader.close();
    return live(run.id);
  }
  try {
    const run = latestRun(store, runId);
    if (!run) throw new TroupeError('RUN_NOT_FOUND', `${db} holds no run`);
    return await idle(store, run);
  } finally {
    store.close();
  }
}

async function send(argv: string[], io: Io): Promise<number> {
  const { values, positionals } = parse('send', argv, ['db', 'run'], 2);
  const [agent, text] = positionals;
  if (!agent || !text) throw new ConfigError('Usage: troupe send <agent> "<text>"');
  const db = defaultReadDb(values.db);
  return onRun(db, values.run, (store, run) => {
    const target = store.listAgents(run.id).find((a) => a.id === agent || a.name === agent);
    if (!target) throw new TroupeError('AGENT_NOT_FOUND', `No agent "${agent}" in run ${run.id}`);
    const row = store.enqueueMessage({
      id: `msg_cli_${Date.now().toString(36)}`,
      runId: run.id,
      to: target.id,
      from: 'user',
      fromName: 'user',
      type: 'instruction',
      priority: 'normal',
      content: text,
      interrupt: true,
      createdAt: Date.now(),
    });
    io.out.write(`queued for ${target.name} (${target.id}): no process is running this run; it is delivered when the run resumes (troupe resume)\n`);
    return Promise.resolve(row ? EXIT.OK : EXIT.INTERNAL);
  }, (runId) => postAndWait(db, runId, 'send', { agent, content: text }, io));
}

async function stop(argv: string[], io: Io): Promise<number> {
  const { values, positionals } = parse('stop', argv, ['db', 'run'], 1);
  const [agent] = positionals;
  if (!agent) throw new ConfigError('Usage: troupe stop <agent>');
  const db = defaultReadDb(values.db);
  return onRun(db, values.run, async (store, run) => {
    const target = store.listAgents(run.id).find((a) => a.id === agent || a.name === agent);
    if (!target) throw new TroupeError('AGENT_NOT_FOUND', `No agent "${agent}" in run ${run.id}`);
    // Stopping goes through the coordinator (notices, cascade) without running anyone's turn:
    // this model never answers, so resumed agents do no work before the shutdown.
    const idle: Model = {
      name: 'troupe-stop',
      complete: (_request, { signal }) =>
        new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(toError(signal.reason)), { once: true })),
    };
    const c = await resumeCoordinator({ store, model: idle, runId: run.id, interactive: run.interactive });
    try {
      const stopped = await c.stop(target.id);
      io.out.write(`stopped ${stopped.length} agent(s): ${stopped.map((id) => c.get(id).name).join(', ') || '(already terminal)'}\n`);
    } finally {
      await c.shutdown();
    }
    return EXIT.OK;
  }, (runId) => postAndWait(db, runId, 'stop', { agent }, io));
}

export async function runCli(argv: string[], io: Io): Promise<number> {
  const [command, ...rest] = argv;
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
