/**
 * The CLI on PostgreSQL (`--db postgres://…`, issue 17): every command has a PostgreSQL form,
 * chosen by spec.ts from the `--db` value. Workers host the runs: `troupe worker` (and `serve`
 * (pgServe.ts), and `demo` in its own process) claims them; `run` submits one, `resume` hands one back to the
 * workers; `status`, `tree`, `send` and `stop` (pgViews.ts) work from any machine.
 *
 * A run's settings (model, base URL, budget, limits… never an API key) are saved with it when it
 * is submitted (a `cli.run` event; `resume` with flags appends a newer one), and the worker that
 * hosts it uses them. Which wins: the worker's config file and environment are defaults, the run's
 * saved settings override them, and the worker's own flags override both. API keys come only from
 * the worker (its flags, environment or config file).
 * @module
 */
import { randomUUID } from 'node:crypto';
import { ConfigError, TroupeError } from '../errors.js';
import { submitRun } from '../worker/submit.js';
import type { Worker } from '../worker/worker.js';
import { number, type Io } from './args.js';
import { defined, fromEnv, loadConfigFile, mergeConfig, requirePrice, toSaved } from './config.js';
import { DEMO_CONFIG, viewMode } from './runCommands.js';
import { demoScript } from './demoModel.js';
import { runExitCode } from './drive.js';
import { EXIT } from './exitCodes.js';
import { flagSettings, hostRuns, runSettings } from './pgHost.js';
import { pgServe } from './pgServe.js';
import { findRun, only, openPg, send, status, stop, tree, treeText } from './pgViews.js';
import { secrets } from './setup.js';
import type { Handler, Values } from './spec.js';
import { forTerminal, jsonLine } from './terminal.js';

const stopped = () =>
  new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });

async function worker(_args: string[], values: Values, io: Io): Promise<number> {
  if (values.db === undefined || !/^postgres(ql)?:\/\//.test(values.db)) throw new ConfigError('troupe worker needs --db postgres://user@host:port/database (workers share a PostgreSQL server)');
  const concurrency = number('concurrency', values.concurrency, true);
  const store = await openPg(values, io);
  const w = await hostRuns(store, values, io, defined({ concurrency }));
  io.out.write(`worker ${forTerminal(w.id)} hosting runs of ${forTerminal(store.url)} (Ctrl-C stops it; its runs are released to other workers)\n`);
  await stopped();
  await w.stop();
  await store.close();
  return EXIT.OK;
}

async function run(args: string[], values: Values, io: Io): Promise<number> {
  only('run', values, ['db', 'json', 'verbose', 'model', 'baseUrl', 'apiKey', 'budget', 'price', 'interactive', 'stream', 'config']);
  if (!args[0] || args[0].trim() === '') throw new ConfigError('Usage: troupe run "<task>" --db postgres://…  (the task is missing)');
  const file = loadConfigFile(values.config);
  const config = mergeConfig(file, fromEnv(io.env), flagSettings(values, values.model ?? file.model), defined({ apiKey: values.apiKey }));
  requirePrice(config);
  secrets(io, config);
  const store = await openPg(values, io);
  try {
    const { runId, rootId } = await submitRun(store, {
      root: { name: 'lead', task: args[0]! },
      ...defined({ interactive: config.interactive, budget: config.budget, limits: config.limits }),
      event: { type: 'cli.run', data: { ...toSaved({ ...config, db: undefined }, false) } },
    });
    io.out.write(
      values.json ? `${jsonLine({ type: 'run.submitted', runId, rootId, db: store.url })}\n` : `submitted run ${forTerminal(runId)} to ${forTerminal(store.url)}: a worker hosts it (troupe worker --db …)\n`,
    );
    return EXIT.OK;
  } finally {
    await store.close();
  }
}

/**
 * Hand a run back to the workers (it wants a host again). Flags given now override its saved
 * settings for every later host: they are saved with the run first, under a short lease of this
 * command (RUN_LOCKED while a worker hosts it: stop that worker, or resume without flags).
 */
async function resume(_args: string[], values: Values, io: Io): Promise<number> {
  only('resume', values, ['db', 'run', 'json', 'model', 'baseUrl', 'apiKey', 'budget', 'price', 'stream']);
  const store = await openPg(values, io);
  try {
    const found = await findRun(store, values.run);
    const saved = await runSettings(store.reads, found.id);
    const given = flagSettings(values, values.model ?? saved.model);
    secrets(io, defined({ apiKey: values.apiKey }));
    if (Object.keys(given).length > 0) {
      const next = mergeConfig(saved, given);
      requirePrice(next);
      const lease = await store.claim(found.id, { owner: `resume:${randomUUID().slice(0, 8)}`, ttlMs: 60_000, heartbeatMs: 0 });
      await lease.port.commit([{ op: 'appendEvent', row: { runId: found.id, agentId: null, type: 'cli.run', data: { ...toSaved(next, saved.demo ?? false) }, at: Date.now() } }]);
      await lease.release({ state: 'runnable' });
    }
    await store.wake(found.id);
    io.out.write(values.json ? `${jsonLine({ type: 'run.resumed', runId: found.id, db: store.url })}\n` : `run ${forTerminal(found.id)} handed to the workers of ${forTerminal(store.url)}\n`);
    return EXIT.OK;
  } finally {
    await store.close();
  }
}

/** The offline demo on PostgreSQL: submitted as a demo run, hosted by a worker in this process (any worker can host a demo run). */
async function demo(_args: string[], values: Values, io: Io): Promise<number> {
  only('demo', values, ['db', 'json', 'verbose']);
  const script = demoScript();
  const json = viewMode(values.json, io) === 'json';
  if (!json) io.out.write(`${script.description ?? ''}\n\n`);
  const store = await openPg(values, io);
  let w: Worker | undefined;
  try {
    const { runId, rootId } = await submitRun(store, {
      root: { name: 'lead', task: 'Review this repository with a small team.' },
      budget: DEMO_CONFIG.budget!,
      event: { type: 'cli.run', data: { ...toSaved({ ...DEMO_CONFIG, interactive: false }, true) } },
    });
    w = await hostRuns(store, { verbose: values.verbose }, io, { concurrency: 1 });
    io.out.write(json ? `${jsonLine({ type: 'run.submitted', runId, rootId, db: store.url })}\n` : `run ${forTerminal(runId)} on ${forTerminal(store.url)}, hosted by worker ${forTerminal(w.id)}\n`);
    for (;;) {
      const lease = (await store.leases()).find((l) => l.run_id === runId);
      if (lease && lease.owner === null && lease.state !== 'runnable') break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const root = (await store.reads.listAgents(runId)).find((a) => a.id === rootId);
    if (!root) throw new TroupeError('RUN_NOT_FOUND', `run ${runId} has no root`);
    io.out.write(await treeText(store, runId, values.json));
    if (root.report) io.out.write(json ? `${jsonLine({ type: 'run.report', runId, report: root.report })}\n` : `\n${forTerminal(root.report.summary, true)}\n`);
    return runExitCode(root);
  } finally {
    await w?.stop();
    await store.close();
  }
}

const HANDLERS: Record<string, Handler> = { worker, run, resume, demo, serve: (args, values, io) => pgServe(args, values, io), status, tree, send, stop };

/** The PostgreSQL form of a command. */
export function pgHandler(name: string): Handler {
  const handler = HANDLERS[name];
  if (!handler) throw new ConfigError(`troupe ${name} does not work with a PostgreSQL --db`);
  return handler;
}
