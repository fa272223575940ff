/**
 * The run's budget as turns see it (DESIGN §3): every model call is priced and written to the
 * usage ledger; before a paid call the gate applies the coordinator's flags and reserves an
 * estimate of the call, settled to the real cost afterwards, so parallel children cannot overshoot
 * the limit by one call each. Auxiliary calls (compaction, …) are priced and deducted the same way
 * but never refused. A call whose usage cannot be believed or priced (invalid, missing, tokens
 * with no price) is charged its reservation, else the estimate of its request: never $0 unseen.
 * @module
 */
import type { Logger } from 'pino';
import type { BudgetFlags } from '../../../machines/coordinatorMachine.js';
import type { TurnOutcome } from '../../../machines/types.js';
import type { Model, ModelRequest, UsagePurpose } from '../../model/types.js';
import type { Charge, Reservation } from '../../turn/ports.js';
import type { ResolvedOptions } from '../options.js';
import { BudgetWarnings } from './warnings.js';
import { CallPricing, ZERO_ESTIMATE, type PricingHost, type UsageReport } from './pricing.js';
import { Allowances, EPS, usedOf, type Account, type AllowanceHost, type Refusal } from './allowances.js';

export type { Reservation };

/** The calling agent, as the ledger needs it. */
type Payer = { readonly id: string; readonly name?: string; readonly parentId: string | null; readonly logger: Logger };

/** `$0.0712` under a dollar, `$4.50` above. */
const usd = (value: number) => `$${value.toFixed(value >= 1 ? 2 : 4)}`;

/** What the ledger needs of its host. */
export interface LedgerHost extends PricingHost {
  readonly budget: ResolvedOptions['budget'];
  /** The coordinator's budget flags now. */
  flags(): BudgetFlags;
  /**
   * Trip the reserve or the budget stop (the coordinator decides; the flags are staged with it).
   * `reason` says why in words, for views; `agentId` made the call that tripped it.
   */
  trip(event: 'budget.stop' | 'budget.reserveTrip', reason: string, agentId: string): void;
  /** Book spend against an agent (its views and `spentByPurpose`). */
  spent(agentId: string, purpose: UsagePurpose, usd: number): void;
  /** An agent's parent (the allowances' tree). */
  agent(id: string): ({ readonly name: string } & NonNullable<ReturnType<AllowanceHost['agent']>>) | undefined;
  rootId(): string | null;
  /** Whether the reserve of `ownerId`'s allowance has tripped (the coordinator's, persisted through its notice). */
  reserveTripped(ownerId: string): boolean;
  /** Trip an allowance's reserve, or stop its subtree (`allowance`); `agentId` made the call. */
  tripAllowance(kind: 'reserve' | 'allowance', ownerId: string, allowanceUsd: number, reason: string, agentId: string): void;
}

/** How `record` books a call: why it was made, what was reserved for it, and its request. */
export interface RecordOptions {
  purpose?: UsagePurpose;
  reservation?: Reservation;
  request?: ModelRequest;
}

/** Nothing reserved, nothing estimated (no limit set, or a call never reserved: a compaction). */
const NO_RESERVATION: Reservation = Object.freeze({ usd: 0, settled: true }) as Reservation;
/** A call admitted with nothing to reserve: no limit set. */
const FREE: Admission = Object.freeze({ reservation: NO_RESERVATION });
/** A call admitted under a limit with an estimate of $0. */
const FREE_ESTIMATED: Admission = Object.freeze({ reservation: ZERO_ESTIMATE });

const WAIT = Symbol('wait');

/** A main call admitted with its reservation, or the outcome that stops it. */
export type Admission = { reservation: Reservation } | { outcome: TurnOutcome };

