/**
 * `troupe serve`: the long-running mode. It opens the database, builds the model as `troupe run`
 * does, optionally hosts an interactive main run (a new one with root `lead` for a task, or the
 * latest main run with `--resume`), routes the fires of the config file's `proactive` triggers
 * into runs ({@link ProactiveRouter}), and runs a {@link Watchdog} over the store, the model
 * endpoint and the coordinators' queues. It prints a `ready` line once everything is started, a
 * line per trigger fired, dropped, denied or failed and per health change, and on SIGINT/SIGTERM
 * stops everything, leaves every run resumable, and exits 0. With `--otel` (config `otel`) every
 * run it hosts exports its spans and metrics, flushed when it stops (as `troupe run` does).
 * @module
 */
import { uiServing } from './ui.js';
import type { Logger } from 'pino';
import { ApprovalGate } from '../autonomy/approvalGate.js';
import { EventBus } from '../autonomy/eventBus.js';
import { ProactiveManager } from '../autonomy/proactive.js';
import type { ProactiveFire } from '../autonomy/proactivePipeline.js';
import type { ProactiveTrigger } from '../autonomy/proactiveTrigger.js';
import { ProactiveRouter } from '../autonomy/proactiveRouter.js';
import { Watchdog } from '../autonomy/watchdog.js';
import { createCoordinator, type Coordinator } from '../host/createCoordinator.js';
import type { CoordinatorOptions } from '../host/options.js';
import { resumeCoordinator } from '../host/resumeCoordinator.js';
import { ConfigError, TroupeError } from '../errors.js';
import type { Model } from '../model/types.js';
import { ensureParentDir } from '../store/files.js';
import { openStore, type SqliteStore } from '../store/sqliteStore.js';
import type { Io } from './args.js';
import { DEFAULT_DB, defined, fromEnv, loadConfigFile, mergeConfig, proactiveTriggers, requirePrice, toSaved, watchdogSection, type CliConfig } from './config.js';
import { EXIT } from './exitCodes.js';
import { cliLogger } from './logs.js';
import { cliTelemetry, type CliTelemetry } from './otel.js';
import { serveInbox } from './mail.js';
import { latestMainRun, savedConfig } from './runs.js';
import { DEFAULT_WATCHDOG_INTERVAL_MS, modelCheck, queueCheck, storeCheck } from './serveChecks.js';
import { busLines, describeRoute, dropFilter, printerFor, runEventLine, seconds, warnAgentTargets } from './serveLines.js';
import { stopRequested, Terminal, type MainRun, type ServeOptions } from './serveTerminal.js';
import { coordinatorOptions, fromFlags, inspector, LOG_FILE, modelFor, secrets } from './setup.js';
import type { Values } from './spec.js';

export { dropFilter };
export type { ServeOptions };

export { DEFAULT_WATCHDOG_INTERVAL_MS } from './serveChecks.js';

/**
 * The main run: a new interactive run with root `lead`, or the latest main run resumed. `attach`
 * sees the coordinator before its root starts, so the view misses nothing.
 */
async function startMain(
  store: SqliteStore,
  model: Model,
  config: CliConfig,
  logger: Logger,
  start: { task: string } | { resume: string },
  attach: (c: Coordinator) => void,
  extra: Pick<CoordinatorOptions, 'inspect' | 'telemetry'>,
): Promise<MainRun> {
  const options = { ...coordinatorOptions(config), ...extra, interactive: true };
  if ('task' in start) {
    const coordinator = createCoordinator({ model, store, logger, ...options });
    attach(coordinator);
    try {
      const rootId = await coordinator.start({ name: 'lead', task: start.task });
      store.appendEvent({ runId: coordinator.runId, agentId: null, type: 'cli.run', data: { ...toSaved({ ...config, interactive: true }, false) }, at: Date.now() });
      return { coordinator, rootId };
    } catch (err) {
      await coordinator.shutdown();
      throw err;
    }
  }
  const run = store.getRun(start.resume);
  if (!run?.rootId) throw new TroupeError('RUN_NOT_FOUND', `Run ${start.resume} has no root agent`);
  const coordinator = await resumeCoordinator({ store, model, logger, runId: run.id, ...options });
  attach(coordinator);
  return { coordinator, rootId: run.rootId };
}

/** The `troupe serve` command (flags parsed). */
export const serveCommand = (args: string[], values: Values, io: Io): Promise<number> => serve(args, values, io);

