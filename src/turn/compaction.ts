/**
 * Keeping a session within what the model takes (DESIGN §4, seed 002). Before every call: only the
 * newest `session.maxImages` images stay, and a prompt estimated past `session.compactAt` of the
 * model's context window is compacted first. After a rejection: a context overflow compacts the
 * session — older items summarised by the same model, a call metered as `compaction` — and a
 * request rejected while the session holds images replaces every image with a placeholder. Each
 * rewrites the session in one transaction that refuses to overwrite items it did not see.
 * @module
 */
import { serializeError } from '../errors.js';
import { estimatePromptTokens } from '../model/prices.js';
import type { ContentPart, ModelRequest, SessionItem } from '../model/types.js';
import type { AgentRef, Halt, TurnHost } from './ports.js';
import { transcript } from './texts.js';

export const IMAGE_PLACEHOLDER = '[image rejected by the model]';
export const SUMMARY_HEADER = '[Earlier conversation, summarised to fit the context window]';

const SUMMARY_SYSTEM = [
  'You compress the history of an agent working on a task so that it can continue without the full transcript.',
  'Write a faithful, dense summary: the goal, decisions made, facts and results found (with exact identifiers, names, numbers and paths),',
  'agents spawned and what they reported, what is still open, and what the agent was doing last. Do not invent anything. Plain text only.',
].join(' ');

/** Each entry of the summarised transcript is clipped to this many characters. */
const MAX_ITEM_CHARS = 4_000;

/** The session with every image replaced by a placeholder, or null if it holds none. */
export function withoutImages(items: readonly SessionItem[]): SessionItem[] | null {
  let changed = false;
  const out = items.map((item): SessionItem => {
    if (item.role !== 'user' || typeof item.content === 'string' || !item.content.some((p) => p.type === 'image')) return item;
    changed = true;
    return { role: 'user', content: item.content.map((p): ContentPart => (p.type === 'image' ? { type: 'text', text: IMAGE_PLACEHOLDER } : p)) };
  });
  return changed ? out : null;
}

/** What replaces an image past the session's image budget. */
export const imageDroppedText = (kept: number) => `[image removed: only the newest ${kept} images are kept in this conversation]`;

/**
 * The session with all but its newest `max` images replaced by a placeholder, or null if it holds
 * no more than `max`. Counted from the end, so the images the agent saw last are the ones kept.
 */
export function withNewestImages(items: readonly SessionItem[], max: number): SessionItem[] | null {
  let seen = 0;
  let out: SessionItem[] | null = null;
  for (let i = items.length - 1; i >= 0; i--) {
    const item = items[i]!;
    if (item.role !== 'user' || typeof item.content === 'string') continue;
    const images = item.content.reduce((n, p) => n + (p.type === 'image' ? 1 : 0), 0);
    const room = Math.max(0, max - seen);
    seen += images;
    if (images <= room) continue;
    // Within one message the newest images are its last ones: the first `images - room` go.
    let drop = images - room;
    const parts = item.content.map((p): ContentPart => (p.type === 'image' && drop-- > 0 ? { type: 'text', text: imageDroppedText(max) } : p));
    out ??= items.slice();
    out[i] = { role: 'user', content: parts };
  }
  return out;
}

/** Keep only the newest `max` images of the agent's session; true if it rewrote the session. */
export function enforceImageBudget(host: TurnHost, agent: AgentRef, max: number): boolean {
  const items = host.sessions.items(agent);
  const kept = withNewestImages(items, max);
  return kept !== null && host.sessions.replace(agent, kept, items.length);
}

/** Whether the session holds an image. */
export const hasImages = (items: readonly SessionItem[]) =>
  items.some((item) => item.role === 'user' && typeof item.content !== 'string' && item.content.some((p) => p.type === 'image'));

/** Replace the agent's images with placeholders; false if it had none (or the session moved on). */
export function stripImages(host: TurnHost, agent: AgentRef): boolean {
  const items = host.sessions.items(agent);
  const stripped = withoutImages(items);
  return stripped !== null && host.sessions.replace(agent, stripped, items.length);
}

