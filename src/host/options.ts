/**
 * createCoordinator's options: validated up front, before any actor starts or any row is written,
 * with messages that say what was expected and what was given.
 * @module
 */
import type { BreakerPolicy, BreakerShare, BreakerStore } from '../providers/breaker.js';
import type { InspectionEvent, Observer } from 'xstate';
import type { Logger } from 'pino';
import { DEFAULT_IDLE_RESUME_MS } from '../../machines/types.js';
import type { Clock } from '../clock.js';
import { ConfigError } from '../errors.js';
import { checkPrice, requirePriceForBudget } from '../model/prices.js';
import { DEFAULT_NOTES_MAX_CHARS } from '../notes/notes.js';
import type { Model, ModelPrice } from '../model/types.js';
import { processQuotaStore, type QuotaLimits, type QuotaStore } from '../providers/quota.js';
import type { StorePort } from '../store/port.js';
import type { Store } from '../store/types.js';
import type { McpServer } from '../mcp/config.js';
import type { Tool } from '../tools/defineTool.js';
import type { TelemetryOptions } from '../trace/tracer.js';
import type { ApprovalAsker } from '../turn/ports.js';
import { isRules, resolveApprovalRules, type ApprovalRules, type ResolvedApprovalRules } from './async/approvalRules.js';
import { DEFAULT_MAX_LAG_MS, type LagSource } from './calls/admission.js';
import { resolveProfiles, type AgentProfile, type ResolvedProfile } from './profiles.js';

export interface Limits {
  /** Deepest level below the root (root = 0). Default 4. */
  maxDepth: number;
  /** Active children per agent at once. Default 8. */
  maxChildren: number;
  /** Agents registered per run, root included. Default 64. */
  maxAgents: number;
  /** Turns per stint before the agent is stopped. Default 100. */
  maxTurns: number;
  /** Bytes (UTF-8) per message. Default 65,536. */
  maxMessageBytes: number;
  /** Undelivered messages per mailbox; senders are told when it is full. Default 1,000. */
  maxMailbox: number;
  /**
   * Finish calls per stint whose value fails the agent's output schema: the last one ends the
   * agent failed (RESULT_SCHEMA_FAILED). Default 3.
   */
  maxResultTries: number;
}

/**
 * A spending limit that cannot be blown.
 *
 * - Every call is priced (`prices`, then the model's `price`, then OpenAI's list prices, exact
 *   name or dated suffix) and written to the usage ledger with its purpose (`main`, `compaction`,
 *   `review`). A limit needs a price: with a model none of these prices, `createCoordinator` or
 *   `resumeCoordinator` given a `limitUsd`, and `resumeBudget(limit)`, throw CONFIG_INVALID naming
 *   the model and `prices` (nothing changed) — unless the model prices its own calls: it
 *   implements `estimateCostUsd` and reports `usage.costUsd` (as `scriptedModel` does: each step
 *   says what its call costs).
 * - A call whose usage cannot be priced — the model reported none (no `usage`), or tokens with no
 *   `costUsd` and no price — is charged what was reserved for it (else the estimate of its
 *   request); the first such call says so once: a warning in the log and a `budget.usageEstimated`
 *   event (when a limit is set or the charge is not $0).
 * - Before each paid call troupe reserves an estimate (the prompt at one token per 3 characters
 *   plus `maxOutputTokens`, or `model.estimateCostUsd`) and starts the call only if spent +
 *   reserved + estimate fits under the limit (a sub-agent's under the reserve line); it settles to
 *   the real cost after. A call that does not fit waits for calls in flight to settle.
 * - Usage is believed only within bounds (integer token counts in [0, 10⁹], cached ≤ input, a cost
 *   in [0, $10⁶]); otherwise the call is charged its reservation and a warning names why.
 * - `stop` (default): agents are warned in that call's input at 70/85/95 % (root) and 75/80/85 %
 *   (children); at `reserveFraction` every sub-agent stops after its turn and the root gets one
 *   reserve notice; at the limit every agent stops. No call starts after a stop.
 * - `pause`: an agent parks in `budgetPaused` before a call that does not fit (or after
 *   `pauseBudget()`); `resumeBudget(newLimit?)` wakes them to retry the same call.
 * - After a restart the flags are recomputed from the ledger; a reserve trip is kept.
 */
