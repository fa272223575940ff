/**
 * Routes the fires of a {@link ProactiveManager} into runs: `router.onFire` is the manager's
 * `onFire`.
 *
 * - Target `{ root: true }`: the run id is the fire's session id (`proactive-<trigger name>`).
 *   A run the router already hosts gets the prompt as a user message to its root (type
 *   `proactive`); the runs are interactive, so a root that finished, failed or crashed is revived
 *   by it. A run the store already holds (after a restart) is resumed first, then messaged. Else a
 *   new interactive run is created whose root is named after the trigger, with the prompt as its
 *   task.
 * - Target `{ agent: name }`: the prompt goes to the agent with that name (or id) in `main` as a
 *   user message. No main run, or no such agent: rejected with `AGENT_NOT_FOUND`.
 * - Fires for one run are serialised, so two fires never create (or resume) two coordinators for
 *   the same run. A hosted coordinator that has failed (a fatal store error) is shut down and the
 *   run resumed on the next fire.
 * - `resumeUnfinished()` resumes the proactive runs of the store that were mid-work when the
 *   previous host stopped (an agent running or waiting on agents); the others wait for a fire.
 * - `close()` waits for the fires in progress, then shuts down every coordinator the router hosts
 *   (not `main`, which it does not own); persisted state stays resumable. Later fires reject with
 *   `COORDINATOR_SHUT_DOWN`.
 * @module
 */
import { isProactiveRunId, PROACTIVE_MESSAGE_TYPE, PROACTIVE_RUN_PREFIX } from './proactiveIds.js';
import type { Logger } from 'pino';
import { silentLogger } from '../logging/createLogger.js';
import type { Coordinator } from '../host/createCoordinator.js';
import { createCoordinator, resumeCoordinator } from '../worker/library.js';
import { isValidAgentName, type CoordinatorOptions } from '../host/options.js';
import { ConfigError, TroupeError } from '../errors.js';
import type { Model } from '../model/types.js';
import type { Store } from '../store/types.js';
import type { ProactiveFire } from './proactivePipeline.js';

export interface ProactiveRouterOptions {
  /** Where proactive runs live (and are found again after a restart). */
  store: Store;
  model: Model;
  /**
   * Options for every run the router creates or resumes. Runs are always interactive, and their
   * id is the fire's session id, so `interactive` and `runId` cannot be given.
   */
  coordinatorOptions?: Omit<CoordinatorOptions, 'model' | 'store' | 'runId' | 'interactive'>;
  /** The host's main run: where `{ agent: name }` targets are looked up. Not owned by the router. */
  main?: Coordinator;
  /** Default: a silent pino logger. Also given to the runs unless `coordinatorOptions.logger` is. */
  logger?: Logger;
  /** Called once for each coordinator the router starts hosting (to attach a view, an inbox, …). */
  onHost?: (coordinator: Coordinator, how: 'created' | 'resumed') => void;
}

/** What one fire did. */
export type RouteResult =
  /** A new run `runId` whose root `agentId` has the prompt as its task. */
  | { kind: 'started'; runId: string; agentId: string }
  /** The run was in the store, not hosted: resumed, then its root messaged. */
  | { kind: 'resumed'; runId: string; agentId: string; messageId: string }
  /** A hosted run's root, or an agent of the main run, was messaged. */
  | { kind: 'sent'; runId: string; agentId: string; messageId: string };

interface Hosted {
  readonly coordinator: Coordinator;
  readonly rootId: string;
}

export class ProactiveRouter {
  readonly #store: Store;
  readonly #model: Model;
  readonly #options: Omit<CoordinatorOptions, 'model' | 'store' | 'runId' | 'interactive'>;
  readonly #main: Coordinator | undefined;
  readonly #logger: Logger;
  readonly #onHost: ProactiveRouterOptions['onHost'];
  readonly #hosted = new Map<string, Hosted>();
  /** runId → the tail of that run's queue of fires. */
  readonly #locks = new Map<string, Promise<void>>();
  #closed = false;
  #closing: Promise<void> | undefined;

  constructor(options: ProactiveRouterOptions) {
    if (typeof options !== 'object' || options === null) throw new ConfigError('ProactiveRouter options must be an object');
    if (typeof options.store?.listRuns !== 'function') {
      throw new ConfigError(`Expected store to be a Store (openStore or memoryStore), got ${String(options.store)}`);
    }
    if (typeof options.model?.complete !== 'function') {
      throw new ConfigError(`Expected model to have a complete() method, got ${String(options.model)}`);
    }
    if (options.onHost !== undefined && typeof options.onHost !== 'function') throw new ConfigError('ProactiveRouter onHost must be a function');
    this.#store = options.store;
    this.#model = options.model;
    this.#main = options.main;
    this.#logger = options.logger ?? silentLogger();
    this.#options = { logger: this.#logger, ...options.coordinatorOptions };
    this.#onHost = options.onHost;
  }

