/**
 * The tool calls of a turn, in order, through the tool queue — and the in-doubt ledger that makes
 * a crash between a tool's start and its recorded result honest (issue 14):
 *
 * - Before a user tool that may have effects (risk other than `read_only`; undeclared counts as
 *   `mutation`) runs, a `started` row is committed. Its result, and `finished`, are committed with
 *   the turn.
 * - When an agent runs again and finds calls of its last answer without results (a crash or a
 *   shutdown cut the turn), each is resolved once: read-only and `idempotent` tools are re-run
 *   (the latter with the same `idempotencyKey`); a call marked started is reported
 *   `TOOL_IN_DOUBT` (never re-run blindly); a call never started is reported `TOOL_NOT_RUN`.
 *
 * A stop cancels the user tools a turn runs (their AbortSignal, through `agent.toolsInFlight`): the
 * running call ends as `TOOL_CANCELLED`, user tool calls after it as `TOOL_NOT_RUN` (built-ins act
 * as always: they read the stop themselves), and the results (and
 * the ledger's `finished`) are committed with the turn that stops the agent. Images a tool returns
 * follow the turn's tool results as one user message with image parts.
 * @module
 */
import { hash } from 'node:crypto';
import type { TurnOutcome } from '../../machines/types.js';
import type { CycleScope } from '../cancel.js';
import { serializeError, TroupeError, toError } from '../errors.js';
import { errorClassOf } from './fingerprint.js';
import type { ContentPart, SessionItem, ToolCall } from '../model/types.js';
import { BUILTIN_TOOLS } from '../tools/builtin.js';
import type { TurnToolState } from '../tools/builtinKit.js';
import type { CompiledTool } from '../tools/defineTool.js';
import { isToolOutput, type ToolImage } from '../tools/toolOutput.js';
import { checkFinishValue, FINISH_TOOLS, ownFinishTool, refusedAttempts } from './finishValue.js';
import type { AgentRef, TurnHost } from './ports.js';

/** The tool results of a turn, and the calls the ledger marked started (finished with the turn's commit). */
export interface ToolsResult {
  outcome: TurnOutcome;
  items: SessionItem[];
  started: string[];
}

interface CallResult {
  content: string;
  isError: boolean;
  deferred: boolean;
  /** A failed call's error code (its span's `error.type`). */
  errorCode?: string;
  /** Its class for the team's failure patterns (turn/fingerprint.ts `errorClassOf`). */
  errorClass?: string;
  /** Images the tool returned (shown to the model after the turn's tool results). */
  images?: readonly ToolImage[];
}

/** Where a call sits: the turn whose answer asked for it (the ledger's and the idempotency key's scope). */
interface CallScope {
  turn: number;
  /** The first turn of the agent's stint (finish-value attempts count from it). */
  stintStart: number;
  started: string[];
  /** This turn's results so far (a value refused earlier in the turn counts). */
  items: readonly SessionItem[];
}

/** Built-ins that only read: re-run when a crash cut them off. */
const READ_ONLY_BUILTINS = new Set(['view_agent_graph']);

const toolItem = (call: ToolCall, result: unknown, isError: boolean): SessionItem =>
  resultItem(call, typeof result === 'string' ? result : JSON.stringify(result), isError);

/**
 * A tool result as a session item; `isError` only when set. Two literals, not a spread of
 * `isError ? { isError } : {}` into one: that built an extra object and took V8's slow path for a
 * spread followed by properties, on every tool call.
 */
const resultItem = (call: ToolCall, content: string, isError: boolean): SessionItem =>
  isError ? { role: 'tool', toolCallId: call.id, name: call.name, content, isError: true } : { role: 'tool', toolCallId: call.id, name: call.name, content };

/**
 * A name the model made up, as an error repeats it: at most 200 characters. The error goes back
 * into the session, where a hostile 512 KB name was copied on every later call (wireFuzz).
 */
const shortName = (name: string) => (name.length <= 200 ? name : `${name.slice(0, 200)}… (${name.length} characters)`);