/**
 * Where the kept tail starts: about the newest quarter, beginning at an assistant item so that no
 * tool result loses its call — but never after the trailing user messages, which the agent has not
 * answered yet. 0 means nothing to compact.
 */
export function compactionCut(items: readonly SessionItem[]): number {
  const n = items.length;
  if (n < 3) return 0;
  let cut = Math.max(2, n - Math.floor((n - 1) / 4));
  while (cut < n && items[cut]!.role !== 'assistant') cut++;
  // The newest input (mail the agent has not answered yet) is never summarised away.
  let unanswered = n;
  while (unanswered > 1 && items[unanswered - 1]!.role === 'user') unanswered--;
  return Math.min(cut, unanswered);
}

/**
 * Whether a call should compact first: its prompt is estimated past `session.compactAt` of the
 * model's context window (seed 002). Synchronous, and free without a declared window: every turn asks.
 */
export function dueForCompaction(host: Pick<TurnHost, 'options'>, request: ModelRequest): boolean {
  const { contextWindow, compactAt } = host.options.session;
  return contextWindow !== null && estimatePromptTokens(request) >= compactAt * contextWindow;
}

/**
 * Compact before the call (`dueForCompaction`): true if the session was rewritten (build the request
 * again), a halt if the budget stopped the summary's call, false if nothing was compacted — then the
 * call goes ahead and an overflow is still recovered after the fact.
 */
export async function compactEarly(host: TurnHost, agent: AgentRef, turn: number, signal: AbortSignal): Promise<boolean | Halt> {
  try {
    const compacted = await compactSession(host, agent, turn, signal);
    if (compacted === true) agent.logger.info({ turn }, 'the session neared the context window; compacted it before the call');
    return compacted;
  } catch (err) {
    if (signal.aborted) throw err;
    agent.logger.warn({ err }, 'compaction before the call failed; the call goes ahead');
    return false;
  }
}

/**
 * Summarise all but the first item (identity and task) and the newest tail, with the agent's own
 * model. `false` when there is nothing to compact or the summary came back empty; `{halt}` when the
 * budget does not let the call start. A failing summary call throws (the overflow is then not
 * recovered).
 */
export async function compactSession(host: TurnHost, agent: AgentRef, turn: number, signal: AbortSignal): Promise<boolean | Halt> {
  const items = host.sessions.items(agent);
  const cut = compactionCut(items);
  const older = items.slice(1, cut);
  if (older.length === 0) return false;
  const request: ModelRequest = {
    agent: { id: agent.id, name: agent.name, parentId: agent.parentId, depth: agent.depth },
    system: SUMMARY_SYSTEM,
    messages: [{ role: 'user', content: `Summarise this part of the conversation:\n\n${transcript(older, MAX_ITEM_CHARS)}` }],
    tools: [],
    turn,
    purpose: 'compaction',
  };
  // Not reserved (it serves a turn already admitted), but re-checked like every call.
  const span = host.trace.chat(agent, request, 'compaction');
  let answer;
  try {
    answer = await host.gateway.call(agent, request, signal);
  } catch (err) {
    span.end({ error: serializeError(err).code });
    throw err;
  }
  if ('halt' in answer) {
    span.end({ halted: answer.halt.kind });
    return answer;
  }
  // Only main calls are parked by a breaker; a compaction that were would simply not happen.
  if ('parked' in answer) {
    span.end({ halted: 'parked' });
    return false;
  }
  span.end({ turn: answer.turn, charge: host.gateway.settle(agent, answer.turn, { purpose: 'compaction', request }) });
  const summary = answer.turn.text?.trim() ?? '';
  if (summary === '') return false;
  const first = items[0]!;
  const note = `${SUMMARY_HEADER}\n${summary}`;
  // One user message, not two: strict-alternation providers reject adjacent user messages.
  const head: SessionItem[] =
    first.role === 'user' && typeof first.content === 'string'
      ? [{ role: 'user', content: `${first.content}\n\n${note}` }]
      : [first, { role: 'user', content: note }];
  return host.sessions.replace(agent, [...head, ...items.slice(cut)], items.length);
}
