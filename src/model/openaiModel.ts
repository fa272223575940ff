/**
 * `openaiModel`: any OpenAI-compatible Chat Completions endpoint (OpenAI, vLLM, Ollama, llama.cpp
 * server, LM Studio, …) through the official `openai` client. Tools, optional streaming with
 * deltas, usage from every response (checked in `chatWire`: nothing from the wire is trusted as
 * typed). The client's own retries are off — the run loop owns retries
 * — and the request timeout runs on troupe's clock. Every failure leaves as a classified
 * `ProviderError`; only a bug escapes as anything else.
 * @module
 */
import { createHash } from 'node:crypto';
import OpenAI from 'openai';
import type {
  ChatCompletionContentPart,
  ChatCompletionCreateParamsBase,
  ChatCompletionMessageParam,
  ChatCompletionTool,
} from 'openai/resources/chat/completions';
import { systemClock, type Clock } from '../clock.js';
import { ConfigError, ProviderError, toError } from '../errors.js';
import { boundedFetch, isOverLimit, ON_BYTES } from './boundedFetch.js';
import { fromCompletion, StreamAssembler } from './chatWire.js';
import { checkPrice } from './prices.js';
import type { ThreadModelOptions } from './modelThreadWire.js';
import { classifyHttpFailure } from './providerErrors.js';
import { modelThreadAvailable, threadedComplete } from './threadedModel.js';
import { AUTO_MODEL_THREAD, isModelThreadRule, threadRouter, type ModelThreadRule } from './threadRoute.js';
import type { Model, ModelCallOptions, ModelDelta, ModelPrice, ModelRequest, ModelTurn, SessionItem, ToolSpec } from './types.js';

export interface OpenAIModelOptions {
  /** The model id the server knows (`gpt-4.1-mini`, `qwen2.5:7b`, …). */
  model: string;
  /** Any OpenAI-compatible server, e.g. `http://127.0.0.1:11434/v1` for Ollama. Default: OpenAI. */
  baseURL?: string;
  /** Default: `OPENAI_API_KEY`. Local servers that need none accept an empty string. */
  apiKey?: string;
  /** Per request, on troupe's clock; a timeout is retried like any transient error. Default 600 s. */
  timeoutMs?: number;
  /**
   * Streaming only: no byte from the server for this long — before the first chunk or between two —
   * ends the attempt as `PROVIDER_TIMEOUT` (retried like any timeout), long before `timeoutMs`.
   * Default 120 s (never more than `timeoutMs`).
   */
  idleTimeoutMs?: number;
  /** Sent as `max_completion_tokens` (or `max_tokens`, see `tokenLimitParam`). */
  maxOutputTokens?: number;
  /** The model's context window in tokens: sessions are then compacted before they overflow it (`session.compactAt`). */
  contextWindow?: number;
  /** Older OpenAI-compatible servers only know `max_tokens`. Default `max_completion_tokens`. */
  tokenLimitParam?: 'max_completion_tokens' | 'max_tokens';
  /** USD per million tokens; the budget prices this model's usage rows with it. */
  price?: ModelPrice;
  /** Stream the answer and report deltas through `onDelta`. Default false. */
  stream?: boolean;
  temperature?: number;
  /** Extra headers on every request. */
  headers?: Record<string, string>;
  /** Timers of `timeoutMs` and `idleTimeoutMs` (default: the system clock). Not with `thread`. */
  clock?: Clock;
  /**
   * Where the calls run. `true`: in a worker thread — the `openai` client, the HTTP requests, the
   * parsing of the answers and the timeouts run there, off the main thread, so that a team's turns
   * and its model calls use two cores. One worker per process, shared by every threaded model,
   * started on the first call and again on the call after it died (the calls then in flight fail
   * as `PROVIDER_CONNECTION`, retried); it never keeps the process alive while no call is in
   * flight. A call posts only what changed since the agent's last request of the same purpose;
   * the answers, the classified errors and the streamed deltas are the same as without it. Needs
   * the compiled package (the worker is `modelThread.js` beside this module), and no custom
   * `clock` (timers cannot be driven across threads: `CONFIG_INVALID`). `false`: always on the
   * main thread.
   *
   * `'auto'` (the default): on the main thread, and in the thread while a team of over a thousand
   * agents keeps the event loop busy — over a second, the loop at least 60 % busy with at least
   * 1,200 of this model's calls in flight; back once fewer than 300 are (or `{ windowMs, share,
   * calls }`, see `ModelThreadRule`). It stays on the main thread with a custom `clock` or
   * without the compiled worker (the TypeScript sources). Why (2 cores, scale bench): 10,000
   * agents' event-loop delay p99 fell 118 → 47 ms in memory and 127 → 46 ms on a FULL store with
   * the thread, in 0.92-0.98× the time; 1,000 agents (never 1,200 calls out) finish no sooner with
   * it and pay ~15-30 % more CPU.
   */
  thread?: boolean | 'auto' | ModelThreadRule;
}

