/**
 * The library's `createCoordinator` and `resumeCoordinator` (the API keeps its shape). A run a
 * library call hosts on a SQLite file it owns is hosted through the one hosting loop
 * (worker/worker.ts, DESIGN §13), over the file's hosting port (sqliteHosting.ts): the loop claims
 * the run (the owner lock is the lease) and applies what other processes post to the run's inbox —
 * `troupe send`, `stop`, `finish-execution`, the dashboard's actions — through the same
 * `applyOpenRequests` as every host, answered in the commit of its effect. The caller keeps the
 * coordinator it was handed (the loop adopts it: it never rebuilds or shuts it down). A memory
 * store has no other process to hear from: its lease is trivial and there is nothing to apply; a
 * store port (a worker's, a CLI command's) belongs to a host that runs the loop itself.
 * @module
 */
import type { Logger } from 'pino';
import { TroupeError } from '../errors.js';
import { createCoordinator as create, type Coordinator } from '../host/createCoordinator.js';
import type { CoordinatorOptions } from '../host/options.js';
import { resumeCoordinator as resume, type ResumeOptions } from '../host/resumeCoordinator.js';
import type { StorePort } from '../store/port.js';
import type { SqliteStore } from '../store/sqliteStore.js';
import type { Store } from '../store/types.js';
import { startWorker } from './worker.js';
import { sqliteHosting } from '../hosting/sqliteHosting.js';

/** How often a library-hosted run looks at its file's inbox (SQLite has no push). */
const INBOX_POLL_MS = 200;

/** The store, if it is a SQLite file other processes can post to (no store given: the default memory store). */
const fileOf = (store: unknown): SqliteStore | null =>
  typeof store === 'object' && store !== null && typeof (store as Partial<SqliteStore>).openInbox === 'function' ? (store as SqliteStore) : null;

/**
 * Host `c` (run on `file`) through the hosting loop, its inbox looked at every `everyMs`, until the
 * returned function is called. The loop's timers are unref'd: the caller's process decides how
 * long it lives. Stop the loop before shutting `c` down (a request being applied finishes first).
 */
export function hostInLoop(c: Coordinator<Store | StorePort>, file: SqliteStore, everyMs = INBOX_POLL_MS, logger?: Logger): () => Promise<void> {
  const worker = startWorker({
    store: sqliteHosting(file),
    // It hosts the run it adopts, never one it would go looking for.
    concurrency: 0,
    pollMs: everyMs,
    unref: true,
    ...(logger ? { logger } : {}),
    hostOptions: () => Promise.reject(new TroupeError('RUN_LOCKED', 'a library host only hosts the coordinator it was given')),
  });
  const adopted = worker.then((w) => w.adopt(c));
  adopted.catch(() => undefined);
  return async () => {
    await adopted.catch(() => undefined);
    await (await worker).stop();
  };
}

/** `c`, hosted through the loop when its store is a file, until it shuts down. */
function hosted<S extends Store | StorePort>(c: Coordinator<S>, options: Pick<CoordinatorOptions<S>, 'store' | 'logger'>): Coordinator<S> {
  const file = fileOf(options.store);
  if (!file) return c;
  // The loop's warnings (a failed read, retried) go where the run's own logs go.
  const stop = hostInLoop(c as Coordinator<Store | StorePort>, file, INBOX_POLL_MS, options.logger);
  const shutdown = async () => {
    await stop();
    await c.shutdown();
  };
  return { ...c, shutdown, [Symbol.asyncDispose]: shutdown };
}

/**
 * Create a coordinator for one run (on a SQLite file it is hosted through the hosting loop, which applies the run's inbox).
 * @example
 * const coordinator = createCoordinator({ model: scriptedModel(script) });
 * const rootId = await coordinator.start({ name: 'lead', task: 'Review this repo' });
 * await coordinator.waitFor(rootId, ['completed', 'failed', 'crashed', 'stopped']);
 * await coordinator.shutdown();
 */
export function createCoordinator<S extends Store | StorePort = Store>(options: CoordinatorOptions<S>): Coordinator<S> {
  return hosted(create<S>(options), options);
}

/** Resume a run from its store (on a SQLite file it is hosted through the hosting loop, which applies the run's inbox). */
export async function resumeCoordinator<S extends Store | StorePort = Store>(options: ResumeOptions<S>): Promise<Coordinator<S>> {
  return hosted(await resume<S>(options), options);
}
