/**
 * What the hosting loop (worker/worker.ts) needs of a store, the same on every store (DESIGN §13):
 * claim a run (a fenced lease), find the next run that wants a host, read and answer the run's
 * inbox, and hear when a run wants its host. PostgreSQL (postgresHosting.ts): the lease row and its
 * epoch, LISTEN/NOTIFY. SQLite (sqliteHosting.ts): the file's owner lock held by this process is the
 * lease of every run in it, and its boot number the fencing token.
 * @module
 */
import type { Logger } from 'pino';
import type { PortReads } from '../store/postgres/reads.js';
import type { LeaseOptions, RunLease } from '../store/postgres/lease.js';
import type { FireClaim, FireClaimed, FireKey, InboxKind, InboxPost, InboxRequest } from '../store/types.js';

export interface HostingStore {
  /** Reads without a claim (a submit refuses a run id that is taken; a fire finds its agent). */
  readonly reads: Pick<PortReads, 'getRun' | 'listAgents'>;
  /** Claim run `runId` (a new run's lease is created): RUN_LOCKED while another host holds it. */
  claim(runId: string, lease: LeaseOptions): Promise<RunLease>;
  /** Claim the next run that wants a host (runnable, or parked with its wake due), or null. */
  claimNext(lease: LeaseOptions): Promise<RunLease | null>;
  /** Make a run want a host again (its hosts hear it). */
  wake(runId: string): Promise<void>;
  /** Post a request to a run and wake it (its host, or the next to claim it, applies it); its id. */
  post(request: { runId: string; kind: InboxKind; payload: Record<string, unknown>; at: number }): Promise<number>;
  /**
   * Claim a proactive fire: the first claim of (scope, trigger, tick) on the store wins, a later one
   * is `{ claimed: false }`. Claimed with `request`, the request is posted (and its run woken) in the
   * claim's transaction: the tick's message exists exactly when its claim does.
   */
  claimFire(claim: FireClaim, request?: InboxPost): Promise<FireClaimed>;
  /** Forget the fire claims made before `before` (a tick that old is never seen again); how many. */
  pruneFires(before: number): Promise<number>;
  /** When the fire's claim was made (or last taken over); null: unclaimed. */
  fireClaimedAt(key: FireKey): Promise<number | null>;
  /**
   * Move a fire's claim made at `from`, only if it still stands as made then (compare-and-set): to
   * `to` (taken over by another process), or away (`null`: released, the tick unclaimed again).
   * Whether it moved: of several processes moving one claim, one does.
   */
  moveFireClaim(key: FireKey, from: number, to: number | null): Promise<boolean>;
  /** Requests posted to the run and not answered yet, oldest first. */
  openRequests(runId: string): Promise<InboxRequest[]>;
  /** The run's wake sequence: a release is conditional on it. */
  wakeSeq(runId: string): Promise<number>;
  /**
   * Milliseconds until the earliest deadline of a run let go parked (its agents' timers: a
   * `sleep_until`, an idle timeout) that is still ahead, on the store's own clock; null if none.
   */
  nextWakeIn(): Promise<number | null>;
  /**
   * Hear wakes as they are posted (`runId`: the run that wants its host); resolves with a way to
   * stop. A store with no push notifications resolves at once: the worker's poll is its only ear.
   */
  listen(onWake: (runId: string) => void, logger: Logger): Promise<() => Promise<void>>;
}
