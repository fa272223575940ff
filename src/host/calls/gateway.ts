/**
 * The model gateway (DESIGN §12): every model call of the run passes here — the shared queue and
 * rate limit, request building (once per call: the request whose estimate is reserved is the one
 * sent), and the budget's admission, re-check and settlement. Results, not exceptions: a call the
 * budget stops is `{ halt }`, never thrown.
 * @module
 */
import PQueue from 'p-queue';
import type { Clock } from '../../clock.js';
import { ProviderError } from '../../errors.js';
import { ownGetter } from '../../ownGetter.js';
import type { Model, ModelCallOptions, ModelDelta, ModelRequest, ModelTurn, SessionItem, ToolSpec, UsagePurpose } from '../../model/types.js';
import type { AgentRef, Charge, Halt, ModelGateway, Reservation } from '../../turn/ports.js';
import { DEFAULT_MAX_OUTPUT_TOKENS, estimatePromptTokens } from '../../model/prices.js';
import { endpointOf, type Quota, type QuotaTicket } from '../../providers/quota.js';
import { RateLimiter } from '../../turn/rateLimiter.js';
import { systemPrompt } from '../../turn/texts.js';
import type { Admission, BudgetLedger } from './budget.js';
import type { Breaker, Ticket } from '../../providers/breaker.js';
import type { CallLog } from './callLog.js';
import { LoopPacer } from './loopPacer.js';

/**
 * The messages with a note at the end: merged into a trailing user message (strict-alternation
 * providers reject two in a row), else as a user message of its own.
 */
function withNote(messages: readonly SessionItem[], note: string): SessionItem[] {
  const last = messages.at(-1);
  if (last?.role === 'user' && typeof last.content === 'string') return [...messages.slice(0, -1), { role: 'user', content: `${last.content}\n\n${note}` }];
  return [...messages, { role: 'user', content: note }];
}

export interface GatewayDeps {
  model: Model;
  clock: Clock;
  ledger: BudgetLedger;
  concurrency: number;
  rateLimit: { requests: number; intervalMs: number } | null;
  /** The endpoint quota shared with every run of the store (null: none set). */
  quota: Quota | null;
  interactive: boolean;
  systemPrompt: string | undefined;
  /** What the agent's profile appends to `systemPrompt` (PROFILE_UNKNOWN if its profile is gone). */
  profilePrompt?(agent: AgentRef): string | undefined;
  /** The agent's conversation (loaded). */
  session(agent: AgentRef): readonly SessionItem[];
  toolSpecs(agent: AgentRef): readonly ToolSpec[];
  parentName(agent: AgentRef): string | null;
  /** A budget warning went into this agent's call (traces record it). */
  warned(agent: AgentRef, warning: string): void;
  /** Streamed pieces of a main call (nothing when nobody listens). */
  delta(agent: AgentRef, delta: ModelDelta): void;
  hasListeners(): boolean;
  /** Null while this host may call the model; else why not (its lease may be lost: store/port.ts LeaseGuard). */
  fenced(): Error | null;
  /** The breaker of a model's endpoint, shared in the process (providers/breaker.ts); null: none. */
  breaker(model: Model): Breaker | null;
  /** Where every call is recorded for replay (callLog.ts); absent: not recorded. */
  log?: CallLog;
}

const asGate = (admitted: Admission): { reservation: Reservation } | Halt => ('outcome' in admitted ? { halt: admitted.outcome } : admitted);

export class Gateway implements ModelGateway {
  /**
   * The shared model queue (DESIGN §12: p-queue). A parent's calls go before its children's: the
   * priority is minus the agent's depth (the root highest), first come first served within a depth,
   * so a root spawning a big team is not queued behind the children it already spawned.
   *
   * The budget's rules rest on p-queue's timing (pinned by test/unit/host/queues.test.ts): a task
   * starts synchronously inside `add` when a slot is free; when a task settles, the next waiting
   * task starts (a queued microtask) before the caller's continuation runs (`add` is an async
   * function adopting its own promise: two hops more), so a budget stop decided in that
   * continuation reaches every task still waiting — `Passage.run` re-checks when a task starts.
   */
  readonly queue: PQueue;
  readonly #deps: GatewayDeps;
  readonly #rateLimiter: RateLimiter | null;
  /** System prompts, built on an agent's first call. */
  readonly #prompts = new Map<string, string>();
  /** Children's first calls, released a few per turn of the loop after their parent's request (`call`). */
  readonly #firstCalls = new LoopPacer();

  constructor(deps: GatewayDeps) {
    this.#deps = deps;
    this.queue = new PQueue({ concurrency: deps.concurrency });
    this.#rateLimiter = deps.rateLimit ? new RateLimiter(deps.clock, deps.rateLimit.requests, deps.rateLimit.intervalMs) : null;
  }

