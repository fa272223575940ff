/**
 * Background review (off by default; seeds/001): after every N productive turns of an agent, a
 * leaf reviewer forks from the agent's session and may propose one reusable note.
 *
 * - **Leaf.** The reviewer is not a member of the team: it has two tools only (`propose_note`,
 *   `review_done`), so it cannot spawn, delegate or message anyone, and its own calls are not
 *   turns of any agent — a reviewer is never reviewed.
 * - **Bounded.** At most `maxSteps` model calls; one note per review; one review per agent at a time.
 * - **Non-blocking.** The agent's turn never waits for its review; the review's calls share the
 *   model queue and rate limit with everyone else.
 * - **Metered and optional.** Each call is reserved like a sub-agent's (it must fit under the
 *   reserve line) and recorded as `review` against the reviewed agent; when it does not fit, the
 *   review is skipped, never waited for and never trips a stop.
 * - **Root only by default.** Sub-agents (depth > 0) are exempt unless `review.subAgents` is true.
 * - **Durable cadence.** Each counted turn is a `review.turn` event row committed with the turn;
 *   on resume the counter is those rows modulo `everyTurns` (one source of truth).
 * - **Fail-open.** Any error is logged and ignored.
 * - **Quarantined.** A note is a proposal: a `review.note` event (persisted) and a TroupeEvent;
 *   nothing applies it to any agent until a person promotes it (notes/notes.ts): then later runs'
 *   roots read it.
 * @module
 */
import type { TurnOutcome } from '../../machines/types.js';
import { serializeError } from '../errors.js';
import type { ModelRequest, SessionItem, ToolCall, ToolSpec } from '../model/types.js';
import { NOTE_EVENT, proposalOf } from '../notes/notes.js';
import type { EventRow } from '../store/types.js';
import type { TurnTrace } from '../trace/tracer.js';
import { withoutImages } from './compaction.js';
import type { AgentRef, ModelGateway, SessionPort } from './ports.js';
import { openToolCalls } from './turn.js';

/** What a review needs of its host. */
export interface ReviewHost {
  readonly gateway: ModelGateway;
  /** A review's calls are chat spans (purpose `review`) on the agent's stint, while it runs. */
  readonly trace: Pick<TurnTrace, 'chat'>;
  readonly sessions: SessionPort;
  now(): number;
  /**
   * Persist one productive turn of a reviewed agent (a `review.turn` event row, staged with the
   * turn's own writes): the cadence counter is derived from these rows on resume.
   */
  countTurn(agent: AgentRef): void;
  /** Keep a proposed note (a `review.note` event row, and an event to subscribers). */
  proposeNote(agent: AgentRef, note: { title: string; content: string; at: number }): void;
}

export const REVIEW_PROMPT = [
  'Background review. The work above is paused while you review it; you are a reviewer, not the agent.',
  'Decide whether a durable, reusable procedure or lesson emerged that would help an agent doing similar work later.',
  'If yes, call propose_note once with a short title and the note (when to use it, then the steps). Keep it general: no secrets, no session-specific data.',
  'If nothing is worth keeping, call review_done with a one-line reason. Do no other work.',
].join('\n');

export const REVIEW_TOOLS: readonly ToolSpec[] = [
  {
    name: 'propose_note',
    description: 'Propose one reusable note (a procedure or lesson). It is kept for a human to review; it changes nothing by itself.',
    parameters: {
      type: 'object',
      properties: {
        title: { type: 'string', description: 'A short title, one line.' },
        content: { type: 'string', description: 'When to use it, then the steps.' },
      },
      required: ['title', 'content'],
      additionalProperties: false,
    },
  },
  {
    name: 'review_done',
    description: 'End the review, with a one-line reason when nothing was proposed.',
    parameters: { type: 'object', properties: { reason: { type: 'string' } }, additionalProperties: false },
  },
];

const MAX_TITLE = 200;
const MAX_NOTE = 8_000;

/** A note a background review proposed (quarantined until a person promotes it: notes/notes.ts). */
export interface ReviewNote {
  /** What `troupe notes promote <id>` names. */
  id: string;
  agentId: string;
  agentName: string;
  title: string;
  content: string;
  at: number;
}

const productive = (outcome: TurnOutcome) => outcome.kind === 'continue' || outcome.kind === 'wait' || outcome.kind === 'finish';

function parseArgs(call: ToolCall): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(call.arguments || '{}');
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** The agent's session as the reviewer reads it: no images, and every open tool call answered. */
function forkSession(session: readonly SessionItem[]): SessionItem[] {
  const items = [...(withoutImages(session) ?? session)];
  for (const call of openToolCalls(items)) {
    items.push({ role: 'tool', toolCallId: call.id, name: call.name, content: JSON.stringify({ status: 'pending when this review started' }) });
  }
  items.push({ role: 'user', content: REVIEW_PROMPT });
  return items;
}

/** The notes among a run's event rows, oldest first. */
export function reviewNotes(events: readonly EventRow[]): ReviewNote[] {
  return events
    .filter((e) => e.type === NOTE_EVENT)
    .map(proposalOf)
    .map((n) => ({ id: n.id, agentId: n.agentId ?? '', agentName: n.agentName, title: n.title, content: n.content, at: n.proposedAt }));
}

export class BackgroundReviews {
  readonly #host: ReviewHost;
  readonly #everyTurns: number;
  readonly #maxSteps: number;
  readonly #subAgents: boolean;
  /** Productive turns since the agent's last review. */
  readonly #counts = new Map<string, number>();
  /** Agents with a review running. */
  readonly #reviewing = new Set<string>();
  readonly #running = new Set<Promise<void>>();
  readonly #controller = new AbortController();

