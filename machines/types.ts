/**
 * Types shared by the agent and coordinator machines. Everything here is plain JSON so that it
 * can live in machine context, in invoked-actor input and in persisted rows.
 * @module
 */

/** An agent's status is the top-level state of its machine. */
export type AgentStatus = 'running' | 'waiting' | 'stalled' | 'budgetPaused' | 'completed' | 'stopped' | 'failed' | 'crashed';

export const AGENT_STATUSES: readonly AgentStatus[] = ['running', 'waiting', 'stalled', 'budgetPaused', 'completed', 'stopped', 'failed', 'crashed'];

/** Terminal: the agent's stint is over; its parent has been (or is being) told exactly once. */
export const TERMINAL_STATUSES: ReadonlySet<AgentStatus> = new Set(['completed', 'stopped', 'failed', 'crashed']);
/** Active: still mid-task. The root's `finish` is refused while another agent is active. */
export const ACTIVE_STATUSES: ReadonlySet<AgentStatus> = new Set(['running', 'waiting', 'stalled', 'budgetPaused']);

export const isTerminal = (status: AgentStatus): boolean => TERMINAL_STATUSES.has(status);
export const isActive = (status: AgentStatus): boolean => ACTIVE_STATUSES.has(status);

/**
 * What a waiting agent waits on: the user (no timer), its agents (an idle timer), or a time it
 * chose (`sleep_until`: its deadline is the timer, and nothing but a message or a stop ends it sooner).
 */
export type WaitKind = 'user' | 'agents' | 'timer';

/** Why an agent was stopped. */
export type StopReason = 'requested' | 'maxTurns' | 'budget' | 'reserve' | 'reentry' | 'allowance';

/** An error as it is stored in context, rows and events (prototypes do not survive JSON). */
export interface SerializedError {
  code: string;
  message: string;
  retryable: boolean;
}

/**
 * Why a parked agent is running again; decides the result of a pending wait tool call. `deadlock`:
 * the run went quiescent with this agent waiting on agents that cannot answer (nothing runs).
 */
export type WakeReason = 'message' | 'timeout' | 'timer' | 'revived' | 'budgetResumed' | 'deadlock';

/** A lifecycle tool call whose result is written when the agent wakes. */
export interface PendingWait {
  callId: string;
  tool: 'wait_for_agents' | 'respond_to_user' | 'sleep_until';
  /**
   * `all`: a `wait_for_agents` that gathers its children's reports — one that comes while another
   * child is still active does not wake it; the last one does, and so does anything else. Absent:
   * the first message wakes it.
   */
  until?: 'all';
}

/** Structured content of `agent_finish` / `finish`. */
export interface CompletionReport {
  summary: string;
  findings: string[];
  openItems: string[];
  success: boolean;
  /** The value an agent with an output schema finished with (JSON, valid against the schema). */
  value?: unknown;
}

/**
 * How far the recovery of one turn's model call has gone (DESIGN §4): persisted, so a restart in
 * the middle of a turn's retries does not give it a fresh set.
 */
export interface RecoveryAttempts {
  /** The agent's turn (lifetime count) these attempts belong to. */
  turn: number;
  retries: number;
  compactions: number;
  imageStrips: number;
  /**
   * When the last retry's backoff ends (the run's clock). A restart inside it waits for the rest:
   * the provider is not asked sooner than it would have been, and a replay sees the same call time.
   */
  retryAt?: number;
}

/** Token usage of one model call (cost is filled in by the budget layer when priced). */
export interface TurnUsage {
  inputTokens: number;
  outputTokens: number;
  cachedInputTokens: number;
  costUsd: number;
}

/**
 * How one turn ended: the output of the invoked `runTurn` actor. The agent machine decides the
 * next state from it; the actor never decides a status itself.
 */
export type TurnOutcome =
  /** The turn ran non-lifecycle tools: take another turn. */
  | { kind: 'continue'; lastTool: string | null }
  /** The turn ended in plain text (no tool call): counts toward recovery. */
  | { kind: 'plainText' }
  /** A message cut the turn short: does not count as plain text. */
  | { kind: 'interrupted' }
  /** A lifecycle wait parked the agent. */
  | { kind: 'wait'; waitKind: WaitKind; callId: string; tool: PendingWait['tool']; timeoutMs: number | null; at: number; until?: 'all' }
  /** `agent_finish` / `finish` succeeded. */
  | { kind: 'finish'; report: CompletionReport }
  /** A gate seen before the model call (budget stop, reserve). */
  | { kind: 'stopped'; reason: StopReason }
  /** Pause policy: the budget gate parked the agent before a paid call. */
  | { kind: 'budgetPaused'; epoch: number }
  /** Refusal, non-retryable provider error, retries exhausted. */
  | { kind: 'failed'; error: SerializedError }
  /** Anything else that escaped the turn. */
  | { kind: 'crashed'; error: SerializedError };

/** Options that shape an agent's lifecycle; part of its input and context. */
export interface AgentPolicy {
  interactive: boolean;
  /** Turns per stint (a stint starts at spawn and at every revival). */
  maxTurns: number;
  /** Idle auto-resume delay for waits on agents when the model gives no timeout. */
  idleResumeMs: number;
  /** Plain-text turns in a row before the agent stalls (interactive) or crashes (autonomous). */
  recoveryLimit: number;
  /** Idle timeouts in a row, without a real message, before the agent stalls. */
  idleLimit: number;
}

export const DEFAULT_RECOVERY_LIMIT = 3;
export const DEFAULT_IDLE_LIMIT = 3;
export const DEFAULT_IDLE_RESUME_MS = 300_000;

/**
 * When an agent's wait on agents times out, or its timer (`sleep_until`) fires: when it began plus
 * the wait's own timeout, else the run's idle auto-resume delay; null for any other status. The one
 * statement of the rule: the dormant agents' timers, a restored agent's remaining timer and a
 * worker's release deadline use it.
 */
export function idleDeadline(
  status: AgentStatus,
  state: { waitKind?: WaitKind | null; waitingSince?: number | null; waitTimeoutMs?: number | null },
  idleResumeMs: number,
): number | null {
  if (status !== 'waiting' || state.waitingSince === null || state.waitingSince === undefined) return null;
  if (state.waitKind !== 'agents' && state.waitKind !== 'timer') return null;
  return state.waitingSince + (state.waitTimeoutMs ?? idleResumeMs);
}
