/**
 * Budgets per subtree (issue 35), on the ledger itself: random trees with random allowances, a run
 * limit or none, and random interleavings of spawns, calls admitted concurrently (some waiting for
 * a settlement), settlements at or under their estimate, failures, ends and revivals. Whatever the
 * order: no subtree spends (nor commits: spent + reserved + held) past its allowance, the run
 * never past its limit, every account's
 * incremental `used` equals its definition recomputed from scratch, and an owner that ends with
 * its subtree settled gives back exactly its allowance less what its subtree spent.
 */
import { fc, test } from '@fast-check/vitest';
import { pino } from 'pino';
import { expect } from 'vitest';
import { SimulatedClock } from 'xstate';
import { isActive, type AgentStatus, type TurnOutcome } from '../../machines/types.js';
import { usedOf, type Account } from '../../src/host/calls/allowances.js';
import { BudgetLedger, type Admission, type Reservation } from '../../src/host/calls/budget.js';
import { resolveBudget } from '../../src/host/resolveOptions.js';
import type { ModelRequest } from '../../src/model/types.js';

const EPS = 1e-6;
const logger = pino({ level: 'silent' });

const node = (i: number) =>
  fc.record({
    // Chains more often than not: the accounts above a caller are what is at stake.
    parent: fc.oneof(fc.constant(i - 1), fc.integer({ min: 0, max: i - 1 })),
    allowance: fc.option(fc.integer({ min: 1, max: 8 }), { nil: undefined, freq: 2 }),
  });

const action = fc.oneof(
  { weight: 2, arbitrary: fc.record({ t: fc.constant('spawn' as const) }) },
  {
    weight: 6,
    arbitrary: fc.record({ t: fc.constant('call' as const), who: fc.nat(), est: fc.integer({ min: 0, max: 300 }), share: fc.integer({ min: 0, max: 100 }) }),
  },
  { weight: 5, arbitrary: fc.record({ t: fc.constant('settle' as const), k: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('fail' as const), k: fc.nat() }) },
  { weight: 3, arbitrary: fc.record({ t: fc.constant('end' as const), who: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('revive' as const), who: fc.nat() }) },
);

const scenario = fc.record({
  limitUsd: fc.option(fc.integer({ min: 3, max: 20 }), { nil: null }),
  policy: fc.constantFrom('stop' as const, 'pause' as const),
  tree: fc.integer({ min: 2, max: 6 }).chain((n) => fc.tuple(...Array.from({ length: n - 1 }, (_, i) => node(i + 1)))),
  actions: fc.array(action, { minLength: 10, maxLength: 80 }),
});

const replay = process.env.PROPERTY_SEED
  ? { seed: Number(process.env.PROPERTY_SEED), ...(process.env.PROPERTY_PATH ? { path: process.env.PROPERTY_PATH } : {}), endOnFailure: true }
  : {};

/** Drain the microtasks a waiting admission needs to retry after a settlement (no timers). */
const drain = async () => {
  for (let i = 0; i < 20; i++) await Promise.resolve();
};

