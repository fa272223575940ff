/**
 * The turns of one agent: the cycle that runs one after another while the agent is `running`, and
 * one turn (DESIGN §4): answer tool calls left open (the lifecycle wait that parked
 * the agent, or calls a crash cut off) → the plain-text nudge → drain the mailbox into the session
 * → budget admission → model call through the gateway, recovered as `decideRecovery` says → tools
 * in order → everything appended to the session. It returns a `TurnOutcome`; the agent machine
 * decides what it means.
 *
 * The cycle reports each turn as `turn.done`. The agent machine handles the event synchronously; if
 * it decided to leave `running`, XState has already stopped the cycle (aborting its scope) by the
 * time `sendBack` returns, and the loop ends. Nothing escapes: a throw becomes a `crashed` outcome.
 *
 * Writes are staged and committed in groups by the host; a turn waits for durability only where
 * something leaves the process: before the model call (what the model sees is committed) and before
 * a tool with effects runs (toolCalls.ts).
 * @module
 */
import { fromCallback } from 'xstate';
import { turnInputOf, type AgentContext, type AgentEvent, type CycleInput, type TurnInput } from '../../machines/agentMachine.js';
import type { RecoveryAttempts, TurnOutcome, WakeReason } from '../../machines/types.js';
import { CycleScope } from '../cancel.js';
import { sleep } from '../clock.js';
import { errorMessage, isTroupeError, serializeError, TroupeError } from '../errors.js';
import type { ModelRequest, ModelTurn, SessionItem, ToolCall } from '../model/types.js';
import { compactEarly, compactSession, dueForCompaction, enforceImageBudget, hasImages, stripImages } from './compaction.js';
import { EVENT_NUDGE, TROUPE_NUDGE_ATTEMPT, TROUPE_NUDGE_LIMIT } from '../trace/attributes.js';
import type { ChatSpan } from '../trace/tracer.js';
import type { AgentRef, TurnHost } from './ports.js';
import type { Read } from '../tools/ports.js';
import { messagesArrived } from '../tools/builtin.js';
import { afterDecision, decideRecovery, failure, noAttempts } from './recovery.js';
import { nudgeText } from './texts.js';
import { resolveCutCalls, runTools } from './toolCalls.js';

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

/** The result of a `sleep_until` call, written when the agent wakes: its timer fired, or something woke it sooner. */
function sleepResult(wake: WakeReason | null, pending: number): string {
  switch (wake) {
    case 'timer':
      return JSON.stringify({ wait_outcome: 'timer_fired', note: 'The time you slept until has come.' });
    case 'message':
      return JSON.stringify({ wait_outcome: 'message_arrived', pending_messages: pending, note: 'A message woke you before your time: it follows.' });
    case 'revived':
      return JSON.stringify({ wait_outcome: 'stopped', note: 'You were stopped while asleep; a new message revived you.' });
    default:
      return JSON.stringify({ wait_outcome: 'resumed' });
  }
}

