/**
 * OpenTelemetry GenAI spans and metrics for one run, behind a narrow interface the host calls.
 *
 * troupe depends only on `@opentelemetry/api`: when the application registers no SDK, every span
 * is the API's non-recording span and every histogram a no-op, and this module does no more than
 * one map entry per agent stint. Spans are parented explicitly (no context manager needed):
 *
 * - `invoke_agent {name}` per agent stint (from the moment it runs until it parks or ends), under
 *   the `execute_tool spawn_agent` span of the turn that spawned it (the root: under the caller's
 *   active context). A later stint of the same agent sits under the same parent and links to the
 *   previous stint; after a restart the link target is read back from the store (a `trace.stint`
 *   event row written when the stint started), so a run that spans a crash reads as one story.
 * - `chat {model}` per model call of a turn (CLIENT), retries as events, usage and cost at the end.
 * - `execute_tool {tool}` per tool call.
 * - notices, stalls, nudges, budget warnings and trips as events on the agent's stint; when the
 *   agent is not running (no stint open), on a `troupe.dormant {name}` span beside its stints and
 *   linked to its last one: one per status change of a dormant agent (a wait timing out into a
 *   stall, a stop reaching it) with that change's events, one per lone event, one around a
 *   background review's call. An ended stint takes no events (the SDK drops them), a child of it
 *   would sit outside its time, and a run-level span would put the event on no agent at all.
 *
 * Message content and tool arguments/results are recorded only with `recordContent: true`; API
 * keys never reach this module.
 * @module
 */
import type { Attributes, Context, Histogram, Link, Span, SpanContext, Tracer } from '@opentelemetry/api';
import type { ModelRequest, ToolCall, UsagePurpose } from '../model/types.js';
import type { WriteOp } from '../store/port.js';
import * as A from './attributes.js';
import { loadedWhenUsed } from '../whenUsed.js';

export type { TelemetryOptions, ChatSpan, TurnTrace } from './types.js';
import type { TelemetryOptions, TracedAgent, ChatSpan, ToolSpan, TurnTrace, StintRecord } from './types.js';

const NOOP_TOOL: ToolSpan = { end: () => undefined };
const NOOP_CHAT: ChatSpan = { retry: () => undefined, end: () => undefined };

/**
 * `@opentelemetry/api`, loaded for the first run that can record: its 44 CommonJS files cost a
 * process ~35 ms, which every run without an SDK (a crash-harness child, `troupe run`) paid for
 * nothing.
 */
const otel = loadedWhenUsed<typeof import('@opentelemetry/api')>('@opentelemetry/api');
/**
 * Where the API keeps what is registered globally (its versioned key, the one our copy of the
 * 1.x API reads; tracer.test pins it): with nothing there, every global provider is a no-op.
 */
const OTEL_GLOBAL = Symbol.for('opentelemetry.js.api.1');
const globalRegistered = (): boolean => (globalThis as Record<symbol, unknown>)[OTEL_GLOBAL] !== undefined;

/** What the host calls: the tracer of a run. */
export type RunTrace = Pick<RunTracer, keyof RunTracer>;

/** `telemetry: false`: not even the API is called. */
export const NO_TRACE: RunTrace = {
  restore: () => undefined,
  stintStarted: () => undefined,
  dormantChanged: () => undefined,
  stintEnded: () => undefined,
  event: () => undefined,
  budgetWarning: () => undefined,
  notice: () => undefined,
  chat: () => NOOP_CHAT,
  tool: () => NOOP_TOOL,
  close: () => undefined,
};
const TRACER_NAME = 'troupe';

const spanContextOf = (data: unknown): SpanContext | null => {
  const d = data as { traceId?: unknown; spanId?: unknown; traceFlags?: unknown } | null;
  if (typeof d?.traceId !== 'string' || typeof d.spanId !== 'string') return null;
  const ctx: SpanContext = { traceId: d.traceId, spanId: d.spanId, traceFlags: typeof d.traceFlags === 'number' ? d.traceFlags : 1, isRemote: true };
  return otel().trace.isSpanContextValid(ctx) ? ctx : null;
};

