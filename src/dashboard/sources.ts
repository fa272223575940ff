/**
 * Where a dashboard reads from: a database file opened read-only (`troupe ui`; live or finished, a
 * cheap fingerprint polled for changes) or the store of a run this process drives (`--ui`; the
 * coordinator's event stream and read model say when to read again).
 * @module
 */
import type { Coordinator } from '../host/createCoordinator.js';
import type { RunStore } from '../hosting/runStore.js';
import { applyHere } from '../hosting/applyHere.js';
import { forkClaimed, forkRun } from '../fork/fork.js';
import type { AnswerHere } from './actions.js';
import { ownerAlive as isOwned } from '../store/ownerLock.js';
import { portOf } from '../store/port.js';
import type { StoreReads } from './readModel.js';
import type { Store } from '../store/types.js';
import type { DashboardSource } from './server.js';

/** What changes whenever a run does: budget flags, agents' statuses and counters, row counts. */
export async function fingerprint(port: StoreReads): Promise<string> {
  const runs = await port.listRuns();
  const parts: unknown[] = [];
  for (const run of runs.slice(-3)) {
    const [agents, events, messages, usage] = await Promise.all([
      port.listAgents(run.id),
      port.listEvents(run.id),
      port.listMessages(run.id),
      port.listUsage(run.id),
    ]);
    parts.push(
      run.id,
      run.budget,
      agents.map((a) => `${a.id}:${a.status}:${a.updatedAt}:${a.turns}`),
      events.length,
      messages.length,
      messages.filter((m) => m.deliveredAt !== null).length,
      usage.length,
    );
  }
  return JSON.stringify([runs.length, parts]);
}

/** A database file read without owning it: actions are possible while some process drives it. */
export function databaseSource(store: Store, db: string, pollMs = 1_000): DashboardSource {
  // The file's owner applies the inbox of the runs it drives (a finished one: see isLive).
  return polledSource(portOf(store), db, () => isOwned(db), pollMs);
}

/**
 * The runs of any store as a command outside them sees them (`troupe ui`): polled; a run is live
 * while a process hosts it (its claim holds), and actions go to its inbox, which that host applies.
 */
export function runsSource(runs: Pick<RunStore, 'reads' | 'label' | 'hostOf' | 'post' | 'request' | 'claim'>, pollMs = 1_000): DashboardSource {
  return {
    ...polledSource(runs.reads, runs.label, async (runId) => (await runs.hostOf(runId)).hosted, pollMs),
    inbox: runs,
    answerHere: answerHere(runs),
    fork: (runId, at) => forkClaimed(runs, runId, at),
  };
}

/** The CLI's way to a run nobody hosts (cli/mail.ts): claim it, post the request, apply it here, let it go. */
const answerHere =
  (runs: Pick<RunStore, 'post' | 'claim'>): AnswerHere =>
  async (runId, request) => {
    const claim = await runs.claim(runId);
    if (claim === null) return null;
    let id: number;
    try {
      id = await runs.post({ runId, ...request, at: Date.now() });
    } catch (err) {
      await claim.release({ state: 'runnable' });
      throw err;
    }
    return (await applyHere(claim)).get(id) ?? null;
  };

/**
 * Any store's reads, polled for changes (a cheap fingerprint every `pollMs`): a file another
 * process may drive, or a PostgreSQL database workers drive (`troupe ui --db postgres://…`).
 */
export function polledSource(port: StoreReads, db: string, live: DashboardSource['live'], pollMs = 1_000): DashboardSource {
  return {
    port,
    db,
    live,
    watch(changed) {
      let last = '';
      let busy = false;
      const timer = setInterval(() => {
        if (busy) return;
        busy = true;
        fingerprint(port)
          .then((now) => {
            if (now !== last) changed();
            last = now;
          })
          .catch(() => changed())
          .finally(() => (busy = false));
      }, pollMs);
      timer.unref();
      return () => clearInterval(timer);
    },
  };
}

/** Changes pushed by a coordinator this process hosts: its events (not token deltas) and its actors. */
export function coordinatorWatch(c: Pick<Coordinator, 'subscribe' | 'registry'>): DashboardSource['watch'] {
  return (changed) => {
    const unsubscribe = c.subscribe((event) => {
      if (event.type !== 'agent.delta') changed();
    });
    const sub = c.registry.subscribe(() => changed());
    return () => {
      unsubscribe();
      sub.unsubscribe();
    };
  };
}

/**
 * The store of a run this process drives. `live` says whether its inbox is served now (false once
 * the run ended and the dashboard lingers); other runs of the database are not live here.
 */
export function coordinatorSource(c: Pick<Coordinator, 'subscribe' | 'registry' | 'runId'>, store: Store, db: string, live: () => boolean): DashboardSource {
  // This process owns the store: a fork is written here, beside the run (it reads only what was committed).
  return {
    port: portOf(store),
    db,
    live: (runId) => runId === c.runId && live(),
    watch: coordinatorWatch(c),
    fork: (runId, at) => forkRun(store, runId, { at }),
  };
}