const DEFAULT_TIMEOUT_MS = 600_000;
/** A streaming server that says nothing for two minutes is stuck, not thinking (tokens or keep-alives flow). */
const DEFAULT_IDLE_TIMEOUT_MS = 120_000;

/** Why our own timer aborted the request (distinguishes a timeout from the caller's abort). */
class TimedOut extends Error {}
/** The silent-stream guard aborted the request. */
class Silent extends Error {}

function validate(options: OpenAIModelOptions): void {
  if (typeof options !== 'object' || options === null) throw new ConfigError('Expected openaiModel options to be an object');
  if (typeof options.model !== 'string' || options.model.trim() === '') {
    throw new ConfigError(`Expected openaiModel model to be a non-empty string, got ${JSON.stringify(options.model)}`);
  }
  for (const key of ['timeoutMs', 'idleTimeoutMs', 'maxOutputTokens', 'contextWindow'] as const) {
    const value = options[key];
    if (value !== undefined && (!Number.isInteger(value) || value <= 0)) {
      throw new ConfigError(`Expected openaiModel ${key} to be an integer > 0, got ${JSON.stringify(value)}`);
    }
  }
  if (options.baseURL !== undefined) {
    try {
      new URL(options.baseURL);
    } catch {
      throw new ConfigError(`Expected openaiModel baseURL to be a URL, got ${JSON.stringify(options.baseURL)}`);
    }
  }
  if (options.price !== undefined) checkPrice('openaiModel price', options.price);
  if (options.thread !== undefined && typeof options.thread !== 'boolean' && options.thread !== 'auto' && !isModelThreadRule(options.thread)) {
    throw new ConfigError(`Expected openaiModel thread to be true, false, 'auto' or { windowMs, share (0..1), calls }, got ${JSON.stringify(options.thread)}`);
  }
  if (options.clock !== undefined && (options.thread === true || isModelThreadRule(options.thread))) {
    throw new ConfigError('openaiModel thread runs its timers in the model thread, on the system clock: it takes no clock');
  }
}

/** Where the calls run: always here, always in the thread, or routed call by call under a rule. */
function threadMode(options: OpenAIModelOptions): 'off' | 'on' | ModelThreadRule {
  const option = options.thread ?? 'auto';
  if (option === true) return 'on';
  if (option === false || options.clock !== undefined || !modelThreadAvailable()) return 'off';
  return option === 'auto' ? AUTO_MODEL_THREAD : option;
}

const userContent = (content: string | readonly { type: string; text?: string; url?: string }[]): string | ChatCompletionContentPart[] =>
  typeof content === 'string'
    ? content
    : content.map((p) =>
        p.type === 'image' ? { type: 'image_url' as const, image_url: { url: p.url ?? '' } } : { type: 'text' as const, text: p.text ?? '' },
      );

