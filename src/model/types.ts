/**
 * The model boundary: what a turn sends to a model and what comes back. The conversation format is
 * close to Chat Completions so that providers convert it cheaply.
 * @module
 */
import type { TurnUsage } from '../../machines/types.js';

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
}

export interface ModelTurn {
  text: string | null;
  toolCalls: ToolCall[];
  /** A structured refusal: the agent fails. */
  refusal?: string | null;
  usage?: Partial<TurnUsage>;
}

/** Anything that can answer a turn: `openaiModel`, `scriptedModel`, or your own. */
export interface Model {
  readonly name?: string;
  complete(request: ModelRequest, options: { signal: AbortSignal }): Promise<ModelTurn>;
}
