/**
 * `troupe demo`, `run` and `resume`: the commands that host a run in this process until its root
 * ends (drive.ts), each returning an exit code.
 * @module
 */
import { uiBeside, type UiBeside } from './ui.js';
import { rmSync } from 'node:fs';
import { createCoordinator, type Coordinator } from '../host/createCoordinator.js';
import type { BudgetOptions } from '../host/options.js';
import { resumeCoordinator } from '../host/resumeCoordinator.js';
import { ConfigError, errorMessage, TroupeError } from '../errors.js';
import type { Model } from '../model/types.js';
import { ensureParentDir } from '../store/files.js';
import { openStore, type SqliteStore } from '../store/sqliteStore.js';
import type { FakeOpenAIServer } from '../testing/fakeOpenAIServer.js';
import { number, type Io } from './args.js';
import { cliTelemetry, type CliTelemetry } from './otel.js';
import { DEFAULT_DB, defined, fromEnv, loadConfigFile, mergeConfig, requirePrice, toSaved, type CliConfig } from './config.js';
import { drive, runExitCode } from './drive.js';
import { cliLogger } from './logs.js';
import { DEMO_MODEL, DEMO_PRICE, demoModel, demoScript } from './demoModel.js';
import { DEMO_DB, defaultReadDb, latestRun, requireDatabase, savedConfig } from './runs.js';
import { coordinatorOptions, fromFlags, inspector, LOG_FILE, modelFor, secrets } from './setup.js';
import type { Values } from './spec.js';
import { forTerminal } from './terminal.js';
import type { ViewMode } from './view.js';

const DEMO_BUDGET: BudgetOptions = { limitUsd: 0.5, prices: { [DEMO_MODEL]: DEMO_PRICE } };
export const DEMO_CONFIG: CliConfig = { model: DEMO_MODEL, interactive: true, budget: DEMO_BUDGET, stream: true, maxOutputTokens: 1024, idleResumeMs: 20_000 };

export function viewMode(json: boolean | undefined, io: Io): ViewMode {
  return json ? 'json' : io.tty ? 'tty' : 'lines';
}

/** `troupe resume` with the flags that address this database and run. */
const resumeHint = (db: string, defaultDb: string, runId?: string) =>
  `troupe resume${db === defaultDb ? '' : ` --db ${db}`}${runId === undefined ? '' : ` --run ${runId}`}`;

export async function demo(_args: string[], values: Values, io: Io): Promise<number> {
  const killAfterTurns = number('kill-after', values.killAfter, true);
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
  const inspection = await inspector(values, io);
  const logger = cliLogger(LOG_FILE, values.verbose ?? false, io.redactor);
  const store = openStore({ path: db, ...secrets(io) });
  const config = { ...DEMO_CONFIG, ...defined({ otel: values.otel }) };
  const otel = await cliTelemetry(config.otel, io.env);
  let dashboard: UiBeside | undefined;
  const c = createCoordinator({ model, store, logger, ...coordinatorOptions(config), ...otel.options, retry: { baseDelayMs: 200 }, ...(inspection.inspect ? { inspect: inspection.inspect } : {}) });
  try {
    const start = async () => {
      const rootId = await c.start({ name: 'lead', task: 'Review this repository with a small team.' });
      store.appendEvent({ runId: c.runId, agentId: null, type: 'cli.run', data: { ...toSaved(config, true) }, at: Date.now() });
      return rootId;
    };
    dashboard = await uiBeside(values, io, c, store, db);
    const code = await drive(c, start, { mode, io, store, killAfterTurns, interactive: false, inspection, resumeHint: resumeHint(db, DEMO_DB) });
    await dashboard.linger();
    return code;
  } finally {
    await c.shutdown();
    await otel.shutdown();
    store.close();
    await server.close();
    await inspection.close();
    await dashboard?.close();
  }
}

