/**
 * Applying inbox requests (`troupe send` / `troupe stop` from any machine) to a hosted run, through
 * its live coordinator, and answering them fenced by the run's lease.
 * @module
 */
import type { Coordinator } from '../host/createCoordinator.js';
import { errorMessage, isTroupeError } from '../errors.js';
import type { InboxRequest, InboxResult } from '../store/inbox.js';
import type { StorePort } from '../store/port.js';
import type { RunLease } from '../store/postgres/lease.js';
import type { PostgresStore } from '../store/postgres/store.js';
import { answerRequest, openRequests } from './inbox.js';

/**
 * Apply one inbox request through the run's coordinator (the same on SQLite and PostgreSQL): send
 * (with the message type of `payload.type` if given: `proactive` for a trigger's fire), stop (its
 * subtree unless `cascade: false`), pause or resume the budget. A refusal is the answer, with its
 * code.
 */
export async function applyRequest(c: Pick<Coordinator, 'get' | 'send' | 'stop' | 'pauseBudget' | 'resumeBudget'>, request: Pick<InboxRequest, 'kind' | 'payload'>): Promise<InboxResult> {
  try {
    if (request.kind === 'pause') {
      await c.pauseBudget();
      return { ok: true, message: 'budget paused: agents park before their next paid call' };
    }
    if (request.kind === 'resume') {
      const woken = await c.resumeBudget();
      return { ok: true, message: `budget resumed (${woken.length} agent(s) woken)` };
    }
    const agent = c.get(String(request.payload.agent));
    if (request.kind === 'send') {
      const type = typeof request.payload.type === 'string' ? { type: request.payload.type } : {};
      const row = await c.send(agent.id, { content: String(request.payload.content), ...type });
      return { ok: true, message: `queued for ${agent.name} (${agent.id})`, messageId: row.id };
    }
    const stopped = await c.stop(agent.id, { cascade: request.payload.cascade !== false });
    return { ok: true, message: `stopped ${stopped.map((id) => c.get(id).name).join(', ') || '(already terminal)'}` };
  } catch (err) {
    return isTroupeError(err) ? { ok: false, code: err.code, message: `${err.code}: ${err.message}` } : { ok: false, message: errorMessage(err) };
  }
}

export async function applyRequests(store: PostgresStore, lease: RunLease, c: Coordinator<StorePort>): Promise<void> {
  for (const request of await openRequests(store, lease.runId)) {
    if (lease.lost) return;
    const result = await applyRequest(c, request);
    // A refusal caused by the lease moving on is not this host's to answer.
    if (lease.lost) return;
    await answerRequest(store, lease, request.id, result, Date.now());
  }
}