const errorContent = (err: unknown) => {
  const e = serializeError(err);
  return JSON.stringify({ success: false, error: { code: e.code, message: e.message } });
};

/** A call the turn could not finish because a bug escaped (the turn crashes; its outcome is unknown). */
const interruptedResult = (call: ToolCall): SessionItem =>
  toolItem(call, { success: false, error: { code: 'INTERNAL', message: 'The turn was interrupted before this call finished; its outcome is unknown.' } }, true);

/** The key a tool call keeps across restarts. */
const idempotencyKey = (host: TurnHost, agent: AgentRef, turn: number, callId: string) => `${host.runId}:${agent.id}:${turn}:${callId}`;

/** The user message that shows the model the images of this turn's tool calls (null: none). */
function imagesItem(shown: readonly { call: ToolCall; images: readonly ToolImage[] }[]): SessionItem | null {
  const content: ContentPart[] = [];
  for (const { call, images } of shown) {
    if (images.length === 0) continue;
    content.push({
      type: 'text',
      text: `[${images.length === 1 ? 'The image' : `The ${images.length} images`} returned by ${call.name} (tool call ${call.id})]`,
    });
    for (const image of images) content.push({ type: 'image', url: `data:${image.mimeType};base64,${image.data}` });
  }
  return content.length === 0 ? null : { role: 'user', content };
}

/** The abort reason of tools cut by a stop requested before they began. */
const STOPPED = new Error('the agent was stopped');

const stoppedBefore = (call: ToolCall) =>
  new TroupeError('TOOL_NOT_RUN', `Not run: the agent was stopped before ${call.name} started, so it had no effect. Call it again if it is still needed.`);

/**
 * The cancellation of the user tools a turn runs for `agent`: aborted by a stop
 * (`agent.toolsInFlight`, at once if a stop is already requested) and by the cycle (shutdown, or
 * the agent leaving `running`).
 */
function openCancel(host: TurnHost, agent: AgentRef, cycle: CycleScope): AbortController {
  const cancel = cycle.operation();
  agent.toolsInFlight = cancel;
  if (host.stopRequested(agent)) cancel.abort(STOPPED);
  return cancel;
}

function closeCancel(agent: AgentRef, cancel: AbortController): void {
  if (agent.toolsInFlight === cancel) agent.toolsInFlight = null;
}

/** Whether the ledger tracks this user tool: anything that may have effects. */
const tracked = (tool: CompiledTool) => (tool.risk ?? 'mutation') !== 'read_only';

