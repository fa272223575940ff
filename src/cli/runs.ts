/**
 * Which database and which run a CLI command acts on, and reading them.
 * @module
 */
import { existsSync } from 'node:fs';
import { isProactiveRunId } from '../autonomy/proactiveIds.js';
import { TroupeError } from '../errors.js';
import { fileState } from '../store/files.js';
import type { SqliteStore } from '../store/sqliteStore.js';
import type { RunRow } from '../store/types.js';
import type { RunStore } from '../hosting/runStore.js';
import { sqliteRuns } from '../hosting/sqliteRuns.js';
import { isPostgresUrl, type Io } from './args.js';
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
  return store
    .listRuns()
    .filter((r) => !isProactiveRunId(r.id))
    .at(-1);
}

/**
 * The runs of the database `--db` names (a file by default, a postgres:// URL for PostgreSQL): one
 * port for every command (hosting/runStore.ts). `readOnly` (status, tree): PostgreSQL opens
 * read-only sessions and never migrates; a file must exist (RUN_NOT_FOUND otherwise) either way.
 */
export async function openRuns(values: { db?: string | undefined }, io: Io, options: { readOnly?: boolean } = {}): Promise<RunStore> {
  const redactor = io.redactor ? { redactor: io.redactor } : {};
  if (isPostgresUrl(values.db)) {
    // Loaded only for a PostgreSQL --db: a command on a file never loads pg.
    const [{ openPostgresStore }, { postgresRuns }] = await Promise.all([import('../store/postgres/store.js'), import('../hosting/postgresRuns.js')]);
    return postgresRuns(await openPostgresStore({ url: values.db, ...(options.readOnly ? { readOnly: true } : {}), ...redactor }));
  }
  const db = defaultReadDb(values.db);
  requireDatabase(db);
  return sqliteRuns(db, redactor);
}

/** How a run nobody hosts gets its next host, as a command the user can type. */
export const nextHost = (values: { db?: string | undefined }): string =>
  isPostgresUrl(values.db) ? 'a worker (troupe worker --db …)' : `troupe resume${values.db === undefined ? '' : ` --db ${values.db}`}`;

/** `--run <id>` (RUN_NOT_FOUND if there is no such run), else the latest main run, else the latest run. */
/** The run's agent `agent` (its id or name); AGENT_NOT_FOUND if it has none. */
export async function findAgent(runs: Pick<RunStore, 'reads'>, run: RunRow, agent: string) {
  const target = (await runs.reads.listAgents(run.id)).find((a) => a.id === agent || a.name === agent);
  if (!target) throw new TroupeError('AGENT_NOT_FOUND', `No agent "${agent}" in run ${run.id}`);
  return target;
}

export async function findRun(runs: Pick<RunStore, 'reads' | 'label'>, runId: string | undefined): Promise<RunRow> {
  const all = await runs.reads.listRuns();
  const run = runId === undefined ? (latestMainRun({ listRuns: () => all }) ?? all.at(-1)) : all.find((r) => r.id === runId);
  if (!run) throw new TroupeError('RUN_NOT_FOUND', runId === undefined ? `${runs.label} holds no run` : `${runs.label} holds no run ${runId}`);
  return run;
}

/** The settings a run was started with (the latest `cli.run` event: a resume with flags may append one). */
export async function savedSettings(runs: Pick<RunStore, 'reads'>, runId: string): Promise<SavedRunConfig> {
  return ((await runs.reads.eventsOf(runId, 'cli.run')).at(-1)?.data ?? {}) as SavedRunConfig;
}
