/**
 * The bodies the fake OpenAI server sends for a scripted `message` reply: a Chat Completions
 * completion, or the SSE events of the same answer streamed (text word by word, tool-call
 * arguments in pieces, usage last when `include_usage` is set), in OpenAI's exact shapes.
 * @module
 */
import type { FakeReply } from './fakeReply.js';

type MessageReply = Extract<FakeReply, { message: unknown }>;

/** One scripted answer in wire form, shared by the JSON and the streamed body. */
export interface WireAnswer {
  content: string | null;
  refusal: string | null;
  toolCalls: { id: string; type: 'function'; function: { name: string; arguments: string } }[];
  finishReason: string;
  usage: Record<string, unknown> | undefined;
}

/** What every body of one completion carries. */
export interface CompletionMeta {
  id: string;
  created: number;
  model: string;
}

const DEFAULT_USAGE = { promptTokens: 10, completionTokens: 5, cachedTokens: 0 } as const;

/** Content split word by word, each piece keeping its trailing whitespace. */
const words = (text: string): string[] => (text === '' ? [] : text.split(/(?<=\s)(?=\S)/));

/** Tool-call arguments in 2+ pieces (when the string has 2+ characters). */
function pieces(text: string): string[] {
  const size = Math.max(1, Math.ceil(text.length / 3));
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

/** A scripted reply in wire form; `nextCallId` names tool calls the script left unnamed. */
export function answerOf(reply: MessageReply, nextCallId: () => string): WireAnswer {
  const toolCalls = (reply.message.toolCalls ?? []).map((call) => ({
    id: call.id ?? nextCallId(),
    type: 'function' as const,
    function: { name: call.name, arguments: typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments) },
  }));
  const u = { ...DEFAULT_USAGE, ...reply.usage };
  return {
    content: reply.message.content ?? null,
    refusal: reply.message.refusal ?? null,
    toolCalls,
    finishReason: reply.finishReason ?? (toolCalls.length > 0 ? 'tool_calls' : 'stop'),
    usage:
      reply.usage === null
        ? undefined
        : {
            prompt_tokens: u.promptTokens,
            completion_tokens: u.completionTokens,
            total_tokens: u.promptTokens + u.completionTokens,
            prompt_tokens_details: { cached_tokens: u.cachedTokens, audio_tokens: 0 },
            completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
          },
  };
}

/** The non-streamed completion. */
export function completionBody(a: WireAnswer, meta: CompletionMeta): Record<string, unknown> {
  return {
    id: meta.id,
    object: 'chat.completion',
    created: meta.created,
    model: meta.model,
    system_fingerprint: null,
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content: a.content, refusal: a.refusal, ...(a.toolCalls.length > 0 ? { tool_calls: a.toolCalls } : {}), annotations: [] },
        logprobs: null,
        finish_reason: a.finishReason,
      },
    ],
    ...(a.usage ? { usage: a.usage } : {}),
  };
}

/** The streamed answer as SSE events, `[DONE]` last. */
export function sseEvents(a: WireAnswer, meta: CompletionMeta, includeUsage: boolean): string[] {
  // OpenAI sends `usage: null` on every chunk but the last when include_usage is set.
  const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) => ({
    id: meta.id,
    object: 'chat.completion.chunk',
    created: meta.created,
    model: meta.model,
    system_fingerprint: null,
    choices,
    ...(includeUsage ? { usage: null } : {}),
    ...extra,
  });
  const delta = (d: Record<string, unknown>, finish: string | null = null) => chunk([{ index: 0, delta: d, logprobs: null, finish_reason: finish }]);
  const events: string[] = [];
  const push = (data: unknown) => events.push(`data: ${JSON.stringify(data)}\n\n`);
  push(delta({ role: 'assistant', content: '', refusal: null }));
  if (a.content !== null) for (const word of words(a.content)) push(delta({ content: word }));
  if (a.refusal !== null) for (const word of words(a.refusal)) push(delta({ refusal: word }));
  a.toolCalls.forEach((call, index) => {
    push(delta({ tool_calls: [{ index, id: call.id, type: 'function', function: { name: call.function.name, arguments: '' } }] }));
    for (const piece of pieces(call.function.arguments)) push(delta({ tool_calls: [{ index, function: { arguments: piece } }] }));
  });
  push(delta({}, a.finishReason));
  if (includeUsage && a.usage) push(chunk([], { usage: a.usage }));
  events.push('data: [DONE]\n\n');
  return events;
}