const errorStatus = (span: Span, code: string) => {
  span.setAttribute(A.ERROR_TYPE, code);
  span.setStatus({ code: otel().SpanStatusCode.ERROR, message: code });
};

/** Whether spans can record at all: a provider was given, or an SDK is registered globally. */
export function tracingRegistered(options?: TelemetryOptions | false): boolean {
  if (options === false || (options?.tracerProvider === undefined && !globalRegistered())) return false;
  const { trace, ProxyTracerProvider } = otel();
  const provider = options?.tracerProvider ?? trace.getTracerProvider();
  return !(provider instanceof ProxyTracerProvider) || provider.getDelegateTracer(TRACER_NAME) !== undefined;
}

export interface RunTracerDeps {
  runId: string;
  /** The name of the model a call of this purpose by this agent goes to (`gen_ai.request.model`): auxiliary calls and a profile's agents may have their own. */
  modelFor(purpose: UsagePurpose, agentId: string): string;
  options: TelemetryOptions | undefined;
  now(): number;
  /** Stage a write with the current commit group (a recording stint's span context). */
  stage(op: WriteOp): void;
  /** The agent an id names (a dormant one's span needs its name and parent); undefined if none. */
  agent(id: string): TracedAgent | undefined;
}

/**
 * The run's tracer: `telemetry: false` calls nothing at all, and neither does a run with no
 * provider given and nothing registered globally when it is created or resumed (the global
 * providers are read then; a meter provider always was).
 */
export const runTrace = (options: TelemetryOptions | false | undefined, deps: Omit<RunTracerDeps, 'options'>): RunTrace =>
  options === false || (options?.tracerProvider === undefined && options?.meterProvider === undefined && !globalRegistered())
    ? NO_TRACE
    : new RunTracer({ ...deps, options });

class RunTracer implements TurnTrace {
  readonly #tracer: Tracer;
  readonly #tokens: Histogram;
  readonly #duration: Histogram;
  readonly #deps: RunTracerDeps;
  readonly #content: boolean;
  /** Whether a meter provider records (else a call with no recording span costs nothing at all). */
  readonly #metered: boolean;
  /**
   * The open span of an agent: its stint while it runs; while a dormant agent changes status, the
   * short dormant span of that change (both are ended by stintEnded).
   */
  readonly #stints = new Map<string, Span>();
  /** The open tool span of an agent (a child spawned by it sits under it). */
  readonly #tools = new Map<string, Span>();
  /** Where an agent's stints sit: fixed at its first stint in this process. */
  readonly #parents = new Map<string, Context>();
  /** The last stint of each agent (this process's, or persisted by an earlier one): the link target. */
  readonly #previous = new Map<string, SpanContext>();

  constructor(deps: RunTracerDeps) {
    this.#deps = deps;
    this.#content = deps.options?.recordContent === true;
    const { trace, metrics, createNoopMeter } = otel();
    this.#tracer = (deps.options?.tracerProvider ?? trace.getTracerProvider()).getTracer(TRACER_NAME);
    const meter = (deps.options?.meterProvider ?? metrics.getMeterProvider()).getMeter(TRACER_NAME);
    this.#tokens = meter.createHistogram(A.METRIC_TOKEN_USAGE, { description: 'Number of input and output tokens used', unit: '{token}' });
    this.#duration = meter.createHistogram(A.METRIC_OPERATION_DURATION, { description: 'GenAI operation duration', unit: 's' });
    // The API's no-op histogram is a singleton: a meter that returns it records nothing.
    this.#metered = this.#tokens !== createNoopMeter().createHistogram('troupe.noop');
  }