export async function serve(args: string[], values: Values, io: Io, options: ServeOptions = {}): Promise<number> {
  const task = args[0];
  if (task !== undefined && task.trim() === '') throw new ConfigError('Usage: troupe serve ["<task>" | --resume] …  (the task is empty)');
  if (task !== undefined && values.resume) throw new ConfigError('troupe serve takes a task or --resume, not both');
  const file = loadConfigFile(values.config);
  const flags = fromFlags(values, values.model ?? file.model);
  const triggers: ProactiveTrigger[] = proactiveTriggers(file.proactive, values.config);
  const watchdogConfig = watchdogSection(file.watchdog, values.config);
  let config = mergeConfig(file, fromEnv(io.env), flags);
  // Without --resume the model is known before anything is opened: no model, no database file.
  let model: Model | undefined = values.resume ? undefined : modelFor(config);
  if (!values.resume) requirePrice(config);
  const stored = secrets(io, config);
  const db = config.db ?? DEFAULT_DB;
  ensureParentDir(db);

  const json = values.json ?? false;
  const printer = printerFor(io.out, json);
  const logger = cliLogger(LOG_FILE, values.verbose ?? false, io.redactor);
  const stop = stopRequested(options, io);
  const detach: (() => void)[] = [];
  const bus = new EventBus({ onListenerError: (err, event) => logger.warn({ err, event: event.type }, 'a serve event listener threw') });
  const abortChecks = new AbortController();
  let store: SqliteStore | undefined;
  let main: MainRun | undefined;
  let terminal: Terminal | undefined;
  let router: ProactiveRouter | undefined;
  let manager: ProactiveManager | undefined;
  let watchdog: Watchdog | undefined;
  let ready = false;
  let closeInspector = () => Promise.resolve();
  let closeDashboard = () => Promise.resolve();
  let otel: CliTelemetry | undefined;
  try {
    // One inspector for every run this process hosts (XState session ids are unique per process).
    const inspection = await inspector(values, io);
    closeInspector = inspection.close;
    store = openStore({ path: db, ...stored });
    const theStore = store;
    const attachMain = (c: Coordinator) => detach.push(runEventLine('main', c, printer));
    const resumed = values.resume ? latestMainRun(store) : undefined;
    if (values.resume) {
      if (!resumed) throw new TroupeError('RUN_NOT_FOUND', `${db} holds no run to resume (proactive runs are resumed by serve itself)`);
      config = mergeConfig(savedConfig(store, resumed), file, fromEnv(io.env), flags);
      secrets(io, config);
      model = modelFor(config);
      requirePrice(config);
    }
    // Once the config is final (a resumed run's saved `otel` counts): one exporter pair for every
    // run this process hosts, the main run's and the proactive ones, flushed after they stop.
    otel = await cliTelemetry(config.otel, io.env);
    const extra = { ...(inspection.inspect ? { inspect: inspection.inspect } : {}), ...otel.options };
    if (resumed) {
      main = await startMain(store, model!, config, logger, { resume: resumed.id }, attachMain, extra);
    } else if (task !== undefined) {
      main = await startMain(store, model!, config, logger, { task }, attachMain, extra);
    }
    if (main) detach.push(serveInbox(main.coordinator, store));

    if (process.stdin.isTTY) {
      terminal = new Terminal(io);
      const theMain = main;
      terminal.toMain = theMain ? (content) => theMain.coordinator.send(theMain.rootId, { content }) : undefined;
    }
    const gate = new ApprovalGate({ bus, ...(terminal ? { approver: terminal.approver } : {}) });

    const { interactive: _interactive, ...runOptions } = coordinatorOptions(config);
    void _interactive;
    router = new ProactiveRouter({
      store,
      model: model!,
      ...(main ? { main: main.coordinator } : {}),
      logger,
      coordinatorOptions: { ...runOptions, ...extra },
      onHost: (c) => detach.push(runEventLine(c.runId, c, printer), serveInbox(c, theStore)),
    });
    const theRouter = router;
    // Proactive runs that were mid-work when the last serve stopped carry on now, not at their next fire.
    for (const runId of await theRouter.resumeUnfinished()) {
      printer.line(`proactive  resumed run ${runId} (it was mid-work when serve last stopped)`, { type: 'proactive.resumed', at: Date.now(), runId });
    }
    const onFire = async (fire: ProactiveFire) => {
      const routed = await theRouter.route(fire);
      printer.line(`proactive  ${fire.trigger} → ${describeRoute(routed)}`, { type: 'proactive.routed', at: Date.now(), trigger: fire.trigger, ...routed });
    };

    detach.push(busLines(bus, printer, json));
    manager = new ProactiveManager({ triggers, onFire, gate, bus, logger });
    warnAgentTargets(triggers, main !== undefined, printer);
    manager.start();

    const hosted = () => [...(main ? [main.coordinator] : []), ...theRouter.coordinators()];
    watchdog = new Watchdog({ intervalMs: watchdogConfig.intervalMs ?? DEFAULT_WATCHDOG_INTERVAL_MS, ...defined({ failureThreshold: watchdogConfig.failureThreshold }), bus, logger });
    watchdog.register('store', storeCheck(store));
    watchdog.register('model', modelCheck({ baseURL: config.baseURL, apiKey: config.apiKey, signal: abortChecks.signal }));
    watchdog.register('queue', queueCheck(hosted));
    watchdog.start();
    closeDashboard = await uiServing(values, io, store, db, main?.coordinator, (runId) => theRouter.get(runId));

    const intervalMs = watchdogConfig.intervalMs ?? DEFAULT_WATCHDOG_INTERVAL_MS;
    printer.line(
      `ready      serving ${db}: ${main ? `main run ${main.coordinator.runId} (root ${main.rootId})` : 'no main run'}; ` +
        `${triggers.length} proactive trigger(s)${triggers.length > 0 ? ` (${triggers.map((t) => t.name).join(', ')})` : ''}; ` +
        `health checks every ${seconds(intervalMs)} (store, model, queue). Ctrl-C stops.`,
      { type: 'serve.ready', at: Date.now(), db, mainRunId: main?.coordinator.runId ?? null, triggers: triggers.map((t) => t.name), watchdogIntervalMs: intervalMs },
    );
    ready = true;
    // A first round now, so a dead endpoint shows up at once rather than after one interval.
    void watchdog.checkNow();

    const signal = await stop.promise;
    printer.line(`stopping   (${signal})`, { type: 'serve.stopping', at: Date.now(), signal });
    return EXIT.OK;
  } finally {
    stop.dispose();
    // Sources first (no new fires, no new checks), then the runs, then the store.
    watchdog?.stop();
    abortChecks.abort();
    await manager?.stop();
    terminal?.close();
    await router?.close();
    for (const d of detach.splice(0).reverse()) d();
    await closeDashboard();
    await main?.coordinator.shutdown();
    // Every run has ended its spans: export what is buffered before the process exits.
    await otel?.shutdown();
    store?.close();
    await closeInspector();
    if (ready) printer.line('stopped    every run is saved and resumable', { type: 'serve.stopped', at: Date.now() });
  }
}
