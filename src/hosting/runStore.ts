/**
 * The runs of a store as anything outside a run sees them (DESIGN §13): read them, post a request
 * to one, and claim one to host it. The same port on every store, so each CLI command has one
 * implementation and the `--db` value only picks the adapter (sqliteRuns.ts, postgresRuns.ts).
 *
 * - Hosting starts with a claim: on SQLite the owner lock of the file (its boot number is the
 *   fencing token), on PostgreSQL the run's lease row and its epoch. A claim refused because
 *   another process hosts the run is `null`: then post, and that host applies the request.
 * - Every input from outside is an inbox request with an id, applied by whoever hosts the run and
 *   answered in the commit of its effect (host/inbox.ts), so it is applied exactly once.
 * @module
 */
import type { Delivery } from '../store/inbox.js';
import type { StorePort } from '../store/port.js';
import type { ReleaseState } from '../store/postgres/lease.js';
import type { InboxKind, InboxRequest } from '../store/types.js';

/** Who hosts a run now, as its store knows it. */
export interface HostView {
  /** Whether a process hosts the run now (its claim is live). */
  hosted: boolean;
  /** The claim's state: SQLite `hosted` or `free`; PostgreSQL the lease's `runnable`, `parked` or `done`. */
  state: string;
  /** Who holds the claim (a worker id on PostgreSQL), if anyone. */
  owner: string | null;
  /** The fencing token of the latest claim. */
  epoch: number | null;
}

interface OutsideRequest {
  runId: string;
  kind: InboxKind;
  payload: Record<string, unknown>;
  at: number;
}

/** A run claimed by this process: host it through `port`, apply its requests, then release it. */
export interface RunClaim {
  readonly runId: string;
  /** The run's store, fenced by the claim. */
  readonly port: StorePort;
  /** Requests posted to the run and not answered yet, oldest first. */
  openRequests(): Promise<InboxRequest[]>;
  /** Let the run go as `state` says (runnable: it has work to do, and a worker hosts it next if the store has workers). */
  release(state: ReleaseState): Promise<void>;
}

export interface RunStore {
  /** The database as the user named it (a path, or a URL without its password). */
  readonly label: string;
  /** Reads of any run without hosting it. */
  readonly reads: Omit<StorePort, 'boot' | 'commit'>;
  /** Decode every row first (a SQLite file that is not troupe's, or damaged, is refused with its typed error); nothing is written. */
  verify(): Promise<void>;
  hostOf(runId: string): Promise<HostView>;
  /** The id of the run whose agent linked execution `id`, if any. */
  runOfExecution(id: string): Promise<string | undefined>;
  /** Claim `runId` to host it, or null while another process hosts it. */
  claim(runId: string): Promise<RunClaim | null>;
  /** Post a request to a run (waking its store's workers, if it has any); resolves with its id. */
  post(request: OutsideRequest): Promise<number>;
  /** A request as it stands (answered or not). */
  request(id: number): Promise<InboxRequest | undefined>;
  /** Whether message `id` is delivered (undefined if there is no such message). */
  delivery(messageId: string): Promise<Delivery | undefined>;
  close(): Promise<void>;
}
