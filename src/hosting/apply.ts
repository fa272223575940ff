/**
 * The one loop every host runs over a run's inbox (a worker, the process driving a run, a CLI
 * command hosting a run for a moment, a library call on a file): apply each open request through
 * the run's coordinator, which commits its answer with its effect (host/inbox.ts).
 * @module
 */
import type { Coordinator } from '../host/createCoordinator.js';
import type { InboxRequest, InboxResult } from '../store/types.js';

/**
 * Apply every open request of a hosted run, oldest first. Stops at a request once `held` says the
 * run is no longer this host's (its commits would be refused anyway: the lease fences them).
 */
export async function applyOpenRequests(
  c: Pick<Coordinator, 'applyRequest'>,
  openRequests: () => Promise<InboxRequest[]>,
  held: { readonly lost: unknown } = { lost: null },
): Promise<Map<number, InboxResult>> {
  const answers = new Map<number, InboxResult>();
  for (const request of await openRequests()) {
    if (held.lost) break;
    answers.set(request.id, await c.applyRequest(request));
  }
  return answers;
}
