/**
 * The PostgreSQL inbox: how `troupe send` / `troupe stop` on any machine reach whichever worker
 * hosts a run. The poster inserts a request and wakes the run in one transaction (NOTIFY fires on
 * commit); the hosting worker — or the next one to claim the run — applies it through its
 * coordinator, which commits the answer with the effect in one transaction fenced by its lease
 * (host/inbox.ts), and the poster reads the answer. Exactly once: a request is open until the
 * commit that applies it, and answered by that commit.
 * @module
 */
import type pg from 'pg';
import { toInboxRequest } from '../store/decode.js';
import type { InboxDbRow } from '../store/dbRows.js';
import type { FireClaim, FireClaimed, FireKey, InboxPost, InboxRequest } from '../store/types.js';
import type { PostgresStore } from '../store/postgres/store.js';

/**
 * `work` in one read-write transaction on a connection of the pool: committed if it resolves,
 * rolled back if it throws. READ WRITE: a posting is the one write a read-only store (`troupe
 * ui`'s) makes, deliberately. A connection that failed meanwhile is not returned to the pool.
 */
async function inTransaction<T>(store: PostgresStore, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await store.pool.connect();
  let broken: Error | undefined;
  const onError = (err: Error) => (broken = err);
  client.on('error', onError);
  try {
    await client.query('BEGIN READ WRITE');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.off('error', onError);
    client.release(broken);
  }
}

/** Insert a request and wake its run (NOTIFY, sent when the transaction commits); its id. */
async function insertRequest(store: PostgresStore, client: pg.PoolClient, request: InboxPost): Promise<number> {
  const { rows } = await client.query<{ id: number }>('INSERT INTO inbox (run_id, kind, payload, created_at) VALUES ($1, $2, $3, $4) RETURNING id', [
    request.runId,
    request.kind,
    JSON.stringify(request.payload),
    request.at,
  ]);
  await store.wake(request.runId, client);
  return rows[0]!.id;
}

/** From any machine: post a request to a run and wake it; resolves with the request id. */
export function postRequest(store: PostgresStore, request: InboxPost): Promise<number> {
  return inTransaction(store, (client) => insertRequest(store, client, request));
}

/**
 * From any machine: claim a proactive fire (one row per scope, trigger and tick; a second insert is
 * ignored) and, claimed, post `request` and wake its run in the same transaction: a tick is posted
 * once, or not at all, whichever process sees it and whenever one crashes.
 */
export function claimFire(store: PostgresStore, claim: FireClaim, request?: InboxPost): Promise<FireClaimed> {
  return inTransaction(store, async (client): Promise<FireClaimed> => {
    const { rowCount } = await client.query(
      'INSERT INTO proactive_fires (scope, trigger_name, tick, claimed_at) VALUES ($1, $2, $3, $4) ON CONFLICT (scope, trigger_name, tick) DO NOTHING',
      [claim.scope, claim.trigger, claim.tick, claim.at],
    );
    if (rowCount !== 1) return { claimed: false };
    if (!request) return { claimed: true, requestId: null };
    const requestId = await insertRequest(store, client, request);
    await client.query('UPDATE proactive_fires SET request_id = $1 WHERE scope = $2 AND trigger_name = $3 AND tick = $4', [
      requestId,
      claim.scope,
      claim.trigger,
      claim.tick,
    ]);
    return { claimed: true, requestId };
  });
}

/** Forget the fire claims made before `before`; how many. */
export async function pruneFires(store: PostgresStore, before: number): Promise<number> {
  const { rowCount } = await store.pool.query('DELETE FROM proactive_fires WHERE claimed_at < $1', [before]);
  return rowCount ?? 0;
}

/** When the fire's claim was made (or taken over); null: unclaimed. */
export async function fireClaimedAt(store: PostgresStore, key: FireKey): Promise<number | null> {
  const { rows } = await store.pool.query<{ claimed_at: string }>(
    'SELECT claimed_at FROM proactive_fires WHERE scope = $1 AND trigger_name = $2 AND tick = $3',
    [key.scope, key.trigger, key.tick],
  );
  return rows[0] ? Number(rows[0].claimed_at) : null;
}

/** Move the fire's claim made at `from` to `to` (or release it: null), if it still stands so; whether it moved. */
export async function moveFireClaim(store: PostgresStore, key: FireKey, from: number, to: number | null): Promise<boolean> {
  const where = 'scope = $1 AND trigger_name = $2 AND tick = $3 AND claimed_at = $4';
  const args = [key.scope, key.trigger, key.tick, from];
  const { rowCount } =
    to === null
      ? await store.pool.query(`DELETE FROM proactive_fires WHERE ${where}`, args)
      : await store.pool.query(`UPDATE proactive_fires SET claimed_at = $5 WHERE ${where}`, [...args, to]);
  return rowCount === 1;
}

/** From any machine: the request as it stands (answered or not). */
export async function readRequest(store: PostgresStore, id: number): Promise<InboxRequest | undefined> {
  const { rows } = await store.pool.query<InboxDbRow>('SELECT * FROM inbox WHERE id = $1', [id]);
  return rows[0] && toInboxRequest(rows[0]);
}

/** The host: requests posted to its run and not answered yet, oldest first. */
export async function openRequests(store: PostgresStore, runId: string): Promise<InboxRequest[]> {
  const { rows } = await store.pool.query<InboxDbRow>('SELECT * FROM inbox WHERE run_id = $1 AND done_at IS NULL ORDER BY id', [runId]);
  return rows.map(toInboxRequest);
}

/** The wake sequence of a run (a release is conditional on it). */
export async function wakeSeq(store: PostgresStore, runId: string): Promise<number> {
  const { rows } = await store.pool.query<{ wake_seq: number }>('SELECT wake_seq FROM run_leases WHERE run_id = $1', [runId]);
  return rows[0]?.wake_seq ?? 0;
}
