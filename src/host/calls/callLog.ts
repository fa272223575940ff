/**
 * The call log (issue 37): what a replay needs that the other rows do not keep. Each model call
 * becomes one `replay.call` event, staged when it is answered (so it commits with the answer, no
 * commit of its own): who asked, which turn, the request as what changed since that agent's last
 * call of the same purpose (`keep` items of the last request, then `add`; the system prompt and the
 * tools only when they changed), and the answer with its usage or the error it ended with.
 * Each input from outside the run (a message, a stop, a budget pause or resume, an execution's or a
 * delegation's end, an approval's answer) becomes a `replay.input` event staged with its effect,
 * and each user tool's end a `replay.tool` event staged as its result comes back (it rides the
 * commit its turn makes anyway: the next tracked tool's ledger row or the turn's results), and
 * each mailbox read that took messages a `replay.read` event with how many (it rides the commit of
 * what it read: the delivery, the wait's result). The event ids order them all as the owner applied them.
 *
 * Recording costs O(new items) per call: a session only grows (a rewrite replaces the array), so
 * the prefix the last request shared with this one is found by identity.
 * @module
 */
import { isTroupeError, serializeError } from '../../errors.js';
import type { McpToolOrigin } from '../../mcp/tools.js';
import type { ModelRequest, ModelTurn, SessionItem, ToolSpec, UsagePurpose } from '../../model/types.js';
import type { Read } from '../../tools/ports.js';
import type { MailRead } from '../../turn/ports.js';
import { CALL_EVENT, INPUT_EVENT, READ_EVENT, TOOL_EVENT, type EventRow } from '../../store/types.js';

/** One model call as the log holds it (the event's `at` is when it was answered). */
export interface RecordedCall {
  agentId: string;
  name: string;
  turn: number;
  purpose: UsagePurpose;
  /** When the call left the queue for the model. */
  t0: number;
  /** Items of this agent's previous request (same purpose) that open this one. */
  keep: number;
  /** The items that follow them. */
  add: SessionItem[];
  /** Set on the agent's first call and whenever it changed. */
  system?: string;
  /**
   * Set with `system`'s rule: which of the run's distinct tool lists the agent now has (numbered in
   * the order the log met them). `tools` holds the list itself only where the log met it first:
   * a team's agents mostly share one or two lists, which were half of the log's bytes when every
   * agent's first call repeated them (4.3 of 8.4 MB for 1,000 children).
   */
  toolSet?: number;
  tools?: readonly ToolSpec[];
  /**
   * Written with `tools`: where each of its MCP tools comes from, by the name offered (the server,
   * its own name, its hints) — what a replay offers them with, connecting to no server.
   */
  mcp?: Record<string, McpToolOrigin>;
  answer?: ModelTurn;
  error?: RecordedError;
  /** The call was cut short (a stop, an interrupting message): it was never answered. */
  aborted?: true;
  /**
   * Its answer came in the same burst as the previous call's: no microtask ran between them (one
   * timer callback resolved both). A replay answers such calls together, so their effects
   * interleave as they did; other answers each settle before the next.
   */
  burst?: true;
  /**
   * Its answer came before the group commit holding the step before it was done (that step's
   * effects — a notice, a wake — had not run): two answers of one timer phase, say. A replay
   * answers it in the same commit window.
   */
  window?: true;
}

interface RecordedError {
  code: string;
  message: string;
  /** A ProviderError (classified at the boundary); otherwise the model threw something else. */
  provider: boolean;
  status?: number;
  retryAfterMs?: number;
}

/** One input from outside the run, as applied (`kind` as the inbox names it). */
export interface RecordedInput {
  kind: 'send' | 'stop' | 'pause' | 'resume' | 'execution' | 'delegation' | 'approval';
  payload: Record<string, unknown>;
  /** Applied before the commit holding the step before it was done (as a call's `window`). */
  window?: true;
}

/** A call under way: answered or failed exactly once. */
export interface CallEntry {
  answered(turn: ModelTurn): ModelTurn;
  failed(err: unknown, aborted: boolean): void;
}

interface Last {
  items: readonly SessionItem[];
  length: number;
  system: string;
  tools: readonly ToolSpec[];
}