/** The session in Chat Completions form, after the system prompt. */
function toChatMessages(system: string, items: readonly SessionItem[]): ChatCompletionMessageParam[] {
  const out: ChatCompletionMessageParam[] = [{ role: 'system', content: system }];
  for (const item of items) {
    if (item.role === 'user') out.push({ role: 'user', content: userContent(item.content) });
    else if (item.role === 'tool') out.push({ role: 'tool', tool_call_id: item.toolCallId, content: item.content });
    else if (item.toolCalls && item.toolCalls.length > 0) {
      out.push({
        role: 'assistant',
        content: item.content,
        tool_calls: item.toolCalls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } })),
      });
    } else out.push({ role: 'assistant', content: item.content ?? item.refusal ?? '' });
  }
  return out;
}

const NETWORK_CODES = new Set(['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED']);

/** A socket that closed under a streamed body surfaces as a plain TypeError('terminated') or similar. */
function isNetworkFailure(err: unknown): boolean {
  for (let e = err, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && NETWORK_CODES.has(code)) return true;
    if (e instanceof TypeError && /terminated|fetch failed|socket/i.test(e.message)) return true;
  }
  return false;
}

/** Any failure of the `openai` client as a ProviderError; an unknown error (a bug) is returned as is. */
export function classifyOpenAIError(err: unknown, now?: number): unknown {
  if (err instanceof ProviderError) return err;
  if (err instanceof OpenAI.APIConnectionTimeoutError) {
    return new ProviderError('PROVIDER_TIMEOUT', `The request timed out: ${err.message}`, { cause: err });
  }
  if (err instanceof OpenAI.APIUserAbortError) return err;
  if (err instanceof OpenAI.APIConnectionError) {
    return new ProviderError('PROVIDER_CONNECTION', `Connection to the model server failed: ${err.message}`, { cause: err });
  }
  if (err instanceof OpenAI.APIError) {
    return classifyHttpFailure({ status: err.status, headers: err.headers, code: err.code, message: err.message, cause: err }, now);
  }
  if (err instanceof SyntaxError) {
    return new ProviderError('PROVIDER_INVALID_RESPONSE', `The server sent a body that is not valid JSON: ${err.message}`, { cause: err });
  }
  if (isNetworkFailure(err)) {
    return new ProviderError('PROVIDER_CONNECTION', `The connection dropped mid-response: ${(err as Error).message}`, { cause: err });
  }
  return err;
}

/** Assemble a streamed answer; deltas go to `onDelta` as they arrive, text also to `partial`. */
async function readStream(stream: AsyncIterable<unknown>, onDelta: ((d: ModelDelta) => void) | undefined, partial: { text: string }): Promise<ModelTurn> {
  const answer = new StreamAssembler(onDelta, partial);
  for await (const chunk of stream) answer.add(chunk);
  return answer.finish();
}

/** The error with what was streamed before it, so the run loop can salvage it into the session. */
function withPartialText(err: unknown, partialText: string): unknown {
  if (!(err instanceof ProviderError)) return Object.assign(toError(err), { partialText });
  return new ProviderError(err.code as ConstructorParameters<typeof ProviderError>[0], err.message, {
    cause: err.cause,
    retryable: err.retryable,
    ...(err.status === undefined ? {} : { status: err.status }),
    ...(err.retryAfterMs === undefined ? {} : { retryAfterMs: err.retryAfterMs }),
    details: { ...err.details, partialText },
  });
}

/** An endpoint's id: its URL and the first 12 hex digits of its key's SHA-256 (a key is never kept in it). */
function endpointId(baseURL: string, apiKey: string): string {
  const key = apiKey === '' ? 'nokey' : createHash('sha256').update(apiKey).digest('hex').slice(0, 12);
  return `${baseURL.replace(/\/+$/, '')}#${key}`;
}

