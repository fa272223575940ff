/**
 * What a replayed request is checked against: the recorded request of the same agent and turn,
 * rebuilt from the call log (each call keeps `keep` items of that agent's previous request and adds
 * the rest), and the first difference found, said in a line: where, what the recording had, what
 * the code asks now.
 *
 * Each call compares only what is new: an item the previous request of the agent already had (the
 * same object on both sides) was compared then. O(new items) per call, apart from pointer checks.
 * @module
 */
import type { RecordedCall } from '../host/calls/callLog.js';
import type { ModelRequest, SessionItem, ToolSpec } from '../model/types.js';

/** A request the code made that the recording did not (`request`), a different tool result or run (`tool call`), a different message from an agent or troupe (`notice`). */
export type DivergenceKind = 'request' | 'tool call' | 'notice';

/** The first place where the code now does what the recording did not. */
export interface Divergence {
  /** The agent's name and id. */
  agent: string;
  agentId: string;
  /** Its turn (1-based within its stint, as its request says). */
  turn: number;
  kind: DivergenceKind;
  /** What differs: where, the recorded value, the value now (clipped around the first difference). */
  diff: string;
}

interface Expected {
  messages: SessionItem[];
  system: string;
  tools: readonly ToolSpec[];
}

interface Seen {
  now: readonly SessionItem[];
  recorded: readonly SessionItem[];
  /** Items compared equal, from the start. */
  verified: number;
}

export class Requests {
  readonly #expected = new Map<string, Expected>();
  readonly #seen = new Map<string, Seen>();
  /** Recorded tool lists already found equal to the code's list (by identity, both never change). */
  readonly #sameTools = new WeakMap<readonly ToolSpec[], readonly ToolSpec[]>();

  /** Check `request` against the recorded `call` (calls of one agent and purpose must come in order). */
  check(call: RecordedCall, request: ModelRequest): Divergence | null {
    const key = `${call.purpose}:${call.agentId}`;
    const last = this.#expected.get(key);
    const expected: Expected = {
      messages: (last ? last.messages.slice(0, call.keep) : []).concat(call.add),
      system: call.system ?? last?.system ?? '',
      tools: call.tools ?? last?.tools ?? [],
    };
    this.#expected.set(key, expected);
    const at = (kind: DivergenceKind, diff: string): Divergence => ({ agent: call.name, agentId: call.agentId, turn: call.turn, kind, diff });
    if (request.turn !== call.turn) return at('request', `turn: recorded ${call.turn}, now ${request.turn}`);
    if (request.system !== expected.system) return at('request', `system prompt: ${textDiff(expected.system, request.system)}`);
    if (this.#sameTools.get(expected.tools) !== request.tools) {
      const tools = toolsDiff(expected.tools, request.tools);
      if (tools !== null) return at('request', tools);
      // An agent's calls share both lists: compared once, not per call (it was 9 % of a replay).
      this.#sameTools.set(expected.tools, request.tools);
    }
    const now = request.messages;
    const seen = this.#seen.get(key);
    const n = Math.max(now.length, expected.messages.length);
    let i = 0;
    if (seen) {
      const max = Math.min(seen.verified, now.length, expected.messages.length);
      // The first `keep` recorded items are the last request's, the very objects verified then.
      const kept = seen.recorded === last?.messages ? Math.min(max, call.keep) : 0;
      const before = seen.now;
      while (i < kept && now[i] === before[i]) i++;
      if (i === kept) while (i < max && now[i] === before[i] && expected.messages[i] === seen.recorded[i]) i++;
    }
    const differs = firstDifference(expected.messages, now, i);
    if (differs) {
      this.#seen.delete(key);
      return at(differs.kind, `message ${differs.diff}`);
    }
    this.#seen.set(key, { now, recorded: expected.messages, verified: n });
    return null;
  }
}

/**
 * Where an agent's session now first differs from the recorded one, after its last call: an
 * answer's effects (a tool result, a notice) the requests never showed.
 */
export function sessionDiff(
  agent: { id: string; name: string; turns: number },
  recorded: readonly SessionItem[],
  now: readonly SessionItem[],
): Divergence | null {
  const differs = firstDifference(recorded, now, 0);
  if (!differs) return null;
  return { agent: agent.name, agentId: agent.id, turn: agent.turns, kind: differs.kind, diff: `session item ${differs.diff}` };
}

