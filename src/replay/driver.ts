/**
 * The replay's driver (issue 37): which recorded step the code gets when.
 *
 * Order: the steps of the recording (model calls and inputs, as their events are numbered) are
 * applied one at a time. A call is answered only when the code has asked for it and every earlier
 * step is done; when the code stops moving before it asks, the clock moves to the moment the
 * recording made the call (a timer may be what makes it), and if it still does not ask, the replay
 * has diverged. A call the recording answered in the instant it was asked (a scripted or instant
 * model) is answered inside the ask, so its effects race the commits and wakes in flight as they
 * did; a call with latency is answered once the steps before it have settled, or in their commit
 * window where the recording says it came there, the clock stopping at every recorded ask on the
 * way. Nothing here waits on the wall clock: "stopped moving" is a few turns of the event loop in
 * which no request, tool or view event came.
 * @module
 */
import type { RecordedCall } from '../host/calls/callLog.js';
import type { Coordinator } from '../host/createCoordinator.js';
import type { IdSource } from '../host/options.js';
import { errorOf, extraCall, never, RecordedIds } from './answers.js';
import type { Model, ModelCallOptions, ModelRequest, ModelTurn } from '../model/types.js';
import type { StorePort } from '../store/port.js';
import type { Tool, ToolContext } from '../tools/defineTool.js';
import type { MailReads } from '../turn/ports.js';
import type { ReplayClock } from './clock.js';
import { Requests, type Divergence } from './compare.js';
import { Quiet } from './quiet.js';
import type { Recording, Step } from './recording.js';
import { RecordedReads } from './mailReads.js';
import { ToolResults } from './toolResults.js';

/** How the replay answers: what the recorded model declared, and where to go live. */
export interface DriveOptions {
  /** What the recorded model declared (its name, price, token limits): the budget prices and reserves with them. */
  model?: Pick<Model, 'name' | 'price' | 'maxOutputTokens' | 'contextWindow'>;
  /**
   * What the recorded auxiliary model declared (compaction, review): its calls are answered from
   * the recording as the main model's are, priced and bounded as it was. Defaults to the
   * coordinator's `auxiliaryModel`, if given.
   */
  auxiliaryModel?: Pick<Model, 'name' | 'price' | 'maxOutputTokens' | 'contextWindow'>;
  /**
   * From this agent's (name) turn on, go live: that call and every later one are answered by
   * `model`, and user tools run for real. The recording is checked up to there.
   */
  liveFrom?: { agent: string; turn: number; model: Model };
}

type CallStep = Extract<Step, { kind: 'call' }>;

/** A call answered in the instant it was asked (a scripted or instant model): no latency to settle in. */
const instant = (step: CallStep): boolean => step.at === step.call.t0;

interface Pending {
  resolve(turn: ModelTurn): void;
  reject(err: unknown): void;
}

/** One replay's state: the recorded calls by agent, the calls waiting for their turn, what diverged. */
export class Replay {
  readonly #recording: Recording;
  readonly #clock: ReplayClock;
  readonly #options: DriveOptions;
  readonly #requests = new Requests();
  /** Recorded calls not yet asked for, by purpose and agent, in order. */
  readonly #queues = new Map<string, RecordedCall[]>();
  readonly #arrived = new Map<RecordedCall, Pending>();
  /** The next step to apply: steps before it are applied (a call answered, or taken to be cut short). */
  #i = 0;
  /** When the recording's calls were asked, ascending, and the first not yet passed. */
  readonly #asks: number[];
  #nextAsk = 0;
  /** Calls the recording does not have, asked and not cut short (yet), oldest first. */
  readonly #extra = new Set<Divergence>();
  /** Agents whose last call the recording made but never saw answered. */
  readonly #unanswered = new Set<string>();
  #coordinator: Coordinator<StorePort> | null = null;
  /** Whether the code has stopped moving. */
  readonly #quiet = new Quiet();
  /** The user tools' recorded results, held until their step (toolResults.ts). */
  readonly #results: ToolResults;
  /** The recorded mailbox reads, and the reads held for their messages (mailReads.ts). */
  readonly #reads: RecordedReads;
  /** The recording's ids, handed out in order. */
  readonly #ids: RecordedIds;
  /** Each recorded call's step. */
  readonly #stepOf = new Map<RecordedCall, number>();
  /**
   * Windowed steps queued (each in an immediate of its own) and not run yet: they come before the
   * cursor, so no call at the cursor is answered until they have run.
   */
  #windowing = 0;
  /** The restarts' steps, ascending. */
  readonly #restarts: number[] = [];
  /** Which process of the recording the code now is (a restart starts the next); the dead ones' asks never end. */
  #epoch = 0;
  #resume: (() => Promise<Coordinator<StorePort>>) | null = null;
  /** A call of a burst being gathered (`#gather`): asked, it waits for the burst, not the pump. */
  #gathering: RecordedCall | null = null;
  divergence: Divergence | null = null;
  live = false;
  calls = 0;
  inputs = 0;
  readonly model: Model;
  readonly ids: IdSource;