export class CallLog {
  readonly #stage: (row: EventRow) => void;
  readonly #runId: string;
  readonly #now: () => number;
  /**
   * Each agent's last request, by purpose then agent id: the id string is the agent's own (its hash
   * is cached), where a `purpose:id` key was a new string to build and hash on every call. A `Last`
   * is updated in place, not allocated per call.
   */
  readonly #last: Record<UsagePurpose, Map<string, Last>> = { main: new Map(), compaction: new Map(), review: new Map(), summary: new Map() };
  /** The tool lists met so far, by identity and (for a list equal to one met before) by content. */
  readonly #toolSets = new Map<readonly ToolSpec[], number>();
  readonly #toolTexts = new Map<string, number>();
  /** Each set's list, by its number. */
  readonly #lists: (readonly ToolSpec[])[] = [];
  /** Each set's MCP tools' origins, taken when the log met it (the servers' tools may change later). */
  readonly #origins: (Record<string, McpToolOrigin> | undefined)[] = [];
  readonly #origin: (name: string) => McpToolOrigin | undefined;
  /** The sets some written entry holds in full (calls are answered, so written, out of order). */
  readonly #written = new Set<number>();
  /** An answer was written and no microtask has run since. */
  #inBurst = false;
  /** Queued after the first answer of a burst (one function for the log's life, not a closure per answer). */
  readonly #endBurst = (): void => {
    this.#inBurst = false;
  };
  readonly #flushes: () => number;
  /** The committer's flushes when the last step (a call answered, an input) was written. */
  #stepFlushes = -1;

  constructor(deps: { stage(row: EventRow): void; runId: string; now(): number; flushes(): number; origin?(name: string): McpToolOrigin | undefined }) {
    this.#stage = deps.stage;
    this.#origin = deps.origin ?? (() => undefined);
    this.#runId = deps.runId;
    this.#now = deps.now;
    this.#flushes = deps.flushes;
  }

  /** A call leaves for the model: its request is taken now (a session grows while it runs). */
  begin(request: ModelRequest, source: { items: readonly SessionItem[]; length: number }): CallEntry {
    const purpose = request.purpose ?? 'main';
    const lasts = this.#last[purpose];
    const last = lasts.get(request.agent.id);
    const { items, length } = source;
    let keep = 0;
    if (last) {
      const max = Math.min(last.length, length);
      if (last.items === items) keep = max;
      else while (keep < max && last.items[keep] === items[keep]) keep++;
    }
    const call: RecordedCall = {
      agentId: request.agent.id,
      name: request.agent.name,
      turn: request.turn,
      purpose,
      t0: this.#now(),
      keep,
      add: items.slice(keep, length),
    };
    if (last?.system !== request.system) call.system = request.system;
    if (last?.tools !== request.tools) this.#toolSet(call, request.tools);
    if (last === undefined) lasts.set(request.agent.id, { items, length, system: request.system, tools: request.tools });
    else {
      last.items = items;
      last.length = length;
      last.system = request.system;
      last.tools = request.tools;
    }
    return {
      answered: (turn) => {
        if (turn && Array.isArray(turn.toolCalls)) call.answer = answerOf(turn);
        else call.error = { code: 'PROVIDER_INVALID_RESPONSE', message: 'The model returned no turn (expected { text, toolCalls })', provider: true };
        this.#write(call);
        return turn;
      },
      failed: (err, aborted) => {
        if (aborted) call.aborted = true;
        else call.error = errorOf(err);
        this.#write(call);
      },
    };
  }

  /** An input from outside, staged with its effect. */
  input(input: RecordedInput, agentId: string | null = null): void {
    const flushes = this.#flushes();
    const data: RecordedInput = flushes === this.#stepFlushes ? { ...input, window: true } : { ...input };
    this.#stepFlushes = flushes;
    this.#stage({ runId: this.#runId, agentId, type: INPUT_EVENT, data: data as unknown as Record<string, unknown>, at: this.#now() });
  }

  /**
   * A user tool failed: the class of its error (its result holds the code and message), which the
   * team's failure patterns count — a replay's recorded failure must count the same.
   */
  toolFailed(agentId: string, callId: string, errorClass: string): void {
    this.#stage({ runId: this.#runId, agentId, type: TOOL_EVENT, data: { callId, errorClass }, at: this.#now() });
  }

  /**
   * A user tool's execution ended (its result or its failure came back): when it ended among the
   * answers and inputs is what a replay gives its recorded result by — a message applied while it
   * ran, or another agent's answer, comes before it or after it as it did. `startedAt`: when it
   * began (one that ended in the instant it began had no latency to order).
   */
  toolEnded(agentId: string, callId: string, startedAt: number): void {
    const flushes = this.#flushes();
    // Ended before the commit holding the step before it was done (as a call's `window`).
    const data = flushes === this.#stepFlushes ? { callId, ended: true, t0: startedAt, window: true } : { callId, ended: true, t0: startedAt };
    this.#stepFlushes = flushes;
    this.#stage({ runId: this.#runId, agentId, type: TOOL_EVENT, data, at: this.#now() });
  }

  /**
   * A mailbox read took `count` (> 0) messages: a turn's (the ones it reads), or a wait tool's (the
   * count it reports). Staged with what it read (the delivery, the wait's result), no commit of its
   * own; a read of none is not recorded (a recording holding no read took none, or predates them).
   * `last: true` only when the wait said so (a recording without it: not the last).
   */
  mailRead(agentId: string, read: MailRead, { count, last }: Read): void {
    this.#stage({ runId: this.#runId, agentId, type: READ_EVENT, data: last ? { ...read, count, last } : { ...read, count }, at: this.#now() });
  }

  /** The agent is gone from this host (it finished): its next call, if revived, records in full. */
  forget(agentId: string): void {
    for (const lasts of Object.values(this.#last)) lasts.delete(agentId);
  }

  /** Record which tool list `call` uses (numbered; written in full with the first entry that names it). */
  #toolSet(call: RecordedCall, tools: readonly ToolSpec[]): void {
    let set = this.#toolSets.get(tools);
    if (set === undefined) {
      const text = JSON.stringify(tools);
      set = this.#toolTexts.get(text);
      if (set === undefined) {
        set = this.#lists.push(tools) - 1;
        this.#toolTexts.set(text, set);
        const origins = tools.flatMap((t) => {
          const origin = this.#origin(t.name);
          return origin ? [[t.name, origin] as const] : [];
        });
        this.#origins[set] = origins.length === 0 ? undefined : Object.fromEntries(origins);
      }
      this.#toolSets.set(tools, set);
    }
    call.toolSet = set;
  }

  #write(call: RecordedCall): void {
    if (call.toolSet !== undefined && !this.#written.has(call.toolSet)) {
      this.#written.add(call.toolSet);
      call.tools = this.#lists[call.toolSet];
      const origins = this.#origins[call.toolSet];
      if (origins) call.mcp = origins;
    }
    const flushes = this.#flushes();
    if (flushes === this.#stepFlushes) call.window = true;
    this.#stepFlushes = flushes;
    if (this.#inBurst) call.burst = true;
    else {
      this.#inBurst = true;
      queueMicrotask(this.#endBurst);
    }
    this.#stage({ runId: this.#runId, agentId: call.agentId, type: CALL_EVENT, data: call as unknown as Record<string, unknown>, at: this.#now() });
  }
}

/** The answer's fields a replay gives back (a model's own extra fields are not troupe's). */
function answerOf(turn: ModelTurn): ModelTurn {
  const out: ModelTurn = { text: turn.text ?? null, toolCalls: turn.toolCalls.map((c) => ({ id: c.id, name: c.name, arguments: c.arguments })) };
  if (turn.refusal !== undefined) out.refusal = turn.refusal;
  if (turn.usage !== undefined) out.usage = { ...turn.usage };
  if (turn.invalidUsage !== undefined) out.invalidUsage = turn.invalidUsage;
  if (turn.model !== undefined) out.model = turn.model;
  return out;
}

function errorOf(err: unknown): RecordedError {
  const e = serializeError(err);
  const out: RecordedError = { code: e.code, message: e.message, provider: isTroupeError(err) && e.code.startsWith('PROVIDER_') };
  const { status, retryAfterMs } = (err ?? {}) as { status?: unknown; retryAfterMs?: unknown };
  if (typeof status === 'number') out.status = status;
  if (typeof retryAfterMs === 'number') out.retryAfterMs = retryAfterMs;
  return out;
}
