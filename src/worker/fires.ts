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
 * - Fires for one run are serialised in this process. Two serving processes with the same trigger
 *   both fire: the second submit of a run finds it and posts instead.
 * @module
 */
import type { ProactiveFire } from '../autonomy/proactivePipeline.js';
import { isProactiveRunId, PROACTIVE_MESSAGE_TYPE, PROACTIVE_RUN_PREFIX } from '../autonomy/proactiveRouter.js';
import { ConfigError, TroupeError } from '../errors.js';
import { isValidAgentName } from '../host/options.js';
import type { HostingStore } from '../hosting/hostingStore.js';
import { submitRun, type SubmitOptions } from './submit.js';

/** What one fire did: a run submitted, or a message posted to a run's inbox (request `requestId`). */
export type FireRoute = { kind: 'started'; runId: string; agentId: string } | { kind: 'posted'; runId: string; agentId: string; requestId: number };

export interface DatabaseFiresOptions {
  /** Where the runs are: a run is submitted through it, a message posted to its inbox. */
  hosting: HostingStore;
  /** The serving process's main run: where `{ agent: name }` targets are looked up. */
  mainRunId?: string;
  /** What a new proactive run is submitted with (budget, limits, the settings saved with it). */
  submit?: Omit<SubmitOptions, 'root' | 'runId' | 'interactive'>;
  now?: () => number;
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
  const tails = new Map<string, Promise<unknown>>();

  const post = async (runId: string, agentId: string, prompt: string): Promise<FireRoute> => {
    const requestId = await hosting.post({ runId, kind: 'send', payload: { agent: agentId, content: prompt, type: PROACTIVE_MESSAGE_TYPE }, at: now() });
    return { kind: 'posted', runId, agentId, requestId };
  };

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
    return post(runId, found.id, fire.prompt);
  }

  async function toRoot(fire: ProactiveFire): Promise<FireRoute> {
    const runId = fire.sessionId;
    const existing = await hosting.reads.getRun(runId);
    if (existing) {
      if (existing.rootId === null) throw new TroupeError('RUN_NOT_FOUND', `Run ${runId} has no root agent`);
      return post(runId, existing.rootId, fire.prompt);
    }
    if (!isValidAgentName(fire.trigger)) {
      throw new ConfigError(`Trigger name ${JSON.stringify(fire.trigger)} cannot name the root of run ${runId}: it must be one line of 1..64 characters`, {
        details: { trigger: fire.trigger },
      });
    }
    try {
      const { rootId } = await submitRun(hosting, { ...options.submit, runId, interactive: true, root: { name: fire.trigger, task: fire.prompt } });
      return { kind: 'started', runId, agentId: rootId };
    } catch (err) {
      // Another serving process submitted it first: message it like any existing run.
      const raced = await hosting.reads.getRun(runId).catch(() => undefined);
      if (raced?.rootId) return post(runId, raced.rootId, fire.prompt);
      throw err;
    }
  }

  return {
    route(fire) {
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
    },
  };
}
