/**
 * Which database and which run a CLI command acts on, and reading them.
 * @module
 */
import { existsSync } from 'node:fs';
import { isProactiveRunId } from '../autonomy/proactiveRouter.js';
import { agentViews, type AgentView } from '../host/registry.js';
import { TroupeError } from '../errors.js';
import { fileState } from '../store/files.js';
import { openStore, type SqliteStore } from '../store/sqliteStore.js';
import type { RunRow } from '../store/types.js';
import { DEFAULT_DB, type SavedRunConfig } from './config.js';

export const DEMO_DB = '.troupe/demo.db';

/** `--db`, else the default database, else the demo's when only it exists. */
export const defaultReadDb = (db: string | undefined) => db ?? (existsSync(DEFAULT_DB) || !existsSync(DEMO_DB) ? DEFAULT_DB : DEMO_DB);

/**
 * RUN_NOT_FOUND when nothing is at `db`; STORE_OPEN_FAILED when something is in the way of the
 * file (a directory, a parent that is a file, a directory that may not be searched).
 */
export function requireDatabase(db: string, hint = ''): void {
  if (!fileState(db)) throw new TroupeError('RUN_NOT_FOUND', `No database at ${db}${hint}`);
}

/** The latest run no proactive trigger started (`troupe serve` keeps `proactive-<name>` runs in the same database). */
export function latestMainRun(store: Pick<SqliteStore, 'listRuns'>): RunRow | undefined {
  return store.listRuns().filter((r) => !isProactiveRunId(r.id)).at(-1);
}

/**
 * The run resume, status, tree, send and stop act on: `--run <id>` if given (RUN_NOT_FOUND if the
 * database has no such run), else the latest main run, else the latest run.
 */
export function latestRun(store: Pick<SqliteStore, 'listRuns'>, runId?: string): RunRow | undefined {
  if (runId !== undefined) {
    const run = store.listRuns().find((r) => r.id === runId);
    if (!run) throw new TroupeError('RUN_NOT_FOUND', `The database holds no run ${runId}`);
    return run;
  }
  return latestMainRun(store) ?? store.listRuns().at(-1);
}

export function savedConfig(store: Pick<SqliteStore, 'listEvents'>, run: RunRow): SavedRunConfig {
  const event = store.listEvents(run.id).find((e) => e.type === 'cli.run');
  return (event?.data ?? {}) as SavedRunConfig;
}

/**
 * Open `db` read-only (no lock: the run may be live) and find the run. With `verify`, every row of
 * the file is decoded first (for a command about to write to it).
 */
export function readRun(db: string, runId: string | undefined, verify = false): { store: SqliteStore; run: RunRow } {
  requireDatabase(db);
  const store = openStore({ path: db, readonly: true });
  try {
    if (verify) store.verify();
    const run = latestRun(store, runId);
    if (!run) throw new TroupeError('RUN_NOT_FOUND', `${db} holds no run`);
    return { store, run };
  } catch (err) {
    store.close();
    throw err;
  }
}

/** Every agent of a run as the live registry would show it (spend summed from the usage ledger). */
export function views(store: SqliteStore, runId: string): AgentView[] {
  return agentViews(store.listAgents(runId), store.listUsage(runId));
}

/** Kept here for the CLI's PostgreSQL commands (pg.ts); the one home is src/host/registry.ts. */
export { agentViews };
