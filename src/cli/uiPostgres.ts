/**
 * `troupe ui --db postgres://…`: the dashboard over a PostgreSQL database (issue 17's scale-out
 * store), read through its lease-free reads and polled for changes. It only reads: the page shows
 * every run as not live here, and its actions are refused (RUN_NOT_LIVE) — `troupe send` and
 * `troupe stop` with the same --db reach the worker hosting a run.
 * @module
 */
import { startDashboard, type DashboardHandle, type DashboardOptions } from '../dashboard/server.js';
import { pickRun } from '../dashboard/readModel.js';
import { polledSource } from '../dashboard/sources.js';
import { openPostgresStore } from '../store/postgres/store.js';
import type { Io } from './args.js';
import { secrets } from './setup.js';
import { forTerminal } from './terminal.js';

export async function uiPostgres(url: string, runId: string | undefined, io: Io, options: DashboardOptions, serve: (handle: DashboardHandle) => Promise<number>): Promise<number> {
  const store = await openPostgresStore({ url, ...secrets(io) });
  try {
    // A run id that does not exist, or a database with no run: refused before anything is served.
    const run = await pickRun(store.reads, runId);
    const handle = await startDashboard(polledSource(store.reads, store.url, () => false), options);
    io.out.write(`serving run ${forTerminal(run.id)} of ${forTerminal(store.url)} (read only) — Ctrl-C to stop\n`);
    return await serve(handle);
  } finally {
    await store.close();
  }
}
