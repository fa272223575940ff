/**
 * The user tools' recorded results in a replay (issue 37's driver): which result a call gets, and
 * when. A tool whose end the recording kept (a `tool` step) gives its result at that step: the
 * answers and inputs the recording applied while it ran come first, the ones after it after. A
 * recording without tool ends (made before the call log kept them) gives a result once the steps
 * committed before the commit holding it are applied (`ToolResult.after`), in commit order.
 * @module
 */
import { TroupeError, isErrorCode, type ErrorCode } from '../errors.js';
import type { Tool, ToolContext } from '../tools/defineTool.js';
import { toolOutput } from '../tools/toolOutput.js';
import type { Divergence } from './compare.js';
import { toolKey, type Recording } from './recording.js';

/** What the results need of the replay's state. */
export interface ResultsState {
  /** The next step to apply. */
  cursor(): number;
  /** The first restart still to come (its step), or Infinity. */
  nextRestart(): number;
  /** Which process of the recording the code now is. */
  epoch(): number;
  /** Whether the replay has diverged or gone live: every held result is due. */
  over(): boolean;
  diverge(divergence: Divergence): void;
  /** The code moved (a tool was called, a result given). */
  moved(): void;
}

interface Held {
  /** Given at this `tool` step; or, with none recorded (-1), once `after` steps are applied. */
  end: number;
  after: number;
  order: number;
  give(): void;
}

/** What a tool gives that ended in a process the recording shows dying before its result was kept. */
const LOST = 'its result was lost with the process';

export class ToolResults {
  readonly #recording: Recording;
  readonly #state: ResultsState;
  #held: Held[] = [];
  /** Per tool call (`toolKey`): the steps where its executions ended, in order. */
  readonly #ends = new Map<string, number[]>();

  constructor(recording: Recording, state: ResultsState) {
    this.#recording = recording;
    this.#state = state;
    recording.steps.forEach((step, i) => {
      if (step.kind === 'tool') this.#ends.set(step.key, [...(this.#ends.get(step.key) ?? []), i]);
    });
  }

  /** Results held for a step still to come. */
  get holding(): boolean {
    return this.#held.length > 0;
  }

  /** A restart: what the dead process's tools waited for never comes. */
  clear(): void {
    this.#held = [];
  }

  /** The result `tool`'s call gets: at once, held for its step, or never (its process died with it under way). */
  result(tool: Tool, context: ToolContext): unknown {
    this.#state.moved();
    const key = toolKey(context.agentId, callIdOf(context));
    const next = this.#recording.toolResults.get(key)?.[0];
    const after = next?.after;
    // Its result came after the recording's process died (a recovery's, a re-run's): it never ends
    // here, unless it had ended in that process (its result lost with it).
    if (after !== undefined && after > this.#state.nextRestart()) {
      return this.#recording.endedUnrecorded.has(`${this.#state.epoch()}:${key}`) ? LOST : new Promise(() => {});
    }
    // Its end as recorded: the first not passed yet (an execution lost with a dead process passed its own).
    const ends = this.#ends.get(key);
    while (ends && ends.length > 0 && ends[0]! < this.#state.cursor()) ends.shift();
    const end = ends?.shift() ?? -1;
    // The recorded tool took its time: what the recording applied while it ran comes first, and the
    // results the recording committed before it (`release`).
    if (after === undefined && end < 0) return this.#recorded(tool, context);
    return new Promise((resolve, reject) =>
      this.#held.push({
        end,
        after: after ?? 0,
        order: next?.order ?? 0,
        give: () => {
          try {
            resolve(this.#recorded(tool, context));
          } catch (err) {
            reject(err);
          }
        },
      }),
    );
  }

  /** Whether the code has called the tool that ended at `tool` step `step` (its result is held for it). */
  holds(step: number): boolean {
    return this.#held.some((h) => h.end === step);
  }

  /** Give the result held for `tool` step `step`; false if none is (the code has not called it). */
  end(step: number): boolean {
    const held = this.#held.find((h) => h.end === step);
    if (!held) return false;
    this.#held = this.#held.filter((h) => h !== held);
    this.#state.moved();
    held.give();
    return true;
  }

  /** Give the held results whose steps are applied (all of them if `all`); whether any was. */
  release(all = false): boolean {
    if (this.#held.length === 0) return false;
    const over = all || this.#state.over();
    const due = this.#held.filter((h) => over || (h.end < 0 && h.after <= this.#state.cursor()));
    if (due.length === 0) return false;
    // One at a time, in the order the recording committed them, each settling before the next:
    // what each sets going (the answer's next tool, a message and its id) comes in that order.
    const first = over ? due : [due.reduce((a, b) => (b.order < a.order ? b : a))];
    this.#held = this.#held.filter((h) => !first.includes(h));
    this.#state.moved();
    for (const h of first) h.give();
    return true;
  }

  #recorded(tool: Tool, context: ToolContext): unknown {
    const callId = callIdOf(context);
    const result = this.#recording.toolResults.get(toolKey(context.agentId, callId))?.shift();
    if (!result) {
      this.#state.diverge({
        agent: context.agentName,
        agentId: context.agentId,
        turn: 0,
        kind: 'tool call',
        diff: `the code ran ${tool.name} (${callId}); the recording has no result of it`,
      });
      throw new TroupeError('TOOL_FAILED', `${tool.name} is not in the recording`);
    }
    if (!result.isError) return result.images ? toolOutput(result.content, result.images) : result.content;
    const recorded = parseError(result.content);
    // The class the failure patterns counted: `TOOL_FAILED:<what it wrapped>` (fingerprint.ts).
    const errorClass = this.#recording.toolErrors.get(toolKey(context.agentId, callId))?.shift();
    const wrapped = errorClass?.startsWith(`${recorded.code}:`) ? errorClass.slice(recorded.code.length + 1) : null;
    throw new TroupeError(recorded.code, recorded.message, wrapped === null ? {} : { cause: { code: wrapped } });
  }
}

/** The tool call's id: its key is `<run>:<agent>:<turn>:<call id>` (turn/toolCall.ts). */
function callIdOf(context: ToolContext): string {
  const rest = context.idempotencyKey.slice(`${context.runId}:${context.agentId}:`.length);
  return rest.slice(rest.indexOf(':') + 1);
}

/** A failed tool's recorded result is `{ success: false, error: { code, message } }` (turn/toolCall.ts). */
function parseError(content: string): { code: ErrorCode; message: string } {
  try {
    const parsed = JSON.parse(content) as { error?: { code?: unknown; message?: unknown } };
    const code = parsed.error?.code;
    if (isErrorCode(code)) return { code, message: String(parsed.error?.message ?? '') };
  } catch {
    // not JSON: said as it was
  }
  return { code: 'TOOL_FAILED', message: content };
}
