/**
 * Budgets per subtree (issue 35): a spawn may give the child an allowance, which opens an
 * *account* owned by that child; every agent spends from its nearest ancestor's account (itself
 * if it has one), and the run's account (the run's limit, none = unlimited) is at the top.
 *
 * Invariants (the hold model):
 * - `used(a)` = spent + reserved by the account's own members + the holds of its child accounts;
 * - a child account holds `max(allowance, used)` on its parent while its owner is active, only
 *   `used` once the owner is terminal (the unspent allowance returns), and its allowance again if
 *   the owner is revived;
 * - a call (or a spawn with an allowance) is admitted only if the increase of `used` it causes fits
 *   every account of the chain from the caller's up to the run's: the owner of an account may go
 *   to its allowance, anyone else (and any child hold) only to its reserve line (stop policy).
 *
 * Holds are kept incrementally (`#bump` walks up the chain while a hold changes); nothing here is
 * persisted: a resume rebuilds every account from the agents' terms, statuses and the usage ledger.
 * With no allowance anywhere `none` is true and the ledger never calls in here on a call's path.
 * @module
 */
import { isActive, type AgentStatus } from '../../../machines/types.js';
import type { AgentTerms } from '../../store/types.js';
import type { Reservation } from '../../turn/ports.js';

/** Float residue tolerated by the fit checks (a sum of many settled calls). */
export const EPS = 1e-9;

/** One account: the run's (`owner` its root, `allowanceUsd` its limit or null) or an allowance's. */
export interface Account {
  readonly owner: string;
  /** The allowance; for the run's account its limit (null: none), kept current by the ledger. */
  allowanceUsd: number | null;
  readonly parent: Account | null;
  /** Spent + reserved by the account's own members (agents whose nearest account this is). */
  own: number;
  /** What the child accounts hold on this one. */
  holds: number;
  /** Spent in the whole subtree (the owner's and every descendant's calls). */
  spent: number;
  /** Reserved by calls in flight in the whole subtree. */
  reserved: number;
  /**
   * Whether the account holds its allowance on its parent: from the spawn while its owner is active;
   * false once the owner ends (the unspent part returns) and again true when it is revived, if the
   * allowance fits its parent again (else its calls are held to every account above, as spend).
   */
  active: boolean;
}

/** What the accounts need of the run. */
export interface AllowanceHost {
  /** An agent's parent and terms (undefined: unknown agent). */
  agent(id: string): { readonly parentId: string | null } | undefined;
}

/** A refusal: the account whose cap the call would break, and whether the caller owns it. */
export interface Refusal {
  readonly account: Account;
  readonly byOwner: boolean;
}

export const usedOf = (a: Account): number => a.own + a.holds;
const holdOf = (a: Account): number => (a.active ? Math.max(a.allowanceUsd ?? 0, usedOf(a)) : usedOf(a));

export class Allowances {
  readonly #host: AllowanceHost;
  readonly #policy: 'stop' | 'pause';
  readonly #reserveFraction: number;
  /** The run's account (its owner is the root; created when the first allowance opens). */
  #run: Account | null = null;
  /** Allowance accounts by owner id. */
  readonly #accounts = new Map<string, Account>();
  /** Each agent's nearest account (cached: parents never change). */
  readonly #accountOf = new Map<string, Account>();
  /** Parents read from the rows at resume. */
  readonly #restoredParents = new Map<string, string | null>();
  /** Where each reservation in flight was made. */
  readonly #reservedOn = new WeakMap<Reservation, Account>();

  constructor(host: AllowanceHost, budget: { policy: 'stop' | 'pause'; reserveFraction: number }) {
    this.#host = host;
    this.#policy = budget.policy;
    this.#reserveFraction = budget.reserveFraction;
  }

  /** No allowance anywhere: the ledger keeps its run-wide fast path. */
  get none(): boolean {
    return this.#accounts.size === 0;
  }

  get accounts(): Iterable<Account> {
    return this.#accounts.values();
  }

  account(ownerId: string): Account | undefined {
    return this.#accounts.get(ownerId);
  }

  /** The run's account, its limit brought up to date. */
  run(rootId: string, limitUsd: number | null, spentUsd: number, reservedUsd: number): Account {
    if (this.#run && this.none) {
      // Until the first allowance opens nothing keeps the run's account: it is what the ledger says
      // (in place: agents' cached accounts point at it).
      Object.assign(this.#run, { own: spentUsd + reservedUsd, holds: 0, spent: spentUsd, reserved: reservedUsd });
    } else if (!this.#run) {
      // Everything spent before the first allowance opened is the run's own.
      this.#run = {
        owner: rootId,
        allowanceUsd: limitUsd,
        parent: null,
        own: spentUsd + reservedUsd,
        holds: 0,
        spent: spentUsd,
        reserved: reservedUsd,
        active: true,
      };
    }
    this.#run.allowanceUsd = limitUsd;
    return this.#run;
  }

