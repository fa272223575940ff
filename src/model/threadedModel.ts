/**
 * The main thread's side of `openaiModel({ thread: true })`: calls go to one worker thread per
 * process (modelThread.ts), shared by every threaded model, started on the first call, restarted
 * on the call after it died. While no call is in flight the worker is `unref()`ed: it never keeps
 * the process alive.
 *
 * A call costs the main thread O(what changed): each model keeps, per purpose and agent, the last
 * request it sent (its messages by identity, as the call log does: host/calls/callLog.ts `begin`),
 * and posts how many of them open this one and the items after them; the system prompt and the
 * tool list only when they changed. A request troupe built from a session (gateway.ts
 * `SnapshotRequest`) is read through its `source()`, so its messages are never copied here.
 *
 * The last session is held through a `WeakRef`: a session nobody else keeps is not kept alive by
 * this cache, and once it is collected the worker's copy goes too (`sessions` below).
 * @module
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { ProviderError } from '../errors.js';
import { fromWire, type CallMessage, type FromWorker, type ModelThreadStats, type ThreadModelOptions, type ToWorker } from './modelThreadWire.js';
import type { ModelCallOptions, ModelDelta, ModelRequest, ModelTurn, SessionItem, ToolSpec, UsagePurpose } from './types.js';

interface Pending {
  resolve(turn: ModelTurn): void;
  reject(err: unknown): void;
  onDelta: ((delta: ModelDelta) => void) | undefined;
  settle(): void;
}

/**
 * The process's Node flags, for the worker (which inherits them by default), but `--input-type`:
 * it is for `node -e` code, and a worker started with it fails to load its file.
 */
function workerArgv(): string[] {
  const out: string[] = [];
  const argv = process.execArgv;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--input-type') i++;
    else if (!argv[i]!.startsWith('--input-type=')) out.push(argv[i]!);
  }
  return out;
}

const ENTRY = new URL('./modelThread.js', import.meta.url);

let available: boolean | undefined;
/** Whether the worker's compiled entry is there (not when troupe runs from its TypeScript sources). */
export const modelThreadAvailable = (): boolean => (available ??= existsSync(fileURLToPath(ENTRY)));

/** The process's model thread: the worker, the calls in flight on it, and its generation (one per worker started). */
class ModelThread {
  #worker: Worker | null = null;
  /** Bumped per worker started: a model whose caches are of another generation starts them again. */
  generation = 0;
  #nextId = 1;
  /** Calls posted, over every worker. */
  calls = 0;
  readonly #pending = new Map<number, Pending>();
  /** Why the worker failed, if it said (its 'error' comes before its 'exit'). */
  #failure: Error | null = null;
  /** The tool lists this worker has been sent, numbered: a list crosses once per worker, then goes by its number. */
  #toolSets = new WeakMap<readonly ToolSpec[], number>();
  #nextSet = 0;

  get worker(): Worker | null {
    return this.#worker;
  }

