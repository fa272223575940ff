/**
 * What crosses between the main thread and the model thread (`openaiModel({ thread: true })`):
 * the messages both sides post, and a call's failure as data — classified in the worker (the
 * boundary), rebuilt on the main thread as the same `ProviderError`.
 * @module
 */
import { readFileSync } from 'node:fs';
import { ProviderError, toError, type ErrorCode } from '../errors.js';
import type { ModelDelta, ModelTurn, SessionItem, ToolSpec, UsagePurpose } from './types.js';

/** The options the worker builds its in-thread `openaiModel` from (no clock: it cannot cross). */
export interface ThreadModelOptions {
  model: string;
  baseURL?: string;
  apiKey: string;
  timeoutMs?: number;
  idleTimeoutMs?: number;
  maxOutputTokens?: number;
  tokenLimitParam?: 'max_completion_tokens' | 'max_tokens';
  stream?: boolean;
  temperature?: number;
  headers?: Record<string, string>;
}

/**
 * One call. The worker keeps each (model, purpose, agent)'s last request: this one is its first
 * `keep` messages, then `add`; `system` and `toolSet` are sent when they changed (absent: as
 * last). Tool lists are numbered per worker: a list's first call carries it in `tools`, later ones
 * name it by number (a team's agents share a few lists: one copy each in the worker).
 */
export interface CallMessage {
  t: 'call';
  id: number;
  model: number;
  agent: string;
  purpose: UsagePurpose;
  keep: number;
  add: SessionItem[];
  system?: string;
  toolSet?: number;
  tools?: readonly ToolSpec[];
  /** Whether the caller listens to streamed pieces. */
  deltas: boolean;
}

export type ToWorker =
  /** A model's options (sent once per worker, before its first call there). */
  | { t: 'model'; model: number; options: ThreadModelOptions }
  | CallMessage
  | { t: 'abort'; id: number }
  /** The main thread no longer holds this agent's session: its last request goes (its next call sends the whole). */
  | { t: 'forget'; model: number; purpose: UsagePurpose; agent: string }
  /** The model is gone: everything kept for it goes. */
  | { t: 'drop'; model: number }
  /** Test and bench hook: the worker's figures (`ModelThreadStats`), answered as `stats` with this id. */
  | { t: 'stats'; id: number };

/** A failure as data: a ProviderError's fields, or (a bug) an error's name and message. */
export type WireError =
  | {
      provider: true;
      code: string;
      message: string;
      retryable: boolean;
      status?: number;
      retryAfterMs?: number;
      details?: Record<string, unknown>;
      cause?: { name: string; message: string };
    }
  | { provider: false; name: string; message: string; partialText?: string };

export type FromWorker =
  | { t: 'ok'; id: number; turn: ModelTurn }
  | { t: 'err'; id: number; error: WireError }
  | { t: 'delta'; id: number; delta: ModelDelta }
  | ({ t: 'stats'; id: number } & ModelThreadStats);

/**
 * The model thread's own figures, for tests and benches (its heap is not in the main thread's
 * `process.memoryUsage().heapUsed`): what it keeps, and its heap.
 */
export interface ModelThreadStats {
  /** Last requests kept (every model's, every agent's). */
  requests: number;
  /** The worker's `heapUsed` now, garbage included. */
  heapUsed: number;
  /**
   * The largest `heapUsed` right after one of the worker's major GCs since the previous ask (its
   * live heap, garbage aside, as the main thread's is read); null if none ran. Watched from the
   * first ask on.
   */
  heapAfterMajorGc: number | null;
  /** Major GCs since the previous ask. */
  majorGcs: number;
  /** The worker's own CPU time so far, user + system, in ms (`threadCpuMs`); null off Linux. */
  cpuMs: number | null;
}

/**
 * The calling thread's CPU time so far (user + system, ms), from Linux's /proc/thread-self/stat; null
 * where there is none. Node 20 has no per-thread CPU figure (`process.cpuUsage()` is the process's,
 * every thread's; the event loop's utilisation counts time the thread waited for a core as busy).
 * Clock ticks of 10 ms (Linux's USER_HZ is 100): a figure for runs of seconds, not for one call.
 */
export function threadCpuMs(): number | null {
  let stat: string;
  try {
    stat = readFileSync('/proc/thread-self/stat', 'utf8');
  } catch {
    return null;
  }
  // Fields after the command's closing parenthesis (the command may hold spaces): state is the
  // first, utime the 12th, stime the 13th (proc(5)'s fields 14 and 15).
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

const causeOf = (cause: unknown): { name: string; message: string } | undefined =>
  cause instanceof Error ? { name: cause.name, message: cause.message } : undefined;

/** In the worker: a call's failure as data. */
export function toWire(err: unknown): WireError {
  if (err instanceof ProviderError) {
    const cause = causeOf(err.cause);
    return {
      provider: true,
      code: err.code,
      message: err.message,
      retryable: err.retryable,
      ...(err.status === undefined ? {} : { status: err.status }),
      ...(err.retryAfterMs === undefined ? {} : { retryAfterMs: err.retryAfterMs }),
      ...(err.details === undefined ? {} : { details: err.details }),
      ...(cause === undefined ? {} : { cause }),
    };
  }
  const error = toError(err);
  const partialText = (error as { partialText?: unknown }).partialText;
  return { provider: false, name: error.name, message: error.message, ...(typeof partialText === 'string' ? { partialText } : {}) };
}

/** On the main thread: the failure the in-thread model would have thrown (a cause keeps its name and message only). */
export function fromWire(wire: WireError): Error {
  if (!wire.provider) {
    const error = new Error(wire.message);
    error.name = wire.name;
    return wire.partialText === undefined ? error : Object.assign(error, { partialText: wire.partialText });
  }
  const cause = wire.cause === undefined ? undefined : Object.assign(new Error(wire.cause.message), { name: wire.cause.name });
  return new ProviderError(wire.code as Extract<ErrorCode, `PROVIDER_${string}`>, wire.message, {
    retryable: wire.retryable,
    ...(wire.status === undefined ? {} : { status: wire.status }),
    ...(wire.retryAfterMs === undefined ? {} : { retryAfterMs: wire.retryAfterMs }),
    ...(wire.details === undefined ? {} : { details: wire.details }),
    ...(cause === undefined ? {} : { cause }),
  });
}