export interface BudgetOptions {
  limitUsd?: number;
  /** USD per 1M tokens by model name (or name prefix); overrides the model's own and the built-in table. */
  prices?: Record<string, ModelPrice>;
  /** Share of the limit at which every sub-agent is stopped. Default 0.9. */
  reserveFraction?: number;
  policy?: 'stop' | 'pause';
}

/** What the coordinator needs of an approval gate (`ApprovalGate` from troupe's autonomy module). */
export interface ApprovalPolicy extends ApprovalAsker {
  /** Whether the agent has an open approval window (auto-continuation only runs inside one). */
  windowOpen(agentId: string): boolean;
  /** Told when an approval opens an agent's window: its finished executions continue then. */
  onWindowOpen?(listener: (agentId: string) => void): () => void;
}

export interface ReviewOptions {
  /** Productive turns of an agent between two reviews of it (an integer >= 1). */
  everyTurns: number;
  /** Model calls one review may make; default 3, at most 10. */
  maxSteps?: number;
  /** Review sub-agents too; default false: only root agents (depth 0) are reviewed. */
  subAgents?: boolean;
}

export type InspectOption = Observer<InspectionEvent> | ((event: InspectionEvent) => void);

export interface CoordinatorOptions<S extends Store | StorePort = Store> {
  model: Model;
  /** Defaults to an in-memory store. */
  store?: S;
  /**
   * User tools: `defineTool` tools and MCP servers (`mcpServer(...)`), whose tools are listed when
   * the run starts (`start()` or `resumeCoordinator`) and again when the server says they changed.
   */
  tools?: (Tool | McpServer)[];
  /** A human is attached: agents park instead of ending, terminal agents can be revived. */
  interactive?: boolean;
  budget?: BudgetOptions;
  limits?: Partial<Limits>;
  /** Idle auto-resume delay of waits on agents (when the model gives no timeout). Default 300 s. */
  idleResumeMs?: number;
  /** Default per-tool timeout. Default 120 s. */
  toolTimeoutMs?: number;
  /**
   * Model and tool calls at once. `adaptive` (default false): the model queue admits fewer calls
   * while the event loop lags (its p99 over `maxLagMs`, default 50) and more again up to `model`
   * when it does not (host/calls/admission.ts); `lag` replaces the event-loop delay read (tests).
   */
  concurrency?: { model?: number; tools?: number; adaptive?: boolean | { maxLagMs?: number; lag?: LagSource } };
  /** At most `requests` model calls start in any `intervalMs` (a provider's requests-per-minute). */
  rateLimit?: { requests: number; intervalMs: number };
  /**
   * Requests and tokens per minute of the model's endpoint (its API key), shared by every run of
   * the process and, through `quotaStore`, of the cluster; taken before each call, tokens settled
   * to the real usage after. A 429 with `retry-after` pauses the endpoint for all of them.
   * Applies after the run's own `rateLimit`, which stays per run.
   */
  quota?: { requestsPerMinute?: number; tokensPerMinute?: number };
  /** Where the quota's counters live (default: this process; a worker on PostgreSQL shares them in the database). */
  quotaStore?: QuotaStore;
  /** `family` (default): parent, children, siblings. `any`: every agent of the run. */
  messagePolicy?: 'family' | 'any';
  /** Whether user and peer messages cut a running model call short. Default: `interactive`. */
  interruptOnMessage?: boolean;
  /**
   * Host the run without running a turn (default false): an agent that would run stays `running`,
   * its mail queued, until the next host that runs turns. For a process that only creates a run or
   * applies requests to it (`troupe send` to a run nobody hosts).
   */
  holdTurns?: boolean;
  /**
   * An MCP server that fails its first start fails `start()` and `resumeCoordinator` with
   * MCP_SERVER_UNAVAILABLE (default false: the run goes on without its tools, an `mcp.server`
   * event says so, and it is retried with backoff).
   */
  strictMcp?: boolean;
  /**
   * The live stream (default on for a store another process can read — SQLite, PostgreSQL — and off
   * in memory unless given; `flushMs` 100): every event subscribers see and the streamed pieces of
   * answers, written with the group commit and numbered per run, so another process follows the run
   * (`troupe ui`'s `/api/stream`, `troupe follow`, `followRun`). Pieces are merged and committed at
   * most once per `flushMs`, never per token. `false`: nothing is written.
   */
  stream?: { flushMs?: number } | false;
  /**
   * Transient model errors: retries per turn and backoff. Defaults 5, 2 s, 90 s. The delay doubles
   * from `baseDelayMs`; a server's `retry-after` replaces it, and either is capped at `maxDelayMs`.
   */
  retry?: { maxRetries?: number; baseDelayMs?: number; maxDelayMs?: number };
  /** Appended to every agent's system prompt. */
  systemPrompt?: string;
  /**
   * Approvals. An `ApprovalGate` (in-process): tools that declare risk `mutation` or `destructive`
   * ask it before running. Rules (`{ ask, allow, unattended, windowMs, agents }`, `agents` keyed by
   * an agent's name or profile for its own rules): such a step becomes a
   * durable approval row answered from any process (`troupe approve`, the dashboard, `approve()`),
   * before or after a restart. Either way, finished async executions re-invoke their agent only
   * inside its approval window. Without it, every tool runs and every finished execution continues.
   */
  approvals?: ApprovalPolicy | ApprovalRules;
  /**
   * Background review (off by default): after every `everyTurns` productive turns of an agent (turns
   * that called tools), a leaf reviewer forks from its session, may propose one reusable note
   * (`coordinator.reviews.notes()`, a `review.note` event) and ends within `maxSteps` calls
   * (default 3). It cannot spawn, delegate or message; its calls are metered as `review` and must
   * fit under the reserve line; a failed or refused review is logged and ignored. Only root agents
   * are reviewed unless `subAgents: true`.
   */
  review?: ReviewOptions;
  /**
   * Notes a person promoted from background reviews (`troupe notes promote`, notes/notes.ts): a new
   * run's root reads the store's promoted notes in its first input, newest first, whole notes only,
   * up to `maxChars` characters of their text (default 4,000). `false`: none.
   */
  notes?: { maxChars?: number } | false;
  /**
   * How each session is kept before every model call (seed 002). `maxImages` (default 20, `null`:
   * no bound): only the newest images stay, older ones become a short placeholder the model reads.
   * `compactAt` (default 0.8): a call whose estimated prompt passes this share of the model's
   * `contextWindow` compacts the session first (on the agent's model, metered as `compaction`); a
   * model that declares no window is compacted only after an overflow.
   */
  session?: { maxImages?: number | null; compactAt?: number };
  /**
   * A cheaper model for troupe's own calls on an agent's behalf — compaction and background review —
   * set once for the run, priced and metered like the rest (its rows name it). Default: the agents' model.
   */
  auxiliaryModel?: Model;
  /**
   * Named agent definitions spawn_agent (its `profile`) and `start({ profile })` may name: its
   * description is listed in spawn_agent's, its `systemPrompt` is appended to the run's, its `model`
   * answers (and prices) the agent's main calls, its `tools` narrow the user tools of the agent and
   * its descendants (built-ins stay), and `limits.maxTurns` is its own. The name is persisted with
   * the agent; at resume a name no longer configured fails the agent (PROFILE_UNKNOWN).
   */
  profiles?: Record<string, AgentProfile>;
  /**
   * The re-entry budget (seed 001): an agent woken by its own work — a finished execution, a
   * delegation's result, a dead wait's report — at most `maxWakes` times (default 20) in a streak
   * (ended by a user message or 10 min without one); after the first 3, wake n + 1 waits
   * `spacingMs × 2^(n−3)` (default 1 s, at most 60 s). Past it the agent is stopped (reason
   * `reentry`). `false`: no bound.
   */
  reentry?: { maxWakes?: number; spacingMs?: number } | false;
  /**
   * The circuit breaker of the model's endpoint (src/providers/breaker.ts), shared by every run of
   * the process on that endpoint: `failureThreshold` outage failures in a row (default 5) open it;
   * calls then park at no cost and one probe goes every `cooldownMs` (30 s); open for
   * `openTimeoutMs` (10 min), the waiting agents fail with `PROVIDER_CIRCUIT_OPEN`. `false`: none.
   * `store`: where the cluster shares it (a worker on PostgreSQL: the database, read again every
   * `syncMs`, default 1 s, while in use).
   */
  breaker?: { failureThreshold?: number; cooldownMs?: number; openTimeoutMs?: number; store?: BreakerStore; syncMs?: number } | false;
  /**
   * Failure patterns across the team (issue 34 item 9): when `threshold` distinct agents (default 3)
   * fail the same way — the same tool, normalised arguments and error code — within `windowMs`
   * (default 10 min on troupe's clock), a `team.failure_pattern` event is journaled and each distinct
   * parent of those agents gets one `failure_pattern` notice. `false`: off.
   */
  failurePatterns?: { threshold?: number; windowMs?: number } | false;
  clock?: Clock;
  logger?: Logger;
  /**
   * The XState inspection observer, passed to the coordinator and every agent actor. A parked
   * agent (waiting, stalled, budget-paused) or a finished one has no actor: its actor reports a
   * `stopped` snapshot in that state, and a new actor of the same id `agent:<id>` boots in it when
   * the agent wakes.
   */
  inspect?: InspectOption;
  /**
   * OpenTelemetry GenAI spans and metrics (README "Traces and metrics"). troupe uses the global
   * providers of `@opentelemetry/api` unless given others here; with no SDK registered it is a no-op.
   * `false`: no OpenTelemetry call at all.
   */
  telemetry?: TelemetryOptions | false;
  runId?: string;
  /** Where new agent and message ids come from (a replay hands out the recorded ones). Default: random. */
  ids?: IdSource;
}

