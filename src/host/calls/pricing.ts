/**
 * Pricing a call (DESIGN §3), apart from the ledger that books it: which model a call goes to and
 * is priced as, that model's price, what a request may cost at most (the estimate a reservation
 * holds), and what an answered call is charged — its priced usage, or, when the usage cannot be
 * believed or priced, its reservation or estimate (never $0 unseen), said once per kind.
 * @module
 */
import type { Logger } from 'pino';
import type { Clock } from '../../clock.js';
import { DEFAULT_MAX_OUTPUT_TOKENS, estimatePromptTokens, priceOf, priceUsage } from '../../model/prices.js';
import type { Model, ModelPrice, ModelRequest, ModelTurn, UsagePurpose } from '../../model/types.js';
import { isUsd, judgeUsage, MAX_USD_PER_CALL } from '../../model/usage.js';
import type { WriteOp } from '../../store/port.js';
import type { Charge, Reservation } from '../../turn/ports.js';
import type { ResolvedOptions } from '../options.js';

/** The calling agent, as pricing needs it. */
type Payer = { readonly id: string; readonly logger: Logger };

/** What pricing needs of its host. */
export interface PricingHost {
  readonly runId: string;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly model: Model;
  /** Where auxiliary calls (compaction, review) go, and are priced: null, the run's model. */
  readonly auxiliaryModel: Model | null;
  /** The model of an agent's profile, if it names one (null: the run's model); PROFILE_UNKNOWN if its profile is gone. */
  agentModel?(agentId: string): Model | null;
  readonly budget: Pick<ResolvedOptions['budget'], 'prices'>;
  stage(op: WriteOp): void;
}

/** What a model said about one call's usage (a `ModelTurn` will do). */
export type UsageReport = Pick<ModelTurn, 'usage' | 'invalidUsage'>;

/** Nothing reserved because the call was estimated at $0 (its charge, should its usage be unusable). */
export const ZERO_ESTIMATE: Reservation = Object.freeze({ usd: 0, settled: true }) as Reservation;

/** What is logged, once, when a call is charged at its estimate because its usage had no price. */
const UNPRICEABLE_LOG: Record<'noUsage' | 'unpriced', string> = {
  noUsage: 'the model reported no usage for a call: such calls are charged at their estimate',
  unpriced: 'no price for this model and its usage carries no costUsd: such calls are charged at their estimate (set budget.prices)',
};

export class CallPricing {
  readonly #host: PricingHost;
  /** The run's limit now (null: none): an unpriced $0 charge with no limit is only logged. */
  readonly #limitUsd: () => number | null;
  /** Kinds of unpriceable usage already said (once per kind: a warning and a `budget.usageEstimated` event). */
  readonly #said = new Set<'noUsage' | 'unpriced'>();
  /** An unpriced model's $0 calls with no limit were logged. */
  #unpricedLogged = false;
  /** Each model's price, looked up once (the run's model, and the auxiliary one if set). */
  readonly #prices = new Map<Model, ModelPrice | undefined>();
  #badEstimate = false;

  constructor(host: PricingHost, limitUsd: () => number | null) {
    this.#host = host;
    this.#limitUsd = limitUsd;
  }

