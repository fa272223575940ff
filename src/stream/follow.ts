/**
 * Following a run's live stream from any process (issue 38): the rows its owner committed
 * (host/views/streamRecorder.ts), oldest first, from just after a `seq` the reader already has, until the run is over.
 * `troupe ui`'s `/api/stream` (Server-Sent Events, `Last-Event-ID`) and `troupe follow` read it
 * this way, and so can a user's own code (`followRun`, exported).
 *
 * The end: a run is over for its readers once it is not live (nobody hosts it, or its root agent
 * ended) and every row is read. Liveness is asked before the read that finds nothing: a host
 * commits its last rows before it lets the run go, so nothing committed before that answer is
 * missed. A run parked between hosts is still live (its root is active): it is followed on.
 * @module
 */
import { isActive } from '../../machines/types.js';
import { sleep, systemClock, type Clock } from '../clock.js';
import type { TroupeEvent } from '../host/views/views.js';
import type { StorePort } from '../store/port.js';
import type { StreamRow } from '../store/types.js';

/** An event of the stream as its subscribers saw it, with its number in the run's stream. */
export type StreamEvent = TroupeEvent & { seq: number };

export interface FollowOptions {
  /** Start after this seq (a reconnecting reader's last one; default 0: from the first). */
  after?: number;
  /**
   * Whether the run can still change. Default: its root agent is active — then the rows its host
   * commits after the root ended (within the recorder's flushMs) may be left unread; pass whether a
   * process hosts the run (RunStore.hostOf) or its root is active, as `troupe follow` does, to read
   * to the very end.
   */
  live?: (runId: string) => boolean | Promise<boolean>;
  /** Between reads that found nothing (default 100 ms). */
  pollMs?: number;
  /** Rows per read (default 500). */
  batch?: number;
  /** Ends the following (the generator returns). */
  signal?: AbortSignal;
  clock?: Clock;
}

type Reads = Pick<StorePort, 'readStream' | 'getRun' | 'listAgents'>;

/** A stream row as the event its subscribers saw. */
export function toStreamEvent(row: StreamRow): StreamEvent {
  return { ...row.data, ...(row.agentId === null ? {} : { agentId: row.agentId }), type: row.type, at: row.at, seq: row.seq } as StreamEvent;
}

/** Whether the run's root agent is still active (or not registered yet). */
export async function rootActive(reads: Pick<StorePort, 'getRun' | 'listAgents'>, runId: string): Promise<boolean> {
  const run = await reads.getRun(runId);
  if (!run) return false;
  if (run.rootId === null) return true;
  const root = (await reads.listAgents(runId)).find((a) => a.id === run.rootId);
  return root === undefined || isActive(root.status);
}

/** The run's stream events after `options.after`, as they are committed, until the run is over. */
export async function* followRun(reads: Reads, runId: string, options: FollowOptions = {}): AsyncGenerator<StreamEvent, void, undefined> {
  const clock = options.clock ?? systemClock;
  const pollMs = options.pollMs ?? 100;
  const batch = options.batch ?? 500;
  const live = options.live ?? ((id: string) => rootActive(reads, id));
  let after = options.after ?? 0;
  const { signal } = options;
  while (!signal?.aborted) {
    const stillLive = await live(runId);
    const rows = await reads.readStream(runId, after, batch);
    for (const row of rows) {
      if (signal?.aborted) return;
      after = row.seq;
      yield toStreamEvent(row);
    }
    if (rows.length === batch) continue;
    if (rows.length === 0 && !stillLive) return;
    await sleep(clock, pollMs, signal).catch(() => undefined);
  }
}