/** A source of ids for agents (`agent()`) and messages (`message()`, with its `msg_` prefix). */
export interface IdSource {
  agent(): string;
  message(): string;
}

export interface ResolvedOptions {
  interactive: boolean;
  holdTurns: boolean;
  strictMcp: boolean;
  /** `asked`: the user passed `stream` (a store in memory records it only then). */
  stream: { flushMs: number; asked: boolean } | false;
  limits: Limits;
  budget: { limitUsd: number | null; reserveFraction: number; policy: 'stop' | 'pause'; prices: Record<string, ModelPrice> };
  idleResumeMs: number;
  toolTimeoutMs: number;
  concurrency: { model: number; tools: number; adaptive: { maxLagMs: number; lag: LagSource | null } | null };
  rateLimit: { requests: number; intervalMs: number } | null;
  quota: QuotaLimits | null;
  quotaStore: QuotaStore;
  messagePolicy: 'family' | 'any';
  interruptOnMessage: boolean;
  retry: { maxRetries: number; baseDelayMs: number; maxDelayMs: number };
  systemPrompt: string | undefined;
  /** An in-process gate (null with rules or without approvals). */
  approvals: ApprovalPolicy | null;
  /** Durable approval rules (null: none, or a gate). */
  approvalRules: ResolvedApprovalRules | null;
  review: { everyTurns: number; maxSteps: number; subAgents: boolean } | null;
  /** What a new run's root reads of the promoted notes (null: none). */
  notes: { maxChars: number } | null;
  /** `contextWindow`: the model's, if it declares one (null: compaction only after an overflow). */
  session: { maxImages: number | null; compactAt: number; contextWindow: number | null };
  reentry: { maxWakes: number; spacingMs: number } | null;
  breaker: (BreakerPolicy & { share: BreakerShare | null }) | null;
  failurePatterns: { threshold: number; windowMs: number } | null;
  auxiliaryModel: Model | null;
  profiles: ReadonlyMap<string, ResolvedProfile>;
}

