/**
 * Chat Completions answers from the wire, read as `unknown`: the server is not trusted to match the
 * `openai` client's types. Every field troupe reads is checked; a wrong type, a tool-call index out
 * of range or more than `MAX_TOOL_CALLS` calls is a `PROVIDER_INVALID_RESPONSE` (the agent fails),
 * never a crash. Usage that cannot be believed does not fail the answer: the turn carries
 * `invalidUsage` and the budget charges the call at its reserved estimate.
 * @module
 */
import { ProviderError } from '../errors.js';
import type { ModelDelta, ModelTurn, ToolCall } from './types.js';
import { usageFromWire } from './usage.js';

/**
 * The most tool calls one answer may carry (and the bound on a streamed call's `index`). Models
 * issue a handful per turn; 128 is far beyond that and keeps a hostile index from costing anything.
 */
export const MAX_TOOL_CALLS = 128;

const CONTENT_FILTERED = "The provider's content filter stopped the answer";

type Obj = Record<string, unknown>;

const invalid = (message: string) => new ProviderError('PROVIDER_INVALID_RESPONSE', message);

const kind = (value: unknown): string => (value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value);

function object(value: unknown, what: string): Obj {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalid(`${what} is ${kind(value)}, not an object`);
  return value as Obj;
}

/** An optional object: `undefined` and `null` are absent. */
function maybeObject(value: unknown, what: string): Obj | undefined {
  return value === undefined || value === null ? undefined : object(value, what);
}

/** An optional string: `undefined` and `null` are absent. */
function maybeString(value: unknown, what: string): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw invalid(`${what} is ${kind(value)}, not a string`);
  return value;
}

/** An optional array of at most MAX_TOOL_CALLS entries. */
function maybeToolCalls(value: unknown, what: string): unknown[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw invalid(`${what} is ${kind(value)}, not an array`);
  if (value.length > MAX_TOOL_CALLS) throw invalid(`${what} holds ${value.length} tool calls; at most ${MAX_TOOL_CALLS} are accepted`);
  return value;
}

/** Troupe offers only function tools: a call of another type is one it cannot run. */
function checkType(value: unknown, what: string): void {
  if (value !== undefined && value !== null && value !== 'function') throw invalid(`${what} is ${JSON.stringify(value)}, not "function"`);
}

/** Tool-call ids answer calls in the session: two calls with one id cannot both be answered. */
function unique(calls: ToolCall[]): ToolCall[] {
  const ids = new Set<string>();
  for (const call of calls) {
    if (ids.has(call.id)) throw invalid(`two tool calls share the id ${JSON.stringify(call.id.slice(0, 80))}`);
    ids.add(call.id);
  }
  return calls;
}

/** The model the provider says answered (`gen_ai.response.model`): a short string, or nothing. */
const modelOf = (raw: unknown): Pick<ModelTurn, 'model'> => (typeof raw === 'string' && raw !== '' && raw.length <= 200 ? { model: raw } : {});

function usageOf(raw: unknown): Pick<ModelTurn, 'usage' | 'invalidUsage'> {
  const checked = usageFromWire(raw);
  if (!checked.ok) return { invalidUsage: checked.reason };
  return checked.usage ? { usage: checked.usage } : {};
}

/** A non-streamed completion as a turn. */
export function fromCompletion(res: unknown): ModelTurn {
  const body = object(res, 'the response');
  if (!Array.isArray(body.choices) || body.choices.length === 0) throw invalid('The response has no choices');
  const choice = object(body.choices[0], 'choices[0]');
  const message = object(choice.message, 'choices[0].message');
  const toolCalls = unique(
    maybeToolCalls(message.tool_calls, 'message.tool_calls').map((raw, i): ToolCall => {
      const what = `message.tool_calls[${i}]`;
      const call = object(raw, what);
      checkType(call.type, `${what}.type`);
      const fn = object(call.function, `${what}.function`);
      const name = fn.name;
      if (typeof name !== 'string') throw invalid(`${what}.function.name is ${kind(name)}, not a string`);
      return { id: maybeString(call.id, `${what}.id`) || `call_${i}`, name, arguments: maybeString(fn.arguments, `${what}.function.arguments`) ?? '' };
    }),
  );
  const content = maybeString(message.content, 'message.content') ?? null;
  const refusal = maybeString(message.refusal, 'message.refusal') || null;
  const finish = maybeString(choice.finish_reason, 'choices[0].finish_reason');
  const filtered = finish === 'content_filter' && !content && toolCalls.length === 0;
  return { text: content, toolCalls, refusal: refusal ?? (filtered ? CONTENT_FILTERED : null), ...usageOf(body.usage), ...modelOf(body.model) };
}