  constructor(host: ReviewHost, options: { everyTurns: number; maxSteps: number; subAgents?: boolean }) {
    this.#host = host;
    this.#everyTurns = options.everyTurns;
    this.#maxSteps = options.maxSteps;
    this.#subAgents = options.subAgents ?? false;
  }

  /** Called after every committed turn of an agent. */
  afterTurn(agent: AgentRef, outcome: TurnOutcome): void {
    if (!productive(outcome) || this.#controller.signal.aborted) return;
    // Sub-agents are exempt unless asked for (seeds/001): the root's review sees the team's work.
    if (agent.depth > 0 && !this.#subAgents) return;
    this.#host.countTurn(agent);
    const n = (this.#counts.get(agent.id) ?? 0) + 1;
    if (n < this.#everyTurns) {
      this.#counts.set(agent.id, n);
      return;
    }
    this.#counts.set(agent.id, 0);
    if (this.#reviewing.has(agent.id)) return;
    this.#reviewing.add(agent.id);
    const run = this.#review(agent)
      .catch((err: unknown) => agent.logger.warn({ err }, 'background review failed (ignored)'))
      .finally(() => {
        this.#reviewing.delete(agent.id);
        this.#running.delete(run);
      });
    this.#running.add(run);
  }

  /**
   * Resume: each agent's productive turns so far (its `review.turn` rows). Reviews fall due at every
   * multiple of `everyTurns`, so a resumed run reviews where it would have without the restart.
   */
  restore(turnsByAgent: ReadonlyMap<string, number>): void {
    for (const [agentId, turns] of turnsByAgent) this.#counts.set(agentId, turns % this.#everyTurns);
  }

  /** Resolves when every review started so far has ended, or at shutdown (queued calls are dropped then). */
  async settled(): Promise<void> {
    const { signal } = this.#controller;
    const aborted = new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
    while (this.#running.size > 0 && !signal.aborted) await Promise.race([Promise.all([...this.#running]), aborted]);
  }

  /** Abort reviews in flight (shutdown); they end without writing anything more. */
  close(): void {
    this.#controller.abort(new Error('the coordinator shut down'));
  }

  async #review(agent: AgentRef): Promise<void> {
    const { gateway } = this.#host;
    const signal = this.#controller.signal;
    const messages = forkSession(this.#host.sessions.items(agent));
    agent.logger.info('background review started');
    let proposed = false;
    for (let step = 1; step <= this.#maxSteps; step++) {
      const request: ModelRequest = {
        agent: { id: `${agent.id}:review`, name: `${agent.name}:review`, parentId: agent.id, depth: agent.depth + 1 },
        system: `You are the background reviewer of agent ${agent.name} (${agent.id}) in a troupe team. You only review; you cannot act.`,
        // A copy: the model (or its recorder) may keep the request after the call.
        messages: [...messages],
        tools: REVIEW_TOOLS,
        turn: step,
        purpose: 'review',
      };
      const reservation = gateway.admitOptional(request);
      if (reservation === null) {
        agent.logger.info('background review skipped: it does not fit in the budget');
        return;
      }
      const span = this.#host.trace.chat(agent, request, 'review');
      let answer;
      try {
        answer = await gateway.call(agent, request, signal);
      } catch (err) {
        gateway.release(reservation);
        span.end(signal.aborted ? { halted: 'cancelled' } : { error: serializeError(err).code });
        throw err;
      }
      // (Only main calls are parked by a breaker: a review never is.)
      if (signal.aborted || 'halt' in answer || 'parked' in answer) {
        gateway.release(reservation);
        span.end({ halted: signal.aborted ? 'cancelled' : 'budget' });
        if (!signal.aborted) agent.logger.info('background review skipped: the budget moved while it queued');
        return;
      }
      const turn = answer.turn;
      span.end({ turn, charge: gateway.settle(agent, turn, { purpose: 'review', reservation, request }) });
      if (turn.toolCalls.length === 0) break;
      messages.push({ role: 'assistant', content: turn.text, toolCalls: turn.toolCalls });
      let done = false;
      for (const call of turn.toolCalls) {
        const result = this.#toolResult(agent, call, proposed);
        if (result.proposed) proposed = true;
        if (result.done) done = true;
        messages.push({ role: 'tool', toolCallId: call.id, name: call.name, content: JSON.stringify(result.body), isError: !result.ok });
      }
      if (done) break;
    }
    agent.logger.info({ proposed }, 'background review ended');
  }

  #toolResult(agent: AgentRef, call: ToolCall, proposed: boolean): { ok: boolean; done?: boolean; proposed?: boolean; body: unknown } {
    const fail = (message: string) => ({ ok: false, body: { success: false, error: { code: 'TOOL_INPUT_INVALID', message } } });
    if (call.name === 'review_done') return { ok: true, done: true, body: { success: true } };
    if (call.name !== 'propose_note') {
      return {
        ok: false,
        body: { success: false, error: { code: 'TOOL_NOT_FOUND', message: `A reviewer can only call propose_note and review_done, not ${call.name}.` } },
      };
    }
    if (proposed) return fail('One note per review: this review already proposed one. Call review_done.');
    const args = parseArgs(call);
    const title = typeof args?.title === 'string' ? args.title.trim() : '';
    const content = typeof args?.content === 'string' ? args.content.trim() : '';
    if (title === '' || /[\n\r]/.test(title) || title.length > MAX_TITLE) return fail(`Expected title to be one line of 1..${MAX_TITLE} characters.`);
    if (content === '' || content.length > MAX_NOTE) return fail(`Expected content to be 1..${MAX_NOTE} characters.`);
    this.#host.proposeNote(agent, { title, content, at: this.#host.now() });
    agent.logger.info({ title }, 'background review proposed a note');
    return { ok: true, proposed: true, body: { success: true, note: 'Saved for review. Call review_done.' } };
  }
}
