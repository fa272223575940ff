/**
 * What a turn needs of the host that runs it — and nothing more. The host (src/host/) implements
 * these ports; the turn code imports them, never the host, so the two cannot grow back into one
 * hub (the pattern of `DelegationHost`).
 * @module
 */
import type { Logger } from 'pino';
import type { TurnOutcome } from '../../machines/types.js';
import type { Clock } from '../clock.js';
import type { ModelRequest, ModelTurn, SessionItem, ToolSpec, UsagePurpose } from '../model/types.js';
import type { BuiltinEnv } from '../tools/builtinKit.js';
import type { Read } from '../tools/ports.js';
import type { CompiledTool } from '../tools/defineTool.js';
import type { OutputCheck } from '../tools/outputSchema.js';
import type { TurnTrace } from '../trace/tracer.js';
import type { FailureTracker } from './failureTracker.js';

/** What turn code may read and keep of one agent. */
export interface AgentRef {
  readonly id: string;
  readonly name: string;
  readonly parentId: string | null;
  readonly depth: number;
  readonly logger: Logger;
  readonly tracker: FailureTracker;
  /** Notes for this agent's next call only, never persisted (finished executions). */
  notes: string[];
  /** The strategy-rotation prompt to inject before the next model call. */
  strategyPrompt: string | null;
  /** Plain text of the last plain-text turn (respond_to_user may deliver it). */
  lastText: string | null;
  /** The result a dead-wait report gives the wait that parked the agent (then cleared). */
  waitReport: string | null;
  /**
   * Aborts the in-flight model call: with INTERRUPTED when a message cuts the turn short, with
   * STOP_REQUESTED when the agent is stopped (the request is cancelled on the wire).
   */
  inFlight: AbortController | null;
  /**
   * Aborts the user tools the agent's turn is running (their AbortSignal; an MCP call is cancelled
   * on the wire) when the agent is stopped: the calls end as TOOL_CANCELLED and the turn ends.
   */
  toolsInFlight: AbortController | null;
}

/** An amount held for one call until it settles. */
export interface Reservation {
  readonly usd: number;
  settled: boolean;
}

/** What one settled call was charged (its usage row). */
export interface Charge {
  costUsd: number;
  inputTokens: number;
  outputTokens: number;
  cachedInputTokens: number;
}

/** A call the budget would not let start: the turn ends with this outcome instead. */
export interface Halt {
  halt: TurnOutcome;
}

/**
 * The model gateway: the shared queue and rate limit, request building, and the budget's
 * admission, re-check and settlement. Results, not exceptions: a call the budget stops is `{halt}`.
 */
export interface ModelGateway {
  /** The request for the agent's next main call: its session, notes and budget warning. */
  request(agent: AgentRef, turn: number): ModelRequest;
  /** Reserve the estimate of a main call: settles at once unless it must wait for calls in flight to settle (or `signal` aborts). */
  admit(agent: AgentRef, request: ModelRequest, signal: AbortSignal): Promise<{ reservation: Reservation } | Halt>;
  /** Reserve an optional call (a review): never waits, never trips; null when it does not fit. */
  admitOptional(request: ModelRequest): Reservation | null;
  /**
   * One call through the queue and rate limit. Right before it starts, the budget is checked again
   * (it may have stopped, or its limit dropped, while the call queued or backed off). Provider
   * failures are thrown (ProviderError); streamed pieces become `agent.delta` events.
   */
  call(agent: AgentRef, request: ModelRequest, signal: AbortSignal): Promise<{ turn: ModelTurn } | Halt | { parked: true }>;
  /** Book a call's cost (its reservation released) — under the stop policy, trip the reserve or the stop. Returns what was charged. */
  settle(
    agent: AgentRef,
    answer: Pick<ModelTurn, 'usage' | 'invalidUsage'> | undefined,
    how: { purpose: UsagePurpose; reservation?: Reservation; request: ModelRequest },
  ): Charge;
  /** Give back a reservation whose call ended without usage. Idempotent. */
  release(reservation: Reservation): void;
}

/** What the turn loop needs of the agent's session and mailbox. */
export interface SessionPort {
  /** Make sure the agent's conversation is in memory (after a restart it is read once). */
  load(agent: AgentRef): Promise<void>;
  /** The agent's conversation (loaded). */
  items(agent: AgentRef): readonly SessionItem[];
  /** Append items (committed with the current group). */
  append(agent: AgentRef, items: SessionItem[]): void;
  /** How many images the conversation holds (kept current: cheap to ask every turn). */
  images(agent: AgentRef): number;
  /** Replace the whole conversation unless it changed length since it was read. */
  replace(agent: AgentRef, items: SessionItem[], expectedLength: number): boolean;
  /** Messages waiting for the agent. */
  pending(agent: AgentRef): number;
  /** Whether one of them is from the user. */
  pendingFromUser(agent: AgentRef): boolean;
  /** Move the waiting messages (the first `limit`, if given) into the session (delivered with the current group). */
  drain(agent: AgentRef, limit?: number): void;
}

/**
 * Where a turn reads its mailbox — the count a wait reports, the messages the turn takes — and
 * which of an agent's reads it is: its turn's (`turn`), or a wait tool's (`callId`).
 */
export type MailRead = { turn: number } | { callId: string };

/**
 * How many waiting messages a read takes, given by a replay (issue 37): the recorded count, once
 * that many have come — when a turn reads its mailbox is not the recording's, only what it read —
 * and whether the recording's read was the last (whether anything else is still active depends on
 * timing a replay does not hold). null: the code's own read (all that wait, `last` as it is now). A promise only for a read that must wait: any
 * await would move the read a few microtasks on, later than the recording's (the property test
 * caught a wait reading a notice its recording's wait never saw). Live runs have none.
 */