/**
 * A streamed answer, assembled chunk by chunk. Tool calls are kept in a map keyed by their
 * `index`, which must be an integer in [0, MAX_TOOL_CALLS): no index value can cost more than one
 * map entry.
 */
export class StreamAssembler {
  #text = '';
  #refusal = '';
  #finish: string | null = null;
  #sawChoice = false;
  #usage: Pick<ModelTurn, 'usage' | 'invalidUsage'> = {};
  #model: Pick<ModelTurn, 'model'> = {};
  readonly #calls = new Map<number, { id: string; name: string; arguments: string }>();

  /** `partial.text` always holds the text streamed so far (salvaged if the stream fails). */
  constructor(
    private readonly onDelta: ((d: ModelDelta) => void) | undefined,
    private readonly partial: { text: string },
  ) {}

  add(raw: unknown): void {
    const chunk = object(raw, 'a stream chunk');
    // OpenAI sends `usage: null` on every chunk but the last; the last usage reported counts.
    if (chunk.usage !== undefined && chunk.usage !== null) this.#usage = usageOf(chunk.usage);
    if (this.#model.model === undefined) this.#model = modelOf(chunk.model);
    if (chunk.choices === undefined || chunk.choices === null) return;
    if (!Array.isArray(chunk.choices)) throw invalid(`a stream chunk's choices is ${kind(chunk.choices)}, not an array`);
    if (chunk.choices.length === 0) return;
    const choice = object(chunk.choices[0], "a stream chunk's choices[0]");
    this.#sawChoice = true;
    const delta = maybeObject(choice.delta, 'delta') ?? {};
    const content = maybeString(delta.content, 'delta.content');
    if (content) {
      this.#text += content;
      this.partial.text = this.#text;
      this.onDelta?.({ kind: 'text', text: content });
    }
    const refusal = maybeString(delta.refusal, 'delta.refusal');
    if (refusal) {
      this.#refusal += refusal;
      this.onDelta?.({ kind: 'refusal', text: refusal });
    }
    for (const part of maybeToolCalls(delta.tool_calls, 'delta.tool_calls')) this.#addCall(part);
    const finish = maybeString(choice.finish_reason, 'finish_reason');
    if (finish) this.#finish = finish;
  }

  #addCall(raw: unknown): void {
    const part = object(raw, 'a streamed tool call');
    const index = part.index;
    if (typeof index !== 'number' || !Number.isInteger(index) || index < 0 || index >= MAX_TOOL_CALLS) {
      throw invalid(`a streamed tool call's index is ${typeof index === 'number' ? index : kind(index)}, not an integer in [0, ${MAX_TOOL_CALLS})`);
    }
    checkType(part.type, 'a streamed tool call type');
    const id = maybeString(part.id, 'a streamed tool call id');
    const fn = maybeObject(part.function, 'a streamed tool call function') ?? {};
    const name = maybeString(fn.name, 'a streamed tool call name');
    const args = maybeString(fn.arguments, 'streamed tool call arguments') ?? '';
    let slot = this.#calls.get(index);
    if (!slot) this.#calls.set(index, (slot = { id: '', name: '', arguments: '' }));
    if (id) slot.id = id;
    if (name) slot.name += name;
    slot.arguments += args;
    this.onDelta?.({ kind: 'toolCall', index, ...(name ? { name } : {}), text: args });
  }

  /** The assembled turn once the stream ended. */
  finish(): ModelTurn {
    if (!this.#sawChoice) throw invalid('The stream carried no choices');
    if (this.#finish === null) {
      throw new ProviderError('PROVIDER_CONNECTION', 'The stream ended before the answer was complete', { retryable: true });
    }
    const calls = [...this.#calls].sort(([a], [b]) => a - b).map(([, c], i) => ({ id: c.id || `call_stream_${i}`, name: c.name, arguments: c.arguments }));
    const text = this.#text;
    const filtered = this.#finish === 'content_filter' && calls.length === 0 && text === '';
    return {
      text: text === '' ? null : text,
      toolCalls: unique(calls),
      refusal: this.#refusal || (filtered ? CONTENT_FILTERED : null),
      ...this.#usage,
      ...this.#model,
    };
  }
}
