/**
 * The pipeline every trigger event goes through, automatic or manual (`fireNow`):
 * 1. cooldown: an event less than `cooldownMs` (default 5 min) after the last event that passed
 *    this check is dropped, counted and audited (`proactive.trigger_dropped`). The cooldown starts
 *    when an event passes the check, so a denied event also starts it (a human is not asked again
 *    on every poll);
 * 2. the prompt is rendered from `promptTemplate` ({@link renderTemplate});
 * 3. with `requiresConfirmation`, the {@link ApprovalGate} is asked (risk `mutation`, action = the
 *    trigger name, agentId = the session id `proactive-<name>`, so one approval covers that
 *    trigger's fires during the gate's window); denied, or no gate configured → counted and
 *    audited (`proactive.trigger_denied`), nothing fires. An automatic event whose approval
 *    arrives after its manager stopped (`live` says no) is discarded;
 * 4. `proactive.trigger_fired` is audited and `onFire` is called; an `onFire` that throws or
 *    rejects is logged, counted (`failed`) and audited (`proactive.fire_failed`).
 * A trigger's `TriggerState` (its counters and cooldown) is changed only here.
 * @module
 */
import type { Cron } from 'croner';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { ApprovalGate } from './approvalGate.js';
import type { EventBus } from './eventBus.js';
import { globToRegExp, renderTemplate } from './proactiveTemplate.js';
import { errorMessage, makeCron, type ProactiveTarget, type ProactiveTrigger } from './proactiveTrigger.js';

export interface ProactiveFire {
  trigger: string;
  /** `proactive-<trigger name>`. */
  sessionId: string;
  prompt: string;
  target: ProactiveTarget;
  /** `clock.now()` when it fired. */
  at: number;
  /**
   * Which tick this fire is, the same in every process that sees it (its claim's key): a
   * schedule's scheduled time in ms, or `event:<event_id>`; absent for an event without one.
   */
  tick?: string;
}

export interface TriggerStats {
  /** Fires that reached `onFire` (including those whose onFire then failed). */
  fired: number;
  /** Events dropped by the cooldown. */
  dropped: number;
  /** Events denied by the approval gate (or for want of one). */
  denied: number;
  /** Fires whose `onFire` threw or rejected. */
  failed: number;
  lastFiredAt: number | null;
}

const DEFAULT_COOLDOWN_MS = 300_000;

export interface TriggerState {
  readonly trigger: ProactiveTrigger;
  readonly sessionId: string;
  readonly cooldownMs: number;
  readonly target: ProactiveTarget;
  readonly patterns: RegExp[] | undefined;
  readonly cron: Cron | undefined;
  readonly stats: TriggerStats;
  /** When the last event passed the cooldown check; null before the first. */
  cooldownFrom: number | null;
}

/** Where an event came from: a watcher / timer / poll of one `start()` epoch, or `fireNow`. */
export type Origin = { epoch: number } | 'manual';

/** A trigger's state before its first event; `t` is a validated trigger, copied. */
export function newTriggerState(t: ProactiveTrigger): TriggerState {
  const trigger: ProactiveTrigger = {
    ...t,
    ...(t.watchPatterns ? { watchPatterns: [...t.watchPatterns] } : {}),
    ...(t.target ? { target: { ...t.target } } : {}),
  };
  return {
    trigger,
    sessionId: `proactive-${t.name}`,
    cooldownMs: t.cooldownMs ?? DEFAULT_COOLDOWN_MS,
    target: trigger.target ?? { root: true },
    patterns: trigger.watchPatterns?.map(globToRegExp),
    cron: t.cron !== undefined ? makeCron(t.cron, t.timezone) : undefined,
    stats: { fired: 0, dropped: 0, denied: 0, failed: 0, lastFiredAt: null },
    cooldownFrom: null,
  };
}

export interface PipelineOptions {
  onFire: (fire: ProactiveFire) => void | Promise<void>;
  gate: ApprovalGate | undefined;
  bus: EventBus | undefined;
  clock: Clock;
  logger: Logger;
  /** Whether an event of this origin may still fire (asked again after an approval settles). */
  live: (origin: Origin) => boolean;
}

