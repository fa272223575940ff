/**
 * Proactive fires (`troupe serve`): a fire becomes rows in the database, never a coordinator of the
 * serving process, so it reaches its run whichever process hosts it (on PostgreSQL any worker; on
 * a SQLite file the serving process, which owns it), and survives that host dying (the next host
 * applies it).
 *
 * - Target `{ root: true }`: the run is `proactive-<trigger name>`. A new one is submitted
 *   (interactive, its root named after the trigger, the prompt as its task, the serve's settings
 *   saved with it) and any worker claims it. An existing one gets the prompt as a `proactive`
 *   message to its root, posted to its inbox: its host (or the next worker to claim it) delivers
 *   it, reviving a root that finished.
 * - Target `{ agent: name }`: the agent of that name (or id) in the main run gets the prompt the
 *   same way. No main run, or no such agent: `AGENT_NOT_FOUND`, at once.
 * - A tick fires once (issue 33 item 6): a fire with a tick (a schedule's scheduled time, an
 *   event's id) is claimed by a row keyed by (scope: the run it goes to, trigger, tick), insert-or-
 *   ignore, and only the claimant routes it; every other serving process or worker that sees the
 *   same tick gets `taken`. A message is posted in the claim's own transaction, so a crash leaves
 *   both or neither. The one fire that submits run `proactive-<name>` claims first and then
 *   submits (a run is created under its own lease, outside any transaction of the claim). So a
 *   process that finds such a tick taken waits for the run: if its claimant dies between the two,
 *   the claim is taken over (compare-and-set on its time: one process does) once it is
 *   `claimGraceMs` old, and the taker submits; a submit that fails releases the claim, and a
 *   waiting process claims the tick again. A late submit finding the run made by the same fire
 *   (its root's task is this fire's prompt) counts it as done, not as a second fire. Claims older than
 *   `retentionMs` are pruned (at most once an hour). A fire without a tick (a file change, a
 *   threshold, a manual fire without an `event_id`) is not claimed: every process that sees it fires it.
 * - Fires for one run are serialised in this process; a fire that finds another process creating
 *   its run waits for the run's root (up to 10 s) and posts to it.
 * @module
 */
import type { ProactiveFire } from './proactivePipeline.js';
import { isProactiveRunId, PROACTIVE_MESSAGE_TYPE, PROACTIVE_RUN_PREFIX } from './proactiveIds.js';
import { ConfigError, TroupeError } from '../errors.js';
import { isValidAgentName } from '../host/options.js';
import type { HostingStore } from '../hosting/hostingStore.js';
import type { FireClaim } from '../store/types.js';
import { submitRun, type SubmitOptions } from '../worker/submit.js';

/** What one fire did: a run submitted, a message posted to a run's inbox (request `requestId`), or nothing: its tick was claimed by another fire. */
export type FireRoute =
  | { kind: 'started'; runId: string; agentId: string }
  | { kind: 'posted'; runId: string; agentId: string; requestId: number }
  | { kind: 'taken'; runId: string; tick: string };

/** How long a fire's claim is kept by default: a week. */
const DEFAULT_RETENTION_MS = 7 * 24 * 3_600_000;
const PRUNE_EVERY_MS = 3_600_000;
/** How long a fire whose submit failed waits for the root of a run another process may be submitting. */
const DEFAULT_RACED_SUBMIT_WAIT_MS = 10_000;
/** A submit's own lease lasts 60 s (submit.ts): a claim older than that without its run lost its claimant. */
const DEFAULT_CLAIM_GRACE_MS = 60_000;

export interface DatabaseFiresOptions {
  /** Where the runs are: a run is submitted through it, a message posted to its inbox. */
  hosting: HostingStore;
  /** The serving process's main run: where `{ agent: name }` targets are looked up. */
  mainRunId?: string;
  /** What a new proactive run is submitted with (budget, limits, the settings saved with it). */
  submit?: Omit<SubmitOptions, 'root' | 'runId' | 'interactive'>;
  now?: () => number;
  /** Fire claims older than this are pruned; default a week. */
  retentionMs?: number;
  /** A tick claimed this long ago (on `now`) with no run yet: its claimant is taken to have died; default 60 s. */
  claimGraceMs?: number;
  /** How long (wall time) a fire whose submit failed waits for a run another process may be submitting; default 10 s. */
  racedSubmitWaitMs?: number;
}

