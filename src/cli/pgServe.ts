/**
 * `troupe serve --db postgres://…`: the long-running mode on a shared PostgreSQL. The process is a
 * worker (it claims and hosts runs as `troupe worker` does, its main run among them) that also runs
 * the config file's proactive triggers and a watchdog, with the lines of the SQLite form.
 *
 * - The main run: a task submits a new interactive run with root `lead`, already claimed by this
 *   process; `--resume` claims the latest main run. Serve hosts it until it stops, parked or not
 *   (as on SQLite, it stays hosted when its root finishes). If another worker holds it (it took
 *   the run over while serve was down), serve says so, starts anyway, and takes the run as soon as
 *   that worker lets it go; meanwhile lines typed, `{ agent }` fires and `troupe send` reach it
 *   through its inbox. If serve dies, the run's lease runs out and any worker resumes it.
 * - A fire becomes rows (worker/fires.ts): a new run `proactive-<name>` submitted for the workers,
 *   or a `proactive` message posted to the run it targets, so it reaches that run wherever it is
 *   hosted, and a run whose host dies gets it from the next one.
 * - The watchdog: the database answers a read; GET <baseURL>/models of serve's settings answers
 *   below 500; every run this process hosts accepts work and no queue of it is stuck.
 *
 * On SIGINT / SIGTERM: triggers stop, fires in progress finish, the hosted runs are released to the
 * other workers (runnable), exit 0.
 * @module
 */
import { randomUUID } from 'node:crypto';
import { ApprovalGate } from '../autonomy/approvalGate.js';
import { EventBus } from '../autonomy/eventBus.js';
import { ProactiveManager } from '../autonomy/proactive.js';
import type { ProactiveFire } from '../autonomy/proactivePipeline.js';
import { Watchdog } from '../autonomy/watchdog.js';
import { ConfigError, TroupeError } from '../errors.js';
import type { PostgresStore } from '../store/postgres/store.js';
import { databaseFires } from '../worker/fires.js';
import { postRequest } from '../worker/inbox.js';
import { submitRun } from '../worker/submit.js';
import type { Worker } from '../worker/worker.js';
import type { Io } from './args.js';
import { defined, fromEnv, loadConfigFile, mergeConfig, proactiveTriggers, requirePrice, toSaved, watchdogSection, type CliConfig } from './config.js';
import { EXIT } from './exitCodes.js';
import { cliLogger } from './logs.js';
import { flagSettings, hostRuns, runSettings } from './pgHost.js';
import { only, openPg } from './pgViews.js';
import { latestMainRun } from './runs.js';
import { DEFAULT_WATCHDOG_INTERVAL_MS, modelCheck, queueCheck, storeCheck } from './serveChecks.js';
import { busLines, describeRoute, printerFor, runEventLine, seconds, warnAgentTargets, type Printer } from './serveLines.js';
import { stopRequested, Terminal, type ServeOptions } from './serveTerminal.js';
import { LOG_FILE, secrets } from './setup.js';
import type { Values } from './spec.js';
import { forTerminal } from './terminal.js';

interface PgMain {
  runId: string;
  rootId: string;
}

/** The latest main run (`--resume`). */
async function latestMain(store: PostgresStore): Promise<PgMain> {
  const runs = await store.reads.listRuns();
  const found = latestMainRun({ listRuns: () => runs });
  if (!found?.rootId) throw new TroupeError('RUN_NOT_FOUND', `${store.url} holds no run to resume (proactive runs are hosted by the workers)`);
  return { runId: found.id, rootId: found.rootId };
}

/**
 * Host the main run here until serve stops: a new one is submitted already claimed by this worker;
 * the latest one (`--resume`) is claimed, or, while another worker holds it, taken once it is free.
 */
async function hostMain(store: PostgresStore, w: Worker, start: { task: string; runId: string } | undefined, resumed: PgMain | undefined, config: CliConfig, printer: Printer): Promise<PgMain | undefined> {
  if (start !== undefined) {
    const { runId, rootId, lease } = await submitRun(store, {
      runId: start.runId,
      root: { name: 'lead', task: start.task },
      interactive: true,
      ...defined({ budget: config.budget, limits: config.limits }),
      event: { type: 'cli.run', data: { ...toSaved({ ...config, db: undefined }, false) } },
      hold: w.lease,
    });
    await w.keep(runId, lease);
    return { runId, rootId };
  }
  if (!resumed) return undefined;
  if (!(await w.keep(resumed.runId))) {
    const owner = (await store.leases()).find((l) => l.run_id === resumed.runId)?.owner ?? 'another worker';
    printer.line(
      `main run ${resumed.runId} is hosted by ${owner}: serve hosts it once that worker lets it go (meanwhile fires, lines typed and troupe send reach it through its inbox)`,
      { type: 'serve.main_elsewhere', at: Date.now(), runId: resumed.runId, owner },
    );
  }
  return resumed;
}