export class TriggerPipeline {
  readonly #onFire: PipelineOptions['onFire'];
  readonly #gate: ApprovalGate | undefined;
  readonly #bus: EventBus | undefined;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #live: PipelineOptions['live'];
  /** `onFire` calls in progress. */
  readonly #firing = new Set<Promise<void>>();

  constructor(options: PipelineOptions) {
    this.#onFire = options.onFire;
    this.#gate = options.gate;
    this.#bus = options.bus;
    this.#clock = options.clock;
    this.#logger = options.logger;
    this.#live = options.live;
  }

  /**
   * One event through the pipeline; resolves whether it fired (reached onFire). `scheduled`: the
   * schedule's tick (its time, not when this process noticed it), which is also its `timestamp`.
   */
  async attempt(state: TriggerState, extra: Record<string, string>, origin: Origin, scheduled?: number): Promise<boolean> {
    const { trigger, stats } = state;
    const now = this.#clock.now();
    if (state.cooldownFrom !== null && now - state.cooldownFrom < state.cooldownMs) {
      stats.dropped++;
      const remainingMs = state.cooldownMs - (now - state.cooldownFrom);
      this.#logger.debug({ trigger: trigger.name, remainingMs }, 'proactive trigger dropped (cooldown)');
      this.emit('proactive.trigger_dropped', state, { reason: 'cooldown', remainingMs });
      return false;
    }
    state.cooldownFrom = now;

    const vars: Record<string, string> = {
      ...extra,
      trigger_name: trigger.name,
      trigger_type: trigger.type,
      timestamp: new Date(scheduled ?? now).toISOString(),
    };
    const eventId = extra.event_id;
    const tick = scheduled !== undefined ? String(scheduled) : typeof eventId === 'string' && eventId !== '' ? `event:${eventId}` : undefined;
    const prompt = renderTemplate(trigger.promptTemplate, vars);

    if (trigger.requiresConfirmation) {
      const gate = this.#gate;
      let reason: string;
      let approved = false;
      if (!gate) {
        reason = 'no approval gate configured';
      } else {
        try {
          const decision = await gate.request({
            agentId: state.sessionId,
            agentName: 'agent' in state.target ? state.target.agent : 'root',
            action: trigger.name,
            risk: 'mutation',
            args: { trigger: trigger.name, type: trigger.type, prompt, target: state.target },
            reason: prompt,
          });
          approved = decision.approved;
          reason = decision.reason;
        } catch (err) {
          reason = `denied: approval gate failed: ${errorMessage(err)}`;
        }
      }
      if (!approved) {
        stats.denied++;
        this.#logger.info({ trigger: trigger.name, reason }, 'proactive trigger denied');
        this.emit('proactive.trigger_denied', state, { reason });
        return false;
      }
      if (!this.#live(origin)) {
        this.#logger.debug({ trigger: trigger.name }, 'proactive trigger approved after stop(): discarded');
        return false;
      }
    }

    const fire: ProactiveFire = {
      trigger: trigger.name,
      sessionId: state.sessionId,
      prompt,
      target: { ...state.target },
      at: this.#clock.now(),
      ...(tick !== undefined ? { tick } : {}),
    };
    stats.fired++;
    stats.lastFiredAt = fire.at;
    this.#logger.info({ trigger: trigger.name, sessionId: fire.sessionId }, 'proactive trigger fired');
    this.emit('proactive.trigger_fired', state, { sessionId: fire.sessionId, target: fire.target, prompt });

    const run = (async () => {
      try {
        await this.#onFire(fire);
      } catch (err) {
        stats.failed++;
        this.#logger.error({ trigger: trigger.name, err }, 'proactive onFire failed');
        this.emit('proactive.fire_failed', state, { sessionId: fire.sessionId, error: errorMessage(err) });
      }
    })();
    this.#firing.add(run);
    try {
      await run;
    } finally {
      this.#firing.delete(run);
    }
    return true;
  }

  /** Audits an event of the trigger on the bus, if there is one. */
  emit(type: string, state: TriggerState, fields: Record<string, unknown>): void {
    this.#bus?.emit({ type, at: this.#clock.now(), trigger: state.trigger.name, triggerType: state.trigger.type, ...fields });
  }

  /** Resolves once every `onFire` call in progress has settled. */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.#firing]);
  }
}
