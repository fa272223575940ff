/**
 * The hosting port over a SQLite file this process owns (hostingStore.ts). The owner lock is the
 * lease of every run in the file for as long as the process holds it (its boot number is the
 * fencing token, stamped on rows), so a claim here only says which runs this process hosts now.
 *
 * - No other host exists to hand a run to: what wants a host is kept here, in memory — a run let
 *   go runnable, or parked until a deadline, or woken (`wake`, `post`) — and the runs with
 *   requests other processes posted to the inbox, read from the file. `claimNext` takes the first
 *   of those that is not hosted (only a host that goes looking, `troupe serve`, calls it).
 * - Wakes are told to listeners in this process; requests other processes post are found at the
 *   worker's poll (SQLite has no push).
 * @module
 */
import type { Logger } from 'pino';
import { TroupeError } from '../errors.js';
import { portOf } from '../store/port.js';
import type { RunLease } from '../store/postgres/lease.js';
import type { SqliteStore } from '../store/sqliteStore.js';
import type { HostingStore } from './hostingStore.js';

export interface SqliteHosting extends HostingStore {
  /** Say that `runId` wants a host from `at` on (a parked run's deadline; 0: now) without telling the listeners. */
  want(runId: string, at: number): void;
}

export function sqliteHosting(store: SqliteStore, now: () => number = Date.now): SqliteHosting {
  const claimed = new Set<string>();
  /** Runs that want a host, and from when. */
  const wanted = new Map<string, number>();
  /** Wakes told per run since this process began (its wake sequence): a release is conditional on it. */
  const woken = new Map<string, number>();
  const listeners = new Set<(runId: string) => void>();
  const port = portOf(store);
  const want = (runId: string, at: number) => {
    const before = wanted.get(runId);
    if (before === undefined || at < before) wanted.set(runId, at);
  };
  const wake = (runId: string) => {
    woken.set(runId, (woken.get(runId) ?? 0) + 1);
    want(runId, 0);
    for (const l of [...listeners]) l(runId);
  };

  function claim(runId: string, owner: string): RunLease {
    if (claimed.has(runId)) throw new TroupeError('RUN_LOCKED', `run ${runId} is hosted in this process already`);
    claimed.add(runId);
    wanted.delete(runId);
    return {
      runId,
      owner,
      epoch: store.boot,
      port,
      lost: null,
      check: () => null,
      onLost: () => undefined,
      renew: () => Promise.resolve(true),
      release(state, ifWakeSeq) {
        // A request posted since the host last looked, or a wake told since it read the sequence, wants it hosted on.
        if (store.openInbox(runId).length > 0) return Promise.resolve(false);
        if (ifWakeSeq !== undefined && (woken.get(runId) ?? 0) > ifWakeSeq) return Promise.resolve(false);
        claimed.delete(runId);
        // Its host looked after every wake told so far (the sequence held): none of them wants it
        // now (a request they announced was applied), so it is not handed out again for them.
        if (ifWakeSeq !== undefined) wanted.delete(runId);
        if (state.state === 'runnable') want(runId, 0);
        else if (state.state === 'parked' && state.wakeAt !== null) want(runId, state.wakeAt);
        return Promise.resolve(true);
      },
      abandon: () => void claimed.delete(runId),
    };
  }

  return {
    want,
    reads: { getRun: (id) => Promise.resolve(store.getRun(id)), listAgents: (id) => Promise.resolve(store.listAgents(id)) },
    claim(runId, options) {
      try {
        return Promise.resolve(claim(runId, options.owner));
      } catch (err) {
        return Promise.reject(err as Error);
      }
    },
    claimNext(options) {
      const due = now();
      const next = store.inboxRuns().find((id) => !claimed.has(id)) ?? [...wanted].find(([id, at]) => at <= due && !claimed.has(id))?.[0];
      return Promise.resolve(next === undefined ? null : claim(next, options.owner));
    },
    wake(runId) {
      wake(runId);
      return Promise.resolve();
    },
    post(request) {
      const id = store.postInbox(request);
      wake(request.runId);
      return Promise.resolve(id);
    },
    claimFire(claim, request) {
      try {
        const claimed = store.claimFire(claim, request);
        if (claimed.claimed && request) wake(request.runId);
        return Promise.resolve(claimed);
      } catch (err) {
        return Promise.reject(err as Error);
      }
    },
    pruneFires: (before) => Promise.resolve(store.pruneFires(before)),
    fireClaimedAt: (key) => Promise.resolve(store.fireClaimedAt(key)),
    moveFireClaim: (key, from, to) => Promise.resolve(store.moveFireClaim(key, from, to)),
    openRequests: (runId) => Promise.resolve(store.openInbox(runId)),
    wakeSeq: (runId) => Promise.resolve(woken.get(runId) ?? 0),
    nextWakeIn() {
      const due = now();
      let next: number | null = null;
      for (const [runId, at] of wanted) if (at > due && !claimed.has(runId) && (next === null || at < next)) next = at;
      return Promise.resolve(next === null ? null : next - due);
    },
    listen(onWake: (runId: string) => void, _logger: Logger) {
      listeners.add(onWake);
      return Promise.resolve(() => {
        listeners.delete(onWake);
        return Promise.resolve();
      });
    },
  };
}