export const DEFAULT_LIMITS: Limits = {
  maxDepth: 4,
  maxChildren: 8,
  maxAgents: 64,
  maxTurns: 100,
  maxMessageBytes: 65_536,
  maxMailbox: 1_000,
  maxResultTries: 3,
};

const show = (value: unknown) => `${typeof value === 'string' ? JSON.stringify(value) : String(value)} (${typeof value})`;

function integer(name: string, value: unknown, fallback: number, min: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min) {
    throw new ConfigError(`Expected ${name} to be an integer >= ${min}, got ${show(value)}`);
  }
  return value;
}

function positive(name: string, value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw new ConfigError(`Expected ${name} to be a finite number > 0, got ${show(value)}`);
  }
  return value;
}

function oneOf<T extends string>(name: string, value: unknown, allowed: readonly T[], fallback: T): T {
  if (value === undefined) return fallback;
  if (!allowed.includes(value as T)) {
    throw new ConfigError(`Expected ${name} to be one of ${allowed.map((a) => `"${a}"`).join(', ')}, got ${show(value)}`);
  }
  return value as T;
}

/** Adaptive admission of model calls: off unless asked (see CoordinatorOptions.concurrency). */
function resolveAdaptive(value: unknown): ResolvedOptions['concurrency']['adaptive'] {
  if (value === undefined || value === false) return null;
  if (value === true) return { maxLagMs: DEFAULT_MAX_LAG_MS, lag: null };
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ConfigError(`Expected concurrency.adaptive to be a boolean or { maxLagMs?, lag? }, got ${show(value)}`);
  }
  const { maxLagMs, lag } = value as { maxLagMs?: unknown; lag?: unknown };
  if (lag !== undefined && typeof lag !== 'function') throw new ConfigError(`Expected concurrency.adaptive.lag to be a function, got ${show(lag)}`);
  return { maxLagMs: positive('concurrency.adaptive.maxLagMs', maxLagMs, DEFAULT_MAX_LAG_MS), lag: (lag as LagSource | undefined) ?? null };
}

