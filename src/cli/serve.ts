/**
 * `troupe serve`: the long-running mode, one implementation on every store. The process hosts runs
 * through the hosting loop (worker/worker.ts, DESIGN §13) over the database `--db` names: a SQLite
 * file it owns (every run of the file is its to host), or a PostgreSQL schema it shares with
 * `troupe worker`s (it is one more worker). It optionally hosts an interactive main run (a new one
 * with root `lead` for a task, or the latest main run with `--resume`), turns the fires of the config
 * file's `proactive` triggers into rows (autonomy/fires.ts: a run submitted, or a message posted to a
 * run's inbox, which reaches the run whoever hosts it), and runs a {@link Watchdog} over the store,
 * the model endpoint and the hosted runs' queues.
 *
 * - The main run is kept: hosted until serve stops, even while it waits on the user. On PostgreSQL
 *   another worker may hold it (it took the run over while serve was down): serve says so, and
 *   takes the run as soon as that worker lets it go; meanwhile lines typed, fires and `troupe send`
 *   reach it through its inbox. If serve dies, the run's lease runs out and any worker resumes it.
 * - On a file, the proactive runs that were mid-work when serve last stopped are hosted at once
 *   (on PostgreSQL their lease rows say so to every worker).
 * - Lines typed go to the main run's root through its inbox, as `troupe send` does.
 *
 * It prints a `ready` line once everything is started, a line per trigger fired, dropped, denied or
 * failed, per health change and per event of a hosted run, and on SIGINT/SIGTERM stops the
 * triggers, lets every run go as its rows say (resumable; on PostgreSQL by any worker), and exits 0.
 * With `--otel` every run it hosts exports its spans and metrics, flushed when it stops.
 * @module
 */
import { uiServing } from './ui.js';
import { ApprovalGate } from '../autonomy/approvalGate.js';
import { EventBus } from '../autonomy/eventBus.js';
import { ProactiveManager } from '../autonomy/proactive.js';
import type { ProactiveFire } from '../autonomy/proactivePipeline.js';
import { isProactiveRunId } from '../autonomy/proactiveIds.js';
import { Watchdog } from '../autonomy/watchdog.js';
import { ConfigError, TroupeError } from '../errors.js';
import { newId } from '../host/mail/messaging.js';
import { DEFAULT_IDLE_RESUME_MS } from '../../machines/types.js';
import { releaseStateAfter } from '../hosting/release.js';
import { ensureParentDir } from '../store/files.js';
import { portOf } from '../store/port.js';
import type { PortReads } from '../store/postgres/reads.js';
import { databaseFires } from '../autonomy/fires.js';
import { startWorker, type Worker } from '../worker/worker.js';
import type { HostedOptions } from '../worker/runHosting.js';
import { isPostgresUrl, type Io } from './args.js';
import { DEFAULT_DB, defined, fromEnv, loadConfigFile, mergeConfig, proactiveTriggers, requirePrice, toSaved, watchdogSection } from './config.js';
import { EXIT } from './exitCodes.js';
import { openHostingDb, type HostingDb } from './hostingDb.js';
import { flagSettings, hostSettings } from './hostSettings.js';
import { cliLogger } from './logs.js';
import { cliTelemetry, type CliTelemetry } from './otel.js';
import { latestMainRun, savedSettings } from './runs.js';
import { DEFAULT_WATCHDOG_INTERVAL_MS, modelCheck, queueCheck, storeCheck } from './serveChecks.js';
import { busLines, describeRoute, dropFilter, printerFor, runEventLine, seconds, warnAgentTargets, type Printer } from './serveLines.js';
import { stopRequested, Terminal, type ServeOptions } from './serveTerminal.js';
import { coordinatorOptions, fromFlags, inspector, LOG_FILE, modelFor, secrets } from './setup.js';
import type { Values } from './flags.js';
import { forTerminal } from './terminal.js';

export { dropFilter };
export type { ServeOptions };

export { DEFAULT_WATCHDOG_INTERVAL_MS } from './serveChecks.js';

/** How often the loop looks for requests other processes posted to a file (SQLite has no push; PostgreSQL's LISTEN wakes it sooner). */
const FILE_POLL_MS = 200;

interface Main {
  runId: string;
  rootId: string;
}

/** The latest main run (`--resume`). */
async function latestMain(reads: PortReads, label: string): Promise<Main> {
  const runs = await reads.listRuns();
  const latest = latestMainRun({ listRuns: () => runs });
  if (!latest?.rootId) throw new TroupeError('RUN_NOT_FOUND', `${label} holds no main run to resume (serve hosts proactive runs itself)`);
  return { runId: latest.id, rootId: latest.rootId };
}

/**
 * On a file nothing else remembers which runs want a host: the proactive runs that were mid-work
 * when serve last stopped (an agent running, mail for a parked one, or a deadline) are wanted now.
 */
