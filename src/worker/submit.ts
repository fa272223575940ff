/**
 * Submitting a run from any machine: its run row and root agent are committed under a short lease
 * of the submitter, which then lets the run go `runnable` and wakes the workers (NOTIFY). The root's
 * first model call is made by whichever worker claims the run — or, with `hold`, the submitter
 * keeps the claim (made with a worker's lease options) and hands it to that worker.
 * @module
 */
import { createHash, randomUUID } from 'node:crypto';
import { ConfigError, TroupeError } from '../errors.js';
import { createCoordinator } from '../host/createCoordinator.js';
import { runExistsError, type CoordinatorOptions } from '../host/options.js';
import { holdModel } from '../hosting/holdModel.js';
import type { StorePort } from '../store/port.js';
import type { LeaseOptions, RunLease } from '../store/postgres/lease.js';
import type { HostingStore } from '../hosting/hostingStore.js';

export interface SubmitOptions extends Pick<CoordinatorOptions<StorePort>, 'interactive' | 'budget' | 'limits'> {
  root: { name: string; task: string; skills?: string[] };
  runId?: string;
  /**
   * An idempotency key (1 to 200 characters): submitting again with it creates nothing and
   * resolves with the first submit's run (its id is derived from the key). Not with `runId`.
   */
  key?: string;
  /** Written as the run's first event (the CLI keeps the run's configuration here). */
  event?: { type: string; data: Record<string, unknown> };
  /** Claim the run with these lease options and keep the claim (returned as `lease`): no other worker gets it. */
  hold?: LeaseOptions;
}

export async function submitRun(
  store: Pick<HostingStore, 'reads' | 'claim' | 'wake'>,
  options: SubmitOptions,
): Promise<{ runId: string; rootId: string; lease?: RunLease; existing?: true }> {
  const { root, event, hold, key, ...rest } = options;
  if (key !== undefined) {
    if (typeof key !== 'string' || key.length === 0 || key.length > 200)
      throw new ConfigError(`Expected key to be a string of 1 to 200 characters, got ${JSON.stringify(key)}`);
    if (options.runId !== undefined) throw new ConfigError('Give a submit a runId or a key, not both');
    // The same key names the same run, on any machine, across restarts.
    const runId = runIdOfKey(key);
    const existing = async () => {
      const found = await store.reads.getRun(runId);
      if (!found) return null;
      if (found.rootId === null) throw new TroupeError('RUN_NOT_FOUND', `run ${runId} (key ${JSON.stringify(key)}) exists without a root`);
      return { runId, rootId: found.rootId, existing: true as const };
    };
    const first = await existing();
    if (first) return first;
    try {
      return await submitRun(store, { ...options, key: undefined, runId });
    } catch (err) {
      // A submit with the same key won the race (it holds the claim, or its run is in): that run is the answer.
      const raced = await existing().catch(() => null);
      if (raced) return raced;
      throw err;
    }
  }
  const runId = options.runId ?? `run_${randomUUID()}`;
  // Refused before the claim: claiming a finished or parked run's lease would make it runnable
  // again, and the release after the refusal would leave it so (a worker would host it for nothing).
  if (options.runId !== undefined && (await store.reads.getRun(runId))) {
    throw runExistsError(runId);
  }
  const lease = await store.claim(runId, hold ?? { owner: `submit:${randomUUID().slice(0, 8)}`, ttlMs: 60_000, heartbeatMs: 0 });
  const c = createCoordinator<StorePort>({ ...rest, runId, store: lease.port, model: holdModel, holdTurns: true });
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

/** The run id a submit key names: `run_k_` and 32 hex digits of its SHA-256. */
export const runIdOfKey = (key: string): string => `run_k_${createHash('sha256').update(key).digest('hex').slice(0, 32)}`;