/** How often the live stream's buffered rows are committed when nothing else commits (ms). */
const DEFAULT_STREAM_FLUSH_MS = 100;

function resolveStream(value: unknown): ResolvedOptions['stream'] {
  if (value === false) return false;
  if (value === undefined) return { flushMs: DEFAULT_STREAM_FLUSH_MS, asked: false };
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ConfigError(`Expected stream to be false or { flushMs }, got ${show(value)}`);
  }
  return { flushMs: integer('stream.flushMs', (value as { flushMs?: unknown }).flushMs, DEFAULT_STREAM_FLUSH_MS, 1), asked: true };
}

function boolean(name: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') throw new ConfigError(`Expected ${name} to be a boolean, got ${show(value)}`);
  return value;
}

/** A budget limit: finite and > 0 (a typed CONFIG_INVALID otherwise). */
export const positiveLimit = (name: string, value: unknown): number => positive(name, value, 1);

/** Share of the limit under which sub-agents' calls must stay (stop policy), unless `budget.reserveFraction` says otherwise. */
export const DEFAULT_RESERVE_FRACTION = 0.9;

export function resolveBudget(budget: BudgetOptions | undefined): ResolvedOptions['budget'] {
  const limitUsd = budget?.limitUsd === undefined ? null : positive('budget.limitUsd', budget.limitUsd, 1);
  const reserveFraction = positive('budget.reserveFraction', budget?.reserveFraction, DEFAULT_RESERVE_FRACTION);
  if (reserveFraction > 1) throw new ConfigError(`Expected budget.reserveFraction to be <= 1, got ${show(reserveFraction)}`);
  return {
    limitUsd,
    reserveFraction,
    policy: oneOf('budget.policy', budget?.policy, ['stop', 'pause'], 'stop'),
    prices: resolvePrices(budget?.prices),
  };
}

function resolvePrices(prices: unknown): Record<string, ModelPrice> {
  if (prices === undefined) return {};
  if (typeof prices !== 'object' || prices === null || Array.isArray(prices)) {
    throw new ConfigError(`Expected budget.prices to be an object keyed by model name, got ${show(prices)}`);
  }
  const out: Record<string, ModelPrice> = {};
  for (const [model, price] of Object.entries(prices)) out[model] = checkPrice(`budget.prices["${model}"]`, price);
  return out;
}

function resolveRateLimit(value: unknown): ResolvedOptions['rateLimit'] {
  if (value === undefined) return null;
  const limit = (typeof value === 'object' && value !== null ? value : {}) as Record<string, unknown>;
  if (limit.requests === undefined || limit.intervalMs === undefined) {
    throw new ConfigError(`Expected rateLimit to be { requests, intervalMs }, got ${typeof value === 'object' ? JSON.stringify(value) : show(value)}`);
  }
  return { requests: integer('rateLimit.requests', limit.requests, 0, 1), intervalMs: integer('rateLimit.intervalMs', limit.intervalMs, 0, 1) };
}

