/**
 * The re-entry budget (seed 001, issue 34 item 7): every time an agent is woken by something of
 * its own rather than by a person or another agent — a finished execution continuing it, a
 * delegation's result, the report of a dead wait, its idle timer, a proactive trigger's message —
 * the wake is counted in its durable self-wake
 * row, spaced and backed off, and bounded. A storm is many such wakes in quick succession, so:
 * - the first 3 wakes of a streak come at once; after that wake n + 1 comes at least
 *   `spacingMs × 2^(n−3)` (at most 60 s) after wake n — an earlier one waits out the rest on the
 *   run's clock (a restart recomputes it from the persisted last wake). A dead wait's report, an
 *   idle timer and a proactive message are counted but never put off: the run is quiescent
 *   (nothing else would wake it), the timer is already spaced by `idleResumeMs`, the trigger by
 *   its own schedule — and the wake has happened when it is counted (its refusal stops the agent);
 * - at `maxWakes` wakes in a streak the next one is refused and the agent is stopped with reason
 *   `reentry`: its parent gets the stopped notice, the user a `reentry.spent` event and the status;
 * - a streak ends with a message from the user, or 10 minutes without a self-wake (an agent whose
 *   executions end hours apart is not storming).
 *
 * A `sleep_until` timer firing is a self-wake of source `timer` too, counted and never put off:
 * the agent chose the time, but a loop of short sleeps is still a loop nobody watches. A sleep of
 * 10 minutes or more starts a new streak, so one long timer is never refused as a storm.
 * @module
 */
import type { Logger } from 'pino';
import { isActive, type AgentStatus } from '../../../machines/types.js';
import type { Clock } from '../../clock.js';
import type { WriteOp } from '../../store/port.js';
import type { AgentHandle } from '../agents/agents.js';
import type { ReentryBudgets } from './delegations.js';

/** What counts as a self-wake (the event row says which one was refused). */
export type SelfWakeSource = 'execution' | 'delegation' | 'deadlock' | 'timer' | 'proactive';

/** Sources counted but never put off (see the module comment). */
const UNSPACED: ReadonlySet<SelfWakeSource> = new Set(['deadlock', 'timer', 'proactive']);

/** The longest spacing between two self-wakes, however many came before. */
const MAX_SELF_WAKE_SPACING_MS = 60_000;
/** Self-wakes of a streak that are never put off. */
const FREE_WAKES = 3;
/** A self-wake this long after the last one starts a new streak. */
const STREAK_GAP_MS = 600_000;

export interface SelfWakeHost {
  readonly runId: string;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly policy: { maxWakes: number; spacingMs: number } | null;
  readonly budgets: Pick<ReentryBudgets, 'get' | 'record' | 'reset'>;
  status(h: AgentHandle): AgentStatus;
  /** Stop the agent (its machine decides: a parked one is stopped at once). */
  stop(h: AgentHandle): void;
  stage(op: WriteOp): void;
}

/** `now`: wake it (counted); `later`: the retry is armed; `refused`: the budget is spent (the agent is being stopped). */
export type SelfWakeVerdict = 'now' | 'later' | 'refused';

/** A wake put off by its spacing: what asks again, and whether it would still wake its agent. */
interface PutOff {
  retry(): void;
  live(): boolean;
}

/** How long wake `count + 1` of a streak must wait after the last one (0: at once). */
function selfWakeSpacing(count: number, spacingMs: number): number {
  return count < FREE_WAKES ? 0 : Math.min(MAX_SELF_WAKE_SPACING_MS, spacingMs * 2 ** (count - FREE_WAKES));
}

export class SelfWakes {
  readonly #host: SelfWakeHost;
  /** Agents with a spaced wake armed: one timer each, whatever asks meanwhile. */
  readonly #armed = new Map<string, { cancel(): void; retries: PutOff[] }>();

  constructor(host: SelfWakeHost) {
    this.#host = host;
  }

  /**
   * May `h` be woken by `source` now? `now` counts the wake (staged with the caller's writes);
   * `later` calls `retry` once the spacing has passed (the caller asks again then); `refused` stops
   * an active agent with reason `reentry`, once. `live` says, while the retry is armed, whether it
   * would still wake the agent (absent: always; see `anyOnItsWay`).
   */
  admit(h: AgentHandle, source: SelfWakeSource, retry: () => void, live: () => boolean = () => true): SelfWakeVerdict {
    const host = this.#host;
    const policy = host.policy;
    if (policy === null) return 'now';
    const row = host.budgets.get(h.id);
    const now = host.clock.now();
    if (row && row.count > 0 && now - row.lastWakeAt >= STREAK_GAP_MS) host.budgets.reset(h.id);
    const count = row && now - row.lastWakeAt < STREAK_GAP_MS ? row.count : 0;
    if (count >= policy.maxWakes) {
      this.#refuse(h, source, count);
      return 'refused';
    }
    const due = row && !UNSPACED.has(source) ? row.lastWakeAt + selfWakeSpacing(count, policy.spacingMs) : now;
    if (due > now) {
      this.#arm(h, due - now, { retry, live });
      return 'later';
    }
    host.budgets.record(h.id);
    return 'now';
  }

  /**
   * Whether a put-off wake (spacing) will still wake its agent: the run is not quiescent. One whose
   * agent it can no longer wake (finished or crashed meanwhile, its mail read by another wake) is
   * not: its retry will find nothing to do, and counting it put off the report of waits already
   * dead by up to the spacing (60 s).
   */
  get anyOnItsWay(): boolean {
    for (const armed of this.#armed.values()) if (armed.retries.some((r) => r.live())) return true;
    return false;
  }

  /** A message from the user: the agent's self-wakes count from zero again. */
  userSpoke(agentId: string): void {
    if ((this.#host.budgets.get(agentId)?.count ?? 0) > 0) this.#host.budgets.reset(agentId);
  }

  /** Cancel armed retries (shutdown): the next host recomputes them from the persisted rows. */
  dispose(): void {
    for (const armed of this.#armed.values()) armed.cancel();
    this.#armed.clear();
  }

  #arm(h: AgentHandle, ms: number, putOff: PutOff): void {
    const armed = this.#armed.get(h.id);
    if (armed) {
      armed.retries.push(putOff);
      return;
    }
    const retries = [putOff];
    const timer = this.#host.clock.setTimeout(() => {
      this.#armed.delete(h.id);
      for (const again of retries) again.retry();
    }, ms);
    this.#armed.set(h.id, { cancel: () => this.#host.clock.clearTimeout(timer), retries });
  }

  #refuse(h: AgentHandle, source: SelfWakeSource, count: number): void {
    const host = this.#host;
    // Once: a stopped agent is not active, so later wakes find nothing to stop.
    if (!isActive(host.status(h))) return;
    const data = { source, wakes: count, maxWakes: host.policy?.maxWakes ?? count };
    h.logger.warn(data, 'the self-wake budget is spent: the agent is stopped instead of woken');
    host.stage({ op: 'appendEvent', row: { runId: host.runId, agentId: h.id, type: 'reentry.spent', data, at: host.clock.now() } });
    host.stop(h);
  }
}