export async function run(args: string[], values: Values, io: Io): Promise<number> {
  const task = args[0];
  if (!task || task.trim() === '') throw new ConfigError('Usage: troupe run "<task>" [--model <id>] …  (the task is missing)');
  const file = loadConfigFile(values.config);
  const config = mergeConfig(file, fromEnv(io.env), fromFlags(values, values.model ?? file.model));
  const model = modelFor(config);
  requirePrice(config);
  const stored = secrets(io, config);
  const db = config.db ?? DEFAULT_DB;
  ensureParentDir(db);
  const mode = viewMode(values.json, io);
  const inspection = await inspector(values, io);
  const logger = cliLogger(LOG_FILE, values.verbose ?? false, io.redactor);
  const store = openStore({ path: db, ...stored });
  const otel = await cliTelemetry(config.otel, io.env);
  let dashboard: UiBeside | undefined;
  const c = createCoordinator({ model, store, logger, ...coordinatorOptions(config), ...otel.options, ...(inspection.inspect ? { inspect: inspection.inspect } : {}) });
  try {
    const start = async () => {
      const rootId = await c.start({ name: 'lead', task });
      store.appendEvent({ runId: c.runId, agentId: null, type: 'cli.run', data: { ...toSaved(config, false) }, at: Date.now() });
      return rootId;
    };
    dashboard = await uiBeside(values, io, c, store, db);
    const code = await drive(c, start, { mode, io, store, interactive: config.interactive ?? false, inspection, resumeHint: resumeHint(db, DEFAULT_DB) });
    await dashboard.linger();
    return code;
  } finally {
    await c.shutdown();
    await otel.shutdown();
    store.close();
    await inspection.close();
    await dashboard?.close();
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

export async function resume(_args: string[], values: Values, io: Io): Promise<number> {
  const db = defaultReadDb(values.db);
  requireDatabase(db, ': start a run with troupe run or troupe demo first');
  // The key may come from flags or the environment: known before anything is written.
  const store = openStore({ path: db, ...secrets(io, mergeConfig(fromEnv(io.env), fromFlags({ ...values, price: undefined }, undefined))) });
  let server: FakeOpenAIServer | undefined;
  let otel: CliTelemetry | undefined;
  let dashboard: UiBeside | undefined;
  let closeInspector = () => Promise.resolve();
  let c: Coordinator | undefined;
  try {
    const run = latestRun(store, values.run);
    if (!run) throw new TroupeError('RUN_NOT_FOUND', `${db} holds no run to resume`);
    const saved = savedConfig(store, run);
    const config = mergeConfig(
      saved,
      // MCP servers are not saved with a run (secrets): read from the config file again.
      defined({ mcpServers: loadConfigFile(values.config).mcpServers }),
      fromEnv(io.env),
      fromFlags(values, values.model ?? saved.model),
    );
    secrets(io, config);
    let model: Model;
    if (saved.demo) ({ model, server } = await demoModel(demoScript(), answeredCalls(store, run.id)));
    else {
      model = modelFor(config);
      requirePrice(config);
    }
    const rootId = run.rootId;
    if (rootId === null) throw new TroupeError('RUN_NOT_FOUND', `Run ${run.id} has no root agent`);
    const mode = viewMode(values.json, io);
    const hint = resumeHint(db, saved.demo ? DEMO_DB : DEFAULT_DB, values.run);
    const root = store.getAgent(rootId);
    if (root && (root.status === 'failed' || root.status === 'crashed') && store.pendingCount(rootId) === 0) {
      // Nothing will happen: say how to revive it instead of printing the old failure again.
      const why = root.error ? `: ${root.error.code}: ${root.error.message}` : '';
      io.err.write(
        `troupe: the root ${forTerminal(root.name)} of run ${forTerminal(run.id)} ${root.status}${forTerminal(why)}\n` +
          `A message revives it: troupe send ${forTerminal(root.name)} "<what to do now>"${db === DEFAULT_DB ? '' : ` --db ${db}`}, then ${hint}\n`,
      );
      return runExitCode(root);
    }
    const inspection = await inspector(values, io);
    closeInspector = inspection.close;
    const logger = cliLogger(LOG_FILE, values.verbose ?? false, io.redactor);
    otel = await cliTelemetry(config.otel, io.env);
    c = await resumeCoordinator({ store, model, logger, runId: run.id, ...coordinatorOptions(config), ...otel.options, ...(inspection.inspect ? { inspect: inspection.inspect } : {}) });
    if (mode !== 'json') io.out.write(`Resuming run ${forTerminal(run.id)} from ${forTerminal(db)}\n`);
    dashboard = await uiBeside(values, io, c, store, db);
    const code = await drive(c, () => Promise.resolve(rootId), { mode, io, store, interactive: config.interactive ?? false, inspection, resumeHint: hint, resumed: true });
    await dashboard.linger();
    return code;
  } finally {
    await c?.shutdown();
    await otel?.shutdown();
    store.close();
    await server?.close();
    await closeInspector();
    await dashboard?.close();
  }
}
