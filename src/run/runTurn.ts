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
import { BudgetHalt } from '../coordinator/budget.js';
import { deadlockResult } from '../coordinator/deadlock.js';
import type { AgentHandle, Runtime } from '../coordinator/runtime.js';
import { sleep } from '../clock.js';
import { ProviderError, serializeError, TroupeError, toError } from '../errors.js';
import type { ModelTurn, SessionItem, ToolCall } from '../model/types.js';
import { BUILTIN_TOOLS, type TurnToolState } from '../tools/builtin.js';
import type { CompiledTool } from '../tools/defineTool.js';
import { runUserTool } from '../tools/runUserTool.js';
import { compactSession, stripImages } from './compaction.js';
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

const interruptedResult = (call: ToolCall): SessionItem => ({
  role: 'tool',
  toolCallId: call.id,
  name: call.name,
  content: JSON.stringify({ success: false, error: { code: 'INTERNAL', message: 'The turn was interrupted before this call finished; its outcome is unknown.' } }),
  isError: true,
});

/** Delay before retry `retry` (1-based): min(base·2^(retry-1), max), or what the server asked for. */
export function backoffMs(retry: number, base: number, max: number, retryAfterMs: number | undefined): number {
  return retryAfterMs ?? Math.min(base * 2 ** (retry - 1), max);
}

/** A finished turn: its outcome, and the tool results to commit together with it. */
export interface TurnResult {
  outcome: TurnOutcome;
  items: SessionItem[];
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
  prepareSession(rt, agent, input, firstOfCycle);

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
    rt.ledger.record(agent, turn.usage, 'main', reservation);
  });
  if (turn.refusal) {
    return only({ kind: 'failed', error: { code: 'PROVIDER_REFUSAL', message: `The model refused: ${turn.refusal}`, retryable: false } });
  }
  if (turn.toolCalls.length === 0) {
    agent.lastText = turn.text;
    return only({ kind: 'plainText' });
  }
  return runTools(rt, agent, turn, signal);
}