async function wantUnfinished(db: HostingDb, idleResumeMs: number, printer: Printer): Promise<void> {
  if (!db.file) return;
  const port = portOf(db.file.store);
  for (const run of await port.listRuns()) {
    if (!isProactiveRunId(run.id)) continue;
    const state = await releaseStateAfter(port, run.id, idleResumeMs);
    if (state.state === 'done' || (state.state === 'parked' && state.wakeAt === null)) continue;
    db.file.hosting.want(run.id, state.state === 'runnable' ? 0 : state.wakeAt!);
    printer.line(`proactive  resumed run ${run.id} (it was mid-work when serve last stopped)`, { type: 'proactive.resumed', at: Date.now(), runId: run.id });
  }
}

/** The `troupe serve` command (flags parsed). */
export const serveCommand = (args: string[], values: Values, io: Io): Promise<number> => serve(args, values, io);

export async function serve(args: string[], values: Values, io: Io, options: ServeOptions = {}): Promise<number> {
  const task = args[0];
  if (task !== undefined && task.trim() === '') throw new ConfigError('Usage: troupe serve ["<task>" | --resume] …  (the task is empty)');
  if (task !== undefined && values.resume) throw new ConfigError('troupe serve takes a task or --resume, not both');
  const file = loadConfigFile(values.config);
  const triggers = proactiveTriggers(file.proactive, values.config);
  const watchdogConfig = watchdogSection(file.watchdog, values.config);
  const flags = fromFlags(values, values.model ?? file.model);
  let config = mergeConfig(file, fromEnv(io.env), flags, { interactive: true });
  const db = config.db ?? DEFAULT_DB;
  if (isPostgresUrl(db) && values.ui !== undefined)
    throw new ConfigError('troupe serve does not take --ui with a PostgreSQL --db (troupe ui --db … shows any run of it)');
  // Without --resume the settings are final: no model, no database file.
  let model = values.resume ? undefined : modelFor(config);
  if (!values.resume) requirePrice(config);
  secrets(io, config);
  if (!isPostgresUrl(db)) ensureParentDir(db);

  const json = values.json ?? false;
  const printer = printerFor(io.out, json);
  const logger = cliLogger(LOG_FILE, values.verbose ?? false, io.redactor);
  const stop = stopRequested(options, io);
  const bus = new EventBus({ onListenerError: (err, event) => logger.warn({ err, event: event.type }, 'a serve event listener threw') });
  const abortChecks = new AbortController();
  const detach: (() => void)[] = [];
  /** The event lines of each run this process hosts (replaced when it hosts the run again). */
  const runLines = new Map<string, () => void>();
  let opened: HostingDb | undefined;
  let w: Worker | undefined;
  let manager: ProactiveManager | undefined;
  let watchdog: Watchdog | undefined;
  let terminal: Terminal | undefined;
  let fires: ReturnType<typeof databaseFires> | undefined;
  let otel: CliTelemetry | undefined;
  let ready = false;
  let closeInspector = () => Promise.resolve();
  let closeDashboard = () => Promise.resolve();
  try {
    // One inspector for every run this process hosts (XState session ids are unique per process).
    const inspection = await inspector(values, io);
    closeInspector = inspection.close;
    const target = (opened = await openHostingDb(db, values, io));
    const { hosting, reads, label } = target;
    const resumed = values.resume ? await latestMain(reads, label) : undefined;
    if (resumed) {
      // What the resumed run was started with, under this serve's config, environment and flags.
      config = mergeConfig(await savedSettings({ reads }, resumed.runId), file, fromEnv(io.env), flags, { interactive: true });
      secrets(io, config);
      model = modelFor(config);
      requirePrice(config);
    }
    // Once the config is final (a resumed run's saved `otel` counts): one exporter pair for every
    // run this process hosts, flushed after they stop.
    otel = await cliTelemetry(config.otel, io.env, (line) => io.err.write(line));
    const extra = { ...(inspection.inspect ? { inspect: inspection.inspect } : {}), ...otel.options };
    // Saved with every run serve starts (no key, no database URL): the settings any later host uses.
    const saved = { type: 'cli.run', data: { ...toSaved({ ...config, db: undefined }, false) } };
    // Runs serve did not start are hosted with their saved settings, under serve's file, environment and flags.
    const settings = hostSettings(
      reads,
      mergeConfig(file, fromEnv(io.env)),
      { ...flagSettings(values, values.model ?? file.model), ...defined({ apiKey: config.apiKey }) },
      logger,
      extra,
    );

    // Known before anything is hosted, so the main run's lines are labelled [main] from the first.
    const mainId = resumed?.runId ?? (task !== undefined ? `run_${newId()}` : undefined);
    let rootOf!: (rootId: string) => void;
    let mainFailed!: (err: unknown) => void;
    const booted = new Promise<string>((resolve, reject) => ((rootOf = resolve), (mainFailed = reject)));
    booted.catch(() => undefined);
    const newMain: HostedOptions | undefined =
      task !== undefined
        ? {
            ...coordinatorOptions(config),
            ...extra,
            interactive: true,
            model: model!,
            logger,
            boot: { root: { name: 'lead', task }, event: saved, onStarted: rootOf },
          }
        : undefined;

    await wantUnfinished(target, config.idleResumeMs ?? DEFAULT_IDLE_RESUME_MS, printer);
    w = await startWorker({
      store: hosting,
      ...(target.file ? { pollMs: FILE_POLL_MS } : {}),
      logger,
      // The main run is booted here when new; any run found existing is resumed with its saved settings.
      hostOptions: (runId) => (runId === mainId && newMain ? newMain : settings(runId)),
      onHost: (c) => {
        runLines.get(c.runId)?.();
        runLines.set(c.runId, runEventLine(c.runId === mainId ? 'main' : c.runId, c, printer));
      },
      onEnd: (runId, err) => {
        if (runId === mainId) mainFailed(err ?? new TroupeError('RUN_NOT_LIVE', `the main run ${runId} could not be hosted`));
      },
    });
    const theWorker = w;
    let main: Main | undefined;
    if (mainId !== undefined) {
      if (!(await w.keep(mainId))) {
        const owner = (await target.ownerOf(mainId)) ?? 'another worker';
        printer.line(
          `main run ${mainId} is hosted by ${owner}: serve hosts it once that worker lets it go (meanwhile fires, lines typed and troupe send reach it through its inbox)`,
          { type: 'serve.main_elsewhere', at: Date.now(), runId: mainId, owner },
        );
      }
      main = { runId: mainId, rootId: resumed?.rootId ?? (await booted) };
    }
    const theMain = main;

    if (process.stdin.isTTY) {
      terminal = new Terminal(io);
      terminal.toMain = theMain
        ? (content) => hosting.post({ runId: theMain.runId, kind: 'send', payload: { agent: theMain.rootId, content }, at: Date.now() })
        : undefined;
    }
    const gate = new ApprovalGate({ bus, ...(terminal ? { approver: terminal.approver } : {}) });
    const routes = (fires = databaseFires({
      hosting,
      ...(main ? { mainRunId: main.runId } : {}),
      submit: { ...defined({ budget: config.budget, limits: config.limits }), event: saved },
    }));
    const onFire = async (fire: ProactiveFire) => {
      const routed = await routes.route(fire);
      printer.line(`proactive  ${fire.trigger} → ${describeRoute(routed)}`, { type: 'proactive.routed', at: Date.now(), trigger: fire.trigger, ...routed });
    };
    detach.push(busLines(bus, printer, json));
    manager = new ProactiveManager({ triggers, onFire, gate, bus, logger });
    warnAgentTargets(triggers, main !== undefined, printer);
    manager.start();

    const intervalMs = watchdogConfig.intervalMs ?? DEFAULT_WATCHDOG_INTERVAL_MS;
    watchdog = new Watchdog({ intervalMs, ...defined({ failureThreshold: watchdogConfig.failureThreshold }), bus, logger });
    watchdog.register('store', storeCheck(reads));
    watchdog.register('model', modelCheck({ baseURL: config.baseURL, apiKey: config.apiKey, signal: abortChecks.signal }));
    watchdog.register(
      'queue',
      queueCheck(() => theWorker.coordinators()),
    );
    watchdog.start();
    const hostedHere = (runId: string) => theWorker.coordinators().find((c) => c.runId === runId);
    closeDashboard = await uiServing(values, io, reads, db, (runId) => hostedHere(runId)?.health().ok === true);

    const names = triggers.map((t) => t.name);
    const mainText = main ? `main run ${forTerminal(main.runId)} (root ${forTerminal(main.rootId)})` : 'no main run';
    printer.line(
      `ready      serving ${label}${target.file ? '' : ` as worker ${w.id}`}: ${mainText}; ` +
        `${triggers.length} proactive trigger(s)${names.length > 0 ? ` (${names.join(', ')})` : ''}; ` +
        `health checks every ${seconds(intervalMs)} (store, model, queue). Ctrl-C stops.`,
      { type: 'serve.ready', at: Date.now(), db: label, worker: w.id, mainRunId: main?.runId ?? null, triggers: names, watchdogIntervalMs: intervalMs },
    );
    ready = true;
    // A first round now, so a dead endpoint shows up at once rather than after one interval.
    void watchdog.checkNow();

    const signal = await stop.promise;
    printer.line(`stopping   (${signal})`, { type: 'serve.stopping', at: Date.now(), signal });
    return EXIT.OK;
  } finally {
    stop.dispose();
    // Sources first (no new fires, no new checks), then the runs (let go as their rows say), then the store.
    watchdog?.stop();
    abortChecks.abort();
    await manager?.stop();
    await fires?.settled();
    terminal?.close();
    await w?.stop();
    for (const d of [...detach.splice(0), ...runLines.values()].reverse()) d();
    await closeDashboard();
    // Every run has ended its spans: export what is buffered before the process exits.
    await otel?.shutdown();
    await opened?.close();
    await closeInspector();
    if (ready)
      printer.line(`stopped    every run is saved and resumable${opened?.file ? '' : ' (by any worker of the database)'}`, {
        type: 'serve.stopped',
        at: Date.now(),
      });
  }
}