function resolveQuota(value: unknown): ResolvedOptions['quota'] {
  if (value === undefined) return null;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ConfigError(`Expected quota to be { requestsPerMinute?, tokensPerMinute? }, got ${show(value)}`);
  }
  const v = value as Record<string, unknown>;
  for (const key of Object.keys(v)) if (key !== 'requestsPerMinute' && key !== 'tokensPerMinute') throw new ConfigError(`Unknown option quota.${key}`);
  const requestsPerMinute = v.requestsPerMinute === undefined ? null : integer('quota.requestsPerMinute', v.requestsPerMinute, 0, 1);
  const tokensPerMinute = v.tokensPerMinute === undefined ? null : integer('quota.tokensPerMinute', v.tokensPerMinute, 0, 1);
  return requestsPerMinute === null && tokensPerMinute === null ? null : { requestsPerMinute, tokensPerMinute };
}

function resolveQuotaStore(value: unknown): QuotaStore {
  if (value === undefined) return processQuotaStore;
  const store = value as Partial<QuotaStore> | null;
  if (
    typeof store !== 'object' ||
    store === null ||
    typeof store.take !== 'function' ||
    typeof store.adjust !== 'function' ||
    typeof store.pause !== 'function'
  ) {
    throw new ConfigError(`Expected quotaStore to be a QuotaStore { take, adjust, pause }, got ${show(value)}`);
  }
  return value as QuotaStore;
}

function resolveReview(value: unknown): ResolvedOptions['review'] {
  if (value === undefined) return null;
  if (typeof value !== 'object' || value === null) throw new ConfigError(`Expected review to be { everyTurns, maxSteps? }, got ${show(value)}`);
  const v = value as Partial<ReviewOptions>;
  for (const key of Object.keys(v))
    if (key !== 'everyTurns' && key !== 'maxSteps' && key !== 'subAgents') throw new ConfigError(`Unknown option review.${key}`);
  if (v.everyTurns === undefined) throw new ConfigError('Expected review.everyTurns to be an integer >= 1, got undefined');
  const maxSteps = integer('review.maxSteps', v.maxSteps, 3, 1);
  if (maxSteps > 10) throw new ConfigError(`Expected review.maxSteps to be at most 10, got ${maxSteps}`);
  if (v.subAgents !== undefined && typeof v.subAgents !== 'boolean')
    throw new ConfigError(`Expected review.subAgents to be a boolean, got ${show(v.subAgents)}`);
  return { everyTurns: integer('review.everyTurns', v.everyTurns, 1, 1), maxSteps, subAgents: v.subAgents ?? false };
}

function resolveApprovals(value: unknown): ApprovalPolicy | null {
  if (value === undefined || isRules(value)) return null;
  const v = value as Partial<ApprovalPolicy> | null;
  if (typeof v !== 'object' || v === null || typeof v.request !== 'function' || typeof v.windowOpen !== 'function') {
    throw new ConfigError(
      `Expected approvals to be an ApprovalGate (request() and windowOpen()) or rules ({ ask, allow, unattended, windowMs, agents }), got ${show(value)}`,
    );
  }
  return v as ApprovalPolicy;
}

/** An agent name: one line of 1..64 characters, not blank (the rule spawn and start enforce). */
export function isValidAgentName(name: unknown): name is string {
  return typeof name === 'string' && name.trim() !== '' && name.length <= 64 && !/[\n\r]/.test(name);
}

/** `limits` with defaults filled in, validated; throws ConfigError naming the first invalid one. */
export function resolveLimits(given: Partial<Limits> | undefined): Limits {
  const l = given ?? {};
  if (typeof l !== 'object' || l === null) throw new ConfigError(`Expected limits to be an object, got ${show(l)}`);
  const known = new Set(Object.keys(DEFAULT_LIMITS));
  for (const key of Object.keys(l)) if (!known.has(key)) throw new ConfigError(`Unknown option limits.${key}`);
  return {
    maxDepth: integer('maxDepth', l.maxDepth, DEFAULT_LIMITS.maxDepth, 0),
    maxChildren: integer('maxChildren', l.maxChildren, DEFAULT_LIMITS.maxChildren, 0),
    maxAgents: integer('maxAgents', l.maxAgents, DEFAULT_LIMITS.maxAgents, 1),
    maxTurns: integer('maxTurns', l.maxTurns, DEFAULT_LIMITS.maxTurns, 1),
    maxMessageBytes: integer('maxMessageBytes', l.maxMessageBytes, DEFAULT_LIMITS.maxMessageBytes, 1),
    maxMailbox: integer('maxMailbox', l.maxMailbox, DEFAULT_LIMITS.maxMailbox, 1),
    maxResultTries: integer('maxResultTries', l.maxResultTries, DEFAULT_LIMITS.maxResultTries, 1),
  };
}

