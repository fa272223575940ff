/**
 * What each `createCoordinator` option means, as data: the README's options table is generated
 * from it, with the defaults read from `resolveOptions` itself (so a changed default changes the
 * table). Keyed by every option (`satisfies` makes a new option without a row a type error).
 * @module
 */
import type { CoordinatorOptions, Limits, ResolvedOptions } from './options.js';

export interface OptionDoc {
  /** The default as the reader should see it, from the resolved options. */
  readonly default?: (resolved: ResolvedOptions) => string;
  readonly meaning: string;
}

const n = (value: number) => value.toLocaleString('en-US');

/** One row per limit (`limits.maxDepth` …). */
export const LIMIT_DOCS = {
  maxDepth: 'levels below the root (an agent at it is offered no spawn or stop tools; at 0 the root works alone)',
  maxChildren: 'active children per agent',
  maxAgents: 'per run',
  maxTurns: 'per stint',
  maxMessageBytes: 'UTF-8',
  maxMailbox: 'undelivered per agent',
  maxResultTries: 'finish values failing the output schema per stint, the last one ends the agent failed',
} as const satisfies Record<keyof Limits, string>;

export const OPTION_DOCS = {
  model: { meaning: 'required: `openaiModel(…)`, `scriptedModel(…)` or any `{ complete(request, { signal }) }`' },
  store: { default: () => '`memoryStore()`', meaning: "`openStore({ path })` (SQLite), a PostgreSQL lease's `port`, or any `StorePort`" },
  tools: { default: () => '`[]`', meaning: 'user tools (`defineTool`)' },
  interactive: { default: (r) => `\`${r.interactive}\``, meaning: 'a human is attached: agents park, finished ones can be revived' },
  limits: { meaning: 'see the `limits.*` rows' },
  idleResumeMs: { default: (r) => n(r.idleResumeMs), meaning: 'idle auto-resume of waits on agents' },
  toolTimeoutMs: { default: (r) => n(r.toolTimeoutMs), meaning: 'per tool call (a tool may set its own)' },
  concurrency: {
    default: (r) => `\`limits.maxAgents\` (${r.concurrency.model}) / ${r.concurrency.tools}`,
    meaning: '`{ model, tools, adaptive }` calls at once: one model call per agent the limits allow (`adaptive`: fewer while the event loop lags)',
  },
  rateLimit: { default: () => 'none', meaning: '`{ requests, intervalMs }`: model calls started per interval, by this run alone' },
  quota: {
    default: () => 'none',
    meaning:
      "`{ requestsPerMinute?, tokensPerMinute? }` per model endpoint (API key), shared by the process's runs and a PostgreSQL cluster; a 429's `retry-after` pauses the endpoint for all",
  },
  quotaStore: { default: () => 'this process', meaning: "where the quota's counters live (a worker on PostgreSQL: the database)" },
  messagePolicy: { default: (r) => `\`${r.messagePolicy}\``, meaning: '`any` lets every agent message every other' },
  interruptOnMessage: { default: () => '`interactive`', meaning: 'a user or peer message cuts the model call in flight short' },
  holdTurns: {
    default: () => '`false`',
    meaning: 'host without running turns (agents that would run stay `running`, mail stays queued): to create a run or apply requests only',
  },
  strictMcp: {
    default: (r) => `\`${r.strictMcp}\``,
    meaning: 'an MCP server that fails its first start fails `start()` / resume (else an `mcp.server` event)',
  },
  stream: {
    default: (r) => (r.stream === false ? '`false`' : `on (in memory: when given), ${r.stream.flushMs} ms`),
    meaning: '`{ flushMs }` or `false`: the live stream other processes follow (`troupe follow`, `/api/stream`), committed in batches',
  },
  retry: {
    default: (r) => `${r.retry.maxRetries} retries, ${r.retry.baseDelayMs / 1000} s base, ${r.retry.maxDelayMs / 1000} s max`,
    meaning: '`{ maxRetries, baseDelayMs, maxDelayMs }` for transient model errors',
  },
  budget: { default: () => 'none', meaning: "`{ limitUsd, reserveFraction: 0.9, policy: 'stop' | 'pause', prices }`" },
  approvals: {
    default: () => 'none',
    meaning: 'an `ApprovalGate`, or rules `{ ask, allow, unattended, windowMs, agents }`: durable approvals (`agents`: by agent name or profile)',
  },
  review: { default: () => 'off', meaning: '`{ everyTurns, maxSteps: 3, subAgents: false }`: background review (root agents only unless `subAgents`)' },
  notes: {
    default: (r) => (r.notes ? `${r.notes.maxChars} characters` : '`false`'),
    meaning: "`{ maxChars }` or `false`: the promoted notes (`troupe notes`) a new run's root reads, newest first",
  },
  session: {
    default: (r) => `${r.session.maxImages ?? 'all'} images, compact at ${r.session.compactAt * 100} %`,
    meaning: "`{ maxImages, compactAt }`: older images become placeholders; compaction before the model's `contextWindow` overflows",
  },
  reentry: {
    default: (r) => (r.reentry === null ? '`false`' : `${r.reentry.maxWakes} wakes, ${r.reentry.spacingMs / 1000} s spacing`),
    meaning: '`{ maxWakes, spacingMs }` or `false`: self-wakes between two user messages, backed off; past it the agent stops',
  },
  breaker: {
    default: (r) =>
      r.breaker === null
        ? '`false`'
        : `${r.breaker.failureThreshold} failures, ${r.breaker.cooldownMs / 1000} s probes, ${r.breaker.openTimeoutMs / 60_000} min`,
    meaning: "`{ failureThreshold, cooldownMs, openTimeoutMs, store? }` or `false`: the endpoint's circuit breaker, shared in the process (and via `store`)",
  },
  failurePatterns: {
    default: (r) => (r.failurePatterns === null ? '`false`' : `${r.failurePatterns.threshold} agents in ${r.failurePatterns.windowMs / 60_000} min`),
    meaning: '`{ threshold, windowMs }` or `false`: the same tool failing the same way for that many agents tells their parents once',
  },
  auxiliaryModel: { default: () => 'the agents’ model', meaning: 'a cheaper model for compaction and background review, priced and metered as such' },
  profiles: {
    default: () => 'none',
    meaning:
      "`{ [name]: { description, systemPrompt?, model?, tools?, limits?: { maxTurns? } } }`: agent definitions `spawn_agent` and `start` name; the prompt is appended to the run's, built-in tools stay",
  },
  systemPrompt: { meaning: "appended to every agent's system prompt" },
  clock: { default: () => 'the system clock', meaning: "every timer (XState's `SimulatedClock` in tests)" },
  logger: { default: () => 'silent', meaning: 'a pino logger (a child per agent)' },
  inspect: {
    meaning: 'an XState inspection observer: the coordinator and each awake agent as `agent:<id>` (a parked agent has no actor: [durable runs](#durable-runs))',
  },
  runId: { default: () => 'generated', meaning: "the run's id" },
  ids: { default: () => 'random', meaning: 'where new agent and message ids come from: `{ agent(), message() }` (a replay hands out the recorded ones)' },
  mailReads: {
    default: () => 'all',
    meaning: 'how many waiting messages each mailbox read takes: `{ take(agentId, read, waiting) }` (a replay gives the recorded counts)',
  },
  telemetry: { default: () => 'global providers', meaning: '`{ tracerProvider?, meterProvider?, recordContent? }` or `false`' },
} as const satisfies Record<keyof CoordinatorOptions, OptionDoc>;
