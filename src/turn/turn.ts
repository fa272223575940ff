/**
 * One turn of one agent (DESIGN §4): answer tool calls left open (the lifecycle wait that parked
 * the agent, or calls a crash cut off) → persist the plain-text nudge → drain the mailbox into the
 * session → budget gate → model call through the shared queue, with retries → tools in order
 * through the tool queue → everything appended to the session. It returns a `TurnOutcome`; the
 * agent machine decides what it means.
 * @module
 */
import type { TurnInput } from '../../machines/agentMachine.js';
import type { TurnOutcome, WakeReason } from '../../machines/types.js';
import { BudgetHalt } from '../host/budget.js';
import { deadlockResult } from '../host/deadlock.js';
import type { AgentHandle, Runtime } from '../host/runtime.js';
import { sleep } from '../clock.js';
import { ProviderError, serializeError, TroupeError } from '../errors.js';
import type { ModelRequest, ModelTurn, SessionItem, ToolCall } from '../model/types.js';
import { compactSession, stripImages } from './compaction.js';
import { resolveCutCalls, runTools } from './toolCalls.js';
import { messageToItem, nudgeText } from './texts.js';

/** The abort reason used when a message cuts a running model call short. */
export const INTERRUPTED = Symbol('troupe.interrupted');
/** The abort reason used when the agent is stopped during its model call. */
export const STOP_REQUESTED = Symbol('troupe.stopRequested');

/** Tool calls of the last assistant message that have no result yet. */
export function openToolCalls(session: readonly SessionItem[]): ToolCall[] {
  const answered = new Set<string>();
  for (let i = session.length - 1; i >= 0; i--) {
    const item = session[i]!;
    if (item.role === 'tool') answered.add(item.toolCallId);
    else if (item.role === 'assistant') return (item.toolCalls ?? []).filter((c) => !answered.has(c.id));
  }
  return [];
}

function waitResult(tool: string, wake: WakeReason | null, pending: number, agent: AgentHandle): string {
  if (tool === 'respond_to_user') {
    return JSON.stringify({ status: wake === 'message' || wake === 'revived' ? 'message_arrived' : 'resumed' });
  }
  switch (wake) {
    case 'message':
      // A finished execution wakes its agent with a note for this call, not with mail.
      if (pending === 0 && agent.notes.length > 0) {
        return JSON.stringify({ wait_outcome: 'execution_finished', note: 'One of your executions ended: its result follows.' });
      }
      return JSON.stringify({ wait_outcome: 'message_arrived', pending_messages: pending, note: 'The messages follow.' });
    case 'deadlock':
      return deadlockResult(agent.deadlock ?? []);
    case 'timeout':
      return JSON.stringify({
        wait_outcome: 'timeout',
        note: 'No message arrived before the wait timed out. Continue your work, check on your agents with view_agent_graph, or finish; wait again only if an agent still owes you an answer.',
      });
    case 'revived':
      return JSON.stringify({ wait_outcome: 'stopped', note: 'You were stopped while waiting; a new message revived you.' });
    default:
      return JSON.stringify({ wait_outcome: 'resumed' });
  }
}


/** Delay before retry `retry` (1-based): min(base·2^(retry-1), max), or what the server asked for. */
export function backoffMs(retry: number, base: number, max: number, retryAfterMs: number | undefined): number {
  return retryAfterMs ?? Math.min(base * 2 ** (retry - 1), max);
}

/** A finished turn: its outcome, the tool results to commit with it, and ledger rows to finish then. */
export interface TurnResult {
  outcome: TurnOutcome;
  items: SessionItem[];
  /** Calls the in-doubt ledger marked started in this turn (runTools.ts). */
  started?: string[];
}

const only = (outcome: TurnOutcome): TurnResult => ({ outcome, items: [] });

/**
 * One turn. Its writes are few transactions: what the model must see first (mail, nudges,
 * answers to open calls), then the model's answer with its usage row (persisted before any tool
 * acts on it), and finally — committed by the cycle together with the machine's decision and any
 * notices it causes — the tool results.
 *
 * @param firstOfCycle only the first turn after the agent (re)starts running can find tool calls
 * left open (the wait that parked it, calls a crash cut off): later turns skip that scan.
 */