/** Validate every option; throws ConfigError naming the first invalid one. */
export function resolveOptions(options: CoordinatorOptions<Store | StorePort>): ResolvedOptions {
  if (typeof options !== 'object' || options === null) throw new ConfigError(`Expected an options object, got ${show(options)}`);
  const model = options.model as unknown;
  if (typeof model !== 'object' || model === null || typeof (model as Model).complete !== 'function') {
    throw new ConfigError(`Expected model to be an object with a complete(request, { signal }) method, got ${show(model)}`);
  }
  if (options.tools !== undefined && !Array.isArray(options.tools)) {
    throw new ConfigError(`Expected tools to be an array, got ${show(options.tools)}`);
  }
  const limits = resolveLimits(options.limits);
  const interactive = boolean('interactive', options.interactive, false);
  const retry = options.retry ?? {};
  const budget = resolveBudget(options.budget);
  requirePriceForBudget(options.model, budget.prices, budget.limitUsd);
  const auxiliaryModel = options.auxiliaryModel ?? null;
  if (auxiliaryModel !== null) {
    if (typeof auxiliaryModel !== 'object' || typeof (auxiliaryModel as Model).complete !== 'function') {
      throw new ConfigError(`Expected auxiliaryModel to be an object with a complete(request, { signal }) method, got ${show(auxiliaryModel)}`);
    }
    // Its calls count against the same limit: one it cannot price would spend unseen.
    requirePriceForBudget(auxiliaryModel, budget.prices, budget.limitUsd, 'budget.limitUsd (auxiliaryModel)');
  }
  return {
    interactive,
    holdTurns: boolean('holdTurns', options.holdTurns, false),
    strictMcp: boolean('strictMcp', options.strictMcp, false),
    stream: resolveStream(options.stream),
    limits,
    budget,
    idleResumeMs: integer('idleResumeMs', options.idleResumeMs, DEFAULT_IDLE_RESUME_MS, 1),
    toolTimeoutMs: integer('toolTimeoutMs', options.toolTimeoutMs, 120_000, 1),
    concurrency: {
      // One call in flight per agent the limits allow: a team as big as its limits is never held
      // back by a queue slot (issue 36: a fixed 8 ran 6.4 turns/s whatever the team's size; the
      // scale bench's K = 1,000 at ~95-99 % of ideal with one slot per agent).
      model: integer('concurrency.model', options.concurrency?.model, limits.maxAgents, 1),
      tools: integer('concurrency.tools', options.concurrency?.tools, 16, 1),
      adaptive: resolveAdaptive(options.concurrency?.adaptive),
    },
    rateLimit: resolveRateLimit(options.rateLimit),
    quota: resolveQuota(options.quota),
    quotaStore: resolveQuotaStore(options.quotaStore),
    messagePolicy: oneOf('messagePolicy', options.messagePolicy, ['family', 'any'], 'family'),
    interruptOnMessage: boolean('interruptOnMessage', options.interruptOnMessage, interactive),
    retry: {
      maxRetries: integer('retry.maxRetries', retry.maxRetries, 5, 0),
      baseDelayMs: integer('retry.baseDelayMs', retry.baseDelayMs, 2_000, 0),
      maxDelayMs: integer('retry.maxDelayMs', retry.maxDelayMs, 90_000, 0),
    },
    systemPrompt: options.systemPrompt,
    approvals: resolveApprovals(options.approvals),
    approvalRules: resolveApprovalRules(options.approvals),
    review: resolveReview(options.review),
    notes: resolveNotes(options.notes),
    session: resolveSession(options.session, options.model),
    reentry: resolveReentry(options.reentry),
    breaker: resolveBreaker(options.breaker),
    failurePatterns: resolveFailurePatterns(options.failurePatterns),
    auxiliaryModel,
    profiles: resolveProfiles(options.profiles, { tools: options.tools ?? [], prices: budget.prices, limitUsd: budget.limitUsd }),
  };
}

