/**
 * The run's live stream, written by its owner (issue 38): every event its subscribers see (status
 * changes, what agents said, tool activity, retries, budget trips, MCP servers, deadlocks) and the
 * streamed pieces of model answers, numbered 1, 2, 3, … per run and written with the group commit,
 * so that any process — `troupe ui`'s `/api/stream`, `troupe follow`, a user's own reader of the
 * store — follows the run whichever process hosts it and resumes after a `seq` with no gap and no
 * repeat.
 *
 * Invariants:
 * - Rows ride commits that happen anyway (`GroupCommitter.beforeCommit`); only a buffer nothing
 *   else commits for `flushMs` stages a commit of its own. A busy run pays no extra commit, a
 *   streaming one at most one per `flushMs`: pieces of answers are never committed one by one.
 * - Pieces of one agent's answer that no other event of that agent separates are merged into one
 *   row (the text joined), so the stream holds the whole text once, in order per agent.
 * - `seq` continues the run's last committed one (read when hosting starts: an earlier host's rows,
 *   a failover's, a resume's), and is given when the rows are handed to a commit, so commits carry
 *   increasing, gap-free numbers (a commit that fails stops the host: nothing is committed after).
 * - Events are recorded as they are emitted, and statuses are emitted once their commit is durable,
 *   so the stream never shows a state the store does not hold.
 * - A resumed run re-announces (`from: null`) only the agents whose status its stream does not
 *   already show as their last: one whose change was committed just before a crash, before the row
 *   that told it rode a commit. The others' rows would repeat what a follower has; at 100,000
 *   parked agents they were 100,000 rows (9 MB) per resume, each checked again at every later open.
 * @module
 */
import { systemClock, type Clock } from '../../clock.js';
import type { TroupeEvent } from './views.js';
import type { StorePort, WriteOp } from '../../store/port.js';
import type { Logger } from 'pino';
import type { StreamRow } from '../../store/types.js';

interface Entry {
  agentId: string | null;
  type: string;
  data: Record<string, unknown>;
  at: number;
}

export interface StreamRecorderDeps {
  runId: string;
  /** Arms the flush timer (the host passes real time: the flush batches I/O, it is not behaviour). */
  clock: Clock;
  /** The run's last committed seq (0 for a new run). */
  lastSeq: () => Promise<number>;
  /** Stage writes for the next group commit. */
  stage: (op: WriteOp) => void;
  /** At most this long between an event and the commit that holds it, when nothing else commits. */
  flushMs: number;
  /**
   * Whether the run's row exists (a resumed run). A new run's events before its row (an MCP server
   * connecting as it starts) wait for `runStarted()`; a run that never starts writes none.
   */
  runExists: boolean;
  /**
   * A resumed run's: the agents restored, each with its row's status, from the rows the store
   * compares with the stream (the recorder consumes the map: each is forgotten once its
   * re-announcement is seen), and those of
   * them whose status the stream does not show as their last (Store.unshownStatuses), read with
   * the rows they were restored from, before anything was written (resumeCoordinator's recover).
   */
  restored?: { agents: Map<string, string>; unshown: () => Promise<Map<string, string | null> | null> };
  /** Told when the last seq cannot be read: the stream stays off for this hosting. */
  onError: (err: unknown) => void;
}

/** A delta's merge key: the agent, the kind of piece and, for a tool call's arguments, its index. */
function deltaKey(event: Extract<TroupeEvent, { type: 'agent.delta' }>): string {
  const d = event.delta;
  return d.kind === 'toolCall' ? `toolCall:${d.index}` : d.kind;
}

export class StreamRecorder {
  /** Without `restored`: the map is held only until its agents are re-announced (see #shown). */
  readonly #deps: Omit<StreamRecorderDeps, 'restored'>;
  readonly #flushMs: number;
  #buffer: Entry[] = [];
  /** Per agent: its open delta row in the buffer (merge target) and that row's merge key. */
  readonly #merging = new Map<string, { entry: Entry; key: string }>();
  /** The next seq to give; null until the last one is read. */
  #next: number | null = null;
  readonly #ready: Promise<void>;
  #timer: unknown = null;
  #closed = false;
  #off = false;
  /** Whether the run's row is written (or staged ahead of these): rows wait for it. */
  #open: boolean;
  /**
   * A resumed run's restored agents not yet re-announced, and those of them whose status the
   * stream does not show as their last (with what it shows); null until read (announcements wait in
   * the buffer, unnumbered, until then) and once every restored agent was re-announced.
   */
  #shown: { agents: Map<string, string>; unshown: Map<string, string | null> } | null = null;

  constructor(deps: StreamRecorderDeps) {
    const { restored, ...rest } = deps;
    this.#deps = rest;
    this.#flushMs = deps.flushMs;
    this.#open = deps.runExists;
    // A stream whose statuses cannot be read re-announces every agent, as a stream with none would.
    const unshown = restored && restored.agents.size > 0 ? restored.unshown().catch(() => null) : Promise.resolve(null);
    this.#ready = Promise.all([deps.lastSeq(), unshown]).then(
      ([last, unshown]) => {
        if (restored && unshown) {
          this.#shown = { agents: restored.agents, unshown };
          this.#buffer = this.#buffer.filter((e) => !this.#repeats(e));
        } else restored?.agents.clear(); // consumed: whoever else holds the map does not keep 100,000 ids alive
        this.#next = last + 1;
        if (this.#buffer.length > 0) this.#arm();
      },
      (err: unknown) => {
        restored?.agents.clear();
        this.#off = true;
        this.#buffer = [];
        this.#merging.clear();
        deps.onError(err);
      },
    );
  }