export async function runTurn(rt: Runtime, input: TurnInput, signal: AbortSignal, firstOfCycle = true): Promise<TurnResult> {
  const live = () => {
    if (signal.aborted) throw signal.reason ?? new TroupeError('COORDINATOR_SHUT_DOWN', 'the agent was stopped');
  };
  live();
  const agent = rt.handle(input.agentId);
  // Only the first turn after the agent (re)starts can find calls left open: the wait that parked
  // it, or calls a crash or shutdown cut off, which are resolved once (runTools.ts).
  const open = firstOfCycle ? openToolCalls(rt.store.loadSession(agent.id)) : [];
  const cutCalls = open.filter((c) => input.pendingWait?.callId !== c.id);
  const cut = cutCalls.length > 0 ? await resolveCutCalls(rt, agent, cutCalls, input.turn, signal) : null;
  live();
  prepareSession(rt, agent, input, open, cut);

  // The budget gate, and the call's estimated cost reserved until it settles.
  const admitted = await rt.ledger.admit(agent, () => rt.buildRequest(agent, input.stintTurn), signal);
  if ('outcome' in admitted) return only(admitted.outcome);
  const { reservation } = admitted;
  // Notes (finished executions) go into this call's input; once it is answered they are spent.
  const notes = agent.notes.length;
  let call: ModelCall;
  try {
    call = await callModel(rt, agent, input, signal);
  } catch (err) {
    rt.ledger.release(reservation);
    throw err;
  }
  if ('outcome' in call) {
    rt.ledger.release(reservation);
    return { outcome: call.outcome, items: call.items ?? [] };
  }
  if (signal.aborted) rt.ledger.release(reservation);
  live();
  if (notes > 0) agent.notes.splice(0, notes);
  const turn = call.turn;
  const answer: SessionItem = turn.refusal
    ? { role: 'assistant', content: turn.text, refusal: turn.refusal }
    : turn.toolCalls.length > 0
      ? { role: 'assistant', content: turn.text, toolCalls: turn.toolCalls }
      : { role: 'assistant', content: turn.text };
  rt.commit(() => {
    rt.store.appendSession(agent.id, [answer]);
    rt.ledger.record(agent, turn, { reservation, request: call.request });
  });
  if (turn.refusal) {
    return only({ kind: 'failed', error: { code: 'PROVIDER_REFUSAL', message: `The model refused: ${turn.refusal}`, retryable: false } });
  }
  if (turn.toolCalls.length === 0) {
    agent.lastText = turn.text;
    return only({ kind: 'plainText' });
  }
  return runTools(rt, agent, { text: turn.text, toolCalls: turn.toolCalls, number: input.turn }, signal);
}

/** Everything that must be in the session before the model sees it, in one transaction. */
function prepareSession(
  rt: Runtime,
  agent: AgentHandle,
  input: TurnInput,
  open: readonly ToolCall[],
  cut: { items: SessionItem[]; started: string[] } | null,
): void {
  const { store } = rt;
  // A revived agent starts a new task: tool failure streaks of the old one do not carry over.
  if (input.wake === 'revived') agent.tracker.resetAll();
  const pending = store.pendingCount(agent.id);
  if (open.length === 0 && pending === 0 && !input.nudge && !agent.strategyPrompt) return;
  rt.commit(() => {
    const items: SessionItem[] = open.map((c) =>
      input.pendingWait?.callId === c.id
        ? { role: 'tool', toolCallId: c.id, name: c.name, content: waitResult(c.name, input.wake, pending, agent) }
        : cut!.items.find((i) => i.role === 'tool' && i.toolCallId === c.id)!,
    );
    if (cut && cut.started.length > 0) store.finishToolCalls(agent.id, input.turn, cut.started, rt.clock.now());
    if (input.nudge) {
      items.push({
        role: 'user',
        content: nudgeText(agent.parentId === null, rt.options.interactive, input.nudge.attempt, input.nudge.limit),
      });
    }
    if (items.length > 0) store.appendSession(agent.id, items);
    agent.deadlock = null;
    store.drainMailbox(agent.id, messageToItem, rt.clock.now());
    if (agent.strategyPrompt) {
      store.appendSession(agent.id, [{ role: 'user', content: agent.strategyPrompt }]);
      agent.strategyPrompt = null;
    }
  });
}

type ModelCall = { turn: ModelTurn; request: ModelRequest } | { outcome: TurnOutcome; items?: SessionItem[] };

/** Statuses with which a request can be rejected because of the images it carries. */
const IMAGE_REJECTION_STATUSES = new Set([400, 404, 422]);

/** Recoveries per turn (DESIGN §4). Retries come from `options.retry.maxRetries`. */
export const MAX_COMPACTIONS = 2;
export const MAX_IMAGE_STRIPS = 3;