/** Everything that must be in the session before the model sees it, in one transaction. */
function prepareSession(rt: Runtime, agent: AgentHandle, input: TurnInput, firstOfCycle: boolean): void {
  const { store } = rt;
  // A revived agent starts a new task: tool failure streaks of the old one do not carry over.
  if (input.wake === 'revived') agent.tracker.resetAll();
  const pending = store.pendingCount(agent.id);
  if (!firstOfCycle && pending === 0 && !input.nudge && !agent.strategyPrompt) return;
  rt.commit(() => {
    const open = firstOfCycle ? openToolCalls(store.loadSession(agent.id)) : [];
    const items: SessionItem[] = open.map((c) =>
      input.pendingWait?.callId === c.id
        ? { role: 'tool', toolCallId: c.id, name: c.name, content: waitResult(c.name, input.wake, pending, agent) }
        : interruptedResult(c),
    );
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

type ModelCall = { turn: ModelTurn } | { outcome: TurnOutcome; items?: SessionItem[] };

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
        const turn = await rt.complete(agent, rt.buildRequest(agent, input.stintTurn), callSignal);
        if (!turn || !Array.isArray(turn.toolCalls)) {
          throw new ProviderError('PROVIDER_INVALID_RESPONSE', 'The model returned no turn (expected { text, toolCalls })');
        }
        return { turn };
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

async function runTools(rt: Runtime, agent: AgentHandle, turn: ModelTurn, signal: AbortSignal): Promise<TurnResult> {
  // Text shown in an earlier plain-text turn may be what respond_to_user delivers (single use).
  const state: TurnToolState = { settled: null, settledBy: null, waited: false, text: turn.text ?? agent.lastText };
  agent.lastText = null;
  const items: SessionItem[] = [];
  let lastTool: string | null = null;
  for (const [index, call] of turn.toolCalls.entries()) {
    if (signal.aborted) throw signal.reason;
    if (state.settled) {
      items.push(toolItem(call, { success: false, error: { code: 'TOOL_NOT_ALLOWED', message: `Skipped: this turn already ended with ${state.settledBy}.` } }, true));
      continue;
    }
    let result: CallResult;
    try {
      result = await executeCall(rt, agent, call, state, signal);
    } catch (err) {
      if (signal.aborted) throw err;
      // A bug escaped: keep the results this turn already produced and close the calls left open.
      agent.logger.error({ err, tool: call.name }, 'turn crashed while running tools');
      for (const open of turn.toolCalls.slice(index)) items.push(interruptedResult(open));
      return { outcome: { kind: 'crashed', error: serializeError(err) }, items };
    }
    const { content, isError, deferred } = result;
    if (signal.aborted) throw signal.reason; // stopped while the tool ran: write nothing more
    lastTool = call.name;
    // An async execution this tool started is linked to the agent, to continue it when it ends.
    if (!isError && !deferred && rt.tools.has(call.name)) rt.executions.link(agent, content);
    // A deferred call (a parking wait) is answered when the agent wakes.
    if (!deferred) items.push({ role: 'tool', toolCallId: call.id, name: call.name, content, ...(isError ? { isError } : {}) });
    if (isError) {
      if (agent.tracker.recordFailure(call.name, content)) agent.strategyPrompt = agent.tracker.strategyPrompt(call.name);
    } else agent.tracker.recordSuccess(call.name);
  }
  return { outcome: state.settled ?? { kind: 'continue', lastTool }, items };
}

const toolItem = (call: ToolCall, result: unknown, isError: boolean): SessionItem => ({
  role: 'tool',
  toolCallId: call.id,
  name: call.name,
  content: typeof result === 'string' ? result : JSON.stringify(result),
  ...(isError ? { isError } : {}),
});

const errorContent = (err: unknown) => {
  const e = serializeError(err);
  return JSON.stringify({ success: false, error: { code: e.code, message: e.message } });
};

interface CallResult {
  content: string;
  isError: boolean;
  deferred: boolean;
}

async function executeCall(
  rt: Runtime,
  agent: AgentHandle,
  call: ToolCall,
  state: TurnToolState,
  signal: AbortSignal,
): Promise<CallResult> {
  const fail = (err: unknown): CallResult => ({ content: errorContent(err), isError: true, deferred: false });
  const builtin = BUILTIN_TOOLS.get(call.name);
  const user = builtin ? undefined : rt.tools.get(call.name);
  if (!builtin && !user) {
    return fail(
      new TroupeError('TOOL_NOT_FOUND', `Unknown tool "${call.name}". Available tools: ${rt.toolNames(agent).join(', ')}`),
    );
  }
  let args: unknown;
  try {
    args = call.arguments.trim() === '' ? {} : JSON.parse(call.arguments);
  } catch (err) {
    return fail(new TroupeError('TOOL_INPUT_INVALID', `Arguments for ${call.name} are not valid JSON: ${(err as Error).message}`));
  }
  if (typeof args !== 'object' || args === null || Array.isArray(args)) {
    return fail(new TroupeError('TOOL_INPUT_INVALID', `Arguments for ${call.name} must be a JSON object`));
  }
  const invalid = (builtin ?? user)!.validate(args);
  if (invalid) return fail(invalid);

  if (builtin) {
    try {
      const out = builtin.run(args as Record<string, unknown>, { rt, agent, callId: call.id, state });
      if ('deferred' in out) {
        state.settled = out.deferred;
        state.settledBy = call.name;
        return { content: '', isError: false, deferred: true };
      }
      if (out.settle) {
        state.settled = out.settle;
        state.settledBy = call.name;
      }
      return { content: JSON.stringify(out.result), isError: false, deferred: false };
    } catch (err) {
      return fail(err);
    }
  }
  const approvals = rt.options.approvals;
  const risk = (user as CompiledTool).risk ?? 'mutation';
  if (approvals && risk !== 'read_only') {
    const decision = await approvals.request({ agentId: agent.id, agentName: agent.name, action: call.name, risk, args });
    if (signal.aborted) throw signal.reason;
    if (!decision.approved) {
      return fail(new TroupeError('APPROVAL_DENIED', `${call.name} was not approved: ${decision.reason}`, { details: { risk } }));
    }
  }
  try {
    const result = await runUserTool(rt, user as CompiledTool, args as Record<string, unknown>, agent, signal);
    return { content: result === undefined ? 'null' : typeof result === 'string' ? result : JSON.stringify(result), isError: false, deferred: false };
  } catch (err) {
    if (signal.aborted) throw err;
    agent.logger.warn({ err: toError(err), tool: call.name }, 'tool failed');
    return fail(err instanceof TroupeError ? err : new TroupeError('TOOL_FAILED', `${call.name} failed: ${toError(err).message}`, { cause: err }));
  }
}
