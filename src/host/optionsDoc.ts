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
  maxDepth: 'deepest level below the root',
  maxChildren: 'active children per agent (spawning one, or a message that would revive a finished one, is refused at the limit)',
  maxAgents: 'agents per run, root included',
  maxTurns: 'turns per stint',
  maxMessageBytes: 'bytes (UTF-8) per message',
  maxMailbox: 'undelivered messages per agent (senders are told)',
} as const satisfies Record<keyof Limits, string>;

export const OPTION_DOCS = {
  model: { meaning: 'required: `openaiModel(…)`, `scriptedModel(…)`, or any `{ complete(request, { signal }) }`' },
  store: { default: () => '`memoryStore()`', meaning: "persistence: `openStore({ path, synchronous?: 'FULL' \\| 'NORMAL', readonly?, maxSizeBytes? })` for SQLite" },
  tools: { default: () => '`[]`', meaning: 'user tools (`defineTool`)' },
  interactive: { default: (r) => `\`${r.interactive}\``, meaning: 'a human is attached: agents park and terminal agents can be revived' },
  limits: { meaning: 'see the `limits.*` rows' },
  idleResumeMs: { default: (r) => n(r.idleResumeMs), meaning: 'idle auto-resume of waits on agents' },
  toolTimeoutMs: { default: (r) => n(r.toolTimeoutMs), meaning: 'per tool call (a tool may set its own)' },
  concurrency: { default: (r) => `${r.concurrency.model} / ${r.concurrency.tools}`, meaning: '`{ model, tools }`: the shared p-queues' },
  rateLimit: { default: () => 'none', meaning: '`{ requests, intervalMs }`: at most that many model calls start in any interval (on the injected clock)' },
  messagePolicy: { default: (r) => `\`${r.messagePolicy}\``, meaning: '`any` lets every agent message every other' },
  interruptOnMessage: { default: () => '`interactive`', meaning: 'user/peer messages cut the running model call short (notices never do)' },
  retry: {
    default: (r) => `${r.retry.maxRetries} retries, ${r.retry.baseDelayMs / 1000} s base, ${r.retry.maxDelayMs / 1000} s max`,
    meaning: '`{ maxRetries, baseDelayMs, maxDelayMs }`: transient model errors wait min(base·2^(n-1), max); `retry-after` is honoured',
  },
  budget: { default: () => 'none', meaning: "`{ limitUsd, reserveFraction: 0.9, policy: 'stop' \\| 'pause', prices }` (see *Budget*)" },
  approvals: { default: () => 'none', meaning: 'an `ApprovalGate` (see *Autonomy*)' },
  review: { default: () => 'off', meaning: '`{ everyTurns, maxSteps: 3 }`: background review (see *Autonomy*)' },
  systemPrompt: { meaning: "appended to every agent's system prompt" },
  clock: { default: () => 'the system clock', meaning: "drives every timer (XState's `SimulatedClock` in tests)" },
  logger: { default: () => 'silent', meaning: 'a pino logger (a child per agent)' },
  inspect: { meaning: 'an XState inspection observer: the coordinator and every agent (`agent:<id>`)' },
  runId: { default: () => 'generated', meaning: "the run's id" },
  telemetry: { default: () => 'the global OpenTelemetry providers', meaning: '`{ tracerProvider?, meterProvider?, recordContent? }` or `false`: GenAI spans and metrics (see *Traces and metrics*); a no-op when no SDK is registered' },
} as const satisfies Record<keyof CoordinatorOptions, OptionDoc>;
