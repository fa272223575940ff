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
import type { TurnOutcome } from '../../machines/types.js';
import type { CycleScope } from '../cancel.js';
import { serializeError } from '../errors.js';
import type { ContentPart, SessionItem, ToolCall } from '../model/types.js';
import { BUILTIN_TOOLS } from '../tools/builtin.js';
import type { TurnToolState } from '../tools/builtinKit.js';
import type { ToolImage } from '../tools/toolOutput.js';
import type { AgentRef, TurnHost } from './ports.js';
import { executeCall, type CallResult, type CallScope } from './toolCall.js';

/** The tool results of a turn, and the calls the ledger marked started (finished with the turn's commit). */
export interface ToolsResult {
  outcome: TurnOutcome;
  items: SessionItem[];
  started: string[];
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

/** A call the turn could not finish because a bug escaped (the turn crashes; its outcome is unknown). */
const interruptedResult = (call: ToolCall): SessionItem =>
  toolItem(call, { success: false, error: { code: 'INTERNAL', message: 'The turn was interrupted before this call finished; its outcome is unknown.' } }, true);

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