export async function pgServe(args: string[], values: Values, io: Io, options: ServeOptions = {}): Promise<number> {
  only('serve', values, ['db', 'json', 'model', 'baseUrl', 'apiKey', 'budget', 'price', 'stream', 'config', 'resume', 'verbose']);
  const task = args[0];
  if (task !== undefined && task.trim() === '') throw new ConfigError('Usage: troupe serve ["<task>" | --resume] --db postgres://…  (the task is empty)');
  if (task !== undefined && values.resume) throw new ConfigError('Give troupe serve a task or --resume, not both');
  const file = loadConfigFile(values.config);
  const triggers = proactiveTriggers(file.proactive, values.config);
  const watchdogConfig = watchdogSection(file.watchdog, values.config);
  const flags = flagSettings(values, values.model ?? file.model);
  let config = mergeConfig(file, fromEnv(io.env), flags, { interactive: true });
  if (!values.resume) requirePrice(config);
  const json = values.json ?? false;
  const printer = printerFor(io.out, json);
  const logger = cliLogger(LOG_FILE, values.verbose ?? false, io.redactor);
  const stop = stopRequested(options, io);
  const bus = new EventBus({ onListenerError: (err, event) => logger.warn({ err, event: event.type }, 'a serve event listener threw') });
  const abortChecks = new AbortController();
  const detach: (() => void)[] = [];
  /** The event lines of each run this process hosts (replaced when it hosts the run again). */
  const runLines = new Map<string, () => void>();
  let store: PostgresStore | undefined;
  let w: Worker | undefined;
  let manager: ProactiveManager | undefined;
  let watchdog: Watchdog | undefined;
  let terminal: Terminal | undefined;
  let fires: ReturnType<typeof databaseFires> | undefined;
  let ready = false;
  try {
    store = await openPg(values, io);
    const theStore = store;
    const resumed = values.resume ? await latestMain(store) : undefined;
    if (resumed) {
      // What the resumed run was started with, under this serve's config, environment and flags.
      config = mergeConfig(await runSettings(store.reads, resumed.runId), file, fromEnv(io.env), flags, { interactive: true });
      requirePrice(config);
    }
    secrets(io, mergeConfig(config, defined({ apiKey: values.apiKey })));

    // Known before anything is hosted, so the main run's lines are labelled [main] from the first.
    const mainId = resumed?.runId ?? (task !== undefined ? `run_${randomUUID()}` : undefined);
    w = await hostRuns(store, values, io, {
      logger,
      onHost: (c) => {
        runLines.get(c.runId)?.();
        runLines.set(c.runId, runEventLine(c.runId === mainId ? 'main' : c.runId, c, printer));
      },
    });
    const theWorker = w;
    const main = await hostMain(store, w, task !== undefined && mainId ? { task, runId: mainId } : undefined, resumed, config, printer);

    if (process.stdin.isTTY) {
      terminal = new Terminal(io);
      terminal.toMain = main ? (content) => postRequest(theStore, { runId: main.runId, kind: 'send', payload: { agent: main.rootId, content }, at: Date.now() }) : undefined;
    }
    const gate = new ApprovalGate({ bus, ...(terminal ? { approver: terminal.approver } : {}) });
    const routes = databaseFires({
      store,
      ...(main ? { mainRunId: main.runId } : {}),
      submit: { ...defined({ budget: config.budget, limits: config.limits }), event: { type: 'cli.run', data: { ...toSaved({ ...config, db: undefined }, false) } } },
    });
    fires = routes;
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
    const endpoint = mergeConfig(config, defined({ apiKey: values.apiKey }));
    watchdog.register('store', storeCheck(store.reads));
    watchdog.register('model', modelCheck({ baseURL: endpoint.baseURL, apiKey: endpoint.apiKey, signal: abortChecks.signal }));
    watchdog.register('queue', queueCheck(() => theWorker.coordinators()));
    watchdog.start();

    const names = triggers.map((t) => t.name);
    const mainText = main ? `main run ${forTerminal(main.runId)}${task !== undefined ? ' (troupe send lead "…" --db …)' : ' (resumed)'}` : 'no main run';
    printer.line(
      `ready: worker ${w.id} hosting runs of ${store.url}; ${mainText}; ${triggers.length} proactive trigger(s)${names.length > 0 ? ` (${names.join(', ')})` : ''}; ` +
        `health checks every ${seconds(intervalMs)} (store, model, queue). Ctrl-C stops it`,
      { type: 'serve.ready', at: Date.now(), db: store.url, worker: w.id, mainRunId: main?.runId ?? null, triggers: names, watchdogIntervalMs: intervalMs },
    );
    ready = true;
    // A first round now, so a dead endpoint shows up at once rather than after one interval.
    void watchdog.checkNow();

    const signal = await stop.promise;
    printer.line(`stopping   (${signal})`, { type: 'serve.stopping', at: Date.now(), signal });
    return EXIT.OK;
  } finally {
    stop.dispose();
    // Sources first (no new fires, no new checks), then the runs (released to the workers), then the store.
    watchdog?.stop();
    abortChecks.abort();
    await manager?.stop();
    await fires?.settled();
    terminal?.close();
    await w?.stop();
    for (const d of [...detach.splice(0), ...runLines.values()].reverse()) d();
    await store?.close();
    if (ready) printer.line('stopped    every run is saved and released to the workers of the database', { type: 'serve.stopped', at: Date.now() });
  }
}