/**
 * The model call of a turn, with recovery exactly as DESIGN §4's table says: images rejected →
 * placeholders (≤ 3), context overflow → compaction (≤ 2), transient → backoff and retry; then
 * refusal / other provider errors → failed, anything else → crashed with what was streamed so far
 * salvaged into the session.
 */
async function callModel(rt: Runtime, agent: AgentHandle, input: TurnInput, signal: AbortSignal): Promise<ModelCall> {
  const { maxRetries, baseDelayMs, maxDelayMs } = rt.options.retry;
  // The call's own controller: a message (INTERRUPTED) or a stop (STOP_REQUESTED) cancels it
  // without ending the cycle's signal.
  const controller = new AbortController();
  const forward = () => controller.abort(signal.reason);
  signal.addEventListener('abort', forward, { once: true });
  agent.inFlight = controller;
  // A stop requested before the call began cancels it before it starts.
  if (agent.live?.getSnapshot().context.stopRequested === 'requested') controller.abort(STOP_REQUESTED);
  const callSignal = controller.signal;
  const cancelled = (err: unknown): ModelCall => {
    if (signal.aborted) throw err;
    return callSignal.reason === STOP_REQUESTED ? { outcome: { kind: 'stopped', reason: 'requested' } } : { outcome: { kind: 'interrupted' } };
  };
  let retries = 0;
  let compactions = 0;
  let imageStrips = 0;
  try {
    for (;;) {
      try {
        const request = rt.buildRequest(agent, input.stintTurn);
        const turn = await rt.complete(agent, request, callSignal);
        if (!turn || !Array.isArray(turn.toolCalls)) {
          throw new ProviderError('PROVIDER_INVALID_RESPONSE', 'The model returned no turn (expected { text, toolCalls })');
        }
        return { turn, request };
      } catch (err) {
        if (signal.aborted) throw err;
        if (callSignal.aborted) return cancelled(err);
        if (err instanceof BudgetHalt) return { outcome: err.outcome };
        if (!(err instanceof ProviderError)) {
          agent.logger.error({ err }, 'model call crashed');
          return { outcome: { kind: 'crashed', error: serializeError(err) }, items: salvage(err) };
        }
        if (imageStrips < MAX_IMAGE_STRIPS && err.status !== undefined && IMAGE_REJECTION_STATUSES.has(err.status) && stripImages(rt, agent)) {
          imageStrips++;
          agent.logger.warn({ err, imageStrips }, 'request rejected while the session holds images; replaced them with a placeholder');
          continue;
        }
        if (err.code === 'PROVIDER_CONTEXT_OVERFLOW' && compactions < MAX_COMPACTIONS) {
          let compacted = false;
          try {
            compacted = await compactSession(rt, agent, input.stintTurn, callSignal);
          } catch (compactionError) {
            if (callSignal.aborted) return cancelled(compactionError);
            // The budget stopped (or its limit was lowered) since the turn was admitted.
            if (compactionError instanceof BudgetHalt) return { outcome: compactionError.outcome };
            agent.logger.warn({ err: compactionError }, 'compaction failed');
          }
          if (compacted) {
            compactions++;
            agent.logger.warn({ compactions }, 'context overflow; compacted the session and retrying');
            continue;
          }
        }
        if (err.retryable && retries < maxRetries) {
          retries++;
          const delay = backoffMs(retries, baseDelayMs, maxDelayMs, err.retryAfterMs);
          agent.logger.warn({ err, retry: retries, delayMs: delay }, 'transient model error; retrying');
          try {
            await sleep(rt.clock, delay, callSignal);
          } catch (abort) {
            return cancelled(abort);
          }
          continue;
        }
        agent.logger.warn({ err, retries, compactions, imageStrips }, 'model call failed');
        const error = serializeError(err);
        if (retries > 0) error.message = `${error.message} (after ${retries} ${retries === 1 ? 'retry' : 'retries'})`;
        return { outcome: { kind: 'failed', error }, items: salvage(err) };
      }
    }
  } finally {
    signal.removeEventListener('abort', forward);
    agent.inFlight = null;
  }
}

/** What a call streamed before it broke, kept in the session so a revived agent sees it. */
function salvage(err: unknown): SessionItem[] {
  const partial = err instanceof TroupeError ? err.details?.partialText : (err as { partialText?: unknown } | null)?.partialText;
  return typeof partial === 'string' && partial !== '' ? [{ role: 'assistant', content: `${partial} [cut off: ${serializeError(err).message}]` }] : [];
}