  /** After a restart: the stints the earlier process started (rows of type `trace.stint`, oldest first). */
  restore(rows: readonly StintRecord[]): void {
    for (const row of rows) {
      const ctx = row.agentId === null ? null : spanContextOf(row.data);
      if (ctx) this.#previous.set(row.agentId!, ctx);
    }
  }

  /** The agent starts running (registered, woken, or respawned running). */
  stintStarted(agent: TracedAgent): void {
    if (this.#stints.has(agent.id)) return;
    const span = this.#agentSpan(agent, `${A.OP_INVOKE_AGENT} ${agent.name}`, { [A.GEN_AI_OPERATION_NAME]: A.OP_INVOKE_AGENT }, 'previous_stint');
    this.#stints.set(agent.id, span);
    if (!span.isRecording()) return;
    const ctx = span.spanContext();
    this.#previous.set(agent.id, ctx);
    const data = { traceId: ctx.traceId, spanId: ctx.spanId, traceFlags: ctx.traceFlags };
    this.#deps.stage({ op: 'appendEvent', row: { runId: this.#deps.runId, agentId: agent.id, type: A.STINT_EVENT, data, at: this.#deps.now() } });
  }

  /**
   * A dormant agent changes status without running (a wait times out into a stall, a stop reaches
   * it while parked): its dormant span opens, for the events of the change; stintEnded ends it.
   */
  dormantChanged(agent: TracedAgent, from: string): void {
    if (this.#stints.has(agent.id)) return;
    this.#stints.set(agent.id, this.#agentSpan(agent, `${A.SPAN_DORMANT} ${agent.name}`, { [A.TROUPE_STATUS_FROM]: from }, 'last_stint'));
  }

  /**
   * A span of the agent, where its stints sit: under the tool span of the parent's turn that spawned
   * it (the root: under the caller's active context), linked to the agent's last stint.
   */
  #agentSpan(agent: TracedAgent, name: string, own: Attributes, link: string): Span {
    let parent = this.#parents.get(agent.id);
    const first = !parent;
    if (!parent) {
      const by = agent.parentId === null ? undefined : (this.#tools.get(agent.parentId) ?? this.#stints.get(agent.parentId));
      const { trace, context, ROOT_CONTEXT } = otel();
      parent = by ? trace.setSpan(ROOT_CONTEXT, by) : context.active();
      this.#parents.set(agent.id, parent);
    }
    const previous = this.#previous.get(agent.id);
    const links: Link[] | undefined = previous ? [{ context: previous, attributes: { [A.TROUPE_LINK]: link } }] : undefined;
    const attributes: Attributes = {
      ...own,
      [A.GEN_AI_AGENT_ID]: agent.id,
      [A.GEN_AI_AGENT_NAME]: agent.name,
      [A.GEN_AI_CONVERSATION_ID]: this.#deps.runId,
      [A.TROUPE_DEPTH]: agent.depth,
    };
    if (agent.parentId !== null) attributes[A.TROUPE_PARENT_ID] = agent.parentId;
    const { trace, ROOT_CONTEXT, SpanKind } = otel();
    const span = this.#tracer.startSpan(name, { kind: SpanKind.INTERNAL, attributes, ...(links ? { links } : {}) }, parent);
    // An agent with nothing above it here (the root; an agent restored while its parent is not
    // running): its later spans sit under this first one, so the process's run stays one trace.
    if (first && !trace.getSpan(parent)) this.#parents.set(agent.id, trace.setSpan(ROOT_CONTEXT, span));
    return span;
  }

  /** The agent left `running` (parked: waiting, stalled, budget-paused; or ended), or its dormant change is done. */
  stintEnded(agentId: string, end: { status: string; error?: { code: string } | null; stopReason?: string | null }): void {
    const span = this.#stints.get(agentId);
    if (!span) return;
    this.#stints.delete(agentId);
    span.setAttribute(A.TROUPE_STATUS, end.status);
    if (end.stopReason) span.setAttribute(A.TROUPE_STOP_REASON, end.stopReason);
    if (end.status === 'stalled') span.addEvent(A.EVENT_STALL);
    if ((end.status === 'failed' || end.status === 'crashed') && end.error) errorStatus(span, end.error.code);
    span.end();
  }

  /**
   * An event on the agent's open span; with none (the agent is dormant: a trip caused by a review
   * of a parked agent), on a dormant span of its own. An id that names no agent is ignored.
   */
  event(agentId: string, name: string, attributes?: Attributes): void {
    const open = this.#stints.get(agentId);
    if (open) {
      if (open.isRecording()) open.addEvent(name, attributes);
      return;
    }
    const agent = this.#deps.agent(agentId);
    if (!agent) return;
    const span = this.#agentSpan(agent, `${A.SPAN_DORMANT} ${agent.name}`, {}, 'last_stint');
    if (span.isRecording()) span.addEvent(name, attributes);
    span.end();
  }

  /** A budget warning went into the agent's call: its band (`[BUDGET NOTICE] …` → `BUDGET NOTICE`). */
  budgetWarning(agentId: string, warning: string): void {
    if (this.#stints.get(agentId)?.isRecording() === false) return;
    this.event(agentId, A.EVENT_BUDGET_WARNING, { [A.TROUPE_BUDGET_BAND]: warning.slice(1, Math.max(1, warning.indexOf(']'))) });
  }

  /**
   * A notice the coordinator decided: an event on the open span of the agent it is about (its stint
   * ending now, or its dormant change), else the recipient's (the reserve notice from `system`: on
   * the root's stint, or a dormant span of the root when it is parked).
   */
  notice(e: { from: string; to: string; kind: string }): void {
    const attributes = { [A.TROUPE_NOTICE_KIND]: e.kind, [A.TROUPE_NOTICE_FROM]: e.from, [A.TROUPE_NOTICE_TO]: e.to };
    this.event(this.#stints.has(e.from) ? e.from : e.to, A.EVENT_NOTICE, attributes);
  }

  chat(agent: TracedAgent, request: ModelRequest, purpose: UsagePurpose): ChatSpan {
    // A background review of a parked (or finished) agent: its call sits on a dormant span of it.
    const dormant = this.#stints.has(agent.id) ? null : this.#agentSpan(agent, `${A.SPAN_DORMANT} ${agent.name}`, {}, 'last_stint');
    const stint = this.#stints.get(agent.id) ?? dormant;
    if (!this.#metered && !stint?.isRecording()) return NOOP_CHAT;
    const model = this.#deps.modelFor(purpose, agent.id);
    const started = performance.now();
    let span: Span | null = null;
    if (stint?.isRecording()) {
      const { trace, ROOT_CONTEXT, SpanKind } = otel();
      span = this.#tracer.startSpan(
        `${A.OP_CHAT} ${model}`,
        {
          kind: SpanKind.CLIENT,
          attributes: {
            [A.GEN_AI_OPERATION_NAME]: A.OP_CHAT,
            [A.GEN_AI_REQUEST_MODEL]: model,
            [A.GEN_AI_CONVERSATION_ID]: this.#deps.runId,
            [A.GEN_AI_AGENT_ID]: agent.id,
            [A.GEN_AI_AGENT_NAME]: agent.name,
            [A.TROUPE_PURPOSE]: purpose,
          },
        },
        trace.setSpan(ROOT_CONTEXT, stint),
      );
      if (this.#content) {
        span.setAttribute(A.GEN_AI_SYSTEM_INSTRUCTIONS, JSON.stringify([{ type: 'text', content: request.system }]));
        span.setAttribute(A.GEN_AI_INPUT_MESSAGES, JSON.stringify(request.messages));
      }
    }
    const tokens = this.#tokens;
    const duration = this.#duration;
    const content = this.#content;
    return {
      retry(reason, delayMs) {
        span?.addEvent(A.EVENT_RETRY, delayMs === null ? { [A.ERROR_TYPE]: reason } : { [A.ERROR_TYPE]: reason, [A.TROUPE_RETRY_DELAY_MS]: delayMs });
      },
      end(how) {
        const base: Attributes = { [A.GEN_AI_OPERATION_NAME]: A.OP_CHAT, [A.GEN_AI_REQUEST_MODEL]: model };
        if ('turn' in how) {
          const { turn, charge } = how;
          if (turn.model !== undefined) base[A.GEN_AI_RESPONSE_MODEL] = turn.model;
          tokens.record(charge.inputTokens, { ...base, [A.GEN_AI_TOKEN_TYPE]: 'input' });
          tokens.record(charge.outputTokens, { ...base, [A.GEN_AI_TOKEN_TYPE]: 'output' });
          if (span) {
            span.setAttributes({
              [A.GEN_AI_USAGE_INPUT_TOKENS]: charge.inputTokens,
              [A.GEN_AI_USAGE_OUTPUT_TOKENS]: charge.outputTokens,
              [A.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS]: charge.cachedInputTokens,
              [A.TROUPE_COST_USD]: charge.costUsd,
            });
            if (turn.model !== undefined) span.setAttribute(A.GEN_AI_RESPONSE_MODEL, turn.model);
            if (turn.refusal) errorStatus(span, 'PROVIDER_REFUSAL');
            if (content)
              span.setAttribute(
                A.GEN_AI_OUTPUT_MESSAGES,
                JSON.stringify([{ role: 'assistant', content: turn.text, tool_calls: turn.toolCalls, refusal: turn.refusal ?? null }]),
              );
          }
        } else if ('error' in how) {
          base[A.ERROR_TYPE] = how.error;
          if (span) errorStatus(span, how.error);
        } else if (span) {
          // Never made (the budget stopped it, a message interrupted it): not an error.
          span.setAttribute(A.TROUPE_HALTED, how.halted);
        }
        duration.record((performance.now() - started) / 1000, base);
        span?.end();
        dormant?.end();
      },
    };
  }

  tool(agent: TracedAgent, call: ToolCall): ToolSpan {
    const stint = this.#stints.get(agent.id);
    if (!stint?.isRecording()) return NOOP_TOOL;
    const attributes: Attributes = {
      [A.GEN_AI_OPERATION_NAME]: A.OP_EXECUTE_TOOL,
      [A.GEN_AI_TOOL_NAME]: call.name,
      [A.GEN_AI_TOOL_CALL_ID]: call.id,
      [A.GEN_AI_TOOL_TYPE]: 'function',
    };
    if (this.#content) attributes[A.GEN_AI_TOOL_CALL_ARGUMENTS] = call.arguments;
    const { trace, ROOT_CONTEXT, SpanKind } = otel();
    const span = this.#tracer.startSpan(`${A.OP_EXECUTE_TOOL} ${call.name}`, { kind: SpanKind.INTERNAL, attributes }, trace.setSpan(ROOT_CONTEXT, stint));
    this.#tools.set(agent.id, span);
    const tools = this.#tools;
    const content = this.#content;
    return {
      end(error, result) {
        if (tools.get(agent.id) === span) tools.delete(agent.id);
        if (error !== null) errorStatus(span, error);
        if (content && result !== undefined) span.setAttribute(A.GEN_AI_TOOL_CALL_RESULT, result);
        span.end();
      },
    };
  }

  /** Shutdown: stints still open end here (status: what the agent was, plus a shutdown event). */
  close(statusOf: (agentId: string) => string): void {
    for (const [agentId, span] of this.#stints) {
      span.addEvent(A.EVENT_SHUTDOWN);
      span.setAttribute(A.TROUPE_STATUS, statusOf(agentId));
      span.end();
    }
    this.#stints.clear();
    for (const span of this.#tools.values()) span.end();
    this.#tools.clear();
  }
}
