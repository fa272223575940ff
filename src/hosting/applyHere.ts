/**
 * Host a claimed run only to apply the requests posted to it (a CLI command found nobody hosting
 * the run): resumed with a model that starts nothing, every open request applied and answered
 * through the coordinator — the same rules and the same keyed effects as any host — then shut
 * down and let go as its rows say (runnable when an agent has work to do).
 * @module
 */
import { DEFAULT_IDLE_RESUME_MS } from '../../machines/types.js';
import type { CoordinatorOptions } from '../host/options.js';
import { resumeCoordinator } from '../host/resumeCoordinator.js';
import type { StorePort } from '../store/port.js';
import type { ReleaseState } from '../store/postgres/lease.js';
import type { InboxResult } from '../store/types.js';
import { applyOpenRequests } from './apply.js';
import { holdModel } from './holdModel.js';
import { releaseStateAfter } from './release.js';
import type { RunClaim } from './runStore.js';

export type ApplyHereOptions = Pick<CoordinatorOptions<StorePort>, 'limits' | 'logger' | 'idleResumeMs'>;

/** Apply the claimed run's open requests here; resolves with their answers by request id, the claim released. */
export async function applyHere(claim: RunClaim, options: ApplyHereOptions = {}): Promise<Map<number, InboxResult>> {
  const { runId, port } = claim;
  let answers = new Map<number, InboxResult>();
  // Whatever goes wrong, the run is let go for another host to resume from what committed.
  let release: ReleaseState = { state: 'runnable' };
  try {
    const run = await port.getRun(runId);
    const c = await resumeCoordinator<StorePort>({
      ...options,
      store: port,
      runId,
      model: holdModel,
      holdTurns: true,
      ...(run ? { interactive: run.interactive } : {}),
    });
    try {
      answers = await applyOpenRequests(c, () => claim.openRequests());
    } finally {
      await c.shutdown();
    }
    release = await releaseStateAfter(port, runId, options.idleResumeMs ?? DEFAULT_IDLE_RESUME_MS);
  } finally {
    await claim.release(release);
  }
  return answers;
}