export async function runTools(
  host: TurnHost,
  agent: AgentRef,
  turn: { text: string | null; toolCalls: ToolCall[]; number: number; stintStart: number },
  cycle: CycleScope,
): Promise<ToolsResult> {
  const controller = openCancel(host, agent, cycle);
  const cancel = controller.signal;
  try {
    // Text shown in an earlier plain-text turn may be what respond_to_user delivers (single use).
    const state: TurnToolState = { settled: null, settledBy: null, waited: false, text: turn.text ?? agent.lastText };
    agent.lastText = null;
    const items: SessionItem[] = [];
    const scope: CallScope = { turn: turn.number, stintStart: turn.stintStart, started: [], items };
    const shown: { call: ToolCall; images: readonly ToolImage[] }[] = [];
    let lastTool: string | null = null;
    for (const [index, call] of turn.toolCalls.entries()) {
      if (cycle.aborted) throw cycle.reason;
      if (state.settled) {
        items.push(
          toolItem(call, { success: false, error: { code: 'TOOL_NOT_ALLOWED', message: `Skipped: this turn already ended with ${state.settledBy}.` } }, true),
        );
        continue;
      }
      host.activity(agent, { kind: 'tool', tool: call.name });
      let result: CallResult;
      const span = host.trace.tool(agent, call);
      try {
        result = await executeCall(host, agent, call, state, cycle, scope, cancel);
      } catch (err) {
        // Cut off by a stop or shutdown: not the tool's error.
        span.end(cycle.aborted ? null : serializeError(err).code);
        if (cycle.aborted) throw err;
        // A bug escaped: keep the results this turn already produced and close the calls left open.
        agent.logger.error({ err, tool: call.name }, 'turn crashed while running tools');
        for (const open of turn.toolCalls.slice(index)) items.push(interruptedResult(open));
        return { outcome: { kind: 'crashed', error: serializeError(err) }, items, started: scope.started };
      }
      const { content, isError, deferred } = result;
      span.end(result.errorCode ?? null, content);
      if (cycle.aborted) throw cycle.reason; // stopped while the tool ran: write nothing more
      lastTool = call.name;
      // An async execution this tool started is linked to the agent, to continue it when it ends.
      // (A call that succeeded and is not a built-in ran a user tool: no second lookup.)
      if (!isError && !deferred && !BUILTIN_TOOLS.has(call.name)) host.linkExecutions(agent, content);
      // A deferred call (a parking wait) is answered when the agent wakes.
      if (!deferred) items.push(resultItem(call, content, isError));
      if (result.images) shown.push({ call, images: result.images });
      if (isError) {
        if (agent.tracker.recordFailure(call.name, content)) agent.strategyPrompt = agent.tracker.strategyPrompt(call.name);
        // The same user tool failing the same way across the team: the parent hears of it once
        // (host/agents/failurePatterns.ts). A built-in's refusal is the model's misuse, not a broken tool.
        if (!BUILTIN_TOOLS.has(call.name)) host.toolFailed(agent, call, result.errorClass ?? result.errorCode ?? 'TOOL_FAILED');
      } else agent.tracker.recordSuccess(call.name);
    }
    // After every tool result: a user message may not come between the answer and its results.
    const images = imagesItem(shown);
    if (images) items.push(images);
    return { outcome: state.settled ?? { kind: 'continue', lastTool }, items, started: scope.started };
  } finally {
    closeCancel(agent, controller);
  }
}

/**
 * Resolve the calls of the agent's last answer that have no result (a crash or a shutdown cut the
 * turn), each exactly once: the results go into the session with the turn's first transaction.
 * `started` lists re-run calls the ledger marked started again, to finish with those results.
 */
export async function resolveCutCalls(
  host: TurnHost,
  agent: AgentRef,
  open: readonly ToolCall[],
  turn: number,
  cycle: CycleScope,
): Promise<{ items: SessionItem[]; started: string[] }> {
  const controller = openCancel(host, agent, cycle);
  try {
    return await resolveCalls(host, agent, open, turn, cycle, controller.signal);
  } finally {
    closeCancel(agent, controller);
  }
}

async function resolveCalls(
  host: TurnHost,
  agent: AgentRef,
  open: readonly ToolCall[],
  turn: number,
  cycle: CycleScope,
  cancel: AbortSignal,
): Promise<{ items: SessionItem[]; started: string[] }> {
  const inDoubt = new Set((await host.ledger.started(agent)).filter((r) => r.turn === turn).map((r) => r.callId));
  const scope: CallScope = { turn, stintStart: turn, started: [], items: [] };
  const items: SessionItem[] = [];
  const shown: { call: ToolCall; images: readonly ToolImage[] }[] = [];
  for (const call of open) {
    const user = host.userTool(agent, call.name);
    const rerun = user ? user.risk === 'read_only' || user.idempotent === true : READ_ONLY_BUILTINS.has(call.name);
    if (rerun) {
      const state: TurnToolState = { settled: null, settledBy: null, waited: false, text: null };
      const result = await executeCall(host, agent, call, state, cycle, scope, cancel);
      if (cycle.aborted) throw cycle.reason;
      agent.logger.info({ tool: call.name, callId: call.id }, 'a tool call cut by a crash was re-run (read-only or idempotent)');
      items.push(resultItem(call, result.content, result.isError));
      if (result.images) shown.push({ call, images: result.images });
      continue;
    }
    // A built-in acts at once (spawn, message, stop): cut off, its effect is as uncertain as a started tool's.
    if (!user || inDoubt.has(call.id)) {
      agent.logger.warn({ tool: call.name, callId: call.id }, 'a tool call cut by a crash is in doubt; the model is told instead of re-running it');
      items.push(
        toolItem(
          call,
          {
            success: false,
            error: {
              code: 'TOOL_IN_DOUBT',
              message: `The process stopped while ${call.name} was running: it may or may not have taken effect. It was not re-run. Check its effect (for agents: view_agent_graph) before calling it again.`,
            },
          },
          true,
        ),
      );
    } else {
      items.push(
        toolItem(
          call,
          {
            success: false,
            error: { code: 'TOOL_NOT_RUN', message: `The process stopped before ${call.name} started: it had no effect. Call it again if it is still needed.` },
          },
          true,
        ),
      );
    }
  }
  // Rows of this turn's calls answered now (in doubt, not run) are closed with these results.
  for (const call of open) if (inDoubt.has(call.id) && !scope.started.includes(call.id)) scope.started.push(call.id);
  const images = imagesItem(shown);
  if (images) items.push(images);
  return { items, started: scope.started };
}

