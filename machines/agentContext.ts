/**
 * The agent machine's context, input and events (the shapes agentMachine.ts decides over), and the
 * pure readers of that context. Kept apart so the machine file holds only its decisions.
 * @module
 */
import type { ErrorActorEvent } from 'xstate';
import {
  type AgentPolicy,
  type AgentStatus,
  type CompletionReport,
  type PendingWait,
  type RecoveryAttempts,
  type SerializedError,
  type StopReason,
  type TurnOutcome,
  type WaitKind,
  type WakeReason,
} from './types.js';

/** The persisted part of an agent's lifecycle: enough to re-create it after a restart. */
export interface AgentLifecycleState {
  turns: number;
  stintTurns: number;
  recoveries: number;
  idleResumes: number;
  waitKind: WaitKind | null;
  waitTimeoutMs: number | null;
  waitingSince: number | null;
  pendingWait: PendingWait | null;
  stopReason: StopReason | null;
  error: SerializedError | null;
  report: CompletionReport | null;
  lastTool: string | null;
  budgetEpoch: number;
  /** The current turn's recovery attempts (retries, compactions, image strips), null between turns. */
  attempts: RecoveryAttempts | null;
}

export interface AgentInput {
  id: string;
  name: string;
  parentId: string | null;
  policy?: Partial<AgentPolicy>;
  /** Restore: the status to start in (default `running`) and the lifecycle state to resume from. */
  status?: AgentStatus;
  state?: Partial<AgentLifecycleState>;
  /** Restore of a wait on agents: the idle timer's remaining delay (re-armed from `waitingSince`). */
  idleTimerMs?: number;
}

/** What never changes in an actor's life: its identity, policy and the status it booted in. */
interface AgentSpec extends AgentPolicy {
  id: string;
  name: string;
  parentId: string | null;
  initialStatus: AgentStatus;
}

/**
 * The agent's context. The fixed part is grouped under `spec` on purpose: XState copies the whole
 * context with `Object.assign({}, context, update)` on every `assign`, and V8 runs that about 15×
 * slower once the object has 20 or more keys (measured here: 0.24 µs at 19 keys, 4.1 µs at 20).
 * Keep the top level under 20 keys (a unit test checks it).
 */
export interface AgentContext extends AgentLifecycleState {
  spec: AgentSpec;
  /** What the pending idle timer was armed with (the remaining delay after a restart). */
  idleTimerMs: number;
  /** Why the agent is running again; consumed by the next turn. */
  wake: WakeReason | null;
  /** A stop that waits for the end of the current turn. */
  stopRequested: StopReason | null;
}

/** Input of the invoked turn: everything the runtime needs, as JSON. */
export interface TurnInput {
  agentId: string;
  /** 1-based turn number over the agent's life (a turn cut by a crash keeps its number). */
  turn: number;
  /** 1-based turn number within this stint. */
  stintTurn: number;
  wake: WakeReason | null;
  pendingWait: PendingWait | null;
  /** Set when the previous turn ended in plain text: the nudge to persist first. */
  nudge: { attempt: number; limit: number } | null;
  budgetEpoch: number;
  /** Recovery attempts this turn already made (a restart in the middle of its retries). */
  attempts: RecoveryAttempts | null;
}

export type AgentEvent =
  /** A message to this agent is committed to its mailbox. */
  /** `notice`: a coordinator notice about a child (terminal, stall, reserve); it never revives a finished agent. */
  | {
      type: 'agent.message';
      from: string;
      user: boolean;
      notice?: boolean;
      /** A child's report while another of the recipient's children is still active: a wait for all of them (`until: 'all'`) takes it without waking. */
      more?: boolean;
    }
  /** Stop: at once when parked, after the current turn when running. */
  | { type: 'agent.stop'; reason: StopReason }
  /** The budget resume epoch advanced (pause policy). */
  | { type: 'budget.resume'; epoch: number }
  /**
   * The run is quiescent and this wait on agents can never be answered (a dead wait): wake now
   * instead of after the idle timer. Counts against the idle limit like a timeout, so it never loops.
   */
  | { type: 'agent.deadlock' }
  /**
   * The idle timer of a dormant wait fired (the host keeps one timer for every parked agent): the
   * same as this state's own `after` timer.
   */
  | { type: 'agent.idleTimeout' }
  /** The cycle finished one turn. */
  | { type: 'turn.done'; outcome: TurnOutcome }
  /** The turn's model call is being recovered (a retry, a compaction, images stripped): persist how far. */
  | { type: 'turn.recovering'; attempts: RecoveryAttempts }
  | ErrorActorEvent<unknown, 'cycle'>;

/** Input of the cycle actor; everything else it reads per turn with `turnInputOf(context)`. */
export interface CycleInput {
  agentId: string;
}

/** What the next turn needs to know, as JSON: read by the cycle before every turn. */
export function turnInputOf(context: AgentContext): TurnInput {
  return {
    agentId: context.spec.id,
    turn: context.turns + 1,
    stintTurn: context.stintTurns + 1,
    wake: context.wake,
    pendingWait: context.pendingWait,
    nudge: context.recoveries > 0 ? { attempt: context.recoveries, limit: context.spec.recoveryLimit } : null,
    budgetEpoch: context.budgetEpoch,
    attempts: context.attempts !== null && context.attempts.turn === context.turns + 1 ? context.attempts : null,
  };
}

export function serializeUnknown(error: unknown): SerializedError {
  const message = error instanceof Error ? error.message : String(error);
  const code =
    typeof error === 'object' && error !== null && typeof (error as { code?: unknown }).code === 'string' ? (error as { code: string }).code : 'INTERNAL';
  return { code, message, retryable: false };
}
