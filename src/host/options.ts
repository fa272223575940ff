/**
 * createCoordinator's options: what a user may pass, what the runtime holds once they are resolved
 * (`ResolvedOptions`), and the defaults users read. Validation and defaulting are resolveOptions.ts'.
 * @module
 */
import type { BreakerPolicy, BreakerShare, BreakerStore } from '../providers/breaker.js';
import type { InspectionEvent, Observer } from 'xstate';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import { ConfigError } from '../errors.js';
import type { Model, ModelPrice } from '../model/types.js';
import type { QuotaLimits, QuotaStore } from '../providers/quota.js';
import type { StorePort } from '../store/port.js';
import type { Store } from '../store/types.js';
import type { McpServer } from '../mcp/config.js';
import type { Tool } from '../tools/defineTool.js';
import type { TelemetryOptions } from '../trace/tracer.js';
import type { ApprovalAsker, MailReads } from '../turn/ports.js';
import type { ApprovalRules, ResolvedApprovalRules } from './async/approvalRules.js';
import type { LagSource } from './calls/admission.js';
import type { AgentProfile, ResolvedProfile } from './profiles.js';

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
   * A parent's calls go first: queued, before its children's; on a model with an `endpoint`, its
   * next request before the first ones of the children it just spawned.
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
   * providers of `@opentelemetry/api` unless given others here, as registered when the coordinator
   * is created or resumed; with no SDK registered then it is a no-op (the API is not even loaded).
   * `false`: no OpenTelemetry call at all.
   */
  telemetry?: TelemetryOptions | false;
  runId?: string;
  /** Where new agent and message ids come from (a replay hands out the recorded ones). Default: random. */
  ids?: IdSource;
  /** How many waiting messages each mailbox read takes (a replay gives the recorded counts). Default: all. */
  mailReads?: MailReads;
}

/** A source of ids for agents (`agent()`) and messages (`message()`, with its `msg_` prefix). */
export interface IdSource {
  agent(): string;
  message(): string;
}

export interface ResolvedOptions {
  interactive: boolean;
  holdTurns: boolean;
  mailReads: MailReads | null;
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

/** Share of the limit under which sub-agents' calls must stay (stop policy), unless `budget.reserveFraction` says otherwise. */
export const DEFAULT_RESERVE_FRACTION = 0.9;

/** An agent name: one line of 1..64 characters, not blank (the rule spawn and start enforce). */
export function isValidAgentName(name: unknown): name is string {
  return typeof name === 'string' && name.trim() !== '' && name.length <= 64 && !/[\n\r]/.test(name);
}

/** The refusal of a new run under the id of a run the store already holds (a start, a submit). */
export const runExistsError = (runId: string): ConfigError =>
  new ConfigError(`The store already holds run ${runId}: resume it with resumeCoordinator({ store, runId })`);
