/**
 * The runs of a PostgreSQL schema (runStore.ts): a claim is the run's lease row (its epoch is the
 * fencing token), requests go through the inbox table and wake the workers (NOTIFY), and a run let
 * go runnable is hosted by the next worker to claim it.
 * @module
 */
import { randomUUID } from 'node:crypto';
import { isTroupeError } from '../errors.js';
import type { PostgresStore } from '../store/postgres/store.js';
import { openRequests, postRequest, readRequest } from './postgresInbox.js';
import type { Delivery } from '../store/inbox.js';
import type { RunClaim, RunStore } from './runStore.js';

/** A CLI command's claim: long enough to apply a request, no heartbeat (it never hosts for long). */
const SHORT_CLAIM = { ttlMs: 60_000, heartbeatMs: 0 };

export function postgresRuns(store: PostgresStore): RunStore {
  return {
    label: store.url,
    reads: store.reads,
    // Rows are decoded as they are read; the open refused a schema it cannot read.
    verify: () => Promise.resolve(),
    async hostOf(runId) {
      const lease = await store.lease(runId);
      if (!lease) return { hosted: false, state: 'none', owner: null, epoch: null };
      return { hosted: lease.owner !== null, state: lease.state, owner: lease.owner, epoch: lease.epoch };
    },
    async runOfExecution(id) {
      const { rows } = await store.pool.query<{ run_id: string }>('SELECT a.run_id FROM executions e JOIN agents a ON a.id = e.agent_id WHERE e.id = $1', [id]);
      return rows[0]?.run_id;
    },
    async claim(runId) {
      let lease;
      try {
        lease = await store.claim(runId, { owner: `cli:${randomUUID().slice(0, 8)}`, ...SHORT_CLAIM });
      } catch (err) {
        if (isTroupeError(err) && err.code === 'RUN_LOCKED') return null;
        throw err;
      }
      const claim: RunClaim = {
        runId,
        port: lease.port,
        openRequests: () => openRequests(store, runId),
        async release(state) {
          await lease.release(state);
          if (state.state === 'runnable') await store.wake(runId);
        },
      };
      return claim;
    },
    post: (request) => postRequest(store, request),
    request: (id) => readRequest(store, id),
    async delivery(messageId) {
      const { rows } = await store.pool.query<{ delivered_at: string | null; name: string; status: string }>(
        'SELECT m.delivered_at, a.name, a.status FROM messages m JOIN agents a ON a.id = m.to_agent WHERE m.id = $1',
        [messageId],
      );
      const row = rows[0];
      return (
        row && ({ deliveredAt: row.delivered_at === null ? null : Number(row.delivered_at), agentName: row.name, agentStatus: row.status } satisfies Delivery)
      );
    },
    close: () => store.close(),
  };
}
