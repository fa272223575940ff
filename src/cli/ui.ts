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
import { coordinatorSource, coordinatorWatch, polledSource, runsSource } from '../dashboard/sources.js';
import type { StoreReads } from '../dashboard/readModel.js';
import type { SqliteStore } from '../store/sqliteStore.js';
import { number, type Io } from './args.js';
import type { Values } from './flags.js';
import { EXIT } from './exitCodes.js';
import { findRun, openRuns } from './runs.js';
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

/**
 * `troupe ui`: the same on every store. Actions on a run go to its inbox, applied by the process
 * that hosts it (on PostgreSQL the worker holding its lease); a run nobody hosts is shown read only.
 */
export async function ui(_args: string[], values: Values, io: Io, signal?: AbortSignal): Promise<number> {
  const port = values.port === '0' ? 0 : (number('port', values.port, true) ?? DEFAULT_UI_PORT);
  // Read-only (PostgreSQL: read-only sessions, never a migration), every row decoded first: a file
  // that is not troupe's, of a newer schema, or an empty schema is refused here with its typed
  // error before anything is served (and nothing is written).
  const runs = await openRuns(values, io, { readOnly: true });
  try {
    await runs.verify();
    const run = await findRun(runs, values.run);
    const handle = await startDashboard(runsSource(runs), { port, ...tokenFrom(io) });
    io.out.write(`serving run ${forTerminal(run.id)} of ${forTerminal(runs.label)} — Ctrl-C to stop\n`);
    return await serveUntilInterrupted(io, handle, signal);
  } finally {
    await runs.close();
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
  const handle = await startDashboard(
    coordinatorSource(c, store, db, () => live),
    { port, ...tokenFrom(io) },
  );
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
 * `--ui[=port]` on serve: every run of the database this process serves, polled (runs come and
 * go); `live(runId)`: whether serve hosts the run now, healthy (it applies the run's inbox, where
 * the page's actions go). A `main` run's events push at once. Returns how to close it.
 */
export async function uiServing(
  flags: Pick<Values, 'ui'>,
  io: Io,
  reads: StoreReads,
  db: string,
  live: (runId: string) => boolean,
  main?: Pick<Coordinator, 'subscribe' | 'registry'>,
): Promise<() => Promise<void>> {
  if (flags.ui === undefined) return () => Promise.resolve();
  const port = number('ui', flags.ui, true, true) ?? DEFAULT_UI_PORT;
  const polled = polledSource(reads, db, live);
  const pushed = main ? coordinatorWatch(main) : undefined;
  const handle = await startDashboard(
    {
      ...polled,
      watch: (changed) => {
        const stopPolling = polled.watch(changed);
        const stopMain = pushed?.(changed) ?? (() => {});
        return () => (stopPolling(), stopMain());
      },
    },
    { port, ...tokenFrom(io) },
  );
  announce(io, handle);
  return () => handle.close();
}