/** What the model thread builds its own (in-thread) model from: the options that cross a thread, the key resolved here. */
function threadOptions(options: OpenAIModelOptions, apiKey: string): ThreadModelOptions {
  const { model, baseURL, timeoutMs, idleTimeoutMs, maxOutputTokens, tokenLimitParam, stream, temperature, headers } = options;
  const picked = { model, baseURL, timeoutMs, idleTimeoutMs, maxOutputTokens, tokenLimitParam, stream, temperature, headers };
  return { apiKey, ...(Object.fromEntries(Object.entries(picked).filter(([, v]) => v !== undefined)) as Omit<ThreadModelOptions, 'apiKey'>) };
}

/**
 * A model on any OpenAI-compatible Chat Completions server. Every failure is classified once,
 * here, and the run loop acts on the class:
 *
 * - timeout, dropped connection, stream cut, 408, 409, 429, 5xx, `x-should-retry: true`
 *   (`PROVIDER_TIMEOUT` / `_CONNECTION` / `_RATE_LIMITED` / `_UNAVAILABLE`): retried ≤ 5 times,
 *   waiting min(2 s·2^(n-1), 90 s) or what `retry-after(-ms)` asks; then the agent fails.
 * - a 400 saying the context is too long (`PROVIDER_CONTEXT_OVERFLOW`): all but the task and the
 *   newest quarter is summarised by the same model (a metered `compaction` call), ≤ 2 times.
 * - 400/404/422 while the session holds images (`PROVIDER_BAD_REQUEST`): images are replaced by a
 *   placeholder (≤ 3 times) and the call retried.
 * - a refusal, 401, 403, other 4xx, exhausted quota, `x-should-retry: false`: the agent fails.
 * - a response troupe cannot use (no choices, not JSON, a field of the wrong type, a tool-call
 *   index outside [0, 128), more than 128 calls, an SSE event over 1 MiB, or a body over 8 MiB —
 *   streamed or not, counted as it arrives and cut off there): `PROVIDER_INVALID_RESPONSE`, and no
 *   tool call of that answer runs (nor is the text of an answer cut off for its size kept).
 *
 * The client's own retries and console logging are off (`OPENAI_LOG=warn` turns logging on).
 * With `stream: true` pieces reach `coordinator.subscribe` as `agent.delta` events.
 * @example
 * const model = openaiModel({ model: 'gpt-4.1-mini' }); // OPENAI_API_KEY from the environment
 * const local = openaiModel({ model: 'qwen2.5:7b', baseURL: 'http://127.0.0.1:11434/v1', apiKey: '' });
 */