  /** The running worker, started if none is. */
  ensure(): Worker {
    if (this.#worker) return this.#worker;
    const worker = new Worker(ENTRY, { execArgv: workerArgv() });
    this.#worker = worker;
    this.generation++;
    this.#failure = null;
    this.#toolSets = new WeakMap();
    this.#nextSet = 0;
    worker.unref();
    worker.on('message', (msg: FromWorker) => this.#receive(msg));
    worker.on('error', (err) => {
      this.#failure = err;
    });
    worker.on('exit', (code) => {
      if (this.#worker !== worker) return;
      this.#worker = null;
      const why = this.#failure ? `: ${this.#failure.message}` : ` with code ${code}`;
      const failed = [...this.#pending.values()];
      this.#pending.clear();
      for (const ask of this.#asks.values()) ask(null);
      this.#asks.clear();
      for (const call of failed) {
        call.settle();
        call.reject(new ProviderError('PROVIDER_CONNECTION', `The model thread exited during the call${why}`, { retryable: true }));
      }
    });
    return worker;
  }

  post(worker: Worker, msg: ToWorker): void {
    worker.postMessage(msg);
  }

  /** Post to the worker of `generation` if it still runs (what it keeps died with any other). */
  postTo(generation: number, msg: ToWorker): void {
    if (this.#worker !== null && this.generation === generation) this.#worker.postMessage(msg);
  }

  readonly #asks = new Map<number, (stats: ModelThreadStats | null) => void>();

  /** Test and bench hook: the running worker's figures (null if none runs). */
  stats(): Promise<ModelThreadStats | null> {
    if (this.#worker === null) return Promise.resolve(null);
    const id = this.#nextId++;
    this.#worker.postMessage({ t: 'stats', id } satisfies ToWorker);
    return new Promise((resolve) => this.#asks.set(id, resolve));
  }

  /**
   * Post a call (with `tools` if the agent's list changed); it settles with the worker's answer,
   * `signal`'s reason once aborted, or a connection failure if the worker dies.
   */
  call(
    worker: Worker,
    msg: Omit<CallMessage, 'id' | 'toolSet' | 'tools'>,
    tools: readonly ToolSpec[] | undefined,
    signal: AbortSignal,
    onDelta: ((delta: ModelDelta) => void) | undefined,
  ): Promise<ModelTurn> {
    const id = this.#nextId++;
    this.calls++;
    const known = tools === undefined ? undefined : this.#toolSets.get(tools);
    const set = tools === undefined ? {} : known === undefined ? { toolSet: this.#nextSet, tools } : { toolSet: known };
    worker.postMessage({ ...msg, id, ...set } satisfies CallMessage);
    if (tools !== undefined && known === undefined) this.#toolSets.set(tools, this.#nextSet++);
    return new Promise<ModelTurn>((resolve, reject) => {
      const onAbort = () => {
        if (!this.#pending.has(id)) return;
        this.#forget(id);
        this.#worker?.postMessage({ t: 'abort', id } satisfies ToWorker);
        reject(signal.reason);
      };
      const settle = () => signal.removeEventListener('abort', onAbort);
      if (this.#pending.size === 0) worker.ref();
      this.#pending.set(id, { resolve, reject, onDelta, settle });
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  #forget(id: number): void {
    this.#pending.get(id)?.settle();
    this.#pending.delete(id);
    // Nothing in flight: the worker must not keep the process alive.
    if (this.#pending.size === 0) this.#worker?.unref();
  }

  #receive(msg: FromWorker): void {
    if (msg.t === 'stats') {
      const { t: _, id, ...stats } = msg;
      this.#asks.get(id)?.(stats);
      this.#asks.delete(id);
      return;
    }
    const call = this.#pending.get(msg.id);
    if (call === undefined) return; // aborted: settled already
    if (msg.t === 'delta') {
      call.onDelta?.(msg.delta);
      return;
    }
    this.#forget(msg.id);
    if (msg.t === 'ok') call.resolve(msg.turn);
    else call.reject(fromWire(msg.error));
  }
}

const thread = new ModelThread();

/**
 * @public Test hook (modelThread.test.ts loads it from dist/, which knip does not read): the model
 * thread's worker, or null while none runs (a test terminates it to see the calls in flight fail
 * and the next call start another). Not part of the package's API.
 */
export const modelThreadWorker = (): Worker | null => thread.worker;

/** @public Test hook (as modelThreadWorker; the scale bench reads it too): how many calls the model thread was given, over the process's life. Not part of the package's API. */
export const modelThreadCalls = (): number => thread.calls;

/**
 * @public Test hook (as modelThreadWorker; the scale bench reads the worker's heap through it): the
 * model thread's figures, or null while none runs. Not part of the package's API.
 */
export const modelThreadStats = (): Promise<ModelThreadStats | null> => thread.stats();

interface Last {
  items: WeakRef<readonly SessionItem[]>;
  /** The copy of a caller's messages (held here: nothing else holds it). */
  copy: readonly SessionItem[] | null;
  length: number;
  system: string;
  tools: readonly ToolSpec[];
}

/**
 * A request's messages (`items`, the first `length`) and what bounds how long the worker keeps
 * them (`owner`: once it is collected, so is the worker's copy). A session's prefix is read
 * without a copy (gateway.ts `SnapshotRequest.source`: a session only grows, and a rewrite
 * replaces the array), and owns itself. Any other caller's messages are copied (`copied`): the
 * caller may change its array in place between calls, and the prefix shared with the last request
 * is found by identity; its array is the owner.
 */
function sourceOf(request: ModelRequest): { items: readonly SessionItem[]; length: number; owner: object; copied: boolean } {
  const source = (request as { source?: unknown }).source;
  if (typeof source === 'function') {
    const { items, length } = (source as () => { items: readonly SessionItem[]; length: number }).call(request);
    return { items, length, owner: items, copied: false };
  }
  return { items: request.messages.slice(), length: request.messages.length, owner: request.messages, copied: true };
}

let nextModel = 1;

/** A session the worker keeps a copy of (as an agent's last request), and where the main side notes it. */
interface Held {
  model: number;
  generation: number;
  purpose: UsagePurpose;
  agent: string;
  lasts: Map<string, Last>;
  /** The entry's WeakRef when it was registered: a later request of the agent (a rewritten session) replaced it. */
  ref: WeakRef<readonly SessionItem[]>;
}

/**
 * The worker's copies live as long as the main thread's: once a session (or a caller's messages
 * array) is collected (its agent ended and the host let it go), the worker forgets that request, unless a later one replaced it;
 * once a model is collected, the worker drops all it kept for it. Without this the worker kept
 * every agent's last request for the life of the process (a second 10,000-agent team still held
 * the first's). A memory store keeps every session, so there the copy stays with it.
 */
const sessions = new FinalizationRegistry<Held>((held) => {
  if (held.lasts.get(held.agent)?.items !== held.ref) return;
  held.lasts.delete(held.agent);
  thread.postTo(held.generation, { t: 'forget', model: held.model, purpose: held.purpose, agent: held.agent });
});
const models = new FinalizationRegistry<number>((model) => thread.postTo(thread.generation, { t: 'drop', model }));

/** `complete` of a threaded openaiModel with these options. */
export function threadedComplete(options: ThreadModelOptions): (request: ModelRequest, call: ModelCallOptions) => Promise<ModelTurn> {
  const id = nextModel++;
  let generation = 0;
  const lasts: Record<UsagePurpose, Map<string, Last>> = { main: new Map(), compaction: new Map(), review: new Map(), summary: new Map() };
  const complete = async (request: ModelRequest, { signal, onDelta }: ModelCallOptions): Promise<ModelTurn> => {
    if (signal.aborted) throw signal.reason;
    const worker = thread.ensure();
    if (generation !== thread.generation) {
      // A new worker knows no request of ours: every first call sends the whole.
      for (const map of Object.values(lasts)) map.clear();
      thread.post(worker, { t: 'model', model: id, options });
      generation = thread.generation;
    }
    const purpose = request.purpose ?? 'main';
    const agent = request.agent.id;
    const last = lasts[purpose].get(agent);
    const { items, length, owner, copied } = sourceOf(request);
    let keep = 0;
    const before = last?.copy ?? last?.items.deref();
    if (last && before) {
      const max = Math.min(last.length, length);
      if (before === items) keep = max;
      else while (keep < max && before[keep] === items[keep]) keep++;
    }
    const system = last === undefined || last.system !== request.system ? request.system : undefined;
    const tools = last === undefined || last.tools !== request.tools ? request.tools : undefined;
    const answer = thread.call(
      worker,
      {
        t: 'call',
        model: id,
        agent,
        purpose,
        keep,
        add: items.slice(keep, length),
        ...(system === undefined ? {} : { system }),
        deltas: onDelta !== undefined,
      },
      tools,
      signal,
      onDelta,
    );
    // Posted: the worker now holds this request as the agent's last.
    if (last === undefined || before !== items) {
      const ref = new WeakRef(items);
      const copy = copied ? items : null;
      sessions.register(owner, { model: id, generation, purpose, agent, lasts: lasts[purpose], ref });
      if (last === undefined) lasts[purpose].set(agent, { items: ref, copy, length, system: request.system, tools: request.tools });
      else [last.items, last.copy] = [ref, copy];
    }
    if (last !== undefined) {
      last.length = length;
      last.system = request.system;
      last.tools = request.tools;
    }
    return answer;
  };
  models.register(complete, id);
  return complete;
}