test.prop([scenario], { numRuns: Number(process.env.PROPERTY_RUNS ?? 3000), ...replay })(
  'allowances: no subtree past its allowance, the run never past its limit, returns add up',
  async ({ limitUsd, policy, tree, actions }) => {
    const n = tree.length + 1;
    const id = (i: number) => `a${i}`;
    const parentOf = (i: number): number | null => (i === 0 ? null : tree[i - 1]!.parent);
    const allowanceOf = (i: number): number | undefined => (i === 0 ? undefined : tree[i - 1]!.allowance);
    const status = new Map<string, AgentStatus>();
    const spawned = new Set<number>([0]);
    const refused = new Set<number>();
    const spentBy = new Map<string, number>();
    const flags = { limitUsd, budgetStopped: false, reserveStopped: false, paused: false, resumeEpoch: 0, reserveNoticeClaimed: false };
    const tripped = new Set<string>();
    const inFlight: { who: number; reservation: Reservation; costUsd: number }[] = [];
    const waiting = new Set<number>();
    const cancels: AbortController[] = [];
    status.set(id(0), 'running');

    const subtree = (i: number): number[] => [i, ...[...spawned].filter((j) => parentOf(j) === i).flatMap(subtree)];
    const setStatus = (i: number, to: AgentStatus) => {
      status.set(id(i), to);
      ledger.allowances.changed(id(i), to);
    };
    const stopAll = (ids: number[]) => {
      for (const j of ids) if (isActive(status.get(id(j))!)) setStatus(j, 'stopped');
    };
    const budget = resolveBudget(limitUsd === null ? { policy } : { limitUsd, policy });
    const ledger: BudgetLedger = new BudgetLedger({
      runId: 'run',
      clock: new SimulatedClock(),
      logger,
      auxiliaryModel: null,
      model: {
        name: 'property',
        estimateCostUsd: (request) => (request as ModelRequest & { est: number }).est,
        complete: () => Promise.reject(new Error('unused')),
      },
      budget,
      flags: () => flags,
      trip: (event) => {
        if (event === 'budget.stop') {
          flags.budgetStopped = true;
          stopAll([...spawned]);
        } else if (!flags.reserveStopped) {
          flags.reserveStopped = true;
          stopAll([...spawned].filter((j) => j !== 0));
        }
      },
      stage: () => undefined,
      spent: () => undefined,
      agent: (agentId) => {
        const i = Number(agentId.slice(1));
        return spawned.has(i) ? { name: agentId, parentId: i === 0 ? null : id(parentOf(i)!) } : undefined;
      },
      rootId: () => id(0),
      reserveTripped: (ownerId) => tripped.has(ownerId),
      tripAllowance: (kind, ownerId) => {
        const owner = Number(ownerId.slice(1));
        if (kind === 'reserve') tripped.add(ownerId);
        stopAll(subtree(owner).filter((j) => kind === 'allowance' || j !== owner));
      },
    });
    const payer = (i: number) => ({ id: id(i), name: id(i), parentId: i === 0 ? null : id(parentOf(i)!), logger });
    const took = (i: number, admitted: Admission) => {
      if ('reservation' in admitted) inFlight.push({ who: i, reservation: admitted.reservation, costUsd: 0 });
      else halted(i, admitted.outcome);
    };
    const halted = (i: number, outcome: TurnOutcome) => {
      if (outcome.kind === 'stopped' && isActive(status.get(id(i))!)) setStatus(i, 'stopped');
    };

    /** `used` by its definition, from the agents' spend and calls in flight (the account's own fields unread but `active`). */
    const accountOf = (i: number): number => {
      for (let j: number | null = i; j !== null; j = parentOf(j)) if (allowanceOf(j) !== undefined && spawned.has(j) && !refused.has(j) && j !== 0) return j;
      return 0;
    };
    const spendOf = (i: number) => (spentBy.get(id(i)) ?? 0) + inFlight.filter((c) => c.who === i).reduce((sum, c) => sum + c.reservation.usd, 0);
    const reference = (owner: number): number => {
      let used = 0;
      for (const j of spawned) {
        if (refused.has(j)) continue;
        if (j !== owner && j !== 0 && allowanceOf(j) !== undefined && parentOf(j) !== null && accountOf(parentOf(j)!) === owner) {
          const child = ledger.allowances.account(id(j))!;
          const u = reference(j);
          used += child.active ? Math.max(allowanceOf(j)!, u) : u;
        } else if (accountOf(j) === owner) used += spendOf(j);
      }
      return used;
    };
    const subtreeSpend = (i: number) => subtree(i).reduce((sum, j) => sum + (spentBy.get(id(j)) ?? 0), 0);

    const check = () => {
      for (const i of spawned) {
        const allowance = allowanceOf(i);
        if (allowance === undefined || refused.has(i)) continue;
        // No subtree spends past its allowance.
        expect(subtreeSpend(i)).toBeLessThanOrEqual(allowance + EPS);
        const account = ledger.allowances.account(id(i))!;
        expect(usedOf(account)).toBeCloseTo(reference(i), 6);
        // Nor commits past it: spent, reserved and held together.
        expect(usedOf(account)).toBeLessThanOrEqual(allowance + EPS);
      }
      if (limitUsd !== null) expect(subtreeSpend(0)).toBeLessThanOrEqual(limitUsd + EPS);
      if (limitUsd !== null && !ledger.allowances.none) expect(usedOf(ledger.allowances.accountOf(id(0)))).toBeLessThanOrEqual(limitUsd + EPS);
    };

    for (const a of actions) {
      switch (a.t) {
        case 'spawn': {
          const i = [...Array(n).keys()].find((j) => !spawned.has(j));
          if (i === undefined) break;
          const parent = parentOf(i)!;
          // Only a running parent spawns; a refused one's subtree never exists.
          if (refused.has(parent) || !spawned.has(parent) || status.get(id(parent)) !== 'running') {
            spawned.add(i);
            refused.add(i);
            break;
          }
          const allowance = allowanceOf(i);
          spawned.add(i);
          if (allowance !== undefined && ledger.allowanceRefusal(id(parent), allowance) !== null) {
            refused.add(i);
            break;
          }
          status.set(id(i), 'running');
          if (allowance !== undefined) ledger.openAllowance(id(i), allowance);
          break;
        }
        case 'call': {
          const live = [...spawned].filter((j) => !refused.has(j) && status.get(id(j)) === 'running' && !waiting.has(j));
          if (live.length === 0) break;
          const i = live[a.who % live.length]!;
          const est = a.est / 100;
          const cost = Math.floor(a.est * a.share) / 10_000;
          const cancel = new AbortController();
          cancels.push(cancel);
          // Decided at once or after calls in flight settle: either way a promise (drained below).
          waiting.add(i);
          ledger.admit(payer(i), { est } as unknown as ModelRequest, cancel.signal).then(
            (r) => {
              waiting.delete(i);
              took(i, r);
              if ('reservation' in r) inFlight.at(-1)!.costUsd = cost;
            },
            () => waiting.delete(i),
          );
          break;
        }
        case 'settle':
        case 'fail': {
          if (inFlight.length === 0) break;
          const [c] = inFlight.splice(a.k % inFlight.length, 1);
          if (a.t === 'fail') ledger.release(c!.reservation);
          else {
            ledger.record(payer(c!.who), { usage: { costUsd: c!.costUsd } }, { reservation: c!.reservation });
            spentBy.set(id(c!.who), (spentBy.get(id(c!.who)) ?? 0) + c!.costUsd);
          }
          break;
        }
        case 'end': {
          const live = [...spawned].filter(
            (j) => j !== 0 && !refused.has(j) && isActive(status.get(id(j))!) && !waiting.has(j) && !inFlight.some((c) => c.who === j),
          );
          if (live.length === 0) break;
          const i = live[a.who % live.length]!;
          const allowance = allowanceOf(i);
          const settledSubtree =
            allowance !== undefined &&
            subtree(i).every((j) => j === i || refused.has(j) || !isActive(status.get(id(j))!)) &&
            !inFlight.some((c) => subtree(i).includes(c.who));
          const account: Account | undefined = ledger.allowances.account(id(i));
          const parent = account ? ledger.allowances.accountOf(id(parentOf(i)!)) : null;
          const before = parent ? usedOf(parent) : 0;
          const held = account?.active === true;
          setStatus(i, 'completed');
          // The return: the parent's account has its allowance back, less what the subtree spent.
          if (settledSubtree && parent && held) {
            expect(usedOf(parent)).toBeCloseTo(before - Math.max(0, allowance - subtreeSpend(i)), 6);
          }
          break;
        }
        case 'revive': {
          const ended = [...spawned].filter((j) => j !== 0 && !refused.has(j) && status.get(id(j)) === 'completed');
          if (ended.length === 0) break;
          setStatus(ended[a.who % ended.length]!, 'running');
          break;
        }
      }
      await drain();
      check();
    }
    for (const cancel of cancels) cancel.abort(new Error('end'));
    await drain();
  },
);
