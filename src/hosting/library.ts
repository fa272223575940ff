/**
 * The library's `createCoordinator` and `resumeCoordinator` (the API keeps its shape): a run hosted
 * by a library call on a SQLite file it owns takes what other processes post to the run's inbox —
 * `troupe send`, `stop`, `finish-execution`, the dashboard's actions — and applies each through
 * the same `applyOpenRequests` as every host (apply.ts), answered in the commit of its effect. A memory store has no
 * other process to hear from; a store port (a worker's, a CLI command's) belongs to a host that
 * applies the inbox itself.
 * @module
 */
import { createCoordinator as create, type Coordinator } from '../host/createCoordinator.js';
import type { CoordinatorOptions } from '../host/options.js';
import { resumeCoordinator as resume, type ResumeOptions } from '../host/resumeCoordinator.js';
import type { StorePort } from '../store/port.js';
import type { InboxRequest, Store } from '../store/types.js';
import { applyOpenRequests } from './apply.js';

/** How often a library-hosted run looks at its file's inbox (SQLite has no push). */
const INBOX_POLL_MS = 200;

/** A store with an inbox other processes post to: a SQLite file this process owns (answers go with the run's commits). */
interface FileInbox {
  openInbox(runId: string): InboxRequest[];
}

/** The store's inbox, if it has one (no store given: the default memory store, which has none). */
const fileInboxOf = (store: unknown): FileInbox | null =>
  typeof store === 'object' && store !== null && typeof (store as Partial<FileInbox>).openInbox === 'function' ? (store as FileInbox) : null;

/**
 * Apply what other processes post to run `c.runId` in `inbox`, every `everyMs` (unref'd: the
 * caller's process decides how long it lives), until the returned function is called.
 */
export function applyFileInbox(c: Coordinator<Store | StorePort>, inbox: FileInbox, everyMs = INBOX_POLL_MS): () => void {
  let busy = false;
  const poll = async () => {
    if (busy || !c.health().ok) return;
    busy = true;
    try {
      await applyOpenRequests(c, () => Promise.resolve(inbox.openInbox(c.runId)));
    } finally {
      busy = false;
    }
  };
  const timer = setInterval(() => void poll().catch(() => undefined), everyMs);
  timer.unref();
  return () => clearInterval(timer);
}

/** `c`, applying its file's inbox until it shuts down. */
function withInbox<S extends Store | StorePort>(c: Coordinator<S>, store: unknown): Coordinator<S> {
  const inbox = fileInboxOf(store);
  if (!inbox) return c;
  const stop = applyFileInbox(c as Coordinator<Store | StorePort>, inbox);
  const shutdown = async () => {
    stop();
    await c.shutdown();
  };
  return { ...c, shutdown, [Symbol.asyncDispose]: shutdown };
}

/**
 * Create a coordinator for one run (on a SQLite file it also applies the run's inbox).
 * @example
 * const coordinator = createCoordinator({ model: scriptedModel(script) });
 * const rootId = await coordinator.start({ name: 'lead', task: 'Review this repo' });
 * await coordinator.waitFor(rootId, ['completed', 'failed', 'crashed', 'stopped']);
 * await coordinator.shutdown();
 */
export function createCoordinator<S extends Store | StorePort = Store>(options: CoordinatorOptions<S>): Coordinator<S> {
  return withInbox(create<S>(options), options.store);
}

/** Resume a run from its store (on a SQLite file it also applies the run's inbox). */
export async function resumeCoordinator<S extends Store | StorePort = Store>(options: ResumeOptions<S>): Promise<Coordinator<S>> {
  return withInbox(await resume<S>(options), options.store);
}
