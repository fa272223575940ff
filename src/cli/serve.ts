/**
 * `troupe serve`: the long-running mode. It opens the database, builds the model as `troupe run`
 * does, optionally hosts an interactive main run (a new one with root `lead` for a task, or the
 * latest main run with `--resume`), routes the fires of the config file's `proactive` triggers
 * into runs ({@link ProactiveRouter}), and runs a {@link Watchdog} over the store, the model
 * endpoint and the coordinators' queues. It prints a `ready` line once everything is started, a
 * line per trigger fired, dropped, denied or failed and per health change, and on SIGINT/SIGTERM
 * stops everything, leaves every run resumable, and exits 0.
 * @module
 */
import { createInterface, type Interface } from 'node:readline';
import type { Logger } from 'pino';
import { ApprovalGate, type Approver, type ApprovalRequest } from '../autonomy/approvalGate.js';
import { EventBus, type AuditEvent } from '../autonomy/eventBus.js';
import { ProactiveManager, type ProactiveFire, type ProactiveTrigger } from '../autonomy/proactive.js';
import { ProactiveRouter, type RouteResult } from '../autonomy/proactiveRouter.js';
import { HEALTH_CHECK_EVENT, Watchdog } from '../autonomy/watchdog.js';
import { createCoordinator, type Coordinator } from '../host/createCoordinator.js';
import type { CoordinatorOptions } from '../host/options.js';
import { resumeCoordinator } from '../host/resumeCoordinator.js';
import { ConfigError, errorMessage, TroupeError } from '../errors.js';
import type { Model } from '../model/types.js';
import { ensureParentDir } from '../store/files.js';
import { openStore, type SqliteStore } from '../store/sqliteStore.js';
import { number, parse, type Io } from './args.js';
import { coordinatorOptions, inspector, LOG_FILE, modelFor, secrets } from './commands.js';
import { serveInbox } from './mail.js';
import { latestMainRun, savedConfig } from './runs.js';
import {
  DEFAULT_DB,
  defined,
  fromEnv,
  loadConfigFile,
  mergeConfig,
  proactiveTriggers,
  toSaved,
  watchdogSection,
  type CliConfig,
} from './config.js';
import { EXIT } from './exitCodes.js';
import { cliLogger } from './logs.js';
import { modelCheck, queueCheck, storeCheck } from './serveChecks.js';
import { uiServing } from './ui.js';
import { forTerminal, jsonLine } from './terminal.js';
import { eventLine, type Output } from './view.js';

/** Between the end of one round of health checks and the next, unless the config says otherwise. */
export const DEFAULT_WATCHDOG_INTERVAL_MS = 30_000;

export interface ServeOptions {
  /** Stop when this aborts. Default: the process's SIGINT / SIGTERM (a second one exits at once). */
  signal?: AbortSignal;
}

interface MainRun {
  coordinator: Coordinator;
  rootId: string;
}

/** Writes one line per event: text, or JSON lines with `--json`. */
interface Printer {
  line(text: string, json: Record<string, unknown>): void;
}

/** Lines carry trigger names, paths, errors and agents' words: every one goes out terminal-safe. */
const printerFor = (out: Output, json: boolean): Printer => ({
  line: (text, value) => out.write(json ? `${jsonLine(value)}\n` : `${forTerminal(text, true)}\n`),
});

const seconds = (ms: number) => `${Math.round(ms / 100) / 10} s`;

function describeTarget(fire: Pick<ProactiveFire, 'sessionId' | 'target'>): string {
  return 'agent' in fire.target ? `agent ${fire.target.agent} of the main run` : `the root of run ${fire.sessionId}`;
}

function describeRoute(r: RouteResult): string {
  switch (r.kind) {
    case 'started':
      return `started run ${r.runId} (root ${r.agentId})`;
    case 'resumed':
      return `resumed run ${r.runId} and messaged its root (${r.agentId})`;
    case 'sent':
      return `message to ${r.agentId} in run ${r.runId}`;
  }
}

/** One line for an audit event worth showing; null for the rest. */
function auditLine(event: AuditEvent): string | null {
  const trigger = String(event.trigger ?? '');
  switch (event.type) {
    case 'proactive.trigger_fired':
      return `proactive  ${trigger} fired → ${describeTarget(event as unknown as ProactiveFire)}`;
    case 'proactive.trigger_dropped':
      return `proactive  ${trigger} dropped (${String(event.reason)}, ${seconds(Number(event.remainingMs ?? 0))} left)`;
    case 'proactive.trigger_denied':
      return `proactive  ${trigger} denied (${String(event.reason)})`;
    case 'proactive.fire_failed':
      return `proactive  ${trigger} failed: ${String(event.error)}`;
    case 'proactive.watch_failed':
      return `proactive  ${trigger} stopped watching ${String(event.path)}: ${String(event.error)}`;
    case 'proactive.probe_failed':
      return `proactive  ${trigger} probe failed: ${String(event.error)}`;
    default:
      return null;
  }
}