  request(agent: AgentRef, turn: number): ModelRequest {
    let system = this.#prompts.get(agent.id);
    const tools = this.#deps.toolSpecs(agent);
    if (system === undefined) {
      system = systemPrompt(
        { id: agent.id, name: agent.name, parentId: agent.parentId, parentName: this.#deps.parentName(agent) },
        this.#deps.interactive,
        joinPrompts(this.#deps.systemPrompt, this.#deps.profilePrompt?.(agent)),
        // What the toolbox offers decides (one source): the list is a function of the agent's depth.
        tools.some((t) => t.name === 'spawn_agent'),
      );
      this.#prompts.set(agent.id, system);
    }
    const warning = this.#deps.ledger.warning(agent);
    if (warning !== null) this.#deps.warned(agent, warning);
    const head = { id: agent.id, name: agent.name, parentId: agent.parentId, depth: agent.depth };
    const session = this.#deps.session(agent);
    if (agent.notes.length > 0 || warning !== null) {
      let messages: readonly SessionItem[] = session.slice();
      for (const note of agent.notes) messages = withNote(messages, note);
      // A budget warning goes into this call's input only, never into the session.
      return { agent: head, system, messages: warning === null ? messages : withNote(messages, warning), tools, turn };
    }
    return new SnapshotRequest(head, system, session, tools, turn);
  }

  /** Forget an agent's cached prompt (it finished). */
  forget(agentId: string): void {
    this.#prompts.delete(agentId);
    this.#deps.log?.forget(agentId);
  }

  admit(agent: AgentRef, request: ModelRequest, signal: AbortSignal): Promise<{ reservation: Reservation } | Halt> {
    return this.#deps.ledger.admit(agent, request, signal).then(asGate);
  }

  admitOptional(request: ModelRequest): Reservation | null {
    return this.#deps.ledger.admitOptional(request);
  }

  /**
   * One model call through the queue. Not an async function: the task is the model's own promise
   * with one check chained on (an async task was one more promise and frame per turn).
   *
   * A parent's turn goes before the turns it starts: on a model that calls an endpoint (a network:
   * `Model.endpoint`), a child's first main call of a stint waits for a later turn of the event loop, so
   * that the parent that spawned it (up to 128 in one call) sends its own next request before its
   * batch's first ones. Without it the parent's request was built among the batch's (their promise
   * chains interleave) and sent on a connection opened behind theirs: at 1,000 children the root's
   * spawn calls were answered 50-170 ms later than the server's delay, against 1-25 ms with the
   * wait, and the team finished 0.3-1 s sooner (scale bench, two pairs: memory 96 -> 99 % of the
   * ideal, FULL 97 -> 97.4-98.5 %). The batch's first calls are then released a few per turn of
   * the loop (loopPacer.ts), not all at once. One wait per stint, not per call: later turns are spread
   * by the model's own latency. A scripted or replayed model (no endpoint) does not wait: there is
   * no wire to be first on, and a replay answers in the recorded order whatever the order of the
   * asks. `waited`: this call has had its wait (the call again after it).
   */
  call(agent: AgentRef, request: ModelRequest, signal: AbortSignal, waited = false): Promise<Called> {
    const main = request.purpose === undefined || request.purpose === 'main' ? this.#deps.ledger.modelFor('main', agent.id) : null;
    if (!waited && main?.endpoint !== undefined && agent.parentId !== null && request.turn === 1) {
      return this.#firstCalls.next().then(() => this.call(agent, request, signal, true));
    }
    // The breaker guards the main model's endpoint; an auxiliary model's calls are its own affair.
    const breaker = main === null ? null : this.#deps.breaker(main);
    if (breaker === null) return this.queue.add(this.#passage(agent, request, signal, null), { priority: -agent.depth });
    const ticket = breaker.now();
    if (ticket) return this.queue.add(this.#passage(agent, request, signal, new Guard(breaker, ticket, signal)), { priority: -agent.depth });
    // Open: parked at no cost until a probe is due or it closes (an extra hop only then).
    return breaker.wait(signal).then((t) => this.queue.add(this.#passage(agent, request, signal, new Guard(breaker, t, signal)), { priority: -agent.depth }));
  }

  /** The queue's task for one call: its passage through the gates (p-queue awaits a value or a promise: its `Task` type names one or the other). */
  #passage(agent: AgentRef, request: ModelRequest, signal: AbortSignal, guard: Guard | null): () => PromiseLike<Called> {
    return new Passage(this.#deps, this.#rateLimiter, agent, request, signal, guard).run as () => PromiseLike<Called>;
  }

  settle(
    agent: AgentRef,
    answer: Pick<ModelTurn, 'usage' | 'invalidUsage'> | undefined,
    how: { purpose: UsagePurpose; reservation?: Reservation; request: ModelRequest },
  ): Charge {
    return this.#deps.ledger.record(agent, answer, how);
  }

  release(reservation: Reservation): void {
    this.#deps.ledger.release(reservation);
  }
}

/** What a call ends with: an answer, a budget halt, or `parked` (its endpoint is down: call again, no attempt spent). */
type Called = { turn: ModelTurn } | Halt | typeof PARKED;

/** A call whose endpoint's breaker is open: no call was made; the caller calls again (it waits at the gate). */
const PARKED = Object.freeze({ parked: true as const });

/** One call under its endpoint's breaker: the breaker hears how it went. */
class Guard {
  readonly #breaker: Breaker;
  readonly #ticket: Ticket;
  readonly #signal: AbortSignal;

  constructor(breaker: Breaker, ticket: Ticket, signal: AbortSignal) {
    this.#breaker = breaker;
    this.#ticket = ticket;
    this.#signal = signal;
  }

  /** Whether the breaker opened since the ticket was given (a probe goes regardless). */
  closedOff(): boolean {
    return !this.#ticket.probe && this.#breaker.state !== 'closed';
  }

  unused(): void {
    this.#breaker.unused(this.#ticket);
  }

  readonly answered = (turn: ModelTurn): { turn: ModelTurn } => {
    this.#breaker.succeeded(this.#ticket);
    return checkedTurn(turn);
  };

  readonly failed = (err: unknown): typeof PARKED => {
    if (this.#signal.aborted) {
      this.#breaker.unused(this.#ticket);
      throw err;
    }
    if (this.#breaker.failed(this.#ticket, err) === 'surface') throw err;
    return PARKED;
  };
}

/**
 * One call on its way from the queue to the model: `run` is the queue's task and takes the gates in
 * order (cancelled or its breaker opened while queued; the shared rate limit; the endpoint's quota;
 * the budget's last word and the lease; then the model). A gate that must wait resumes `run` at the
 * next one, so a call that waits for none is one frame from the queue to the model.
 */
class Passage {
  readonly #deps: GatewayDeps;
  readonly #rateLimiter: RateLimiter | null;
  readonly #agent: AgentRef;
  readonly #request: ModelRequest;
  readonly #signal: AbortSignal;
  readonly #guard: Guard | null;
  /** The next gate. */
  #gate: 'dequeued' | 'quota' | 'start' = 'dequeued';

  constructor(deps: GatewayDeps, rateLimiter: RateLimiter | null, agent: AgentRef, request: ModelRequest, signal: AbortSignal, guard: Guard | null) {
    this.#deps = deps;
    this.#rateLimiter = rateLimiter;
    this.#agent = agent;
    this.#request = request;
    this.#signal = signal;
    this.#guard = guard;
  }

  readonly run = (): Called | Promise<Called> => {
    const deps = this.#deps;
    const agent = this.#agent;
    const request = this.#request;
    const signal = this.#signal;
    const guard = this.#guard;
    if (this.#gate === 'dequeued') {
      if (signal.aborted) {
        guard?.unused();
        throw signal.reason;
      }
      // It opened while this call queued: back to the gate, no call made.
      if (guard?.closedOff()) return PARKED;
      this.#gate = 'quota';
      if (this.#rateLimiter) return this.#rateLimiter.acquire(signal).then(this.run);
    }
    if (this.#gate === 'quota') {
      this.#gate = 'start';
      // The endpoint's quota, taken in the queue slot (so what it counts in a minute starts in that
      // minute): 1 request and the estimated tokens before the call, settled to the real usage after;
      // a 429 with `retry-after` pauses the endpoint for every caller (the agent retries as always).
      const quota = deps.quota;
      if (quota) {
        const model = deps.ledger.modelFor(request.purpose, agent.id);
        const endpoint = endpointOf(model);
        const tokens = quota.countsTokens ? estimatePromptTokens(request) + (model.maxOutputTokens ?? DEFAULT_MAX_OUTPUT_TOKENS) : 0;
        return quota.acquire(endpoint, tokens, signal).then((ticket) =>
          Promise.resolve()
            .then(this.run)
            .then(
              (result) => settled(quota, ticket, result),
              async (err: unknown) => {
                if (err instanceof ProviderError && err.code === 'PROVIDER_RATE_LIMITED' && err.retryAfterMs !== undefined) {
                  await quota.pause(endpoint, err.retryAfterMs);
                }
                await quota.settle(ticket, 0);
                throw err;
              },
            ),
        );
      }
    }
    const purpose: UsagePurpose = request.purpose ?? 'main';
    const ledger = deps.ledger;
    // The budget may have stopped or paused while this call queued: then it never starts.
    // A compaction is not reserved (it belongs to an admitted turn) but is held to the same check:
    // after a budget stop, or a limit lowered below what is spent, it would be money for nothing.
    if (purpose === 'main' || purpose === 'compaction') {
      const halt = ledger.recheck(agent);
      if (halt) {
        guard?.unused();
        return { halt };
      }
    }
    if (purpose === 'review' && !ledger.optionalFits()) return { halt: { kind: 'stopped', reason: 'budget' } };
    // Checked last, synchronously before the call: a host that may have lost its lease makes none.
    const fenced = deps.fenced();
    if (fenced) {
      guard?.unused();
      throw fenced;
    }
    // A review's answer is not the agent's: it streams to nobody.
    const onDelta = (delta: ModelDelta): void => {
      if (deps.hasListeners()) deps.delta(agent, delta);
    };
    const options: ModelCallOptions = purpose === 'review' ? { signal } : { signal, onDelta };
    // Promise.resolve: a custom model that answers with a plain object is still read.
    const entry = deps.log?.begin(request, sourceOf(request));
    const answer = Promise.resolve(ledger.modelFor(purpose, agent.id).complete(request, options));
    // One reaction either way (the budget's ordering counts hops: see `Gateway.queue`): the breaker hears the outcome in it.
    if (entry === undefined) return guard === null ? answer.then(checkedTurn) : answer.then(guard.answered, guard.failed);
    // The log hears it in the same reaction: its event is staged before the answer's own writes.
    const answered = guard === null ? checkedTurn : guard.answered;
    return answer.then(
      (turn) => answered(entry.answered(turn)),
      (err: unknown) => {
        entry.failed(err, signal.aborted);
        if (guard === null) throw err;
        return guard.failed(err);
      },
    );
  };
}

/** The run's prompt, then the profile's. */
function joinPrompts(run: string | undefined, profile: string | undefined): string | undefined {
  if (profile === undefined || profile === '') return run;
  return run === undefined || run === '' ? profile : `${run}\n\n${profile}`;
}

/** A call answered: its tokens settle to its usage (a halted call, never sent, gives them all back). */
async function settled(quota: Quota, ticket: QuotaTicket, result: Called): Promise<Called> {
  if (!('turn' in result)) await quota.settle(ticket, 0);
  else if (!result.turn.invalidUsage && result.turn.usage) {
    const used = (result.turn.usage.inputTokens ?? 0) + (result.turn.usage.outputTokens ?? 0);
    if (Number.isFinite(used) && used >= 0) await quota.settle(ticket, used);
  }
  return result;
}

/** A custom model is a boundary too: what it returns is checked once, here. */
function checkedTurn(turn: ModelTurn): { turn: ModelTurn } {
  if (!turn || !Array.isArray(turn.toolCalls)) {
    throw new ProviderError('PROVIDER_INVALID_RESPONSE', 'The model returned no turn (expected { text, toolCalls })');
  }
  return { turn };
}

/** The lazy part of a request is an own getter (ownGetter.ts): a model that spreads the request keeps it. */
const MESSAGES = ownGetter((request: SnapshotRequest) => request.snapshot());

/**
 * A request whose `messages` are a snapshot: a model may keep the request it was given while the
 * session grows. A session array is only ever appended to (a rewrite replaces it: sessions.ts), so
 * its first `length` items never change, and the copy is made when the messages are first read,
 * not on every turn: O(1) per turn for troupe, one copy for a model that reads them.
 */
class SnapshotRequest implements ModelRequest {
  readonly agent: ModelRequest['agent'];
  readonly system: string;
  declare readonly messages: readonly SessionItem[];
  readonly tools: readonly ToolSpec[];
  readonly turn: number;
  readonly #session: readonly SessionItem[];
  readonly #length: number;
  #copy: readonly SessionItem[] | null = null;

  constructor(agent: ModelRequest['agent'], system: string, session: readonly SessionItem[], tools: readonly ToolSpec[], turn: number) {
    this.agent = agent;
    this.system = system;
    Object.defineProperty(this, 'messages', MESSAGES);
    this.tools = tools;
    this.turn = turn;
    this.#session = session;
    this.#length = session.length;
  }

  snapshot(): readonly SessionItem[] {
    return (this.#copy ??= this.#session.slice(0, this.#length));
  }

  /** The session it was built from, and how much of it (no copy). */
  source(): { items: readonly SessionItem[]; length: number } {
    return { items: this.#session, length: this.#length };
  }
}

/** What a request's messages are: a snapshot's session prefix, or the messages themselves. */
function sourceOf(request: ModelRequest): { items: readonly SessionItem[]; length: number } {
  return request instanceof SnapshotRequest ? request.source() : { items: request.messages, length: request.messages.length };
}