export interface MailReads {
  take(agentId: string, read: MailRead, waiting: () => number): Read | null | Promise<Read | null>;
}

/** The in-doubt ledger (issue 14): tools with effects are marked started before they run. */
export interface ToolLedger {
  start(agent: AgentRef, call: { turn: number; callId: string; tool: string; argsHash: string }): void;
  finish(agent: AgentRef, turn: number, callIds: readonly string[]): void;
  started(agent: AgentRef): Promise<{ turn: number; callId: string }[]>;
}

/** What an agent is doing between status changes, for views (`agent.activity` events). */
export type AgentActivity =
  | { kind: 'tool'; tool: string }
  | { kind: 'retry'; code: string; message: string; status?: number; retry: number; maxRetries: number; delayMs: number }
  | { kind: 'nudge'; attempt: number; limit: number };

/** What a turn asks before a risky tool runs (the coordinator's `ApprovalPolicy` is one). */
export interface ApprovalAsker {
  request(req: {
    agentId: string;
    agentName?: string;
    action: string;
    risk: 'read_only' | 'mutation' | 'destructive';
    args?: unknown;
    /** The model's id of the call (a durable approval records it). */
    callId?: string;
  }): Promise<{ approved: boolean; reason: string; pending?: string }>;
}

/** Options a turn reads. */
interface TurnOptions {
  readonly interactive: boolean;
  /** No turn runs: an agent's cycle waits for its end (a host that only applies requests). */
  readonly holdTurns: boolean;
  readonly toolTimeoutMs: number;
  readonly retry: { maxRetries: number; baseDelayMs: number; maxDelayMs: number };
  readonly approvals: ApprovalAsker | null;
  /** Images kept and the proactive compaction line (`contextWindow` null: only after an overflow). */
  readonly session: { readonly maxImages: number | null; readonly compactAt: number; readonly contextWindow: number | null };
  /** Finish calls with a value that fails the agent's output schema, per stint, before it fails. */
  readonly limits: { readonly maxResultTries: number };
  /** A replay's recorded mailbox reads (null: live, every read takes what waits). */
  readonly mailReads: MailReads | null;
}

export interface TurnHost {
  readonly runId: string;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly options: TurnOptions;
  /** The fatal error that stopped the host, if any (a turn writes nothing more then). */
  readonly failure: unknown;
  readonly gateway: ModelGateway;
  readonly sessions: SessionPort;
  readonly ledger: ToolLedger;
  /** A user tool the agent is offered, by the name the model sees (undefined: none). */
  userTool(agent: AgentRef, name: string): CompiledTool | undefined;
  /** The output check of an agent whose parent set an output schema (null: it finishes without a value). */
  outputCheck(agent: AgentRef): OutputCheck | null;
  /** Spans for model and tool calls, events on the agent's stint (no-op without an OpenTelemetry SDK). */
  readonly trace: TurnTrace;
  agent(id: string): AgentRef;
  /** Tool names the agent is offered (for TOOL_NOT_FOUND messages). */
  toolNames(agent: AgentRef): string[];
  toolSpecs(agent: AgentRef): readonly ToolSpec[];
  /** What a built-in tool needs, for this agent's call. */
  builtinEnv(agent: AgentRef, callId: string, state: BuiltinEnv['state']): BuiltinEnv;
  /** Run a user tool through the shared tool queue, with its timeout and the agent's signal: a promise of its value. */
  runTool(agent: AgentRef, tool: CompiledTool, args: Record<string, unknown>, signal: AbortSignal, idempotencyKey: string): Promise<unknown>;
  /** A tool result may announce async executions: link them to the agent. */
  linkExecutions(agent: AgentRef, content: string): void;
  /** Resolves once everything staged so far is committed (before a model call or a tool with effects). */
  durable(): Promise<void>;
  /** After every committed turn (background review counts turns). */
  afterTurn(agent: AgentRef, outcome: TurnOutcome): void;
  /** The stop requested for this agent, if any (a call not started yet is cancelled). */
  stopRequested(agent: AgentRef): boolean;
  /** Tell views what the agent is doing (a tool starting, a retry after a wait, a nudge); never persisted. */
  activity(agent: AgentRef, activity: AgentActivity): void;
  /** A read of the agent's mailbox took `taken.count` (> 0) messages: recorded for replay, in the commit of what it read. */
  mailRead(agent: AgentRef, read: MailRead, taken: Read): void;
  /** Nothing could still answer a wait of `agent` (waits/graph.ts): its mail is the last. */
  nobodyToAnswer(agent: AgentRef): boolean;
  /** A user tool's execution ended, its result or failure back (recorded for replay: when, among the other steps). */
  toolEnded(agent: AgentRef, call: { id: string }, startedAt: number): void;
  /** A tool call failed with this error code (a team's failure patterns count it). */
  toolFailed(agent: AgentRef, call: { id: string; name: string; arguments: string }, errorCode: string): void;
  /** A failed model call is being recovered from: journal what and why (an event row views show). */
  recovering(agent: AgentRef, recovery: ModelRecovery): void;
}

/** How a failed model call is recovered from, and why: the provider error's code and message. */
interface ModelRecovery {
  kind: 'retry' | 'compact' | 'stripImages';
  code: string;
  message: string;
  /** This turn's attempts of this kind so far, this one included. */
  attempt: number;
  /** Before a retry. */
  delayMs?: number;
}