export interface DatabaseFires {
  /** Route one fire; rejects with a typed error when it cannot. */
  route(fire: ProactiveFire): Promise<FireRoute>;
  /** Wait for the fires being routed (no new ones are refused: stop the triggers first). */
  settled(): Promise<void>;
}

export function databaseFires(options: DatabaseFiresOptions): DatabaseFires {
  const { hosting } = options;
  const now = options.now ?? Date.now;
  const retentionMs = options.retentionMs ?? DEFAULT_RETENTION_MS;
  const graceMs = options.claimGraceMs ?? DEFAULT_CLAIM_GRACE_MS;
  const racedWaitMs = options.racedSubmitWaitMs ?? DEFAULT_RACED_SUBMIT_WAIT_MS;
  const tails = new Map<string, Promise<unknown>>();
  let prunedAt: number | null = null;
  let pruning: Promise<void> = Promise.resolve();

  const claimOf = (fire: ProactiveFire, scope: string, tick: string): FireClaim => ({ scope, trigger: fire.trigger, tick, at: now() });

  /** Post the prompt; with a tick, only if this call claims it (the claim and the post are one transaction). */
  const post = async (fire: ProactiveFire, runId: string, agentId: string): Promise<FireRoute> => {
    const request = { runId, kind: 'send' as const, payload: { agent: agentId, content: fire.prompt, type: PROACTIVE_MESSAGE_TYPE }, at: now() };
    if (fire.tick === undefined) return { kind: 'posted', runId, agentId, requestId: await hosting.post(request) };
    const claimed = await hosting.claimFire(claimOf(fire, runId, fire.tick), request);
    if (!claimed.claimed) return { kind: 'taken', runId, tick: fire.tick };
    return { kind: 'posted', runId, agentId, requestId: claimed.requestId! };
  };

  /** Best effort, at most once an hour: a failed prune is tried again at the next fire. */
  const prune = async (): Promise<void> => {
    const at = now();
    if (prunedAt !== null && at - prunedAt < PRUNE_EVERY_MS) return;
    try {
      await hosting.pruneFires(at - retentionMs);
      prunedAt = at;
    } catch {
      // Claims are kept a little longer; nothing depends on their going.
    }
  };

  /** The root of a run another process is submitting, once its rows are in (or undefined after the wait). */
  async function rootOf(runId: string): Promise<string | undefined> {
    const until = Date.now() + racedWaitMs;
    for (;;) {
      const run = await hosting.reads.getRun(runId).catch(() => undefined);
      if (run?.rootId) return run.rootId;
      if (Date.now() >= until) return undefined;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /**
   * A tick another fire claimed for a run not made yet: wait for the run; if it does not come
   * within the grace, take the claim over (or claim the tick again if it was released). Whether
   * this fire now holds the tick (`at`: its claim's time).
   */
  async function takeOver(fire: ProactiveFire, runId: string, tick: string): Promise<{ at: number } | null> {
    const key = { scope: runId, trigger: fire.trigger, tick };
    const until = Date.now() + graceMs + racedWaitMs;
    for (;;) {
      if (await hosting.reads.getRun(runId)) return null;
      const seen = await hosting.fireClaimedAt(key);
      const at = now();
      if (seen === null) return (await hosting.claimFire({ ...key, at })).claimed ? { at } : null;
      if (at - seen >= graceMs) return (await hosting.moveFireClaim(key, seen, at)) ? { at } : null;
      if (Date.now() >= until) return null;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  async function toMainAgent(fire: ProactiveFire, agent: string): Promise<FireRoute> {
    const runId = options.mainRunId;
    if (runId === undefined) {
      throw new TroupeError('AGENT_NOT_FOUND', `Trigger "${fire.trigger}" targets agent "${agent}", but there is no main run to find it in`, {
        details: { trigger: fire.trigger, agent },
      });
    }
    const agents = await hosting.reads.listAgents(runId);
    const found = agents.find((a) => a.id === agent) ?? agents.findLast((a) => a.name === agent);
    if (!found) {
      throw new TroupeError('AGENT_NOT_FOUND', `Trigger "${fire.trigger}" targets agent "${agent}": no such agent in the main run ${runId}`, {
        details: { trigger: fire.trigger, agent, runId },
      });
    }
    return post(fire, runId, found.id);
  }

  async function toRoot(fire: ProactiveFire): Promise<FireRoute> {
    const runId = fire.sessionId;
    const existing = await hosting.reads.getRun(runId);
    if (existing) {
      if (existing.rootId === null) throw new TroupeError('RUN_NOT_FOUND', `Run ${runId} has no root agent`);
      return post(fire, runId, existing.rootId);
    }
    if (!isValidAgentName(fire.trigger)) {
      throw new ConfigError(`Trigger name ${JSON.stringify(fire.trigger)} cannot name the root of run ${runId}: it must be one line of 1..64 characters`, {
        details: { trigger: fire.trigger },
      });
    }
    // Claimed before the submit: only the claimant of this tick creates or messages the run.
    let held: { at: number } | null = null;
    if (fire.tick !== undefined) {
      const claim = claimOf(fire, runId, fire.tick);
      held = (await hosting.claimFire(claim)).claimed ? { at: claim.at } : await takeOver(fire, runId, fire.tick);
      if (!held) return { kind: 'taken', runId, tick: fire.tick };
    }
    try {
      const { rootId } = await submitRun(hosting, { ...options.submit, runId, interactive: true, root: { name: fire.trigger, task: fire.prompt } });
      return { kind: 'started', runId, agentId: rootId };
    } catch (err) {
      const rootId = await rootOf(runId);
      if (rootId === undefined) {
        // Not submitted: the tick is let go for another fire of it to route, not dropped.
        if (held && fire.tick !== undefined)
          await hosting.moveFireClaim({ scope: runId, trigger: fire.trigger, tick: fire.tick }, held.at, null).catch(() => false);
        throw err;
      }
      // This very fire's run, made by a claimant taken for dead: the tick is done.
      const root = (await hosting.reads.listAgents(runId)).find((a) => a.id === rootId);
      if (fire.tick !== undefined && root?.task === fire.prompt) return { kind: 'taken', runId, tick: fire.tick };
      // Another fire (another tick, another process) submitted it first: message its root, this tick being ours.
      const requestId = await hosting.post({ runId, kind: 'send', payload: { agent: rootId, content: fire.prompt, type: PROACTIVE_MESSAGE_TYPE }, at: now() });
      return { kind: 'posted', runId, agentId: rootId, requestId };
    }
  }

  return {
    route(fire) {
      if (fire.tick !== undefined) pruning = pruning.then(prune);
      const target = fire.target ?? { root: true };
      if ('agent' in target) return toMainAgent(fire, target.agent);
      if (typeof fire.sessionId !== 'string' || !isProactiveRunId(fire.sessionId)) {
        return Promise.reject(new ConfigError(`Expected a proactive session id "${PROACTIVE_RUN_PREFIX}<trigger>", got ${JSON.stringify(fire.sessionId)}`));
      }
      const result = (tails.get(fire.sessionId) ?? Promise.resolve()).then(() => toRoot(fire));
      const tail = result.catch(() => undefined);
      tails.set(fire.sessionId, tail);
      void tail.then(() => {
        if (tails.get(fire.sessionId) === tail) tails.delete(fire.sessionId);
      });
      return result;
    },
    async settled() {
      while (tails.size > 0) await Promise.allSettled([...tails.values()]);
      await pruning;
    },
  };
}