/**
 * A schedule faster than its cooldown drops an event at every tick. On a terminal only the first
 * drop after each fire (per trigger) is shown: returns null for an event to hide, else a suffix
 * for its line. (`--json` prints every event.)
 */
export function dropFilter(): (event: AuditEvent) => string | null {
  const quiet = new Set<string>();
  return (event) => {
    const trigger = String(event.trigger ?? '');
    if (event.type === 'proactive.trigger_fired') quiet.delete(trigger);
    if (event.type !== 'proactive.trigger_dropped') return '';
    if (quiet.has(trigger)) return null;
    quiet.add(trigger);
    return ' — later drops are not shown until it fires again';
  };
}

/** Prints a hosted run's status changes and answers, prefixed `[label]` (token deltas are left out). */
function runEventLine(label: string, c: Coordinator, printer: Printer): () => void {
  return c.subscribe((event) => {
    if (event.type === 'agent.delta') return;
    const text = eventLine(event);
    if (text === null) return;
    printer.line(`[${label}] ${text}`, { ...event, runId: c.runId });
  });
}

/**
 * The terminal: lines typed go to the main run's root, except that while a proactive trigger asks
 * for confirmation the next line answers it (`y` / `yes` approves; anything else denies).
 */
class Terminal {
  readonly #rl: Interface;
  readonly #out: Output;
  readonly #err: Output;
  readonly #questions: { text: string; resolve: (approved: boolean) => void }[] = [];
  main: MainRun | undefined;

  constructor(io: Io) {
    this.#out = io.out;
    this.#err = io.err;
    this.#rl = createInterface({ input: process.stdin });
    this.#rl.on('line', (line) => this.#onLine(line));
  }