function waitResult(tool: string, wake: WakeReason | null, pending: number, last: boolean, agent: AgentRef): string {
  if (tool === 'respond_to_user') {
    return JSON.stringify({ status: wake === 'message' || wake === 'revived' ? 'message_arrived' : 'resumed' });
  }
  if (tool === 'sleep_until') return sleepResult(wake, pending);
  switch (wake) {
    case 'message':
      // A finished execution wakes its agent with a note for this call, not with mail.
      if (pending === 0 && agent.notes.length > 0) {
        return JSON.stringify({ wait_outcome: 'execution_finished', note: 'One of your executions ended: its result follows.' });
      }
      return JSON.stringify(messagesArrived(pending, last));
    case 'deadlock':
      return agent.waitReport ?? JSON.stringify({ wait_outcome: 'deadlock' });
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

/** A finished turn: its outcome, the tool results to commit with it, and ledger rows to finish then. */
export interface TurnResult {
  outcome: TurnOutcome;
  items: SessionItem[];
  /** Calls the in-doubt ledger marked started in this turn (toolCalls.ts). */
  started?: string[];
}

/** What the turn tells its agent's machine while it runs. */
interface TurnReports {
  /** The model call is being recovered: persist how far (a restart continues the count). */
  recovering(attempts: RecoveryAttempts): void;
}

const only = (outcome: TurnOutcome): TurnResult => ({ outcome, items: [] });

/** The abort reason of a stopped cycle: one instance (an Error per stop captured a stack each time). */
const CYCLE_STOPPED = new Error('the cycle was stopped');

/**
 * @param hostOf the turns' host, read when a cycle starts (the host is built of parts that are built after the agents).
 * @param contextOf the agent machine's context now (the cycle reads it before every turn).
 */
export function createCycleLogic(hostOf: () => TurnHost, contextOf: (agentId: string) => AgentContext) {
  return fromCallback<AgentEvent, CycleInput>(({ input, sendBack }) => {
    const host = hostOf();
    // The cycle's scope: its turns' operations get their AbortSignals from it (cancel.ts).
    const cycle = new CycleScope();
    const reports = { recovering: (attempts: RecoveryAttempts) => sendBack({ type: 'turn.recovering', attempts }) };
    const loop = async () => {
      // Never run inside the transition that started the cycle.
      await Promise.resolve();
      const agent = host.agent(input.agentId);
      for (let first = true; !cycle.aborted; first = false) {
        let result: TurnResult;
        const turn = turnInputOf(contextOf(input.agentId));
        try {
          result = host.options.holdTurns ? await heldTurn(host, agent, cycle) : await runTurn(host, turn, cycle, first, reports);
        } catch (err) {
          if (cycle.aborted) return;
          agent.logger.error({ err }, 'turn crashed');
          result = { outcome: { kind: 'crashed', error: serializeError(err) }, items: [] };
        }
        if (cycle.aborted || host.failure) return;
        // The tool results, the machine's decision and the writes it causes (status, counters,
        // notices) are staged together, so they commit in one group.
        if (result.items.length > 0) host.sessions.append(agent, result.items);
        // The in-doubt ledger: these calls' results are in this very group.
        if (result.started && result.started.length > 0) host.ledger.finish(agent, turn.turn, result.started);
        sendBack({ type: 'turn.done', outcome: result.outcome });
        host.afterTurn(agent, result.outcome);
      }
    };
    // A failed commit has already stopped the host (host.failure); nothing else escapes.
    loop().catch((err: unknown) => {
      if (!host.failure) host.logger.error({ err }, 'a cycle ended unexpectedly');
    });
    return () => cycle.abort(CYCLE_STOPPED);
  });
}

/**
 * One turn.
 * @param firstOfCycle only the first turn after the agent (re)starts running can find tool calls
 * left open (the wait that parked it, calls a crash cut off): later turns skip that scan.
 */
async function runTurn(host: TurnHost, input: TurnInput, cycle: CycleScope, firstOfCycle: boolean, reports: TurnReports): Promise<TurnResult> {
  const live = () => {
    if (cycle.aborted) throw cycle.reason ?? new TroupeError('COORDINATOR_SHUT_DOWN', 'the agent was stopped');
  };
  live();
  const agent = host.agent(input.agentId);
  if (firstOfCycle) await host.sessions.load(agent);
  live();
  // Only the first turn after the agent (re)starts can find calls left open: the wait that parked
  // it, or calls a crash or shutdown cut off, which are resolved once (toolCalls.ts).
  const open = firstOfCycle ? openToolCalls(host.sessions.items(agent)) : [];
  const cutCalls = open.filter((c) => input.pendingWait?.callId !== c.id);
  const cut = cutCalls.length > 0 ? await resolveCutCalls(host, agent, cutCalls, input.turn, cycle) : null;
  live();
  // A replay's turn reads as many messages as the recording's did, once that many have come.
  const reads = host.options.mailReads;
  let take = reads ? reads.take(agent.id, { turn: input.turn }, () => host.sessions.pending(agent)) : null;
  if (take instanceof Promise) {
    take = await take;
    live();
  }
  prepareSession(host, agent, input, open, cut, take);
  const { maxImages } = host.options.session;
  if (maxImages !== null && host.sessions.images(agent) > maxImages) enforceImageBudget(host, agent, maxImages);

  // The request is built once: its estimate is reserved, and the same request is sent.
  let request = host.gateway.request(agent, input.stintTurn);
  if (dueForCompaction(host, request)) {
    const early = await compactEarly(host, agent, input.stintTurn, cycle.operation().signal);
    if (typeof early === 'object') return only(early.halt);
    live();
    if (early) request = host.gateway.request(agent, input.stintTurn);
  }
  // Nobody but the cycle aborts an operation before it is in flight (agent.inFlight).
  const admitted = await host.gateway.admit(agent, request, cycle.operation().signal);
  if ('halt' in admitted) return only(admitted.halt);
  const { reservation } = admitted;
  // What the model sees is committed before it sees it.
  await host.durable();
  live();
  // Notes (finished executions) go into this call's input; once it is answered they are spent.
  const notes = agent.notes.length;
  const chat = host.trace.chat(agent, request, 'main');
  let call: ModelCall;
  try {
    call = await callModel(host, agent, input, request, cycle, reports, chat);
  } catch (err) {
    host.gateway.release(reservation);
    chat.end(cycle.aborted ? { halted: 'cancelled' } : { error: serializeError(err).code });
    throw err;
  }
  if ('outcome' in call) {
    host.gateway.release(reservation);
    const { outcome } = call;
    chat.end(outcome.kind === 'failed' || outcome.kind === 'crashed' ? { error: outcome.error.code } : { halted: outcome.kind });
    return { outcome, items: call.items ?? [] };
  }
  if (cycle.aborted) host.gateway.release(reservation);
  live();
  request = call.request;
  if (notes > 0) agent.notes.splice(0, notes);
  const turn = call.turn;
  const answer: SessionItem = turn.refusal
    ? { role: 'assistant', content: turn.text, refusal: turn.refusal }
    : turn.toolCalls.length > 0
      ? { role: 'assistant', content: turn.text, toolCalls: turn.toolCalls }
      : { role: 'assistant', content: turn.text };
  // The answer and its cost go in the same group: a tool never acts on an answer not yet durable
  // (tools with effects wait for it; built-ins stage their writes after it).
  host.sessions.append(agent, [answer]);
  chat.end({ turn, charge: host.gateway.settle(agent, turn, { purpose: 'main', reservation, request }) });
  if (turn.refusal) {
    return only({ kind: 'failed', error: { code: 'PROVIDER_REFUSAL', message: `The model refused: ${turn.refusal}`, retryable: false } });
  }
  if (turn.toolCalls.length === 0) {
    agent.lastText = turn.text;
    return only({ kind: 'plainText' });
  }
  // Awaited, not returned: an async function returning a promise adopts it two microtasks later.
  const stintStart = input.turn - input.stintTurn + 1;
  return await runTools(host, agent, { text: turn.text, toolCalls: turn.toolCalls, number: input.turn, stintStart }, cycle);
}

/**
 * A turn of a host that runs none (`holdTurns`): nothing is drained into the session and nothing is
 * called; it waits as a model call would, until a stop (the agent stops: `stopped`), an
 * interrupting message (`interrupted`: the next held turn begins) or the end of the hosting.
 */
async function heldTurn(host: Pick<TurnHost, 'stopRequested'>, agent: AgentRef, cycle: CycleScope): Promise<TurnResult> {
  const call = cycle.operation();
  agent.inFlight = call;
  if (host.stopRequested(agent)) call.abort(STOP_REQUESTED);
  const { signal } = call;
  try {
    if (!signal.aborted) await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
  } finally {
    agent.inFlight = null;
  }
  if (cycle.aborted) throw cycle.reason;
  return { outcome: signal.reason === STOP_REQUESTED ? { kind: 'stopped', reason: 'requested' } : { kind: 'interrupted' }, items: [] };
}

/** Everything that must be in the session before the model sees it, staged together. */
function prepareSession(
  host: TurnHost,
  agent: AgentRef,
  input: TurnInput,
  open: readonly ToolCall[],
  cut: { items: SessionItem[]; started: string[] } | null,
  take: Read | null,
): void {
  const { sessions } = host;
  // A revived agent starts a new task: tool failure streaks of the old one do not carry over.
  if (input.wake === 'revived') agent.tracker.resetAll();
  // The read of the mailbox: the count a woken wait reports is what the turn takes.
  const pending = take?.count ?? sessions.pending(agent);
  if (open.length === 0 && pending === 0 && !input.nudge && !agent.strategyPrompt) return;
  // Whether the mail a woken wait reads is the last (a replay's: as recorded).
  const wait = input.wake === 'message' && pending > 0 && open.some((c) => c.id === input.pendingWait?.callId && c.name === 'wait_for_agents');
  const last = wait && (take ? take.last : host.nobodyToAnswer(agent));
  const items: SessionItem[] = open.map((c) =>
    input.pendingWait?.callId === c.id
      ? { role: 'tool', toolCallId: c.id, name: c.name, content: waitResult(c.name, input.wake, pending, last, agent) }
      : cut!.items.find((i) => i.role === 'tool' && i.toolCallId === c.id)!,
  );
  // Images a re-run call returned follow every tool result.
  if (cut) items.push(...cut.items.filter((i) => i.role === 'user'));
  if (cut && cut.started.length > 0) host.ledger.finish(agent, input.turn, cut.started);
  if (input.nudge) {
    host.activity(agent, { kind: 'nudge', attempt: input.nudge.attempt, limit: input.nudge.limit });
    host.trace.event(agent.id, EVENT_NUDGE, { [TROUPE_NUDGE_ATTEMPT]: input.nudge.attempt, [TROUPE_NUDGE_LIMIT]: input.nudge.limit });
    items.push({ role: 'user', content: nudgeText(agent.parentId === null, host.options.interactive, input.nudge.attempt, input.nudge.limit) });
  }
  if (items.length > 0) sessions.append(agent, items);
  agent.waitReport = null;
  sessions.drain(agent, pending);
  if (pending > 0) host.mailRead(agent, { turn: input.turn }, { count: pending, last });
  if (agent.strategyPrompt) {
    sessions.append(agent, [{ role: 'user', content: agent.strategyPrompt }]);
    agent.strategyPrompt = null;
  }
}

type ModelCall = { turn: ModelTurn; request: ModelRequest } | { outcome: TurnOutcome; items?: SessionItem[] };

/**
 * The model call of a turn, recovered as `decideRecovery` says: images rejected → placeholders,
 * context overflow → compaction, transient → backoff and retry; refusal and other provider errors
 * → failed, anything else → crashed with what was streamed so far salvaged into the session. The
 * attempts are reported to the machine before each recovery, so a restart continues the count.
 */
async function callModel(
  host: TurnHost,
  agent: AgentRef,
  input: TurnInput,
  first: ModelRequest,
  cycle: CycleScope,
  reports: TurnReports,
  chat: ChatSpan,
): Promise<ModelCall> {
  // The call's own controller: a message (INTERRUPTED) or a stop (STOP_REQUESTED) cancels it
  // without ending the cycle.
  const controller = cycle.operation();
  const callSignal = controller.signal;
  agent.inFlight = controller;
  // A stop requested before the call began cancels it before it starts.
  if (host.stopRequested(agent)) controller.abort(STOP_REQUESTED);
  let attempts = input.attempts ?? noAttempts(input.turn);
  let request = first;
  try {
    // Resumed inside a retry's backoff (a restart): the rest of it first.
    const rest = (attempts.retryAt ?? 0) - host.clock.now();
    if (rest > 0) {
      try {
        await sleep(host.clock, rest, callSignal);
      } catch (abort) {
        return cancelledCall(abort, cycle, callSignal);
      }
    }
    for (;;) {
      try {
        const answer = await host.gateway.call(agent, request, callSignal);
        if ('halt' in answer) return { outcome: answer.halt };
        // Its endpoint is down (providers/breaker.ts): call again, parked at the gate, no attempt spent.
        if ('parked' in answer) continue;
        return { turn: answer.turn, request };
      } catch (err) {
        if (cycle.aborted) throw err;
        if (callSignal.aborted) return cancelledCall(err, cycle, callSignal);
        const decision = decideRecovery(err, attempts, { hasImages: hasImages(host.sessions.items(agent)), retry: host.options.retry });
        if (decision.kind === 'crash') {
          agent.logger.error({ err }, 'model call crashed');
          return { outcome: { kind: 'crashed', error: decision.error }, items: salvage(err) };
        }
        if (decision.kind === 'fail') {
          agent.logger.warn({ err, ...attempts }, 'model call failed');
          return { outcome: { kind: 'failed', error: decision.error }, items: salvage(err) };
        }
        attempts = afterDecision(attempts, decision);
        if (decision.kind === 'retry') attempts = { ...attempts, retryAt: host.clock.now() + decision.delayMs };
        reports.recovering(attempts);
        chat.retry(serializeError(err).code, decision.kind === 'retry' ? decision.delayMs : null);
        host.recovering(agent, {
          kind: decision.kind,
          code: isTroupeError(err) ? err.code : 'INTERNAL',
          message: errorMessage(err),
          attempt: decision.kind === 'retry' ? attempts.retries : decision.kind === 'compact' ? attempts.compactions : attempts.imageStrips,
          ...(decision.kind === 'retry' ? { delayMs: decision.delayMs } : {}),
        });
        if (decision.kind === 'stripImages') {
          stripImages(host, agent);
          agent.logger.warn({ err, imageStrips: attempts.imageStrips }, 'request rejected while the session holds images; replaced them with a placeholder');
        } else if (decision.kind === 'compact') {
          let compacted: Awaited<ReturnType<typeof compactSession>> = false;
          try {
            compacted = await compactSession(host, agent, input.stintTurn, callSignal);
          } catch (compactionError) {
            if (callSignal.aborted) return cancelledCall(compactionError, cycle, callSignal);
            agent.logger.warn({ err: compactionError }, 'compaction failed');
          }
          // The budget stopped (or its limit was lowered) since the turn was admitted.
          if (typeof compacted === 'object') return { outcome: compacted.halt };
          if (!compacted) return { outcome: { kind: 'failed', error: failure(err, attempts.retries) }, items: salvage(err) };
          agent.logger.warn({ compactions: attempts.compactions }, 'context overflow; compacted the session and retrying');
        } else {
          agent.logger.warn({ err, retry: attempts.retries, delayMs: decision.delayMs }, 'transient model error; retrying');
          const failed = serializeError(err);
          const status = (err as { status?: unknown }).status;
          host.activity(agent, {
            kind: 'retry',
            code: failed.code,
            message: failed.message,
            ...(typeof status === 'number' ? { status } : {}),
            retry: attempts.retries,
            maxRetries: host.options.retry.maxRetries,
            delayMs: decision.delayMs,
          });
          try {
            await sleep(host.clock, decision.delayMs, callSignal);
          } catch (abort) {
            return cancelledCall(abort, cycle, callSignal);
          }
        }
        // Built again: the session may have changed (images, compaction), and the budget warning with the spend.
        await host.durable();
        request = host.gateway.request(agent, input.stintTurn);
      }
    }
  } finally {
    agent.inFlight = null;
  }
}

/** A model call cancelled by a message (interrupted) or a stop; a cancelled cycle rethrows. */
function cancelledCall(err: unknown, cycle: CycleScope, callSignal: AbortSignal): ModelCall {
  if (cycle.aborted) throw err;
  return callSignal.reason === STOP_REQUESTED ? { outcome: { kind: 'stopped', reason: 'requested' } } : { outcome: { kind: 'interrupted' } };
}

/** What a call streamed before it broke, kept in the session so a revived agent sees it. */
function salvage(err: unknown): SessionItem[] {
  const partial = err instanceof TroupeError ? err.details?.partialText : (err as { partialText?: unknown } | null)?.partialText;
  return typeof partial === 'string' && partial !== '' ? [{ role: 'assistant', content: `${partial} [cut off: ${serializeError(err).message}]` }] : [];
}
