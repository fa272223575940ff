/**
 * `troupe demo`, `run` and `resume`: the commands that host a run in this process until its root
 * ends (drive.ts), each returning an exit code.
 * @module
 */
import { uiBeside, type UiBeside } from './ui.js';
import { rmSync } from 'node:fs';
import type { BudgetOptions } from '../host/options.js';
import { hostRun, type HostedRun } from './hostRun.js';
import { openHostingDb, type HostingDb } from './hostingDb.js';
import { answeredCalls } from './hostSettings.js';
import { ConfigError, errorMessage, TroupeError } from '../errors.js';
import type { Model } from '../model/types.js';
import { ensureParentDir } from '../store/files.js';
import type { FakeOpenAIServer } from '../testing/fakeOpenAIServer.js';
import { isPostgresUrl, number, type Io } from './args.js';
import { cliTelemetry, type CliTelemetry } from './otel.js';
import { DEFAULT_DB, defined, fromEnv, loadConfigFile, mergeConfig, requirePrice, toSaved, type CliConfig } from './config.js';
import { drive, runExitCode } from './drive.js';
import { cliLogger } from './logs.js';
import { DEMO_MODEL, DEMO_PRICE, demoModel, demoScript } from './demoModel.js';
import { DEMO_DB, defaultReadDb, findRun, requireDatabase, savedSettings } from './runs.js';
import { coordinatorOptions, fromFlags, inspector, LOG_FILE, modelFor, secrets } from './setup.js';
import type { Values } from './flags.js';
import { forTerminal } from './terminal.js';
import type { ViewMode } from './view.js';

const DEMO_BUDGET: BudgetOptions = { limitUsd: 0.5, prices: { [DEMO_MODEL]: DEMO_PRICE } };
export const DEMO_CONFIG: CliConfig = { model: DEMO_MODEL, interactive: true, budget: DEMO_BUDGET, stream: true, maxOutputTokens: 1024, idleResumeMs: 20_000 };

export function viewMode(json: boolean | undefined, io: Io): ViewMode {
  return json ? 'json' : io.tty ? 'tty' : 'lines';
}

/** The flags that address this database and run (none for the defaults). */
const address = (db: string, defaultDb: string, runId?: string) => `${db === defaultDb ? '' : ` --db ${db}`}${runId === undefined ? '' : ` --run ${runId}`}`;

/**
 * The offline demo, hosted in this process on either store: on a file it starts from an empty
 * database (so status and tree show just this run); on PostgreSQL it is one more run of the
 * schema, saved as a demo run so that any worker can take it over.
 */
export async function demo(_args: string[], values: Values, io: Io): Promise<number> {
  const killAfterTurns = number('kill-after', values.killAfter, true);
  const db = values.db ?? DEMO_DB;
  if (isPostgresUrl(db)) {
    if (values.ui !== undefined) throw new ConfigError('troupe demo does not take --ui with a PostgreSQL --db (troupe ui --db … shows any run of it)');
  } else {
    for (const suffix of ['', '-wal', '-shm', '.lock']) {
      try {
        rmSync(`${db}${suffix}`, { force: true });
      } catch (err) {
        throw new TroupeError('STORE_OPEN_FAILED', `Cannot replace ${db}${suffix}: ${errorMessage(err)}`, { cause: err });
      }
    }
    ensureParentDir(db);
  }
  const script = demoScript();
  const mode = viewMode(values.json, io);
  if (mode !== 'json') io.out.write(`${script.description ?? ''}\n\n`);
  const { model, server } = await demoModel(script);
  const inspection = await inspector(values, io);
  const logger = cliLogger(LOG_FILE, values.verbose ?? false, io.redactor);
  let opened: HostingDb | undefined;
  const config = { ...DEMO_CONFIG, ...defined({ otel: values.otel }) };
  const otel = await cliTelemetry(config.otel, io.env, (line) => io.err.write(line));
  let dashboard: UiBeside | undefined;
  let hosted: HostedRun | undefined;
  const options = {
    model,
    logger,
    ...coordinatorOptions(config),
    ...otel.options,
    retry: { baseDelayMs: 200 },
    ...(inspection.inspect ? { inspect: inspection.inspect } : {}),
  };
  try {
    const target = (opened = await openHostingDb(db, values, io));
    const code = await drive(
      async (onHosted) => {
        hosted = await hostRun(
          target.hosting,
          options,
          { boot: { root: { name: 'lead', task: 'Review this repository with a small team.' }, event: cliRun(config, true) } },
          onHosted,
        );
        if (target.file) dashboard = await uiBeside(values, io, hosted.c, target.file.store, db);
        return hosted;
      },
      { mode, io, killAfterTurns, interactive: false, inspection, address: address(db, DEMO_DB) },
    );
    await dashboard?.linger();
    return code;
  } finally {
    await hosted?.stop();
    await otel.shutdown();
    await opened?.close();
    await server.close();
    await inspection.close();
    await dashboard?.close();
  }
}

