/**
 * A SQLite file's inbox (DESIGN §13): the requests other processes post to a run (send, stop, an
 * execution finished, …) until its owner applies and answers them, and the proactive fires'
 * claims, each fire claimed once and its request posted in the same transaction. These writes
 * stay on the main thread when the owner's commits run on the commit thread (sqliteWriter.ts),
 * which answers requests in its commits too: nothing here is cached, so either connection may
 * write these tables (SQLite's lock orders them).
 * @module
 */
import { toInboxRequest } from './decode.js';
import type { InboxDbRow } from './dbRows.js';
import type { Statements } from './sqliteStatements.js';
import type { FireClaimed, SqliteInbox } from './types.js';

/** The inbox over the store's statements, its `transaction` and its redactor's `scrubJson`. */
export function inboxOf(q: Statements, transaction: <T>(fn: () => T) => T, json: (value: unknown) => string): SqliteInbox {
  return {
    openInbox: (runId) => (q.openInbox.all(runId) as InboxDbRow[]).map(toInboxRequest),
    answerInbox: (id, result, at) =>
      transaction(() => {
        q.answerInbox.run(at, json(result), id);
      }),
    inboxRuns: () => (q.inboxRuns.all() as { run_id: string }[]).map((r) => r.run_id),
    postInbox: (request) => transaction(() => Number(q.postInbox.run(request.runId, request.kind, json(request.payload), request.at).lastInsertRowid)),
    claimFire: (claim, request) =>
      transaction((): FireClaimed => {
        if (q.claimFire.run(claim.scope, claim.trigger, claim.tick, claim.at).changes === 0) return { claimed: false };
        if (!request) return { claimed: true, requestId: null };
        const requestId = Number(q.postInbox.run(request.runId, request.kind, json(request.payload), request.at).lastInsertRowid);
        q.fireRequest.run(requestId, claim.scope, claim.trigger, claim.tick);
        return { claimed: true, requestId };
      }),
    pruneFires: (before) => transaction(() => q.pruneFires.run(before).changes),
    fireClaimedAt: (key) => (q.fireClaimedAt.get(key.scope, key.trigger, key.tick) as { claimed_at: number } | undefined)?.claimed_at ?? null,
    moveFireClaim: (key, from, to) =>
      transaction(
        () =>
          (to === null ? q.releaseFire.run(key.scope, key.trigger, key.tick, from) : q.retakeFire.run(to, key.scope, key.trigger, key.tick, from)).changes ===
          1,
      ),
  };
}