  /**
   * The model a call of this purpose goes to, and is priced as: main calls to the agent's (its
   * profile's model, else the run's), auxiliary ones (compaction, review) to `auxiliaryModel` if set,
   * else the agent's.
   */
  modelFor(purpose: UsagePurpose | undefined, agentId?: string): Model {
    const own = (agentId === undefined ? null : this.#host.agentModel?.(agentId)) ?? this.#host.model;
    return purpose === undefined || purpose === 'main' ? own : (this.#host.auxiliaryModel ?? own);
  }

  /** A model's price: `budget.prices` first, then the model's own, then the built-in table (looked up once per model). */
  price(model: Model = this.#host.model): ModelPrice | undefined {
    if (!this.#prices.has(model)) this.#prices.set(model, priceOf(model, this.#host.budget.prices));
    return this.#prices.get(model);
  }

  /**
   * What one call is charged, and the tokens its row records (`judgeUsage`). Usage that cannot be
   * believed (invalid), or priced (none reported, or tokens with no `costUsd` and no price), is
   * charged what was reserved for it — or, with nothing reserved (no limit set, a compaction), the
   * estimate of its request — so spend never goes down, never becomes NaN, and a budget binds
   * whatever the provider leaves out. Invalid usage is logged per call, the others once (`#sayOnce`).
   */
  charge(agent: Payer, answer: UsageReport | undefined, reservation: Reservation, request: ModelRequest | undefined, purpose: UsagePurpose): Charge {
    const verdict = judgeUsage(answer, this.price(this.modelFor(purpose, agent.id)));
    const usage = verdict.kind === 'priced' || verdict.kind === 'unpriced' ? verdict.usage : undefined;
    const tokens = { inputTokens: usage?.inputTokens ?? 0, outputTokens: usage?.outputTokens ?? 0, cachedInputTokens: usage?.cachedInputTokens ?? 0 };
    if (verdict.kind === 'priced') return { costUsd: verdict.costUsd, ...tokens };
    // Its reservation, else (nothing reserved, no estimate made: no limit, a compaction) the estimate of its request.
    const costUsd = reservation.usd > 0 || reservation === ZERO_ESTIMATE ? reservation.usd : request ? this.estimate(request) : 0;
    if (verdict.kind === 'invalid') {
      agent.logger.warn(
        { purpose, reason: verdict.reason, chargedUsd: costUsd },
        'the model reported usage that cannot be believed; the call is charged at its estimate',
      );
    } else {
      this.#sayOnce(agent, verdict.kind, purpose, costUsd);
    }
    return { costUsd, ...tokens };
  }

  /**
   * Say once per kind that calls are charged at their estimate: a warning and a
   * `budget.usageEstimated` event (journalled with the call's usage row), when it matters — a
   * limit is set or the charge is not $0 (a scripted step that reports and estimates nothing costs
   * nothing). An unpriced model's tokens with no limit and no estimate are logged once (they count $0).
   */
  #sayOnce(agent: Payer, kind: 'noUsage' | 'unpriced', purpose: UsagePurpose, chargedUsd: number): void {
    if (this.#said.has(kind)) return;
    const model = this.modelFor(purpose, agent.id).name ?? 'model';
    if (chargedUsd === 0 && this.#limitUsd() === null) {
      if (kind === 'unpriced' && !this.#unpricedLogged) this.#host.logger.warn({ model }, 'no price for this model: its calls count as $0 (set budget.prices)');
      this.#unpricedLogged ||= kind === 'unpriced';
      return;
    }
    this.#said.add(kind);
    const data = { model, reason: kind, purpose, chargedUsd };
    agent.logger.warn(data, UNPRICEABLE_LOG[kind]);
    this.#host.stage({
      op: 'appendEvent',
      row: { runId: this.#host.runId, agentId: agent.id, type: 'budget.usageEstimated', data, at: this.#host.clock.now() },
    });
  }

  /**
   * What a call may cost at most, as reserved before it is made: the model's `estimateCostUsd`
   * if it returns a sane amount (`isUsd`), else troupe's own estimate (logged once).
   */
  estimate(request: ModelRequest): number {
    const model = this.modelFor(request.purpose, request.agent?.id);
    if (model.estimateCostUsd) {
      const usd: unknown = model.estimateCostUsd(request);
      if (isUsd(usd)) return usd;
      if (!this.#badEstimate) {
        this.#badEstimate = true;
        this.#host.logger.warn(
          { estimate: typeof usd === 'number' ? usd : typeof usd },
          "model.estimateCostUsd returned no sane amount: troupe's own estimate is used instead",
        );
      }
    }
    const price = this.price(model);
    if (!price) return 0;
    const usd = priceUsage({ inputTokens: estimatePromptTokens(request), outputTokens: model.maxOutputTokens ?? DEFAULT_MAX_OUTPUT_TOKENS }, price);
    return Number.isFinite(usd) ? Math.min(Math.max(0, usd), MAX_USD_PER_CALL) : MAX_USD_PER_CALL;
  }
}
