/**
 * The model boundary: what a turn sends to a model and what comes back. The conversation format is
 * close to Chat Completions so that providers convert it cheaply.
 * @module
 */
import type { TurnUsage } from '../../machines/types.js';

/** Why a model call was made; every call's usage row carries it (the budget prices them all). */
export type UsagePurpose = 'main' | 'compaction' | 'review' | 'summary';

/** USD per million tokens. */
export interface ModelPrice {
  inputPer1M: number;
  /** Defaults to `inputPer1M`. */
  cachedInputPer1M?: number;
  outputPer1M: number;
}

export interface ToolCall {
  id: string;
  name: string;
  /** Raw JSON text as the model produced it (it may be malformed). */
  arguments: string;
}

export type ContentPart = { type: 'text'; text: string } | { type: 'image'; url: string };

/** One entry of an agent's conversation (its session). */
export type SessionItem =
  | { role: 'user'; content: string | ContentPart[] }
  | { role: 'assistant'; content: string | null; toolCalls?: ToolCall[]; refusal?: string }
  | { role: 'tool'; toolCallId: string; name: string; content: string; isError?: boolean };

/** A JSON Schema object (draft 2020-12 / 07 subset as accepted by ajv). */
export type JsonSchema = Record<string, unknown>;

export interface ToolSpec {
  name: string;
  description: string;
  parameters: JsonSchema;
}

export interface ModelRequest {
  agent: { id: string; name: string; parentId: string | null; depth: number };
  /** The system prompt for this agent (not stored in the session). */
  system: string;
  messages: readonly SessionItem[];
  tools: readonly ToolSpec[];
  /** 1-based turn number in this agent's stint. */
  turn: number;
  /** `main` unless troupe asks on its own behalf (a compaction summary, …). */
  purpose?: UsagePurpose;
}

/** A piece of a streamed answer, as it arrives. */
export type ModelDelta =
  | { kind: 'text'; text: string }
  | { kind: 'refusal'; text: string }
  /** Part of a tool call's arguments; `name` is set on the call's first piece. */
  | { kind: 'toolCall'; index: number; name?: string; text: string };

export interface ModelCallOptions {
  /**
   * Aborted when the call is cancelled (a stop, an interrupting message, shutdown). Remove your
   * listeners when the call settles: a signal nothing listens to any more may serve the agent's
   * next call (src/cancel.ts), so one kept and polled after the call may see a later abort.
   */
  signal: AbortSignal;
  /** Called for each streamed piece (streaming providers only). Must not throw. */
  onDelta?: (delta: ModelDelta) => void;
}

export interface ModelTurn {
  text: string | null;
  toolCalls: ToolCall[];
  /** A structured refusal: the agent fails. */
  refusal?: string | null;
  /**
   * What the call used. The budget believes only non-negative integer token counts up to 10^9 per
   * kind (cached ≤ input) and a finite `costUsd` in [0, 10^6]; anything else is invalid usage. A
   * call with no usage (or tokens with no `costUsd` and no price) is charged at its estimate.
   */
  usage?: Partial<TurnUsage>;
  /**
   * Set when the provider reported usage that cannot be believed (why); `usage` is then ignored.
   * Either way invalid usage is charged at the call's reserved estimate and logged (once per call).
   */
  invalidUsage?: string;
  /** The model that answered, as the provider named it (traces: `gen_ai.response.model`). */
  model?: string;
}

/** Anything that can answer a turn: `openaiModel`, `scriptedModel`, or your own. */
export interface Model {
  readonly name?: string;
  /** What a call costs; used to price usage rows that come without `costUsd`. */
  readonly price?: ModelPrice;
  /** The most output tokens one call may produce (used to reserve budget before a call). */
  readonly maxOutputTokens?: number;
  /**
   * The model's context window in tokens. With it, a call whose estimated prompt passes
   * `session.compactAt` of the window compacts the session first (seed 002); without it, a session
   * is compacted only after the provider reports an overflow.
   */
  readonly contextWindow?: number;
  /**
   * The provider endpoint this model calls, with its key (never the key itself): models that share
   * it share one circuit breaker and one quota (src/providers/). `openaiModel` sets it from its base
   * URL and a hash of its API key; a model without it is an endpoint of its own. A model with it
   * is taken to call over a network: a spawned child's first call then waits for a later turn of the
   * event loop (16 such calls per turn), so that its parent's next request leaves first.
   */
  readonly endpoint?: string;
  /**
   * What the budget reserves before this call, in USD. Optional: by default troupe estimates the
   * prompt tokens plus `maxOutputTokens` at the model's price. A model with no price that
   * implements it prices its own calls (it reports `usage.costUsd`): a budget limit accepts it.
   */
  estimateCostUsd?(request: ModelRequest): number;
  /**
   * Answer one turn. Throw a `ProviderError` for provider failures (classified once, here at the
   * boundary); anything else thrown is treated as a bug and crashes the agent.
   */
  complete(request: ModelRequest, options: ModelCallOptions): Promise<ModelTurn>;
}