  /** The run's row is staged: rows staged from now on follow it in the same or a later commit. */
  runStarted(): void {
    this.#open = true;
    if (this.#buffer.length > 0) this.#arm();
  }

  /** Record one event (coordinator.subscribe's listener). */
  record(event: TroupeEvent): void {
    if (this.#closed || this.#off || event.type === 'coordinator.failed') return;
    // The event's own fields but type, at and agentId (rest, not delete: a deleted key leaves a slow object).
    const { type, at, agentId: id, ...rest } = event as TroupeEvent & { agentId?: string };
    const agentId = id ?? null;
    if (event.type === 'agent.delta') {
      const key = deltaKey(event);
      const open = this.#merging.get(event.agentId);
      if (open && open.key === key) {
        const delta = open.entry.data.delta as { text: string; name?: string };
        delta.text += event.delta.text;
        return;
      }
      const entry: Entry = { agentId, type, data: { name: event.name, delta: { ...event.delta } }, at };
      this.#buffer.push(entry);
      this.#merging.set(event.agentId, { entry, key });
    } else {
      const entry = { agentId, type, data: rest, at };
      if (this.#repeats(entry)) return;
      if (agentId !== null && this.#merging.size > 0) this.#merging.delete(agentId);
      this.#buffer.push(entry);
    }
    this.#arm();
  }

  /**
   * Whether `e` re-announces a restored agent with the status the stream already shows (and forget
   * it: announced once). A restored agent the store did not name unshown is shown with its row's
   * status: a re-announcement with another (the restore changed it) is news; an agent not restored
   * (spawned since) was never shown.
   */
  #repeats(e: Entry): boolean {
    const shown = this.#shown;
    if (shown === null || e.type !== 'agent.status' || e.data.from !== null || e.agentId === null) return false;
    const row = shown.agents.get(e.agentId);
    if (row === undefined) return false;
    shown.agents.delete(e.agentId);
    if (shown.agents.size === 0) this.#shown = null;
    const unshown = shown.unshown.get(e.agentId);
    return (unshown === undefined ? row : unshown) === e.data.to;
  }

  /**
   * The buffered rows, numbered, as a write for a commit that happens anyway (GroupCommitter's
   * beforeCommit), or null.
   */
  take(): WriteOp | null {
    if (this.#next === null || !this.#open || this.#buffer.length === 0) return null;
    const rows: StreamRow[] = this.#buffer.map((e) => ({
      runId: this.#deps.runId,
      seq: this.#next!++,
      agentId: e.agentId,
      type: e.type,
      data: e.data,
      at: e.at,
    }));
    this.#buffer = [];
    this.#merging.clear();
    if (this.#timer !== null) this.#deps.clock.clearTimeout(this.#timer);
    this.#timer = null;
    return { op: 'appendStream', rows };
  }

  /** Stage what is buffered and stop recording (before the committer closes). */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#ready;
    this.#stageNow();
  }

  #arm(): void {
    if (this.#timer !== null || this.#next === null || !this.#open) return;
    this.#timer = this.#deps.clock.setTimeout(() => {
      this.#timer = null;
      this.#stageNow();
    }, this.#flushMs);
    // A pending flush never holds the process open (close() stages what is left).
    (this.#timer as { unref?: () => void }).unref?.();
  }

  #stageNow(): void {
    const op = this.take();
    if (op) this.#deps.stage(op);
  }
}

/**
 * The run's live stream writer (null with `stream: false`), wired to every event subscribers see
 * and to the group commit (its rows ride each commit).
 */
export function runStream(w: {
  runId: string;
  settings: { flushMs: number; asked: boolean } | false;
  port: Pick<StorePort, 'inMemory' | 'lastStreamSeq'>;
  /** A resumed run's restored agents (consumed: see StreamRecorderDeps.restored) and which of them its stream does not show; null for a new run. */
  restored: { agents: Map<string, string>; unshown: Map<string, string | null> | null } | null;
  logger: Logger;
  committer: { stage(op: WriteOp): void; beforeCommit(take: () => WriteOp | null): void };
  views: { subscribe(listener: (event: TroupeEvent) => void): unknown };
}): StreamRecorder | null {
  const { runId, settings, port, restored, committer, logger } = w;
  // In memory no other process can read it (in-process views have subscribe): recorded only when asked.
  if (settings === false || (!settings.asked && port.inMemory === true)) {
    restored?.agents.clear();
    return null;
  }
  const recorder = new StreamRecorder({
    runId,
    // Real time, as the group committer's own batching (setImmediate): the flush only batches
    // I/O, and a run on a simulated clock must not see a timer that is not part of its behaviour.
    clock: systemClock,
    lastSeq: () => port.lastStreamSeq(runId),
    runExists: restored !== null,
    ...(restored ? { restored: { agents: restored.agents, unshown: () => Promise.resolve(restored.unshown) } } : {}),
    stage: (op) => committer.stage(op),
    flushMs: settings.flushMs,
    onError: (err) => logger.warn({ err }, 'the live stream is off for this hosting: its last seq cannot be read'),
  });
  committer.beforeCommit(() => recorder.take());
  w.views.subscribe((event) => recorder.record(event));
  return recorder;
}