/** The first item of `now` unlike `expected`'s from `from` on, said as `<n> of <m> (<what>): <diff>`. */
function firstDifference(expected: readonly SessionItem[], now: readonly SessionItem[], from: number): { kind: DivergenceKind; diff: string } | null {
  const n = Math.max(now.length, expected.length);
  for (let i = from; i < n; i++) {
    const a = expected[i];
    const b = now[i];
    if (a === b || sameJson(a, b)) continue;
    const ja = a === undefined ? '(none)' : JSON.stringify(a);
    const jb = b === undefined ? '(none)' : JSON.stringify(b);
    if (ja === jb) continue;
    return { kind: kindOf(a, b), diff: `${i + 1} of ${expected.length} (${describe(a ?? b!)}): ${textDiff(ja, jb)}` };
  }
  return null;
}

/**
 * Whether `a` and `b` surely serialise alike: plain values, arrays and objects with the same keys
 * in the same order (undefined-valued keys skipped, as JSON skips them). False is not "differ":
 * anything else (a toJSON, an undefined in an array, NaN) is left to JSON.stringify. Two
 * stringifies per new item were a third of a replay's own time.
 */
function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return typeof a === 'number' ? Number.isFinite(a) : typeof a === 'string' || typeof a === 'boolean' || typeof a === 'object';
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (a[i] === undefined || !sameJson(a[i], b[i])) return false;
    return true;
  }
  if (Array.isArray(b) || !plain(a) || !plain(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  const va = a as Record<string, unknown>;
  const vb = b as Record<string, unknown>;
  let j = 0;
  for (const k of ka) {
    if (va[k] === undefined) continue;
    while (j < kb.length && vb[kb[j]!] === undefined) j++;
    if (kb[j] !== k || !sameJson(va[k], vb[k])) return false;
    j++;
  }
  while (j < kb.length && vb[kb[j]!] === undefined) j++;
  return j === kb.length;
}

/** An object JSON writes as its own keys: no boxed value, no toJSON. */
const plain = (o: object): boolean => {
  const proto: unknown = Object.getPrototypeOf(o);
  return (proto === Object.prototype || proto === null) && !('toJSON' in o);
};

/** Which kind a differing item says: a tool's result, a message from an agent or troupe, or anything else of the request. */
function kindOf(a: SessionItem | undefined, b: SessionItem | undefined): DivergenceKind {
  const item = a ?? b!;
  if (item.role === 'tool' || (item.role === 'assistant' && item.toolCalls)) return 'tool call';
  const isNotice = (x: SessionItem | undefined) => x?.role === 'user' && typeof x.content === 'string' && x.content.startsWith('[Message from ');
  return isNotice(a) || isNotice(b) ? 'notice' : 'request';
}

function describe(item: SessionItem): string {
  if (item.role === 'tool') return `result of ${item.name} ${item.toolCallId}`;
  return item.role;
}

function toolsDiff(recorded: readonly ToolSpec[], now: readonly ToolSpec[]): string | null {
  if (recorded === now) return null;
  const names = (list: readonly ToolSpec[]) => list.map((t) => t.name).join(', ');
  if (names(recorded) !== names(now)) return `tools: recorded [${names(recorded)}], now [${names(now)}]`;
  for (let i = 0; i < now.length; i++) {
    const a = recorded[i]!;
    const b = now[i]!;
    if (a.description !== b.description) return `tool ${b.name} description: ${textDiff(a.description, b.description)}`;
    const pa = JSON.stringify(a.parameters);
    const pb = JSON.stringify(b.parameters);
    if (pa !== pb) return `tool ${b.name} parameters: ${textDiff(pa, pb)}`;
  }
  return null;
}

const CONTEXT = 40;

/** `recorded «…» now «…»`, each clipped to the neighbourhood of the first differing character. */
function textDiff(recorded: string, now: string): string {
  let i = 0;
  while (i < recorded.length && i < now.length && recorded[i] === now[i]) i++;
  const clip = (s: string) => {
    const from = Math.max(0, i - CONTEXT);
    const to = Math.min(s.length, i + CONTEXT);
    return `${from > 0 ? '…' : ''}${s.slice(from, to)}${to < s.length ? '…' : ''}`;
  };
  return `recorded «${clip(recorded)}» now «${clip(now)}»`;
}
