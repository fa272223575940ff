/**
 * Applying inbox requests (`troupe send` / `troupe stop` from any machine) to a hosted run, through
 * its live coordinator, and answering them fenced by the run's lease.
 * @module
 */
import type { Coordinator } from '../host/createCoordinator.js';
import { errorMessage, isTroupeError } from '../errors.js';
import type { InboxResult } from '../store/inbox.js';
import type { StorePort } from '../store/port.js';
import type { RunLease } from '../store/postgres/lease.js';
import type { PostgresStore } from '../store/postgres/store.js';
import { answerRequest, openRequests } from './inbox.js';

export async function applyRequests(store: PostgresStore, lease: RunLease, c: Coordinator<StorePort>): Promise<void> {
  for (const request of await openRequests(store, lease.runId)) {
    if (lease.lost) return;
    let result: InboxResult;
    try {
      const agent = c.get(String(request.payload.agent));
      if (request.kind === 'send') {
        const row = await c.send(agent.id, { content: String(request.payload.content) });
        result = { ok: true, message: `queued for ${agent.name} (${agent.id})`, messageId: row.id };
      } else {
        const stopped = await c.stop(agent.id);
        result = { ok: true, message: `stopped ${stopped.map((id) => c.get(id).name).join(', ') || '(already terminal)'}` };
      }
    } catch (err) {
      if (lease.lost) return;
      result = isTroupeError(err) ? { ok: false, code: err.code, message: `${err.code}: ${err.message}` } : { ok: false, message: errorMessage(err) };
    }
    await answerRequest(store, lease, request.id, result, Date.now());
  }
}