export class BudgetLedger {
  readonly #host: LedgerHost;
  #spentUsd: number;
  #reservedUsd = 0;
  /** Reservations not yet settled (a count, so float residue never looks like a call in flight). */
  #open = 0;
  /** Callers waiting for an in-flight reservation to settle. */
  #settleWaiters = new Set<() => void>();
  /** Which model, at what price, and each call's charge (pricing.ts). */
  readonly #pricing: CallPricing;
  /** The warnings given (warnings.ts). */
  readonly #warnings: BudgetWarnings;
  /** Budgets per subtree (allowances.ts); `allowances.none` keeps every call on the run-wide fast path. */
  readonly allowances: Allowances;

  constructor(host: LedgerHost, spentUsd = 0) {
    this.#host = host;
    this.#spentUsd = spentUsd;
    this.#pricing = new CallPricing(host, () => this.limitUsd);
    this.#warnings = new BudgetWarnings(host);
    this.allowances = new Allowances({ agent: (id) => host.agent(id) }, host.budget);
  }

  /** The run's account, its limit current (allowances in use only). */
  #runAccount(): Account {
    return this.allowances.run(this.#host.rootId() ?? '', this.limitUsd, this.#spentUsd, this.#reservedUsd);
  }

  /**
   * Why a spawn under `parentId` cannot be given `allowanceUsd` (the hold must fit the parent's account
   * under its reserve line, and every account above), or null.
   */
  allowanceRefusal(parentId: string, allowanceUsd: number): string | null {
    this.#runAccount();
    const from = this.allowances.accountOf(parentId);
    const refusal = this.allowances.refusal(from, allowanceUsd, null);
    if (!refusal) return null;
    const { account } = refusal;
    const cap = this.allowances.cap(account, false) ?? 0;
    const whose = account.parent === null ? "the run's budget" : `the allowance of ${this.#host.agent(account.owner)?.name ?? account.owner}`;
    const left = Math.max(0, cap - usedOf(account));
    return `an allowance of ${usd(allowanceUsd)} does not fit: ${whose} has ${usd(left)} left to give under its sub-agent line ${usd(cap)}`;
  }