/** The `cli.run` event a run starts with: the settings resume reads (no key). */
const cliRun = (config: CliConfig, demo: boolean) => ({ type: 'cli.run', data: { ...toSaved(config, demo) } });

/** A flag only PostgreSQL honours (there are workers to hand a run to): refused on a file, exit 2. */
function detachable(db: string, command: string): void {
  if (!isPostgresUrl(db))
    throw new ConfigError(`troupe ${command} --detach needs a PostgreSQL --db: on a file no worker would host the run (leave it out to host it here)`);
}

/** The dashboard beside a run reads its file: refused with a PostgreSQL --db (troupe ui --db … shows any run there). */
function uiOnFile(db: string, values: Values, command: string): void {
  if (isPostgresUrl(db) && values.ui !== undefined)
    throw new ConfigError(`troupe ${command} does not take --ui with a PostgreSQL --db (troupe ui --db … shows any run of it)`);
}

/**
 * `troupe run`: start a team and host it here until its root ends, on a file or on PostgreSQL (the
 * same hosting loop as a worker: if this process dies, a worker takes the run over). With
 * `--detach` (PostgreSQL) the run is submitted for the workers instead.
 */
export async function run(args: string[], values: Values, io: Io): Promise<number> {
  const task = args[0];
  if (!task || task.trim() === '') throw new ConfigError('Usage: troupe run "<task>" [--model <id>] …  (the task is missing)');
  if (values.detach) {
    detachable(values.db ?? DEFAULT_DB, 'run');
    return (await import('./pg.js')).submitDetached(args, values, io);
  }
  const file = loadConfigFile(values.config);
  const config = mergeConfig(file, fromEnv(io.env), fromFlags(values, values.model ?? file.model));
  const db = config.db ?? DEFAULT_DB;
  uiOnFile(db, values, 'run');
  const model = modelFor(config);
  requirePrice(config);
  secrets(io, config);
  if (!isPostgresUrl(db)) ensureParentDir(db);
  const mode = viewMode(values.json, io);
  const inspection = await inspector(values, io);
  const logger = cliLogger(LOG_FILE, values.verbose ?? false, io.redactor);
  let opened: HostingDb | undefined;
  let otel: CliTelemetry | undefined;
  let dashboard: UiBeside | undefined;
  let hosted: HostedRun | undefined;
  try {
    const target = (opened = await openHostingDb(db, values, io));
    otel = await cliTelemetry(config.otel, io.env, (line) => io.err.write(line));
    const options = { model, logger, ...coordinatorOptions(config), ...otel.options, ...(inspection.inspect ? { inspect: inspection.inspect } : {}) };
    // The database's URL is not a setting of the run (a worker that takes it over has its own).
    const event = cliRun(isPostgresUrl(db) ? { ...config, db: undefined } : config, false);
    const code = await drive(
      async (onHosted) => {
        hosted = await hostRun(target.hosting, options, { boot: { root: { name: 'lead', task }, event } }, onHosted);
        if (target.file) dashboard = await uiBeside(values, io, hosted.c, target.file.store, db);
        return hosted;
      },
      { mode, io, interactive: config.interactive ?? false, inspection, address: address(db, DEFAULT_DB) },
    );
    await dashboard?.linger();
    return code;
  } finally {
    await hosted?.stop();
    await otel?.shutdown();
    await opened?.close();
    await inspection.close();
    await dashboard?.close();
  }
}