export function openaiModel(options: OpenAIModelOptions): Model {
  validate(options);
  const clock = options.clock ?? systemClock;
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const idleTimeoutMs = Math.min(options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS, timeoutMs);
  const apiKey = options.apiKey ?? process.env.OPENAI_API_KEY;
  if (apiKey === undefined && options.baseURL === undefined) {
    throw new ConfigError('openaiModel needs an API key: pass apiKey or set OPENAI_API_KEY (or point baseURL at a local server)');
  }
  const meta = {
    name: options.model,
    ...(options.price ? { price: options.price } : {}),
    ...(options.maxOutputTokens === undefined ? {} : { maxOutputTokens: options.maxOutputTokens }),
    ...(options.contextWindow === undefined ? {} : { contextWindow: options.contextWindow }),
    endpoint: endpointId(options.baseURL ?? 'https://api.openai.com/v1', apiKey ?? ''),
  };
  const mode = threadMode(options);
  if (mode === 'on') return { ...meta, complete: threadedComplete(threadOptions(options, apiKey ?? '')) };
  const client = new OpenAI({
    apiKey: apiKey ?? '',
    ...(options.baseURL === undefined ? {} : { baseURL: options.baseURL }),
    maxRetries: 0, // the run loop owns retries
    // Our timer on troupe's clock is the real timeout; the client's is only a backstop.
    timeout: timeoutMs + 60_000,
    ...(options.headers ? { defaultHeaders: options.headers } : {}),
    // Bodies bounded, streams handed over whole events at a time (see boundedFetch).
    fetch: boundedFetch(options.stream === true),
    // The client's own logger writes to the console, and on an SSE event that is not JSON it
    // prints the server's raw bytes (any size, escape sequences included). Every failure already
    // leaves as a classified ProviderError that troupe logs; OPENAI_LOG still turns it back on.
    ...(process.env.OPENAI_LOG === undefined ? { logLevel: 'off' as const } : {}),
  });
  const limitParam = options.tokenLimitParam ?? 'max_completion_tokens';

  // An agent's tool list is one array for as long as it does not change (readonly, as the model
  // thread's tool sets assume): its wire form is built once per list, not once per call.
  const wireTools = new WeakMap<readonly ToolSpec[], ChatCompletionTool[]>();
  const body = (request: ModelRequest): ChatCompletionCreateParamsBase => {
    let tools = wireTools.get(request.tools);
    if (tools === undefined) {
      tools = request.tools.map((t) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.parameters } }));
      wireTools.set(request.tools, tools);
    }
    return {
      model: options.model,
      messages: toChatMessages(request.system, request.messages),
      ...(tools.length > 0 ? { tools } : {}),
      ...(options.maxOutputTokens === undefined ? {} : { [limitParam]: options.maxOutputTokens }),
      ...(options.temperature === undefined ? {} : { temperature: options.temperature }),
    };
  };

  const here = async (request: ModelRequest, { signal, onDelta }: ModelCallOptions): Promise<ModelTurn> => {
    if (signal.aborted) throw signal.reason;
    const controller = new AbortController();
    const forward = () => controller.abort(signal.reason);
    signal.addEventListener('abort', forward, { once: true });
    const timer = clock.setTimeout(() => controller.abort(new TimedOut()), timeoutMs);
    // The silent-stream guard: armed at the request, re-armed by every byte of the response.
    let idle: unknown;
    const heard = () => {
      clock.clearTimeout(idle);
      idle = clock.setTimeout(() => controller.abort(new Silent()), idleTimeoutMs);
    };
    const partial = { text: '' };
    try {
      if (options.stream) {
        heard();
        const stream = await client.chat.completions.create(
          { ...body(request), stream: true, stream_options: { include_usage: true } },
          { signal: controller.signal, fetchOptions: { [ON_BYTES]: heard } as object },
        );
        return await readStream(stream, onDelta, partial);
      }
      // Read as unknown: the server is not trusted to match the client's types (chatWire checks them).
      const res: unknown = await client.chat.completions.create({ ...body(request), stream: false }, { signal: controller.signal });
      return fromCompletion(res);
    } catch (err) {
      if (signal.aborted) throw signal.reason;
      const why: unknown = controller.signal.reason;
      const classified =
        why instanceof TimedOut
          ? new ProviderError('PROVIDER_TIMEOUT', `No complete answer within ${timeoutMs} ms`, { cause: err })
          : why instanceof Silent
            ? new ProviderError('PROVIDER_TIMEOUT', `The server sent nothing for ${idleTimeoutMs} ms (idleTimeoutMs)`, { cause: err })
            : classifyOpenAIError(err, clock.now());
      // An answer refused for its size is refused whole: none of its text is salvaged into the session.
      throw partial.text === '' || isOverLimit(classified) ? classified : withPartialText(classified, partial.text);
    } finally {
      clock.clearTimeout(timer);
      clock.clearTimeout(idle);
      signal.removeEventListener('abort', forward);
    }
  };
  if (mode === 'off') return { ...meta, complete: here };
  // 'auto': each call where the router says; the thread's model is built at its first call.
  const router = threadRouter(mode);
  let threaded: Model['complete'] | undefined;
  return {
    ...meta,
    async complete(request, call) {
      const run = router.route() ? (threaded ??= threadedComplete(threadOptions(options, apiKey ?? ''))) : here;
      router.begin();
      try {
        return await run(request, call);
      } finally {
        router.end();
      }
    },
  };
}