  /**
   * Why `parentId` may spawn no sub-agent at all (as the run's tripped reserve refuses every spawn):
   * an allowance above it, its own included, spent or past its tripped reserve; else null.
   */
  spawnBlocked(parentId: string): string | null {
    if (this.allowances.none) return null;
    for (let a: Account | null = this.allowances.accountOf(parentId); a?.parent; a = a.parent) {
      if (a.spent >= (a.allowanceUsd ?? 0) - EPS) return `the allowance of ${this.#ownerName(a)} is spent; no new sub-agents`;
      if (this.#host.reserveTripped(a.owner)) return `the sub-agent reserve of ${this.#ownerName(a)}'s allowance is reached; no new sub-agents`;
    }
    return null;
  }

  /** A child was registered with an allowance: its account opens, holding the allowance on its parent's. */
  openAllowance(childId: string, usd: number): void {
    this.#runAccount();
    this.allowances.open(childId, usd, true);
  }

  /** Resume: rebuild the accounts from the agent rows and their spend. */
  restoreAllowances(rows: Parameters<Allowances['restore']>[2], spentOf: (id: string) => number): void {
    this.allowances.restore(this.#host.rootId() ?? '', this.limitUsd, rows, spentOf);
  }

  get spentUsd(): number {
    return this.#spentUsd;
  }

  get reservedUsd(): number {
    return this.#reservedUsd;
  }

  get limitUsd(): number | null {
    return this.#host.flags().limitUsd;
  }
  /** Which model a call of this purpose goes to, and is priced as (pricing.ts). */
  modelFor(purpose: UsagePurpose | undefined, agentId?: string): Model {
    return this.#pricing.modelFor(purpose, agentId);
  }

  /** What a call may cost at most, as reserved before it is made (pricing.ts). */
  estimate(request: ModelRequest): number {
    return this.#pricing.estimate(request);
  }

  /**
   * Record one call's usage (priced, or charged at its estimate if invalid, missing or unpriceable),
   * release its reservation, and under the stop policy trip the reserve or the budget stop when due
   * — all in one transaction. `request` is the call's request: with nothing reserved (and no
   * estimate made), such a call is charged at the estimate of its request.
   */
  record(agent: Payer, answer: UsageReport | undefined, { purpose = 'main', reservation = NO_RESERVATION, request }: RecordOptions = {}): Charge {
    const host = this.#host;
    const charged = this.#pricing.charge(agent, answer, reservation, request, purpose);
    const { costUsd } = charged;
    const row = {
      runId: host.runId,
      agentId: agent.id,
      purpose,
      model: this.modelFor(purpose, agent.id).name ?? 'model',
      inputTokens: charged.inputTokens,
      outputTokens: charged.outputTokens,
      cachedInputTokens: charged.cachedInputTokens,
      costUsd,
      at: host.clock.now(),
    };
    host.stage({ op: 'recordUsage', row });
    this.#spentUsd += costUsd;
    host.spent(agent.id, purpose, costUsd);
    const limitUsd = this.limitUsd;
    if (limitUsd !== null && host.budget.policy === 'stop') {
      const spent = `${agent.name ?? agent.id}'s call brought the spend to ${usd(this.#spentUsd)}`;
      if (this.#spentUsd >= limitUsd) host.trip('budget.stop', `${spent}, at or past the limit ${usd(limitUsd)}`, agent.id);
      else if (this.#spentUsd >= host.budget.reserveFraction * limitUsd) {
        host.trip(
          'budget.reserveTrip',
          `${spent}, past the sub-agent reserve line ${usd(host.budget.reserveFraction * limitUsd)} (${Math.round(host.budget.reserveFraction * 100)} % of ${usd(limitUsd)})`,
          agent.id,
        );
      }
    }
    if (!this.allowances.none) this.#spendInAllowances(agent, costUsd);
    this.release(reservation);
    return charged;
  }

  /**
   * Book a call on its allowance accounts and trip what it crossed: an account spent to its
   * allowance stops its whole subtree (`allowance`, either policy: an allowance never pauses); one
   * past its reserve line (stop policy) stops the subtree but its owner, who is told once.
   */
  #spendInAllowances(agent: Payer, costUsd: number): void {
    const host = this.#host;
    this.allowances.spend(agent.id, costUsd);
    for (let a: Account | null = this.allowances.accountOf(agent.id); a?.parent; a = a.parent) {
      const allowance = a.allowanceUsd ?? 0;
      const before = a.spent - costUsd;
      const said = `${agent.name ?? agent.id}'s call brought the spend of ${this.#ownerName(a)}'s subtree to ${usd(a.spent)}`;
      if (a.spent >= allowance - EPS) {
        if (before < allowance - EPS) host.tripAllowance('allowance', a.owner, allowance, `${said}, its allowance ${usd(allowance)}`, agent.id);
      } else if (host.budget.policy === 'stop' && a.spent >= host.budget.reserveFraction * allowance && !host.reserveTripped(a.owner)) {
        host.tripAllowance('reserve', a.owner, allowance, `${said}, past its sub-agent reserve line ${usd(host.budget.reserveFraction * allowance)}`, agent.id);
      }
    }
  }

  #ownerName(a: Account): string {
    return this.#host.agent(a.owner)?.name ?? a.owner;
  }

  /** Give back a reservation whose call ended without usage (failed, aborted). Idempotent. */
  release(reservation: Reservation): void {
    if (reservation.settled) return;
    if (!this.allowances.none) this.allowances.unreserve(reservation);
    reservation.settled = true;
    this.#open -= 1;
    this.#reservedUsd = this.#open === 0 ? 0 : Math.max(0, this.#reservedUsd - reservation.usd);
    if (this.#settleWaiters.size === 0) return; // every turn settles; few wait for it
    const waiters = [...this.#settleWaiters];
    this.#settleWaiters.clear();
    for (const wake of waiters) wake();
  }

  /** The flags' verdict before a paid call: a stopped budget ends the turn, the pause policy parks it. */
  gate(agent: Payer): TurnOutcome | null {
    const flags = this.#host.flags();
    const { policy } = this.#host.budget;
    if (flags.budgetStopped) return { kind: 'stopped', reason: 'budget' };
    if (flags.reserveStopped && agent.parentId !== null) return { kind: 'stopped', reason: 'reserve' };
    if (policy === 'pause' && (flags.paused || (flags.limitUsd !== null && this.#spentUsd >= flags.limitUsd))) {
      return { kind: 'budgetPaused', epoch: flags.resumeEpoch };
    }
    return this.allowances.none ? null : this.#gateAllowances(agent);
  }

  /** Whether the reserve of an allowance above `agentId` (not its own) tripped: `wait_for_agents` answers `reserve_stopped`. */
  allowanceReserveStopped(agentId: string): boolean {
    if (this.allowances.none) return false;
    for (let a: Account | null = this.allowances.accountOf(agentId); a?.parent; a = a.parent) {
      if (a.owner !== agentId && this.#host.reserveTripped(a.owner)) return true;
    }
    return false;
  }

  /** An account above the agent spent to its allowance stops it; a tripped reserve stops all but the account's owner. */
  #gateAllowances(agent: Payer): TurnOutcome | null {
    for (let a: Account | null = this.allowances.accountOf(agent.id); a?.parent; a = a.parent) {
      if (a.spent >= (a.allowanceUsd ?? 0) - EPS) return { kind: 'stopped', reason: 'allowance' };
      if (a.owner !== agent.id && this.#host.reserveTripped(a.owner)) return { kind: 'stopped', reason: 'reserve' };
    }
    return null;
  }

  /**
   * Admit a paid call: apply the gate, then reserve its estimate. A call is made only if what is
   * spent and reserved plus its estimate fits under the limit — for a sub-agent under the reserve
   * line (`reserveFraction` of the limit, stop policy), so children can never eat the root's share.
   * If it does not fit but other calls are in flight, it waits for one to settle and tries again;
   * if nothing is in flight, the stop policy trips the reserve (a child) or the budget stop (the
   * root), and the pause policy parks the agent.
   */
  admit(agent: Payer, request: ModelRequest, signal: AbortSignal): Promise<Admission> {
    // Decided at once unless the call must wait for calls in flight to settle (no async frame then).
    const now = this.#tryAdmit(agent, request);
    return now === WAIT ? this.#admitAfterWaits(agent, request, signal) : Promise.resolve(now);
  }

  async #admitAfterWaits(agent: Payer, request: ModelRequest, signal: AbortSignal): Promise<Admission> {
    for (;;) {
      await this.#nextSettlement(signal);
      const now = this.#tryAdmit(agent, request);
      if (now !== WAIT) return now;
    }
  }

  /** The gate, then the estimate against the cap: admitted, refused, or WAIT (calls in flight may free room). */
  #tryAdmit(agent: Payer, request: ModelRequest): Admission | typeof WAIT {
    const outcome = this.gate(agent);
    if (outcome) return { outcome };
    if (!this.allowances.none) return this.#tryAdmitInAllowances(agent, request);
    const limitUsd = this.limitUsd;
    if (limitUsd === null) return FREE;
    const cap = this.#cap(limitUsd, agent.parentId !== null);
    const usd = this.estimate(request);
    if (this.#spentUsd + this.#reservedUsd + usd <= cap) {
      if (usd === 0) return FREE_ESTIMATED;
      this.#reservedUsd += usd;
      this.#open += 1;
      return { reservation: { usd, settled: false } };
    }
    if (this.#open > 0) return WAIT;
    return { outcome: this.#refuse(agent, usd) };
  }

  /** With allowances: the call's estimate must fit every account from the caller's up to the run's. */
  #tryAdmitInAllowances(agent: Payer, request: ModelRequest): Admission | typeof WAIT {
    this.#runAccount();
    const usd = this.estimate(request);
    const refusal = this.allowances.refusal(this.allowances.accountOf(agent.id), usd, agent.id);
    if (refusal === null) {
      if (usd === 0) return FREE_ESTIMATED;
      const reservation: Reservation = { usd, settled: false };
      this.#reservedUsd += usd;
      this.#open += 1;
      this.allowances.reserve(agent.id, reservation);
      return { reservation };
    }
    if (this.#open > 0) return WAIT;
    return { outcome: this.#refuseIn(agent, refusal, usd) };
  }

  /**
   * A call does not fit `refusal.account`: the run's account refuses as it always did; an
   * allowance's owner (or anyone, under the pause policy: an allowance never pauses) stops the
   * subtree (`allowance`); anyone else trips the allowance's reserve.
   */
  #refuseIn(agent: Payer, refusal: Refusal, estimateUsd: number | null): TurnOutcome {
    const { account, byOwner } = refusal;
    const host = this.#host;
    const line = this.allowances.cap(account, byOwner);
    if (!byOwner && host.budget.policy === 'stop' && line !== null && account.spent + account.reserved + (estimateUsd ?? 0) <= line + EPS) {
      // What is spent and in flight fits: the room is held by allowances given below, which are
      // theirs. Only this caller is refused; tripping the reserve would stop those it protects.
      agent.logger.warn(
        { account: account.owner, lineUsd: line, spentUsd: account.spent },
        'refused: what is left under the reserve line is held by allowances',
      );
      return { kind: 'stopped', reason: 'reserve' };
    }
    if (account.parent === null) return this.#refuse(agent, estimateUsd);
    const allowance = account.allowanceUsd ?? 0;
    const spent = this.allowances.cap(account, byOwner) ?? allowance;
    const committed = `${usd(account.spent)} spent${usedOf(account) - account.spent > EPS ? ` + ${usd(usedOf(account) - account.spent)} reserved or held` : ''}`;
    const what = `${agent.name ?? agent.id}'s next call${estimateUsd === null ? '' : `, estimated at ${usd(estimateUsd)},`} would take ${committed} of ${this.#ownerName(account)}'s allowance past ${usd(spent)}`;
    if (byOwner || host.budget.policy === 'pause') {
      host.tripAllowance('allowance', account.owner, allowance, what, agent.id);
      return { kind: 'stopped', reason: 'allowance' };
    }
    host.tripAllowance('reserve', account.owner, allowance, what, agent.id);
    return { kind: 'stopped', reason: 'reserve' };
  }

  /**
   * Admit an optional call made on an agent's behalf (a background review): like a sub-agent's
   * call it must fit under the reserve line (stop policy) or the limit, but it never waits and
   * never trips anything — it is refused (null) and simply not made.
   */
  admitOptional(request: ModelRequest): Reservation | null {
    if (!this.optionalFits()) return null;
    const limitUsd = this.limitUsd;
    if (limitUsd === null) return NO_RESERVATION;
    const usd = this.estimate(request);
    if (this.#committedUsd() + usd > this.#cap(limitUsd, true)) return null;
    if (usd === 0) return ZERO_ESTIMATE;
    this.#reservedUsd += usd;
    this.#open += 1;
    const reservation: Reservation = { usd, settled: false };
    if (!this.allowances.none) this.allowances.reserve(null, reservation);
    return reservation;
  }

  /** Whether an optional call may still start: no stop, reserve or pause, and spend under its cap. */
  optionalFits(): boolean {
    const flags = this.#host.flags();
    if (flags.budgetStopped || flags.reserveStopped || flags.paused) return false;
    const limitUsd = flags.limitUsd;
    return limitUsd === null || this.#committedUsd() <= this.#cap(limitUsd, true) + 1e-9;
  }

  /** What the run's account has committed: spent and reserved, plus what allowances hold beyond it. */
  #committedUsd(): number {
    return this.allowances.none ? this.#spentUsd + this.#reservedUsd : usedOf(this.#runAccount());
  }

  /** What a call may bring spent + reserved up to: the reserve line for a child's (or an optional) call under the stop policy, else the limit. */
  #cap(limitUsd: number, belowReserve: boolean): number {
    const { policy, reserveFraction } = this.#host.budget;
    return policy === 'stop' && belowReserve ? reserveFraction * limitUsd : limitUsd;
  }

  /**
   * Nothing fits: the pause policy parks the agent; the stop policy trips the reserve (a child) or
   * the stop. `estimateUsd` is what the refused call would have reserved (null: the limit was
   * lowered under what is already spent and reserved).
   */
  #refuse(agent: Payer, estimateUsd: number | null): TurnOutcome {
    const host = this.#host;
    const child = agent.parentId !== null;
    if (host.budget.policy === 'pause') return { kind: 'budgetPaused', epoch: host.flags().resumeEpoch };
    const limitUsd = this.limitUsd ?? 0;
    const line = this.#cap(limitUsd, child);
    const lineText = child
      ? `the sub-agent reserve line ${usd(line)} (${Math.round(host.budget.reserveFraction * 100)} % of ${usd(limitUsd)})`
      : `the limit ${usd(limitUsd)}`;
    const committed = `${usd(this.#spentUsd)} spent${this.#reservedUsd > 0 ? ` + ${usd(this.#reservedUsd)} reserved` : ''}`;
    const reason =
      estimateUsd === null
        ? `${committed} is past ${lineText}`
        : `${agent.name ?? agent.id}'s next call, estimated at ${usd(estimateUsd)}, would take ${committed} past ${lineText}`;
    host.trip(child ? 'budget.reserveTrip' : 'budget.stop', reason, agent.id);
    return { kind: 'stopped', reason: child ? 'reserve' : 'budget' };
  }

  /**
   * Right before an admitted call starts (after queueing or a retry's backoff): the gate again,
   * and whether what is spent and reserved still fits — an operator may have lowered the limit.
   */
  recheck(agent: Payer): TurnOutcome | null {
    const gated = this.gate(agent);
    if (gated) return gated;
    if (!this.allowances.none) {
      this.#runAccount();
      const refusal = this.allowances.refusal(this.allowances.accountOf(agent.id), 0, agent.id);
      return refusal ? this.#refuseIn(agent, refusal, null) : null;
    }
    const limitUsd = this.limitUsd;
    if (limitUsd === null) return null;
    const child = agent.parentId !== null;
    return this.#spentUsd + this.#reservedUsd > this.#cap(limitUsd, child) + 1e-9 ? this.#refuse(agent, null) : null;
  }

  #nextSettlement(signal: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (signal.aborted) {
        reject(signal.reason);
        return;
      }
      const wake = () => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      };
      const onAbort = () => {
        this.#settleWaiters.delete(wake);
        reject(signal.reason);
      };
      this.#settleWaiters.add(wake);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  /**
   * The warning appended to this call's input only (stop policy, limit set): the highest band the
   * spend has crossed, or null. Never persisted; the pause policy never tells the model anything.
   */
  warning(agent: Pick<Payer, 'id' | 'parentId'>): string | null {
    if (this.#host.budget.policy !== 'stop') return null;
    const account = this.allowances.none ? null : this.allowances.accountOf(agent.id);
    // In an allowance's subtree the bands are against that allowance.
    if (account?.parent) return this.#warnings.warn(agent, account.spent, account.allowanceUsd ?? 0, false, account.owner === agent.id);
    const limitUsd = this.limitUsd;
    if (limitUsd === null) return null;
    return this.#warnings.warn(agent, this.#spentUsd, limitUsd, true);
  }
}