/** The waits whose result counts the messages waiting (a read of the mailbox). */
const WAITS_READING_MAIL: ReadonlySet<string> = new Set(['wait_for_agents', 'sleep_until']);

// Of the arguments as the model sent them (one-shot hash: no re-serialising, no Hash object per call).
const argsHash = (raw: string) => hash('sha256', raw, 'hex');

async function executeCall(
  host: TurnHost,
  agent: AgentRef,
  call: ToolCall,
  state: TurnToolState,
  cycle: CycleScope,
  scope: CallScope,
  cancel: AbortSignal,
): Promise<CallResult> {
  const builtin = BUILTIN_TOOLS.get(call.name);
  const user = builtin ? undefined : host.userTool(agent, call.name);
  if (!builtin && !user) {
    return fail(new TroupeError('TOOL_NOT_FOUND', `Unknown tool "${shortName(call.name)}". Available tools: ${host.toolNames(agent).join(', ')}`));
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
  // An agent with an output schema finishes with a `value`: checked apart from the tool's own arguments.
  const output = builtin && FINISH_TOOLS.has(call.name) ? host.outputCheck(agent) : null;
  const own = output ? withoutValue(args as Record<string, unknown>) : args;
  const invalid = (builtin ?? user)!.validate(own);
  if (invalid) return fail(invalid);

  if (builtin) {
    if (output) {
      const given = args as Record<string, unknown>;
      args = own;
      if (call.name === ownFinishTool(agent)) {
        const refused = refusedAttempts(host.sessions.items(agent), scope.stintStart) + refusedAttempts(scope.items, scope.stintStart);
        const checked = await checkFinishValue(output, call, given, {
          turn: scope.turn,
          refused,
          maxAttempts: host.options.limits.maxResultTries,
        });
        if (cycle.aborted) throw cycle.reason;
        if ('refusal' in checked) {
          if (checked.outcome) {
            state.settled = checked.outcome;
            state.settledBy = call.name;
          }
          return { content: checked.refusal, isError: true, deferred: false, errorCode: 'RESULT_INVALID' };
        }
        args = checked.args;
      }
    }
    // A replay's wait reports the count the recording's did, once that many messages have come.
    const reads = host.options.mailReads;
    if (reads && WAITS_READING_MAIL.has(call.name) && !state.waited) {
      let pinned = reads.take(agent.id, { callId: call.id }, () => host.sessions.pending(agent));
      if (pinned instanceof Promise) {
        pinned = await pinned;
        if (cycle.aborted) throw cycle.reason;
      }
      if (pinned !== null) state.pinned = pinned;
    }
    try {
      const out = builtin.run(args as Record<string, unknown>, host.builtinEnv(agent, call.id, state));
      if (state.read !== undefined) {
        host.mailRead(agent, { callId: call.id }, state.read);
        state.read = undefined;
      }
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
  const tool = user as CompiledTool;
  // Stopped: the user tools left in the turn are answered, not run (built-ins still act: a wait
  // answers "stopped"), and the agent stops when the turn ends.
  if (cancel.aborted) return fail(stoppedBefore(call));
  const approvals = host.options.approvals;
  const risk = tool.risk ?? 'mutation';
  if (approvals && risk !== 'read_only') {
    const decision = await untilAborted(
      approvals.request({ agentId: agent.id, agentName: agent.name, action: call.name, risk, args, callId: call.id }),
      cancel,
    );
    if (cycle.aborted) throw cycle.reason;
    // Stopped while the approval was pending: not run.
    if (decision === null) return fail(stoppedBefore(call));
    // A durable approval (host/async/approvals.ts): nothing ran; the answer comes as a message.
    if (decision.pending !== undefined) return { content: pendingApproval(call.name, decision.pending), isError: false, deferred: false };
    if (!decision.approved) {
      return fail(new TroupeError('APPROVAL_DENIED', `${call.name} was not approved: ${decision.reason}`, { details: { risk } }));
    }
  }
  if (tracked(tool)) {
    // Durable before the tool acts: after a crash, this row (and the answer that asked for the
    // call) is what says the call may have taken effect.
    host.ledger.start(agent, { turn: scope.turn, callId: call.id, tool: call.name, argsHash: argsHash(call.arguments) });
    scope.started.push(call.id);
    await host.durable();
    if (cycle.aborted) throw cycle.reason;
    if (cancel.aborted) return fail(stoppedBefore(call));
  }
  const startedAt = host.clock.now();
  try {
    const key = idempotencyKey(host, agent, scope.turn, call.id);
    const result = await host.runTool(agent, tool, args as Record<string, unknown>, cancel, key);
    host.toolEnded(agent, call, startedAt);
    if (isToolOutput(result))
      return { content: stringify(result.value), isError: false, deferred: false, ...(result.images.length > 0 ? { images: result.images } : {}) };
    return { content: stringify(result), isError: false, deferred: false };
  } catch (err) {
    if (cycle.aborted) throw err;
    // Refused before it began (a stop, a lost lease): it never ran, so it did not end.
    if (!(err instanceof TroupeError && err.code === 'TOOL_NOT_RUN')) host.toolEnded(agent, call, startedAt);
    if (cancel.aborted) {
      // The stop's abort, not the tool's failure: a call the queue never started had no effect.
      if (err instanceof TroupeError && err.code === 'TOOL_NOT_RUN') return fail(stoppedBefore(call));
      agent.logger.warn({ tool: call.name }, 'tool cancelled: the agent was stopped');
      return fail(
        new TroupeError(
          'TOOL_CANCELLED',
          `${call.name} was cancelled: the agent was stopped while it ran. Whether it took effect is unknown; check before calling it again.`,
        ),
      );
    }
    agent.logger.warn({ err: toError(err), tool: call.name }, 'tool failed');
    return fail(err instanceof TroupeError ? err : new TroupeError('TOOL_FAILED', `${call.name} failed: ${toError(err).message}`, { cause: err }));
  }
}

const pendingApproval = (tool: string, id: string) =>
  JSON.stringify({
    approval: 'pending',
    approval_id: id,
    note: `${tool} needs a person's approval and has not run. Call wait_for_agents to park until the answer arrives as a message (it says whether ${tool} ran and its result), or go on with other work.`,
  });

const withoutValue = ({ value: _value, ...rest }: Record<string, unknown>) => rest;

/** A call that failed: its error as the tool result (a function, not a closure per call). */
const fail = (err: unknown): CallResult => ({
  content: errorContent(err),
  isError: true,
  deferred: false,
  errorCode: serializeError(err).code,
  errorClass: errorClassOf(err),
});

const stringify = (result: unknown) => (result === undefined ? 'null' : typeof result === 'string' ? result : JSON.stringify(result));

/** `promise`'s value, or null as soon as `signal` aborts (the promise is left to settle unobserved). */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T | null> {
  if (signal.aborted) return Promise.resolve(null);
  return new Promise<T | null>((resolve, reject) => {
    const onAbort = () => resolve(null);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => (signal.removeEventListener('abort', onAbort), resolve(value)),
      (err: unknown) => (signal.removeEventListener('abort', onAbort), reject(err)),
    );
  });
}
