/**
 * troupe: a durable, actor-model coordinator for teams of LLM agents.
 * @module
 */
export { createCoordinator, resumeCoordinator } from './worker/library.js';
export { recoverRun } from './host/resumeCoordinator.js';
export { isStorePort, portOf, type StorePort, type WriteOp } from './store/port.js';
export type { ResumeOptions } from './host/resumeCoordinator.js';
export type { Coordinator } from './host/createCoordinator.js';
export type { SendOptions, SentMessage } from './host/mail/messaging.js';
export type { AgentId, AgentIdOf, AgentResult } from './host/results.js';
export type { OutputOf, OutputSchema } from './tools/outputSchema.js';
export type { StandardSchemaV1 } from './tools/standardSchema.js';
export type { AgentActivity, AgentInfo, CoordinatorHealth, TroupeEvent } from './host/runtime.js';
export type { AgentView, Registry, TreeNode } from './host/views/registry.js';
export { DEFAULT_LIMITS } from './host/options.js';
export type { BudgetOptions, CoordinatorOptions, InspectOption, Limits } from './host/options.js';
export { systemClock } from './clock.js';
export type { Clock } from './clock.js';
export { ConfigError, ERROR_CODES, isTroupeError, ProviderError, serializeError, TroupeError } from './errors.js';
export type { ErrorCode } from './errors.js';
export { createLogger, REDACT_PATHS } from './logging/createLogger.js';
export type { TroupeLoggerOptions } from './logging/createLogger.js';
export { createRedactor, REDACTED } from './logging/redact.js';
export type { Redactor } from './logging/redact.js';
export { classifyOpenAIError, openaiModel } from './model/openaiModel.js';
export type { OpenAIModelOptions } from './model/openaiModel.js';
export type { ModelThreadRule } from './model/threadRoute.js';
export { classifyHttpFailure, isContextOverflow, retryAfterMs } from './model/providerErrors.js';
export { scriptedModel } from './model/scriptedModel.js';
export type { Script, ScriptStep, ScriptedModel, ScriptedCall } from './model/scriptedModel.js';
export type {
  ContentPart,
  JsonSchema,
  Model,
  ModelCallOptions,
  ModelDelta,
  ModelPrice,
  ModelRequest,
  ModelTurn,
  SessionItem,
  ToolCall,
  ToolSpec,
  UsagePurpose,
} from './model/types.js';
export { FailureTracker } from './turn/failureTracker.js';
export { memoryStore } from './store/memoryStore.js';
export { openStore } from './store/sqliteStore.js';
export type { OpenStoreOptions, SqliteStore } from './store/sqliteStore.js';
export { AUTO_COMMIT_THREAD } from './store/sqliteWriter.js';
export type { CommitThreadRule } from './store/sqliteWriter.js';
export { openPostgresStore } from './store/postgres/store.js';
export type { PostgresStore, PostgresStoreOptions } from './store/postgres/store.js';
export type { LeaseOptions, ReleaseState, RunLease } from './store/postgres/lease.js';
export { sqliteRuns } from './hosting/sqliteRuns.js';
export { postgresRuns } from './hosting/postgresRuns.js';
export type { HostView, RunClaim, RunStore } from './hosting/runStore.js';
export { followRun } from './stream/follow.js';
export type { FollowOptions, StreamEvent } from './stream/follow.js';
export { submitRun } from './worker/submit.js';
export { forkRun, forksOf, originOf } from './fork/fork.js';
export type { ForkOptions, ForkOrigin, ForkPoint, ForkResult } from './fork/fork.js';
export type { SubmitOptions } from './worker/submit.js';
export type { AgentRow, EventRow, MessagePriority, MessageRow, NoteRow, RunRow, Store, StreamRow, UsageRow } from './store/types.js';
export { defineTool } from './tools/defineTool.js';
export type { Tool, ToolContext, ToolRisk } from './tools/defineTool.js';
export { mcpServer } from './mcp/config.js';
export type { McpServerStatus } from './mcp/connection.js';
export type { McpServer, McpServerOptions, McpStdioServerOptions, McpHttpServerOptions, McpToolOverride } from './mcp/config.js';
export type { FromSchema } from './tools/fromSchema.js';
export { agentMachine, coordinatorMachine } from '../machines/index.js';
export type { AgentStatus, CompletionReport, NoticeData, StopReason, WaitKind } from '../machines/index.js';
export { ApprovalGate, DEFAULT_APPROVAL_WINDOW_MS } from './autonomy/approvalGate.js';
export type { ApprovalDecision, ApprovalGateOptions, ApprovalRequest, Approver } from './autonomy/approvalGate.js';
export { Conversation, conversation } from './autonomy/conversation.js';
export type { Reply } from './autonomy/conversation.js';
export { EventBus } from './autonomy/eventBus.js';
export type { AuditEvent, AuditListener } from './autonomy/eventBus.js';
export { continuationNote, extractExecutionIds } from './host/async/executionText.js';
export { ProactiveManager } from './autonomy/proactive.js';
export type { ProactiveOptions } from './autonomy/proactive.js';
export { parseProactiveConfig } from './autonomy/proactiveConfig.js';
export type { ProactiveFire, TriggerStats } from './autonomy/proactivePipeline.js';
export { renderTemplate } from './autonomy/proactiveTemplate.js';
export type { ProactiveTarget, ProactiveTrigger, TriggerType } from './autonomy/proactiveTrigger.js';
export { isProactiveRunId, PROACTIVE_MESSAGE_TYPE, PROACTIVE_RUN_PREFIX } from './autonomy/proactiveIds.js';
export { ProactiveRouter } from './autonomy/proactiveRouter.js';
export type { ProactiveRouterOptions, RouteResult } from './autonomy/proactiveRouter.js';
export { HEALTH_CHECK_EVENT, Watchdog } from './autonomy/watchdog.js';
export type { HealthCheck, SubsystemHealth, WatchdogOptions } from './autonomy/watchdog.js';
export type { ApprovalPolicy, ReviewOptions } from './host/options.js';
export { REVIEW_PROMPT, REVIEW_TOOLS } from './turn/review.js';
export { sqliteNotes } from './notes/sqliteNotes.js';
export { postgresNotes } from './notes/postgresNotes.js';
export type { Note, NoteResult, Notes } from './notes/notes.js';
export type { ReviewNote } from './turn/review.js';
export type { AllowanceState, BudgetState } from './host/createCoordinator.js';
export type { ExecutionRow } from './store/types.js';
