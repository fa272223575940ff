/**
 * One tool call of a turn: its arguments parsed and checked (a finish tool's `value` against the
 * agent's output schema), a built-in run at once, a user tool asked for approval, marked started in
 * the in-doubt ledger before it may act (toolCalls.ts says why), run through the tool queue with
 * its idempotency key, and its result or error shaped for the session. A turn's calls, their order,
 * a stop's cancellation and the calls a crash cut are toolCalls.ts's.
 * @module
 */
import { hash } from 'node:crypto';
import type { CycleScope } from '../cancel.js';
import { serializeError, TroupeError, toError } from '../errors.js';
import { errorClassOf } from './fingerprint.js';
import type { ToolCall, SessionItem } from '../model/types.js';
import { BUILTIN_TOOLS } from '../tools/builtin.js';
import type { TurnToolState } from '../tools/builtinKit.js';
import type { CompiledTool } from '../tools/defineTool.js';
import { isToolOutput, type ToolImage } from '../tools/toolOutput.js';
import { checkFinishValue, FINISH_TOOLS, ownFinishTool, refusedAttempts } from './finishValue.js';
import type { AgentRef, TurnHost } from './ports.js';

/** What one call answered: the session's tool result, and what the turn does with it. */
export interface CallResult {
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
export interface CallScope {
  turn: number;
  /** The first turn of the agent's stint (finish-value attempts count from it). */
  stintStart: number;
  started: string[];
  /** This turn's results so far (a value refused earlier in the turn counts). */
  items: readonly SessionItem[];
}

/**
 * A name the model made up, as an error repeats it: at most 200 characters. The error goes back
 * into the session, where a hostile 512 KB name was copied on every later call (wireFuzz).
 */
const shortName = (name: string) => (name.length <= 200 ? name : `${name.slice(0, 200)}… (${name.length} characters)`);

const errorContent = (err: unknown) => {
  const e = serializeError(err);
  return JSON.stringify({ success: false, error: { code: e.code, message: e.message } });
};

/** The key a tool call keeps across restarts. */
const idempotencyKey = (host: TurnHost, agent: AgentRef, turn: number, callId: string) => `${host.runId}:${agent.id}:${turn}:${callId}`;

const stoppedBefore = (call: ToolCall) =>
  new TroupeError('TOOL_NOT_RUN', `Not run: the agent was stopped before ${call.name} started, so it had no effect. Call it again if it is still needed.`);

/** Whether the ledger tracks this user tool: anything that may have effects. */
const tracked = (tool: CompiledTool) => (tool.risk ?? 'mutation') !== 'read_only';

/** The waits whose result counts the messages waiting (a read of the mailbox). */
const WAITS_READING_MAIL: ReadonlySet<string> = new Set(['wait_for_agents', 'sleep_until']);

// Of the arguments as the model sent them (one-shot hash: no re-serialising, no Hash object per call).
const argsHash = (raw: string) => hash('sha256', raw, 'hex');

export async function executeCall(
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
