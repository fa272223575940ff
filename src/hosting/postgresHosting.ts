/**
 * The hosting port over PostgreSQL (hostingStore.ts): leases are rows with an epoch, the inbox is
 * a table, and wakes are NOTIFYs on a dedicated LISTEN connection, made again when it drops (the
 * worker's poll is the backstop: a notification is lost while the connection is down).
 * @module
 */
import type pg from 'pg';
import { DB_NOW } from '../store/postgres/lease.js';
import { wakeChannel, type PostgresStore } from '../store/postgres/store.js';
import type { HostingStore } from './hostingStore.js';
import { claimFire, fireClaimedAt, moveFireClaim, openRequests, postRequest, pruneFires, wakeSeq } from './postgresInbox.js';

export function postgresHosting(store: PostgresStore, pollMs = 5_000): HostingStore {
  return {
    reads: store.reads,
    claim: (runId, lease) => store.claim(runId, lease),
    claimNext: (lease) => store.claimNext(lease),
    wake: (runId) => store.wake(runId),
    post: (request) => postRequest(store, request),
    claimFire: (claim, request) => claimFire(store, claim, request),
    pruneFires: (before) => pruneFires(store, before),
    fireClaimedAt: (key) => fireClaimedAt(store, key),
    moveFireClaim: (key, from, to) => moveFireClaim(store, key, from, to),
    openRequests: (runId) => openRequests(store, runId),
    wakeSeq: (runId) => wakeSeq(store, runId),
    // On the database's clock, which decides when a parked run may be claimed (claimNext).
    async nextWakeIn() {
      const { rows } = await store.pool.query<{ wait: string | null }>(
        `SELECT min(wake_at) - ${DB_NOW} AS wait FROM run_leases WHERE state = 'parked' AND wake_at > ${DB_NOW}`,
      );
      const wait = rows[0]?.wait;
      return wait === null || wait === undefined ? null : Number(wait);
    },
    async listen(onWake, logger) {
      let listener: pg.Client | null = null;
      let stopped = false;
      const listen = async (): Promise<void> => {
        if (stopped) return;
        try {
          const client = await store.connectDedicated();
          client.on('notification', (n) => onWake(n.payload ?? ''));
          client.on('error', () => {
            listener = null;
            void client.end().catch(() => undefined);
            setTimeout(() => void listen(), 1_000).unref();
          });
          await client.query(`LISTEN ${wakeChannel(store)}`);
          if (stopped) await client.end().catch(() => undefined);
          else listener = client;
        } catch (err) {
          logger.warn({ err }, 'LISTEN failed; polling until it works again');
          setTimeout(() => void listen(), pollMs).unref();
        }
      };
      await listen();
      return async () => {
        stopped = true;
        await listener?.end().catch(() => undefined);
      };
    },
  };
}