  constructor(recording: Recording, clock: ReplayClock, options: DriveOptions) {
    this.#recording = recording;
    this.#clock = clock;
    this.#options = options;
    recording.steps.forEach((step, i) => {
      if (step.kind === 'restart') this.#restarts.push(i);
      if (step.kind === 'call') this.#stepOf.set(step.call, i);
    });
    for (const step of recording.steps) {
      if (step.kind !== 'call') continue;
      const key = `${step.call.purpose}:${step.call.agentId}`;
      const queue = this.#queues.get(key) ?? [];
      queue.push(step.call);
      this.#queues.set(key, queue);
    }
    this.#asks = recording.steps.flatMap((s) => (s.kind === 'call' ? [s.call.t0] : [])).sort((a, b) => a - b);
    this.#reads = new RecordedReads(recording);
    this.#ids = new RecordedIds(recording);
    this.ids = this.#ids.source;
    this.model = this.modelAs(options.model ?? {});
    this.#results = new ToolResults(recording, {
      cursor: () => this.#i,
      nextRestart: () => this.#nextRestart(),
      epoch: () => this.#epoch,
      over: () => this.live || this.divergence !== null,
      diverge: (d) => (this.divergence ??= d),
      moved: () => this.#quiet.moved(),
    });
  }

  /** The main model of the process the code now is (a resumed coordinator needs its own: the dead one's asks never end). */
  mainModel(): Model {
    return this.modelAs(this.#options.model ?? {});
  }

  /** How a restart resumes the run: a new coordinator on the replay's store (the old one is dead). */
  restartWith(resume: () => Promise<Coordinator<StorePort>>): void {
    this.#resume = resume;
  }

  /** At a restart: the ids still to hand out are the recording's not committed yet (answers.ts). */
  resyncIds(committed: { agents: ReadonlySet<string>; messages: ReadonlySet<string> }): void {
    this.#ids.resync(committed);
  }

  /** The first restart still to come (its step), or Infinity. */
  #nextRestart(): number {
    return this.#restarts.find((r) => r >= this.#i) ?? Infinity;
  }

  /**
   * A model declaring what `declared` does (name, price, token limits: the budget prices and
   * reserves with them) whose calls are answered from the recording; from `liveFrom` on, by `own`
   * if given (an auxiliary model), else by the live model.
   */
  modelAs(declared: Pick<Model, 'name' | 'price' | 'maxOutputTokens' | 'contextWindow'>, own: Pick<Model, 'complete'> | null = null): Model {
    const epoch = this.#epoch;
    return {
      name: declared.name ?? 'replay',
      ...(declared.price === undefined ? {} : { price: declared.price }),
      ...(declared.maxOutputTokens === undefined ? {} : { maxOutputTokens: declared.maxOutputTokens }),
      ...(declared.contextWindow === undefined ? {} : { contextWindow: declared.contextWindow }),
      complete: (request, callOptions) => (epoch === this.#epoch ? this.#complete(request, callOptions, own) : never(callOptions)),
    };
  }

  /** The mailbox reads of the process the code now is (a dead one's never end), as recorded (mailReads.ts). */
  mailReads(): MailReads {
    const epoch = this.#epoch;
    return {
      take: (agentId, read, waiting) => {
        if (epoch !== this.#epoch) return new Promise<null>(() => {});
        this.#quiet.moved();
        return this.#reads.take(epoch, agentId, read, waiting, this.live || this.divergence !== null);
      },
    };
  }

  /** Give the held reads whose messages have come (all of them, with the code's own count, once live or diverged, or if `all`). */
  #releaseReads(all = false): boolean {
    if (!this.#reads.release(all || this.live || this.divergence !== null)) return false;
    this.#quiet.moved();
    return true;
  }

  attach(coordinator: Coordinator<StorePort>): void {
    this.#coordinator = coordinator;
    const epoch = this.#epoch;
    coordinator.subscribe(() => {
      if (epoch === this.#epoch) this.#quiet.moved();
    });
  }

  /** `tool` with its recorded results in place of its effects (until the replay goes live). */
  tool(tool: Tool): Tool {
    const epoch = this.#epoch;
    return {
      ...tool,
      // A dead process's tools never end: it was killed with them under way.
      execute: (args: Record<string, unknown>, context: ToolContext) =>
        epoch !== this.#epoch ? new Promise(() => {}) : this.live ? (this.#quiet.moved(), tool.execute(args, context)) : this.#results.result(tool, context),
    };
  }

  async drive(): Promise<void> {
    const steps = this.#recording.steps;
    while (!this.divergence && !this.live) {
      // Windowed steps still queued (a tool's end takes them and returns at once): they run, and
      // their effects settle, before the call at the cursor is answered, as they came before it.
      if (this.#windowing > 0) {
        this.#quiet.acted();
        await this.#settle(() => this.divergence !== null);
      }
      this.#pump();
      if (this.#i >= steps.length || this.divergence || this.live) break;
      const step = steps[this.#i]!;
      if (step.kind === 'input') {
        await this.#input(step);
        this.#i++;
        continue;
      }
      if (step.kind === 'restart') {
        await this.#restart(step);
        this.#i++;
        continue;
      }
      if (step.kind === 'tool') {
        await this.#toolEnd();
        continue;
      }
      if (instant(step)) {
        // Not asked yet: answered by the pump the moment the code asks.
        const at = this.#i;
        if (!(await this.#asked(step, () => this.#i !== at))) break;
        continue;
      }
      if (!(await this.#asked(step, () => this.#arrived.has(step.call)))) break;
      // An answer after a latency comes once what the steps before it set going has settled (an
      // input's commit and wakes), unless it came within the commit window of the step before.
      if (!step.call.window) await this.#settle(() => this.divergence !== null);
      await this.#stepTo(step.at);
      if (this.divergence || this.live) break;
      const first = this.#take(step.call);
      this.#i++;
      // Calls answered in the same burst as this one are answered together, as they were: their
      // effects interleave as they did in the recording.
      const batch: [CallStep, Pending][] = [[step, first]];
      for (; this.#i < steps.length && !step.call.aborted; this.#i++) {
        const next = steps[this.#i]!;
        if (next.kind !== 'call' || !next.call.burst || next.call.aborted) break;
        if (!this.#arrived.has(next.call) && !(await this.#gather(next, step.effectsAt))) break;
        batch.push([next, this.#take(next.call)]);
      }
      // A call cut short in the recording is cut short by a step still to come.
      if (step.call.aborted) continue;
      const windowed = this.#windowed();
      this.#advance(batch.at(-1)![0].effectsAt);
      for (const [{ call }, pending] of batch) this.#answer(call, pending);
      this.#queue(windowed);
      // Their effects (the answers' tools, the notices they cause) come before the next step, as
      // they did in the recording: an answer takes a model's latency, its effects none.
      await this.#settle(() => this.divergence !== null);
    }
    this.#results.release(true);
    this.#releaseReads(true);
    if (this.live) {
      await this.#coordinator!.whenIdle();
      return;
    }
    // Anything the code asks for after the last recorded step is more than the recording did; a
    // timer due before the recording's last event (a sleeping agent stopped at its turn cap as it
    // woke) moves an agent as it did.
    if (!this.divergence) await this.#settle(() => this.divergence !== null);
    if (!this.divergence && this.#recording.endsAt > this.#clock.now()) {
      this.#advance(this.#recording.endsAt);
      await this.#settle(() => this.divergence !== null);
    }
    // A call the recording does not have, never cut short, came before any later divergence.
    const [extra] = this.#extra;
    if (extra) this.divergence = extra;
    if (!this.divergence) this.divergence = this.#reads.unread();
  }

  /**
   * A call of the burst being answered, asked by a timer of the burst's instant (a retry whose
   * backoff ended in the timer callback that resolved the answer before it): the clock moves to its
   * ask and the code asks it, unanswered — it is answered with the burst, after the answer before
   * it, as it was. False if it is not asked then (the clock does not pass `until`, the burst's time).
   */
  async #gather(next: CallStep, until: number): Promise<boolean> {
    const { call } = next;
    if (call.t0 <= this.#clock.now() || call.t0 > until) return false;
    this.#gathering = call;
    this.#advance(call.t0);
    await this.#settle(() => this.#arrived.has(call) || this.divergence !== null);
    this.#gathering = null;
    return this.#arrived.has(call) && !this.divergence;
  }

  /**
   * The steps from the cursor on that came before the commit holding the step before them was done
   * (one timer phase's answers, inputs applied and tools ended in that window), taken: each to run in an immediate
   * of its own, queued before anything the step before sets going queues — so each runs its
   * course, and the commit holding them all comes after, as it did.
   */
  #windowed(): (() => void)[] {
    const steps = this.#recording.steps;
    const windowed: (() => void)[] = [];
    for (; this.#i < steps.length; this.#i++) {
      const next = steps[this.#i]!;
      if (next.kind === 'restart') break;
      if (next.kind === 'tool') {
        if (!next.window || !this.#results.holds(this.#i)) break;
        const at = this.#i;
        windowed.push(() => this.#results.end(at));
        continue;
      }
      if (next.kind === 'input') {
        if (!next.input.window) break;
        windowed.push(() => this.#apply(next));
        continue;
      }
      if (!next.call.window || next.call.aborted || instant(next) || !this.#arrived.has(next.call)) break;
      const pending = this.#take(next.call);
      windowed.push(() => {
        this.#advance(next.effectsAt);
        this.#answer(next.call, pending);
      });
    }
    return windowed;
  }

  /**
   * A user tool ended here in the recording: once what the steps before set going has settled
   * (and the code has called it), its result is given, with the inputs and answers of its commit
   * window after it. A tool the code never called (its execution lost with a dead process) passes.
   */
  async #toolEnd(): Promise<void> {
    const at = this.#i;
    await this.#settle(() => this.divergence !== null);
    if (this.divergence || this.live) return;
    this.#i++;
    if (!this.#results.end(at)) return;
    this.#quiet.acted();
    this.#queue(this.#windowed());
  }

  /** Run the windowed steps, each in an immediate of its own, in order (`#windowing` counts them down). */
  #queue(windowed: (() => void)[]): void {
    this.#windowing += windowed.length;
    for (const step of windowed) {
      setImmediate(() => {
        try {
          step();
        } finally {
          this.#windowing--;
        }
      });
    }
  }

  /**
   * Answer, in order from the cursor, every instant call the code has asked for — synchronously,
   * inside the ask when the code asks for the call at the cursor — so what each answer sets going
   * races the commits and wakes in flight as it did when the model answered in the instant it was
   * asked (a scripted or instant model). Stops at an input, a call with latency, or one not asked yet.
   * `inAsk`: run inside the ask of the call at the cursor, whose caller has not yet attached to its
   * promise (its reaction is queued only then): the calls after it are answered a microtask on, so
   * their reactions come after its, in step order — answered with it, a call asked earlier
   * reacted first (its report reached the lead before the one the recording had first).
   */
  #pump(inAsk = false): void {
    // An instant call at the cursor came after the windowed steps before it: not while they wait.
    // The ask's pump needs this (a call asked as a tool ends, before its window's immediates ran:
    // windowOrder.test); the loop's pump comes after its settle, when none waits.
    if (this.#windowing > 0) return;
    const steps = this.#recording.steps;
    while (this.#i < steps.length && !this.divergence && !this.live) {
      const step = steps[this.#i]!;
      if (step.kind !== 'call' || !instant(step) || !this.#arrived.has(step.call)) return;
      this.#i++;
      const pending = this.#take(step.call);
      // A call cut short in the recording is cut short by a step still to come.
      if (step.call.aborted) continue;
      this.#advance(step.effectsAt);
      this.#answer(step.call, pending);
      if (inAsk) {
        queueMicrotask(() => this.#pump());
        return;
      }
    }
  }

  /**
   * The recording's process ended here and a new one resumed the run: what the old one had under
   * way (calls, tools) never ends, its writes stop, and the run is resumed on what it committed —
   * as a kill -9 and `resumeCoordinator` did.
   */
  async #restart(step: Step): Promise<void> {
    await this.#settle(() => this.divergence !== null);
    if (this.divergence || !this.#resume) return;
    this.#advance(step.at);
    this.#epoch++;
    this.#quiet.acted();
    this.#results.clear();
    this.#reads.clearHeld();
    this.#extra.clear();
    this.#arrived.clear();
    this.attach(await this.#resume());
  }

  async #input(step: Extract<Step, { kind: 'input' }>): Promise<void> {
    await this.#settle(() => this.divergence !== null);
    await this.#stepTo(step.effectsAt);
    // The timers due by then fired before it came, and what they set going ran (a retry's backoff
    // ended and its call was asked, which the input then cut short): the clock moves first.
    this.#advance(step.effectsAt);
    await this.#settle(() => this.divergence !== null);
    if (!this.divergence) this.#apply(step);
  }

  #apply(step: Extract<Step, { kind: 'input' }>): void {
    this.#advance(step.effectsAt);
    this.#quiet.acted();
    this.inputs++;
    const { kind, payload } = step.input;
    const c = this.#coordinator!;
    const agent = String(payload.agent);
    // Not awaited: a stop resolves when its agents are terminal, which may take recorded steps still to come.
    const applied =
      kind === 'send'
        ? c.send(agent, {
            content: String(payload.content),
            ...(payload.from === 'system' ? { from: 'system' as const } : {}),
            ...(typeof payload.type === 'string' ? { type: payload.type } : {}),
            ...(typeof payload.priority === 'string' ? { priority: payload.priority as 'normal' } : {}),
            ...(typeof payload.key === 'string' ? { key: payload.key } : {}),
          })
        : kind === 'stop'
          ? c.stop(agent, { cascade: payload.cascade !== false })
          : c.applyRequest({ id: 0, kind, payload });
    applied.catch(() => undefined);
  }

  /**
   * Move the clock towards `at`, stopping at every moment the recording asked a call in between
   * (a retry's backoff or a wait's timeout ending there) and letting the code move: a jump past
   * them would fire those timers late, after what came at `at`.
   */
  async #stepTo(at: number): Promise<void> {
    const asks = this.#asks;
    while (this.#nextAsk < asks.length && asks[this.#nextAsk]! <= this.#clock.now()) this.#nextAsk++;
    while (this.#nextAsk < asks.length && asks[this.#nextAsk]! < at && !this.divergence && !this.live) {
      this.#advance(asks[this.#nextAsk++]!);
      await this.#settle(() => this.divergence !== null);
    }
  }

  /**
   * Wait until `asked()` — the code asked for `step`'s call — moving the clock to when the
   * recording made it if the code stops first (a timer may be what makes it: a wait's timeout, a
   * retry's backoff); false if the replay diverged or went live first, or the code never asks.
   */
  async #asked(step: CallStep, asked: () => boolean): Promise<boolean> {
    const moved = () => asked() || this.divergence !== null || this.live;
    await this.#settle(moved);
    if (!moved()) {
      this.#advance(step.call.t0);
      await this.#settle(moved);
    }
    if (!moved() && this.#results.holding) {
      // A tool held for a step still to come that cannot come without it: the journal misled.
      this.#results.release(true);
      await this.#settle(moved);
    }
    if (this.divergence || this.live) return false;
    if (asked()) return true;
    const { call } = step;
    // A read held for messages that never came: the code reads a mailbox the recording's did not.
    const held = this.#reads.heldDivergence((agentId) => (call.agentId === agentId ? call.turn : 0));
    if (held) {
      this.divergence = held;
      return false;
    }
    this.divergence = {
      agent: call.name,
      agentId: call.agentId,
      turn: call.turn,
      kind: 'request',
      diff: `the recording made a ${call.purpose} call here; the code did not ask for it`,
    };
    return false;
  }

  #answer(call: RecordedCall, pending: Pending): void {
    this.#quiet.acted();
    // Given as read, not cloned (a clone per call was 4 % of a replay): the recording is this
    // replay's own copy (every store parses or copies what it reads) and each answer is given once.
    if (call.answer) pending.resolve(call.answer);
    else pending.reject(errorOf(call));
  }

  #take(call: RecordedCall): Pending {
    const pending = this.#arrived.get(call)!;
    this.#arrived.delete(call);
    this.calls++;
    return pending;
  }

  #complete(request: ModelRequest, options: ModelCallOptions, own: Pick<Model, 'complete'> | null): Promise<ModelTurn> {
    this.#quiet.moved();
    const live = this.#options.liveFrom;
    const purpose = request.purpose ?? 'main';
    if (this.live || (live && !this.divergence && request.agent.name === live.agent && purpose === 'main' && request.turn >= live.turn)) {
      this.live = true;
      return (own ?? live!.model).complete(request, options);
    }
    const queue = this.#queues.get(`${purpose}:${request.agent.id}`);
    // The recording's process died with this call under way: the call it has is the resumed one's.
    const restart = this.#nextRestart();
    if (restart !== Infinity && (queue?.[0] === undefined || this.#stepOf.get(queue[0])! > restart)) return never(options);
    const call = queue?.shift();
    if (!call) {
      // The recording ended with this call under way (its agent still running): it was never answered.
      // Of any purpose: a context overflow's compaction call, say, asked as the recording stopped.
      if (this.#recording.agents.find((a) => a.id === request.agent.id)?.status === 'running' && !this.#unanswered.has(request.agent.id)) {
        this.#unanswered.add(request.agent.id);
        return never(options);
      }
      return extraCall(this.#extra, request, purpose, options);
    }
    const diverged = this.#requests.check(call, request);
    if (diverged) {
      this.divergence ??= diverged;
      return never(options);
    }
    return new Promise<ModelTurn>((resolve, reject) => {
      this.#arrived.set(call, { resolve, reject });
      // A call the recording answered keeps its answer coming at its step even if the code cancels
      // it meanwhile: the recorded model answered anyway (it did not listen to the signal), and the
      // code took that answer. One the recording shows cut short ends with the cancel.
      if (call.aborted) options.signal.addEventListener('abort', () => reject(options.signal.reason), { once: true });
      const due = this.#recording.steps[this.#i];
      if (due?.kind === 'call' && due.call === call && this.#gathering !== call) this.#pump(true);
    });
  }

  #advance(at: number): void {
    if (at <= this.#clock.now()) return;
    const fired = this.#clock.fired;
    this.#clock.set(at);
    // A timer ran: the code may move. None did: only what now() says changed.
    if (this.#clock.fired !== fired) this.#quiet.acted();
  }

  /** Let the code move until `done()` or it stops moving (quiet.ts). */
  #settle(done: () => boolean): Promise<void> {
    return this.#quiet.settle(done, () => this.#results.release() || this.#releaseReads());
  }
}