  /** The account `agentId` spends from: its own, else its nearest ancestor's, else the run's. */
  accountOf(agentId: string): Account {
    const cached = this.#accountOf.get(agentId);
    if (cached) return cached;
    const own = this.#accounts.get(agentId);
    const parentId = this.#parentOf(agentId);
    const found = own ?? (parentId ? this.accountOf(parentId) : this.#run!);
    this.#accountOf.set(agentId, found);
    return found;
  }

  /** The chain of accounts from `agentId`'s up to the run's. */
  chain(agentId: string): Account[] {
    const out: Account[] = [];
    for (let a: Account | null = this.accountOf(agentId); a; a = a.parent) out.push(a);
    return out;
  }

  /** What a member of `a` may bring `used(a)` up to (null: no cap). */
  cap(a: Account, byOwner: boolean): number | null {
    if (a.allowanceUsd === null) return null;
    return this.#policy === 'stop' && !byOwner ? this.#reserveFraction * a.allowanceUsd : a.allowanceUsd;
  }

  /**
   * Whether raising `used` of `from` by `usd` fits every account up the chain (null), else the
   * lowest account it would break. `caller`: an owner's own call may go to its
   * allowance (a spawn passes null: a hold is always sub-agent spending).
   */
  refusal(from: Account, usd: number, caller: string | null): Refusal | null {
    let d = usd;
    for (let a: Account | null = from; a; a = a.parent) {
      const byOwner = caller !== null && a.owner === caller && a === from;
      const cap = this.cap(a, byOwner);
      if (cap !== null && usedOf(a) + d > cap + EPS) return { account: a, byOwner };
      const used = usedOf(a) + d;
      d = (a.active ? Math.max(a.allowanceUsd ?? 0, used) : used) - holdOf(a);
    }
    return null;
  }

  /** Reserve for a call of `agentId` (null: an optional call, on the run's account), already checked to fit. */
  reserve(agentId: string | null, reservation: Reservation): void {
    const a = agentId === null ? this.#run! : this.accountOf(agentId);
    this.#reservedOn.set(reservation, a);
    this.#bump(a, 'own', reservation.usd);
    for (let x: Account | null = a; x; x = x.parent) x.reserved += reservation.usd;
  }

  /** A reservation settles or is given back (before `settled` is set). */
  unreserve(reservation: Reservation): void {
    // Not mapped: made before the first allowance opened, so counted in the run's own at its creation.
    const a = this.#reservedOn.get(reservation) ?? this.#run;
    if (!a) return;
    this.#reservedOn.delete(reservation);
    this.#bump(a, 'own', -reservation.usd);
    for (let x: Account | null = a; x; x = x.parent) x.reserved = Math.max(0, x.reserved - reservation.usd);
  }

  /** A call of `agentId` cost `usd`: booked on its account and every one above. */
  spend(agentId: string, usd: number): void {
    const a = this.accountOf(agentId);
    this.#bump(a, 'own', usd);
    for (let x: Account | null = a; x; x = x.parent) x.spent += usd;
  }

  /** Open the account of a child given an allowance (at spawn or at resume). */
  open(ownerId: string, allowanceUsd: number, active: boolean): Account {
    const parentId = this.#parentOf(ownerId);
    const parent = parentId ? this.accountOf(parentId) : this.#run!;
    const account: Account = { owner: ownerId, allowanceUsd, parent, own: 0, holds: 0, spent: 0, reserved: 0, active };
    this.#accounts.set(ownerId, account);
    this.#accountOf.set(ownerId, account);
    this.#bump(parent, 'holds', holdOf(account));
    return account;
  }

  /** An agent's status changed: an owner that ends returns its unspent allowance, one revived holds it again (if it fits). */
  changed(agentId: string, status: AgentStatus): void {
    const a = this.#accounts.get(agentId);
    if (!a) return;
    const active = isActive(status);
    if (active === a.active) return;
    // A revival holds the allowance again only if it fits the accounts above, as at spawn.
    if (active && a.parent && this.refusal(a.parent, Math.max(0, (a.allowanceUsd ?? 0) - usedOf(a)), null) !== null) return;
    const before = holdOf(a);
    a.active = active;
    if (a.parent) this.#bump(a.parent, 'holds', holdOf(a) - before);
  }

  /** Rebuild from the agent rows (parents first) and each agent's spend, at resume. */
  restore(
    rootId: string,
    limitUsd: number | null,
    rows: readonly { id: string; parentId: string | null; status: AgentStatus; terms: AgentTerms | null }[],
    spentOf: (id: string) => number,
  ): void {
    if (!rows.some((row) => row.terms?.allowanceUsd !== undefined)) return;
    this.run(rootId, limitUsd, 0, 0);
    // Before the agents are respawned: their parents are read from the rows.
    for (const row of rows) this.#restoredParents.set(row.id, row.parentId);
    for (const row of rows) {
      const allowance = row.terms?.allowanceUsd;
      if (allowance !== undefined) this.open(row.id, allowance, isActive(row.status));
    }
    for (const row of rows) {
      const usd = spentOf(row.id);
      if (usd > 0) this.spend(row.id, usd);
    }
  }

  #parentOf(id: string): string | null {
    const restored = this.#restoredParents.get(id);
    return restored === undefined ? (this.#host.agent(id)?.parentId ?? null) : restored;
  }

  /** Add `d` to `field` of `a`, and carry the change of its hold up the chain. */
  #bump(start: Account, field: 'own' | 'holds', delta: number): void {
    let a: Account | null = start;
    let d = delta;
    let f = field;
    while (a && d !== 0) {
      const before = holdOf(a);
      a[f] += d;
      d = holdOf(a) - before;
      a = a.parent;
      f = 'holds';
    }
  }
}