/**
 * The fields of an option that is `false` (off: null), absent (every default: {}) or an object;
 * anything else is CONFIG_INVALID naming `shape`.
 */
function policyFields(name: string, value: unknown, shape: string): Record<string, unknown> | null {
  if (value === false) return null;
  if (value !== undefined && (typeof value !== 'object' || value === null || Array.isArray(value))) {
    throw new ConfigError(`Expected ${name} to be false or { ${shape} }, got ${show(value)}`);
  }
  return (value ?? {}) as Record<string, unknown>;
}

function resolveNotes(value: unknown): ResolvedOptions['notes'] {
  const v = policyFields('notes', value, 'maxChars?');
  if (v) for (const key of Object.keys(v)) if (key !== 'maxChars') throw new ConfigError(`Unknown option notes.${key}`);
  return v && { maxChars: integer('notes.maxChars', v.maxChars, DEFAULT_NOTES_MAX_CHARS, 1) };
}

function resolveReentry(value: unknown): ResolvedOptions['reentry'] {
  const v = policyFields('reentry', value, 'maxWakes?, spacingMs?');
  return v && { maxWakes: integer('reentry.maxWakes', v.maxWakes, 20, 1), spacingMs: integer('reentry.spacingMs', v.spacingMs, 1_000, 0) };
}

function resolveBreaker(value: unknown): ResolvedOptions['breaker'] {
  const v = policyFields('breaker', value, 'failureThreshold?, cooldownMs?, openTimeoutMs?, store?, syncMs?');
  if (!v) return null;
  const store = v.store as Partial<BreakerStore> | undefined;
  if (store !== undefined && (typeof store !== 'object' || store === null || typeof store.read !== 'function' || typeof store.step !== 'function')) {
    throw new ConfigError(`Expected breaker.store to be a BreakerStore { read, step }, got ${show(store)}`);
  }
  return {
    failureThreshold: integer('breaker.failureThreshold', v.failureThreshold, 5, 1),
    cooldownMs: integer('breaker.cooldownMs', v.cooldownMs, 30_000, 1),
    openTimeoutMs: integer('breaker.openTimeoutMs', v.openTimeoutMs, 600_000, 1),
    share: store === undefined ? null : { store: store as BreakerStore, syncMs: integer('breaker.syncMs', v.syncMs, 1_000, 1) },
  };
}

function resolveFailurePatterns(value: unknown): ResolvedOptions['failurePatterns'] {
  const v = policyFields('failurePatterns', value, 'threshold?, windowMs?');
  return v && { threshold: integer('failurePatterns.threshold', v.threshold, 3, 2), windowMs: integer('failurePatterns.windowMs', v.windowMs, 600_000, 1) };
}

/** Images kept per session by default: recent screenshots stay, a long browsing session does not grow without bound. */
const DEFAULT_MAX_IMAGES = 20;
const DEFAULT_COMPACT_AT = 0.8;

function resolveSession(value: unknown, model: Model): ResolvedOptions['session'] {
  if (value !== undefined && (typeof value !== 'object' || value === null || Array.isArray(value))) {
    throw new ConfigError(`Expected session to be { maxImages?, compactAt? }, got ${show(value)}`);
  }
  const { maxImages, compactAt } = (value ?? {}) as { maxImages?: unknown; compactAt?: unknown };
  const share = positive('session.compactAt', compactAt, DEFAULT_COMPACT_AT);
  if (share > 1) throw new ConfigError(`Expected session.compactAt to be a share of the context window in (0, 1], got ${show(compactAt)}`);
  const window: unknown = model.contextWindow;
  if (window !== undefined && (typeof window !== 'number' || !Number.isInteger(window) || window <= 0)) {
    throw new ConfigError(`Expected model.contextWindow to be an integer > 0, got ${show(window)}`);
  }
  return {
    maxImages: maxImages === null ? null : integer('session.maxImages', maxImages, DEFAULT_MAX_IMAGES, 0),
    compactAt: share,
    contextWindow: (window as number | undefined) ?? null,
  };
}

/** The refusal of a new run under the id of a run the store already holds (a start, a submit). */
export const runExistsError = (runId: string): ConfigError =>
  new ConfigError(`The store already holds run ${runId}: resume it with resumeCoordinator({ store, runId })`);
