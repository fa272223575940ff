/**
 * Hand-built Chat Completions bodies for the fake server's `raw` replies: any field may hold any
 * JSON value, so a test can send what a broken or hostile server would.
 */
import type { FakeReply } from '../../src/testing/fakeOpenAIServer.js';

/** Wire usage with whatever values; `cached` goes into `prompt_tokens_details`. */
export const wireUsage = (prompt: unknown, completion: unknown, cached: unknown = 0) => ({
  prompt_tokens: prompt,
  completion_tokens: completion,
  total_tokens: typeof prompt === 'number' && typeof completion === 'number' ? prompt + completion : 0,
  prompt_tokens_details: { cached_tokens: cached },
});

/** A well-formed function tool call on the wire. */
export const wireCall = (name: string, args: Record<string, unknown> | string, id = `call_${name}`) => ({
  id,
  type: 'function',
  function: { name, arguments: typeof args === 'string' ? args : JSON.stringify(args) },
});

export interface WireMessage {
  content?: unknown;
  refusal?: unknown;
  tool_calls?: unknown;
}

/** A non-streamed completion whose message, finish reason and usage are taken as given. */
export function completion(message: WireMessage, options: { usage?: unknown; finishReason?: unknown } = {}) {
  const calls = Array.isArray(message.tool_calls) && message.tool_calls.length > 0;
  return {
    id: 'chatcmpl-wire',
    object: 'chat.completion',
    created: 1,
    model: 'fake-model',
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content: null, refusal: null, ...message },
        logprobs: null,
        finish_reason: 'finishReason' in options ? options.finishReason : calls ? 'tool_calls' : 'stop',
      },
    ],
    ...('usage' in options ? { usage: options.usage } : { usage: wireUsage(10, 5) }),
  };
}

/** One stream chunk with one choice carrying `delta` (and `finish_reason`). */
export const chunk = (delta: unknown, finish: unknown = null, extra: Record<string, unknown> = {}) => ({
  id: 'chatcmpl-wire',
  object: 'chat.completion.chunk',
  created: 1,
  model: 'fake-model',
  choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
  usage: null,
  ...extra,
});

/** The usage chunk OpenAI sends last when `include_usage` is set. */
export const usageChunk = (usage: unknown) => ({ id: 'chatcmpl-wire', object: 'chat.completion.chunk', created: 1, model: 'fake-model', choices: [], usage });

/** An SSE body: each value as one `data:` event (strings are sent verbatim), then `[DONE]`. */
export const sse = (events: readonly unknown[], done = true): string =>
  events.map((e) => `data: ${typeof e === 'string' ? e : JSON.stringify(e)}\n\n`).join('') + (done ? 'data: [DONE]\n\n' : '');

/** A JSON reply, verbatim. */
export const rawJson = (body: unknown): FakeReply => ({ raw: typeof body === 'string' ? body : JSON.stringify(body) });

/** An SSE reply, verbatim, optionally cut into pieces at byte offsets. */
export const rawSse = (body: string | Uint8Array, splitAt?: readonly number[]): FakeReply => ({
  raw: body,
  headers: { 'content-type': 'text/event-stream' },
  ...(splitAt ? { splitAt } : {}),
});

/** A streamed answer that calls `name` with `args` at tool-call index `index`, then usage. */
export const streamedCall = (index: unknown, name: string, args: Record<string, unknown>, usage: unknown = wireUsage(10, 5)) =>
  sse([
    chunk({ role: 'assistant', content: '' }),
    chunk({ tool_calls: [{ index, id: `call_${name}`, type: 'function', function: { name, arguments: '' } }] }),
    chunk({ tool_calls: [{ index, function: { arguments: JSON.stringify(args) } }] }),
    chunk({}, 'tool_calls'),
    usageChunk(usage),
  ]);
