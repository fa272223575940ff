/**
 * `troupe ui [--db <file|postgres://…>] [--port N] [--run <id>]`: the web dashboard on a database,
 * live or finished, until Ctrl-C; `--ui[=port]` on demo, run and resume: the dashboard beside the run
 * this process drives, which keeps serving after the run ends until Ctrl-C; and on serve: over every
 * run in the database it serves, until serve stops.
 * @module
 */
import type { Coordinator } from '../host/createCoordinator.js';
import { ConfigError } from '../errors.js';
import { startDashboard, type DashboardHandle } from '../dashboard/server.js';
import { coordinatorSource, databaseSource } from '../dashboard/sources.js';
import type { SqliteStore } from '../store/sqliteStore.js';
import { isPostgresUrl, number, type Io } from './args.js';
import type { Values } from './spec.js';
import { EXIT } from './exitCodes.js';
import { defaultReadDb, readRun } from './runs.js';
import { forTerminal } from './terminal.js';

export const DEFAULT_UI_PORT = 7070;

/**
 * The page's token: TROUPE_UI_TOKEN if set (so an open page reconnects to a restarted process on
 * the same port), else a fresh random one.
 */
function tokenFrom(io: Io): { token?: string } {
  const token = io.env.TROUPE_UI_TOKEN;
  if (token === undefined || token === '') return {};
  if (!/^[\w-]{16,}$/.test(token)) throw new ConfigError('Expected TROUPE_UI_TOKEN to be at least 16 letters, digits, _ or -');
  return { token };
}

/** Resolves on the first SIGINT or SIGTERM (or when `signal` aborts). */
function interrupted(signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      process.off('SIGINT', done);
      process.off('SIGTERM', done);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    process.once('SIGINT', done);
    process.once('SIGTERM', done);
    if (signal?.aborted) done();
    else signal?.addEventListener('abort', done, { once: true });
  });
}

function announce(io: Io, handle: DashboardHandle): void {
  io.err.write(
    `Dashboard: open ${handle.url} in a browser on this machine (bound to 127.0.0.1; the URL carries its access token, keep it to yourself). ` +
      `From another machine: ssh -L ${handle.port}:127.0.0.1:${handle.port} <user>@<this-host>, then open the same URL there.\n`,
  );
}

export async function ui(_args: string[], values: Values, io: Io, signal?: AbortSignal): Promise<number> {
  const port = values.port === '0' ? 0 : (number('port', values.port, true) ?? DEFAULT_UI_PORT);
  const url = values.db;
  if (isPostgresUrl(url)) return (await import('./uiPostgres.js')).uiPostgres(url, values.run, io, { port, ...tokenFrom(io) }, (handle) => serveUntilInterrupted(io, handle, signal));
  const db = defaultReadDb(values.db);
  // Read-only, every row decoded first: a file that is not troupe's, or of a newer schema, is
  // refused here with its typed error before anything is served (and nothing is written).
  const { store, run } = readRun(db, values.run, true);
  try {
    const handle = await startDashboard(databaseSource(store, db), { port, ...tokenFrom(io) });
    io.out.write(`serving run ${forTerminal(run.id)} of ${forTerminal(db)} — Ctrl-C to stop\n`);
    return await serveUntilInterrupted(io, handle, signal);
  } finally {
    store.close();
  }
}

async function serveUntilInterrupted(io: Io, handle: DashboardHandle, signal?: AbortSignal): Promise<number> {
  announce(io, handle);
  await interrupted(signal);
  await handle.close();
  return EXIT.OK;
}

export interface UiBeside {
  /** After the run: say so, keep serving (read only) until Ctrl-C. No-op without --ui. */
  linger(signal?: AbortSignal): Promise<void>;
  close(): Promise<void>;
}

/** `--ui[=port]` on demo, run and resume: a dashboard over the run `c` drives in `store` (file `db`). */
export async function uiBeside(
  flags: Pick<Values, 'ui'>,
  io: Io,
  c: Pick<Coordinator, 'subscribe' | 'registry' | 'runId'>,
  store: SqliteStore,
  db: string,
): Promise<UiBeside> {
  if (flags.ui === undefined) return { linger: () => Promise.resolve(), close: () => Promise.resolve() };
  const port = number('ui', flags.ui, true, true) ?? DEFAULT_UI_PORT;
  let live = true;
  const handle = await startDashboard(coordinatorSource(c, store, db, () => live), { port, ...tokenFrom(io) });
  announce(io, handle);
  return {
    async linger(signal) {
      live = false;
      handle.changed();
      io.err.write(`The run has ended; the dashboard keeps serving at ${handle.url} until Ctrl-C.\n`);
      await interrupted(signal);
    },
    close: () => handle.close(),
  };
}

/**
 * `--ui[=port]` on serve: every run of the database this process serves (the main run and the
 * proactive runs; serve applies the inbox of each run it hosts). A run is live while serve hosts it
 * (`hosted`: the main run's or the proactive router's coordinator), its coordinator is healthy, and
 * it has not finished. Returns how to close it.
 */
export async function uiServing(
  flags: Pick<Values, 'ui'>,
  io: Io,
  store: SqliteStore,
  db: string,
  main?: Pick<Coordinator, 'subscribe' | 'registry' | 'runId' | 'health'>,
  hosted: (runId: string) => Pick<Coordinator, 'health'> | undefined = () => undefined,
): Promise<() => Promise<void>> {
  if (flags.ui === undefined) return () => Promise.resolve();
  const port = number('ui', flags.ui, true, true) ?? DEFAULT_UI_PORT;
  const polled = databaseSource(store, db);
  const handle = await startDashboard(
    {
      ...polled,
      live: (runId) => (runId === main?.runId ? main : hosted(runId))?.health().ok === true,
      // Proactive runs come and go: the database is polled; the main run's events push at once.
      watch: (changed) => {
        const stopPolling = polled.watch(changed);
        const stopMain = main ? coordinatorSource(main, store, db, () => true).watch(changed) : () => {};
        return () => (stopPolling(), stopMain());
      },
    },
    { port, ...tokenFrom(io) },
  );
  announce(io, handle);
  return () => handle.close();
}
