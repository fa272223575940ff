/**
 * The types of the tracer's narrow interface (tracer.ts holds the behaviour).
 * @module
 */
import type { Attributes, MeterProvider, TracerProvider } from '@opentelemetry/api';
import type { ModelRequest, ModelTurn, ToolCall, UsagePurpose } from '../model/types.js';

/**
 * OpenTelemetry GenAI conventions (`gen_ai.*`). Spans: `invoke_agent {name}` (INTERNAL, one per
 * stint, from running until it parks or ends; a child's first under the `execute_tool spawn_agent`
 * span that spawned it, later stints linked to the previous one), `chat {model}` (CLIENT, one per
 * model call with retries: tokens, `troupe.cost_usd`, `troupe.purpose`, `error.type`) and
 * `execute_tool {tool}`. Events: `troupe.retry`, `troupe.nudge`, `troupe.stall`, `troupe.notice`,
 * `troupe.budget.*`, `troupe.shutdown`. Stint span contexts are stored (`trace.stint` rows), so a
 * resumed stint links to the one it continues, across kill -9. Metrics:
 * `gen_ai.client.token.usage`, `gen_ai.client.operation.duration`. A parked agent's status changes
 * and lone events are short `troupe.dormant {name}` spans linked to its last stint.
 */
export interface TelemetryOptions {
  /** Default: the global provider (`trace.setGlobalTracerProvider`); none registered → no-op. */
  tracerProvider?: TracerProvider;
  /** Default: the global meter provider; none registered → no-op. */
  meterProvider?: MeterProvider;
  /**
   * Record message content (`gen_ai.input.messages`, `gen_ai.output.messages`) and tool arguments
   * and results on spans. Off by default: prompts and results may hold secrets or personal data.
   */
  recordContent?: boolean;
}

/** What a span needs to know of an agent. */
export interface TracedAgent {
  readonly id: string;
  readonly name: string;
  readonly parentId: string | null;
  readonly depth: number;
}

/** What a settled call cost (the usage row the budget wrote). */
interface ChatCharge {
  costUsd: number;
  inputTokens: number;
  outputTokens: number;
  cachedInputTokens: number;
}

/** How a model call ended: answered and settled, failed with an error code, or never made. */
type ChatEnd = { turn: ModelTurn; charge: ChatCharge } | { error: string } | { halted: string };

/** One model call (all its attempts). */
export interface ChatSpan {
  /** The call is tried again: `reason` is the error code, `delayMs` the backoff (null: no wait). */
  retry(reason: string, delayMs: number | null): void;
  end(how: ChatEnd): void;
}

/** One tool call. */
export interface ToolSpan {
  /** `error`: the error code of a failed call, else null. */
  end(error: string | null, result?: string): void;
}

/** The part of the tracer turn code sees. */
export interface TurnTrace {
  chat(agent: TracedAgent, request: ModelRequest, purpose: UsagePurpose): ChatSpan;
  tool(agent: TracedAgent, call: ToolCall): ToolSpan;
  event(agentId: string, name: string, attributes?: Attributes): void;
}

/** A persisted stint span context (the `data` of a `trace.stint` event row). */
export interface StintRecord {
  agentId: string | null;
  data: unknown;
}