  readonly approver: Approver = (request: ApprovalRequest) =>
    new Promise<boolean>((resolve) => {
      const prompt = typeof request.reason === 'string' ? request.reason.replace(/\s+/g, ' ') : '';
      const shown = prompt.length > 200 ? `${prompt.slice(0, 197)}...` : prompt;
      const target = request.agentName === undefined || request.agentName === 'root' ? `the root of run ${request.agentId}` : `agent ${request.agentName}`;
      const text = `approve proactive trigger "${forTerminal(request.action)}" (→ ${forTerminal(target)}): ${forTerminal(shown)}\n  [y/N] `;
      this.#questions.push({ text, resolve });
      if (this.#questions.length === 1) this.#out.write(text);
    });

  #onLine(line: string): void {
    const question = this.#questions.shift();
    if (question) {
      question.resolve(/^\s*y(es)?\s*$/i.test(line));
      const next = this.#questions[0];
      if (next) this.#out.write(next.text);
      return;
    }
    if (line.trim() === '') return;
    const main = this.main;
    if (!main) {
      this.#err.write('no main run: start troupe serve with a task (or --resume) to talk to one\n');
      return;
    }
    main.coordinator.send(main.rootId, { content: line }).catch((err: unknown) => this.#err.write(`${forTerminal(errorMessage(err))}\n`));
  }

  close(): void {
    this.#rl.close();
    for (const q of this.#questions.splice(0)) q.resolve(false);
  }
}

/** Resolves with the signal's name when serve should stop. */
function stopRequested(options: ServeOptions, io: Io): { promise: Promise<string>; dispose: () => void } {
  if (options.signal) {
    const signal = options.signal;
    let onAbort = () => {};
    const promise = new Promise<string>((resolve) => {
      onAbort = () => resolve('abort');
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
    });
    return { promise, dispose: () => signal.removeEventListener('abort', onAbort) };
  }
  let received: string | undefined;
  let resolveStop!: (name: string) => void;
  const promise = new Promise<string>((resolve) => (resolveStop = resolve));
  const handler = (name: NodeJS.Signals) => {
    if (received !== undefined) {
      io.err.write(`troupe serve: ${name} again while stopping; exiting now\n`);
      process.exit(EXIT.INTERNAL);
    }
    received = name;
    resolveStop(name);
  };
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
  return {
    promise,
    dispose: () => {
      process.off('SIGINT', handler);
      process.off('SIGTERM', handler);
    },
  };
}

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
  extra: Pick<CoordinatorOptions, 'inspect'>,
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

export async function serve(argv: string[], io: Io, options: ServeOptions = {}): Promise<number> {
  const { values, positionals } = parse('serve', argv, ['db', 'json', 'verbose', 'model', 'base-url', 'api-key', 'budget', 'config', 'stream', 'resume', 'inspect', 'inspect-port', 'ui', 'ui-port'], 1);
  const task = positionals[0];
  if (task !== undefined && task.trim() === '') throw new ConfigError('Usage: troupe serve ["<task>" | --resume] …  (the task is empty)');
  if (task !== undefined && values.resume) throw new ConfigError('troupe serve takes a task or --resume, not both');
  const budgetUsd = number('budget', values.budget);
  const file = loadConfigFile(values.config);
  const flags = defined({
    model: values.model,
    baseURL: values['base-url'],
    apiKey: values['api-key'],
    stream: values.stream,
    db: values.db,
    ...(budgetUsd === undefined ? {} : { budget: { limitUsd: budgetUsd } }),
  });
  const triggers: ProactiveTrigger[] = proactiveTriggers(file.proactive, values.config);
  const watchdogConfig = watchdogSection(file.watchdog, values.config);
  let config = mergeConfig(file, fromEnv(io.env), flags);
  // Without --resume the model is known before anything is opened: no model, no database file.
  let model: Model | undefined = values.resume ? undefined : modelFor(config);
  const stored = secrets(io, config);
  const db = config.db ?? DEFAULT_DB;
  ensureParentDir(db);

  const printer = printerFor(io.out, values.json);
  const logger = cliLogger(LOG_FILE, values.verbose, io.redactor);
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
  try {
    // One inspector for every run this process hosts (XState session ids are unique per process).
    const inspection = await inspector(values, io);
    closeInspector = inspection.close;
    const extra = inspection.inspect ? { inspect: inspection.inspect } : {};
    store = openStore({ path: db, ...stored });
    const theStore = store;
    const attachMain = (c: Coordinator) => detach.push(runEventLine('main', c, printer));
    if (values.resume) {
      const run = latestMainRun(store);
      if (!run) throw new TroupeError('RUN_NOT_FOUND', `${db} holds no run to resume (proactive runs are resumed by serve itself)`);
      config = mergeConfig(savedConfig(store, run), file, fromEnv(io.env), flags);
      secrets(io, config);
      model = modelFor(config);
      main = await startMain(store, model, config, logger, { resume: run.id }, attachMain, extra);
    } else if (task !== undefined) {
      main = await startMain(store, model!, config, logger, { task }, attachMain, extra);
    }
    if (main) detach.push(serveInbox(main.coordinator, store));
    closeDashboard = await uiServing(values, io, store, db, main?.coordinator);

    if (process.stdin.isTTY) {
      terminal = new Terminal(io);
      terminal.main = main;
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

    const shown = values.json ? () => '' : dropFilter();
    detach.push(
      bus.on((event) => {
        if (event.type === HEALTH_CHECK_EVENT) return;
        const suffix = shown(event);
        const text = auditLine(event);
        if (suffix !== null && text !== null) printer.line(text + suffix, event);
      }),
    );
    manager = new ProactiveManager({ triggers, onFire, gate, bus, logger });
    for (const t of triggers) {
      if (t.target && 'agent' in t.target && !main) {
        printer.line(`proactive  ${t.name} targets agent ${t.target.agent}, but there is no main run: its fires will fail`, {
          type: 'serve.warning',
          at: Date.now(),
          trigger: t.name,
          message: 'no main run for an agent target',
        });
      }
    }
    manager.start();

    const hosted = () => [...(main ? [main.coordinator] : []), ...theRouter.coordinators()];
    watchdog = new Watchdog({ intervalMs: watchdogConfig.intervalMs ?? DEFAULT_WATCHDOG_INTERVAL_MS, ...defined({ failureThreshold: watchdogConfig.failureThreshold }), bus, logger });
    watchdog.register('store', storeCheck(store));
    watchdog.register('model', modelCheck({ baseURL: config.baseURL, apiKey: config.apiKey, signal: abortChecks.signal }));
    watchdog.register('queue', queueCheck(hosted));
    const known = new Map<string, boolean>();
    detach.push(
      bus.on((event) => {
        if (event.type !== HEALTH_CHECK_EVENT) return;
        const name = String(event.name);
        const healthy = event.healthy === true;
        if (known.get(name) === healthy) return;
        known.set(name, healthy);
        const text = healthy ? `watchdog   ${name} healthy` : `watchdog   ${name} unhealthy: ${String(event.error)}`;
        printer.line(text, event);
      }),
    );
    watchdog.start();

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
    await main?.coordinator.shutdown();
    await closeDashboard();
    store?.close();
    await closeInspector();
    if (ready) printer.line('stopped    every run is saved and resumable', { type: 'serve.stopped', at: Date.now() });
  }
}
