/**
 * The OpenTelemetry names troupe emits, in one place. The GenAI semantic conventions (`gen_ai.*`)
 * are still marked "development": their names are copied here (as of semconv 1.37) instead of
 * importing the unstable entry point of `@opentelemetry/semantic-conventions`, so a rename upstream
 * is one edit here. `troupe.*` names are troupe's own.
 * @module
 */

export const GEN_AI_OPERATION_NAME = 'gen_ai.operation.name';
export const GEN_AI_AGENT_ID = 'gen_ai.agent.id';
export const GEN_AI_AGENT_NAME = 'gen_ai.agent.name';
export const GEN_AI_CONVERSATION_ID = 'gen_ai.conversation.id';
export const GEN_AI_REQUEST_MODEL = 'gen_ai.request.model';
export const GEN_AI_RESPONSE_MODEL = 'gen_ai.response.model';
export const GEN_AI_USAGE_INPUT_TOKENS = 'gen_ai.usage.input_tokens';
export const GEN_AI_USAGE_OUTPUT_TOKENS = 'gen_ai.usage.output_tokens';
export const GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS = 'gen_ai.usage.cache_read.input_tokens';
export const GEN_AI_TOOL_NAME = 'gen_ai.tool.name';
export const GEN_AI_TOOL_CALL_ID = 'gen_ai.tool.call.id';
export const GEN_AI_TOOL_TYPE = 'gen_ai.tool.type';
export const GEN_AI_TOKEN_TYPE = 'gen_ai.token.type';
/** Opt-in content (`telemetry.recordContent`): never recorded by default. */
export const GEN_AI_INPUT_MESSAGES = 'gen_ai.input.messages';
export const GEN_AI_OUTPUT_MESSAGES = 'gen_ai.output.messages';
export const GEN_AI_SYSTEM_INSTRUCTIONS = 'gen_ai.system_instructions';
export const GEN_AI_TOOL_CALL_ARGUMENTS = 'gen_ai.tool.call.arguments';
export const GEN_AI_TOOL_CALL_RESULT = 'gen_ai.tool.call.result';
export const ERROR_TYPE = 'error.type';

/** Operation names (`gen_ai.operation.name`). */
export const OP_INVOKE_AGENT = 'invoke_agent';
export const OP_CHAT = 'chat';
export const OP_EXECUTE_TOOL = 'execute_tool';

/** Metrics (histograms). */
export const METRIC_TOKEN_USAGE = 'gen_ai.client.token.usage';
export const METRIC_OPERATION_DURATION = 'gen_ai.client.operation.duration';

/** troupe's own attributes. */
export const TROUPE_PARENT_ID = 'troupe.parent_id';
export const TROUPE_STATUS = 'troupe.status';
export const TROUPE_STOP_REASON = 'troupe.stop_reason';
export const TROUPE_COST_USD = 'troupe.cost_usd';
export const TROUPE_PURPOSE = 'troupe.purpose';
export const TROUPE_DEPTH = 'troupe.depth';
/** Why a model call was never answered (`budget`-stopped, `interrupted`, `cancelled`…): not an error. */
export const TROUPE_HALTED = 'troupe.halted';
/** On a stint's link to the agent's previous stint. */
export const TROUPE_LINK = 'troupe.link';
/** On a dormant span: the status the agent left (the status it entered is `troupe.status`). */
export const TROUPE_STATUS_FROM = 'troupe.status.from';

/**
 * The span of something that happened to an agent while it was not running (a parked or finished
 * agent: a wait timing out into a stall, a stop reaching it, a notice about it): `troupe.dormant {name}`.
 */
export const SPAN_DORMANT = 'troupe.dormant';

/** Event attributes. */
export const TROUPE_RETRY_DELAY_MS = 'troupe.retry.delay_ms';
export const TROUPE_NOTICE_KIND = 'troupe.notice.kind';
export const TROUPE_NOTICE_FROM = 'troupe.notice.from';
export const TROUPE_NOTICE_TO = 'troupe.notice.to';
export const TROUPE_NUDGE_ATTEMPT = 'troupe.nudge.attempt';
export const TROUPE_NUDGE_LIMIT = 'troupe.nudge.limit';
export const TROUPE_BUDGET_BAND = 'troupe.budget.band';

/** Span events. */
export const EVENT_RETRY = 'troupe.retry';
export const EVENT_NOTICE = 'troupe.notice';
export const EVENT_STALL = 'troupe.stall';
export const EVENT_NUDGE = 'troupe.nudge';
export const EVENT_BUDGET_WARNING = 'troupe.budget.warning';
export const EVENT_RESERVE_TRIP = 'troupe.budget.reserve_trip';
export const EVENT_BUDGET_STOP = 'troupe.budget.stop';
export const EVENT_SHUTDOWN = 'troupe.shutdown';

/** The event row type that persists a stint's span context (the link target after a restart). */
export const STINT_EVENT = 'trace.stint';