  /** `ProactiveManager`'s `onFire`: routes the fire; rejects (a typed error) when it cannot. */
  readonly onFire = async (fire: ProactiveFire): Promise<void> => {
    await this.route(fire);
  };

  /** Routes one fire and says what it did. */
  route(fire: ProactiveFire): Promise<RouteResult> {
    if (this.#closed) return Promise.reject(closedError());
    if (typeof fire !== 'object' || fire === null || typeof fire.prompt !== 'string' || typeof fire.trigger !== 'string') {
      return Promise.reject(new ConfigError(`Expected a proactive fire { trigger, sessionId, prompt, target }, got ${String(fire)}`));
    }
    const target = fire.target ?? { root: true };
    if ('agent' in target) return this.#toMainAgent(fire, target.agent);
    if (typeof fire.sessionId !== 'string' || !isProactiveRunId(fire.sessionId)) {
      return Promise.reject(new ConfigError(`Expected a proactive session id "${PROACTIVE_RUN_PREFIX}<trigger>", got ${JSON.stringify(fire.sessionId)}`));
    }
    return this.#serial(fire.sessionId, () => this.#toRoot(fire));
  }

  /**
   * Resume every proactive run of the store that has work in progress — an agent running, waiting
   * on other agents or asleep until a time — so a restarted host finishes it without waiting for the trigger to
   * fire again. Runs parked on a user (or stalled, paused, finished) wait for their next fire.
   * A run that cannot be resumed is logged and skipped. Resolves with the ids resumed.
   */
  async resumeUnfinished(): Promise<string[]> {
    if (this.#closed) throw closedError();
    const busy = (a: { status: string; waitKind: string | null }) => a.status === 'running' || (a.status === 'waiting' && a.waitKind !== 'user');
    const resumed: string[] = [];
    for (const run of this.#store.listRuns()) {
      if (!isProactiveRunId(run.id) || run.rootId === null || this.#hosted.has(run.id)) continue;
      if (!this.#store.listAgents(run.id).some(busy)) continue;
      const rootId = run.rootId;
      try {
        await this.#serial(run.id, async () => {
          if (this.#closed || this.#hosted.has(run.id)) return;
          const coordinator = await resumeCoordinator({ ...this.#options, store: this.#store, model: this.#model, runId: run.id, interactive: true });
          this.#host(run.id, { coordinator, rootId }, 'resumed');
          resumed.push(run.id);
        });
      } catch (err) {
        this.#logger.error({ runId: run.id, err }, 'a proactive run with work in progress could not be resumed');
      }
    }
    if (resumed.length > 0) this.#logger.info({ runs: resumed }, 'resumed proactive runs with work in progress');
    return resumed;
  }

  /** The coordinator hosting `runId`, if this router hosts it. */
  get(runId: string): Coordinator | undefined {
    return this.#hosted.get(runId)?.coordinator;
  }

  /** Every coordinator this router hosts (not `main`). */
  coordinators(): Coordinator[] {
    return [...this.#hosted.values()].map((h) => h.coordinator);
  }

  /** Waits for fires in progress, then shuts down every hosted coordinator. Idempotent. */
  close(): Promise<void> {
    this.#closed = true;
    this.#closing ??= (async () => {
      // A fire queued behind another sees #closed and rejects; one in progress finishes first.
      while (this.#locks.size > 0) await Promise.allSettled([...this.#locks.values()]);
      const hosted = [...this.#hosted.values()];
      this.#hosted.clear();
      const results = await Promise.allSettled(hosted.map((h) => h.coordinator.shutdown()));
      for (const [i, r] of results.entries()) {
        if (r.status === 'rejected') this.#logger.warn({ runId: hosted[i]!.coordinator.runId, err: r.reason }, 'shutting down a proactive run failed');
      }
    })();
    return this.#closing;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  async #toMainAgent(fire: ProactiveFire, agent: string): Promise<RouteResult> {
    const main = this.#main;
    if (!main) {
      throw new TroupeError('AGENT_NOT_FOUND', `Trigger "${fire.trigger}" targets agent "${agent}", but there is no main run to find it in`, {
        details: { trigger: fire.trigger, agent },
      });
    }
    let agentId: string;
    try {
      agentId = main.get(agent).id;
    } catch (err) {
      if (err instanceof TroupeError && err.code === 'AGENT_NOT_FOUND') {
        throw new TroupeError('AGENT_NOT_FOUND', `Trigger "${fire.trigger}" targets agent "${agent}": ${err.message} in the main run ${main.runId}`, {
          cause: err,
          details: { trigger: fire.trigger, agent, runId: main.runId },
        });
      }
      throw err;
    }
    const sent = await main.send(agentId, { content: fire.prompt, from: 'user', type: PROACTIVE_MESSAGE_TYPE });
    this.#logger.info({ trigger: fire.trigger, runId: main.runId, agentId }, 'proactive fire sent to an agent of the main run');
    return { kind: 'sent', runId: main.runId, agentId, messageId: sent.id };
  }

  async #toRoot(fire: ProactiveFire): Promise<RouteResult> {
    if (this.#closed) throw closedError();
    const runId = fire.sessionId;
    let hosted = this.#hosted.get(runId);
    if (hosted && !hosted.coordinator.health().ok) {
      // A failed coordinator accepts nothing: let it go and resume the run from the store.
      this.#logger.warn({ runId, error: hosted.coordinator.health().error }, 'a proactive run failed; resuming it');
      this.#hosted.delete(runId);
      await hosted.coordinator.shutdown().catch((err: unknown) => this.#logger.warn({ runId, err }, 'shutting down a failed proactive run failed'));
      hosted = undefined;
    }
    if (hosted) {
      const sent = await hosted.coordinator.send(hosted.rootId, { content: fire.prompt, from: 'user', type: PROACTIVE_MESSAGE_TYPE });
      this.#logger.info({ trigger: fire.trigger, runId, agentId: hosted.rootId }, 'proactive fire sent to the root of its run');
      return { kind: 'sent', runId, agentId: hosted.rootId, messageId: sent.id };
    }

    const existing = this.#store.getRun(runId);
    if (existing) {
      if (existing.rootId === null) throw new TroupeError('RUN_NOT_FOUND', `Run ${runId} has no root agent`);
      const coordinator = await resumeCoordinator({ ...this.#options, store: this.#store, model: this.#model, runId, interactive: true });
      const rootId = existing.rootId;
      this.#host(runId, { coordinator, rootId }, 'resumed');
      const sent = await coordinator.send(rootId, { content: fire.prompt, from: 'user', type: PROACTIVE_MESSAGE_TYPE });
      this.#logger.info({ trigger: fire.trigger, runId, agentId: rootId }, 'proactive run resumed and its root messaged');
      return { kind: 'resumed', runId, agentId: rootId, messageId: sent.id };
    }

    if (!isValidAgentName(fire.trigger)) {
      throw new ConfigError(`Trigger name ${JSON.stringify(fire.trigger)} cannot name the root of run ${runId}: it must be one line of 1..64 characters`, {
        details: { trigger: fire.trigger },
      });
    }
    const coordinator = createCoordinator({ ...this.#options, store: this.#store, model: this.#model, runId, interactive: true });
    let rootId: string;
    try {
      rootId = await coordinator.start({ name: fire.trigger, task: fire.prompt });
    } catch (err) {
      await coordinator.shutdown().catch(() => undefined);
      throw err;
    }
    this.#host(runId, { coordinator, rootId }, 'created');
    this.#logger.info({ trigger: fire.trigger, runId, agentId: rootId }, 'proactive run started');
    return { kind: 'started', runId, agentId: rootId };
  }

  #host(runId: string, hosted: Hosted, how: 'created' | 'resumed'): void {
    this.#hosted.set(runId, hosted);
    try {
      this.#onHost?.(hosted.coordinator, how);
    } catch (err) {
      this.#logger.warn({ runId, err }, 'the onHost callback of the proactive router threw');
    }
  }

  /** Runs `fn` after every earlier call for `key` has settled. */
  #serial<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.#locks.get(key) ?? Promise.resolve();
    const result = previous.then(fn);
    const tail = result.then(
      () => undefined,
      () => undefined,
    );
    this.#locks.set(key, tail);
    void tail.then(() => {
      if (this.#locks.get(key) === tail) this.#locks.delete(key);
    });
    return result;
  }
}

const closedError = () => new TroupeError('COORDINATOR_SHUT_DOWN', 'The proactive router is closed');
