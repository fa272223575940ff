/**
 * What only PostgreSQL has: `troupe worker` hosts runs; `run --detach` submits a run for the
 * workers and `resume --detach` hands one back to them. Every other command is one implementation
 * on every store (runCommands.ts, readCommands.ts, mail.ts, serve.ts).
 *
 * A run's settings (model, base URL, budget, limits… never an API key) are saved with it when it
 * is submitted (a `cli.run` event; `resume` with flags appends a newer one), and the worker that
 * hosts it uses them (hostSettings.ts says which wins).
 * @module
 */
import { randomUUID } from 'node:crypto';
import { ConfigError, errorMessage } from '../errors.js';
import { submitRun } from '../worker/submit.js';
import { number, type Io } from './args.js';
import { defined, fromEnv, loadConfigFile, mergeConfig, requirePrice, toSaved } from './config.js';
import { EXIT } from './exitCodes.js';
import { hostRuns, only, openPg } from './pgHost.js';
import { flagSettings } from './hostSettings.js';
import { findRun, savedSettings } from './runs.js';
import { secrets } from './setup.js';
import type { Handler, Values } from './flags.js';
import { forTerminal, jsonLine } from './terminal.js';

const stopped = () =>
  new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });

async function worker(_args: string[], values: Values, io: Io): Promise<number> {
  if (values.db === undefined || !/^postgres(ql)?:\/\//.test(values.db))
    throw new ConfigError('troupe worker needs --db postgres://user@host:port/database (workers share a PostgreSQL server)');
  const concurrency = number('concurrency', values.concurrency, true);
  const store = await openPg(values, io);
  const say = (text: string) => io.out.write(`${forTerminal(text)}\n`);
  /** This worker's owner id in lease rows (known from its first hosting). */
  let me: string | null = null;
  /** What became of a run this worker stopped hosting, from its lease row (a line per hosting). */
  const ended = async (runId: string, error: unknown): Promise<void> => {
    if (error !== undefined) return say(`failed    run ${runId}: ${errorMessage(error)}; another worker resumes it from what was committed`);
    const row = await store.lease(runId).catch(() => undefined);
    if (!row || row.owner === me) return; // gone, or hosted here again already
    if (row.owner !== null) return say(`lost      run ${runId}: worker ${row.owner} hosts it now`);
    if (row.state === 'done') return say(`done      run ${runId}`);
    if (row.state === 'parked')
      return say(`parked    run ${runId} until ${row.wake_at === null ? 'a message or request wakes it' : new Date(Number(row.wake_at)).toISOString()}`);
    say(`released  run ${runId}: another worker takes it`);
  };
  const w = await hostRuns(store, values, io, {
    ...defined({ concurrency }),
    onHost: (_c, lease) => {
      me = lease.owner;
      say(`hosting   run ${lease.runId} (lease epoch ${lease.epoch})`);
    },
    onEnd: (runId, error) => void ended(runId, error),
  });
  io.out.write(`worker ${forTerminal(w.id)} hosting runs of ${forTerminal(store.url)} (Ctrl-C stops it; its runs are released to other workers)\n`);
  await stopped();
  await w.stop();
  await store.close();
  return EXIT.OK;
}

/** `troupe run --detach --db postgres://…`: submit the run and return; a worker hosts it. */
export async function submitDetached(args: string[], values: Values, io: Io): Promise<number> {
  only('run --detach', values, ['db', 'detach', 'json', 'verbose', 'model', 'baseUrl', 'apiKey', 'budget', 'price', 'interactive', 'stream', 'config']);
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
      values.json
        ? `${jsonLine({ type: 'run.submitted', runId, rootId, db: store.url })}\n`
        : `submitted run ${forTerminal(runId)} to ${forTerminal(store.url)}: a worker hosts it (troupe worker --db …)\n`,
    );
    return EXIT.OK;
  } finally {
    await store.close();
  }
}

/**
 * `troupe resume --detach --db postgres://…`: hand a run back to the workers (it wants a host again). Flags given now override its saved
 * settings for every later host: they are saved with the run first, under a short lease of this
 * command (RUN_LOCKED while a worker hosts it: stop that worker, or resume without flags).
 */
export async function handBack(_args: string[], values: Values, io: Io): Promise<number> {
  only('resume --detach', values, ['db', 'detach', 'run', 'json', 'model', 'baseUrl', 'apiKey', 'budget', 'price', 'stream']);
  const store = await openPg(values, io);
  try {
    const found = await findRun({ reads: store.reads, label: store.url }, values.run);
    const saved = await savedSettings({ reads: store.reads }, found.id);
    const given = flagSettings(values, values.model ?? saved.model);
    secrets(io, defined({ apiKey: values.apiKey }));
    if (Object.keys(given).length > 0) {
      const next = mergeConfig(saved, given);
      requirePrice(next);
      const lease = await store.claim(found.id, { owner: `resume:${randomUUID().slice(0, 8)}`, ttlMs: 60_000, heartbeatMs: 0 });
      await lease.port.commit([
        { op: 'appendEvent', row: { runId: found.id, agentId: null, type: 'cli.run', data: { ...toSaved(next, saved.demo ?? false) }, at: Date.now() } },
      ]);
      await lease.release({ state: 'runnable' });
    }
    await store.wake(found.id);
    io.out.write(
      values.json
        ? `${jsonLine({ type: 'run.resumed', runId: found.id, db: store.url })}\n`
        : `run ${forTerminal(found.id)} handed to the workers of ${forTerminal(store.url)}\n`,
    );
    return EXIT.OK;
  } finally {
    await store.close();
  }
}

const HANDLERS: Record<string, Handler> = { worker };

/** The PostgreSQL form of a command. */
export function pgHandler(name: string): Handler {
  const handler = HANDLERS[name];
  if (!handler) throw new ConfigError(`troupe ${name} does not work with a PostgreSQL --db`);
  return handler;
}
