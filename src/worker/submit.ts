/**
 * Submitting a run from any machine: its run row and root agent are committed under a short lease
 * of the submitter, which then lets the run go `runnable` and wakes the workers (NOTIFY). The root's
 * first model call is made by whichever worker claims the run — or, with `hold`, the submitter
 * keeps the claim (made with a worker's lease options) and hands it to that worker.
 * @module
 */
import { randomUUID } from 'node:crypto';
import { toError } from '../errors.js';
import { createCoordinator } from '../host/createCoordinator.js';
import { runExistsError, type CoordinatorOptions } from '../host/options.js';
import type { Model } from '../model/types.js';
import type { StorePort } from '../store/port.js';
import type { LeaseOptions, RunLease } from '../store/postgres/lease.js';
import type { PostgresStore } from '../store/postgres/store.js';

/** A model that never answers: the submitter starts nothing (its call is aborted at shutdown). */
const holdModel: Model = {
  name: 'troupe-submit',
  complete: (_request, { signal }) => new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(toError(signal.reason)), { once: true })),
};

export interface SubmitOptions extends Pick<CoordinatorOptions<StorePort>, 'interactive' | 'budget' | 'limits'> {
  root: { name: string; task: string; skills?: string[] };
  runId?: string;
  /** Written as the run's first event (the CLI keeps the run's configuration here). */
  event?: { type: string; data: Record<string, unknown> };
  /** Claim the run with these lease options and keep the claim (returned as `lease`): no other worker gets it. */
  hold?: LeaseOptions;
}

export async function submitRun(store: PostgresStore, options: SubmitOptions): Promise<{ runId: string; rootId: string; lease?: RunLease }> {
  const runId = options.runId ?? `run_${randomUUID()}`;
  const { root, event, hold, ...rest } = options;
  // Refused before the claim: claiming a finished or parked run's lease would make it runnable
  // again, and the release after the refusal would leave it so (a worker would host it for nothing).
  if (options.runId !== undefined && (await store.reads.getRun(runId))) {
    throw runExistsError(runId);
  }
  const lease = await store.claim(runId, hold ?? { owner: `submit:${randomUUID().slice(0, 8)}`, ttlMs: 60_000, heartbeatMs: 0 });
  const c = createCoordinator<StorePort>({ ...rest, runId, store: lease.port, model: holdModel });
  let rootId: string;
  try {
    rootId = await c.start(root);
    if (event) await lease.port.commit([{ op: 'appendEvent', row: { runId, agentId: null, type: event.type, data: event.data, at: Date.now() } }]);
  } catch (err) {
    await c.shutdown();
    // Not left claimed for the lease's minute: a run another submitter created is the workers'
    // again; a lease row without a run is done (no worker would ever manage to host it).
    const exists = await store.reads.getRun(runId).catch(() => null);
    await lease.release(exists ? { state: 'runnable' } : { state: 'done' }).catch(() => undefined);
    throw err;
  }
  await c.shutdown();
  if (hold) return { runId, rootId, lease };
  await lease.release({ state: 'runnable' });
  await store.wake(runId);
  return { runId, rootId };
}