/**
 * `troupe resume`: host a run here again with its saved settings (flags given override them), on a
 * file or on PostgreSQL (RUN_LOCKED while a worker hosts it). With `--detach` (PostgreSQL) the run
 * is handed back to the workers instead, flags given saved with it.
 */
export async function resume(args: string[], values: Values, io: Io): Promise<number> {
  if (values.detach) {
    detachable(values.db ?? DEFAULT_DB, 'resume');
    return (await import('./pg.js')).handBack(args, values, io);
  }
  const db = defaultReadDb(values.db);
  uiOnFile(db, values, 'resume');
  if (!isPostgresUrl(db)) requireDatabase(db, ': start a run with troupe run or troupe demo first');
  // The key may come from flags or the environment: known before anything is written.
  secrets(io, mergeConfig(fromEnv(io.env), fromFlags({ ...values, price: undefined }, undefined)));
  let opened: HostingDb | undefined;
  let server: FakeOpenAIServer | undefined;
  let otel: CliTelemetry | undefined;
  let dashboard: UiBeside | undefined;
  let closeInspector = () => Promise.resolve();
  let hosted: HostedRun | undefined;
  try {
    const target = (opened = await openHostingDb(db, values, io));
    const run = await findRun({ reads: target.reads, label: db }, values.run);
    const saved = await savedSettings({ reads: target.reads }, run.id);
    const config = mergeConfig(
      saved,
      // MCP servers are not saved with a run (secrets): read from the config file again.
      defined({ mcpServers: loadConfigFile(values.config).mcpServers }),
      fromEnv(io.env),
      fromFlags(values, values.model ?? saved.model),
    );
    secrets(io, config);
    let model: Model;
    if (saved.demo) ({ model, server } = await demoModel(demoScript(), await answeredCalls(target.reads, run.id)));
    else {
      model = modelFor(config);
      requirePrice(config);
    }
    const rootId = run.rootId;
    if (rootId === null) throw new TroupeError('RUN_NOT_FOUND', `Run ${run.id} has no root agent`);
    const mode = viewMode(values.json, io);
    const addressed = address(db, saved.demo ? DEMO_DB : DEFAULT_DB, values.run);
    const hint = `troupe resume${addressed}`;
    const root = (await target.reads.listAgents(run.id)).find((a) => a.id === rootId);
    const rootMail = (await target.reads.pendingMessagesOf(run.id)).filter((m) => m.to === rootId).length;
    if (root && (root.status === 'failed' || root.status === 'crashed') && rootMail === 0) {
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
    otel = await cliTelemetry(config.otel, io.env, (line) => io.err.write(line));
    if (mode !== 'json') io.out.write(`Resuming run ${forTerminal(run.id)} from ${forTerminal(db)}\n`);
    const options = { model, logger, ...coordinatorOptions(config), ...otel.options, ...(inspection.inspect ? { inspect: inspection.inspect } : {}) };
    const code = await drive(
      async (onHosted) => {
        hosted = await hostRun(target.hosting, options, { runId: run.id, rootId }, onHosted);
        if (target.file) dashboard = await uiBeside(values, io, hosted.c, target.file.store, db);
        return hosted;
      },
      { mode, io, interactive: config.interactive ?? false, inspection, address: addressed, resumed: true },
    );
    await dashboard?.linger();
    return code;
  } finally {
    await hosted?.stop();
    await otel?.shutdown();
    await opened?.close();
    await server?.close();
    await closeInspector();
    await dashboard?.close();
  }
}
