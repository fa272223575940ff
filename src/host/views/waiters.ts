/**
 * Promises on agent statuses: `waitFor` (one agent reaching one of some statuses, with a timeout
 * on the injected clock) and `whenIdle` (no agent running). The runtime calls `notify` after every
 * status change.
 * @module
 */
import type { AgentStatus } from '../../../machines/types.js';
import type { Clock } from '../../clock.js';
import { TroupeError } from '../../errors.js';

interface StatusWaiter<T> {
  id: string;
  statuses: ReadonlySet<AgentStatus>;
  resolve: (info: T) => void;
  reject: (err: Error) => void;
}

interface Watched {
  id: string;
  name: string;
  status: AgentStatus;
}

export class Waiters<T> {
  readonly #clock: Clock;
  readonly #isIdle: () => boolean;
  readonly #info: (id: string) => T;
  readonly #status = new Set<StatusWaiter<T>>();
  readonly #idle = new Set<{ resolve: () => void; reject: (err: Error) => void }>();
  #idleCheckQueued = false;

  constructor(clock: Clock, isIdle: () => boolean, info: (id: string) => T) {
    this.#clock = clock;
    this.#isIdle = isIdle;
    this.#info = info;
  }

  waitFor(agent: Watched, statuses: readonly AgentStatus[], timeoutMs?: number): Promise<T> {
    const wanted = new Set(statuses);
    if (wanted.has(agent.status)) return Promise.resolve(this.#info(agent.id));
    return new Promise((resolve, reject) => {
      let timer: unknown;
      const settle = () => {
        if (timer !== undefined) this.#clock.clearTimeout(timer);
      };
      const waiter: StatusWaiter<T> = {
        id: agent.id,
        statuses: wanted,
        resolve: (info) => (settle(), resolve(info)),
        reject: (err) => (settle(), reject(err)),
      };
      this.#status.add(waiter);
      if (timeoutMs !== undefined) {
        timer = this.#clock.setTimeout(() => {
          this.#status.delete(waiter);
          reject(
            new TroupeError('WAIT_TIMEOUT', `${agent.name} (${agent.id}) did not reach ${statuses.join('|')} within ${timeoutMs} ms (it is ${agent.status})`),
          );
        }, timeoutMs);
      }
    });
  }

  whenIdle(): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#idle.add({ resolve, reject });
      this.#queueIdleCheck();
    });
  }

  /** An agent's status changed. */
  notify(agent: Watched): void {
    for (const w of this.#status) {
      if (w.id === agent.id && w.statuses.has(agent.status)) {
        this.#status.delete(w);
        w.resolve(this.#info(agent.id));
      }
    }
    if (this.#isIdle()) this.#queueIdleCheck();
  }

  rejectAll(err: Error): void {
    for (const w of this.#status) w.reject(err);
    this.#status.clear();
    for (const w of this.#idle) w.reject(err);
    this.#idle.clear();
  }

  /** Idle is judged after the current synchronous cascade of wake-ups has settled. */
  #queueIdleCheck(): void {
    if (this.#idleCheckQueued) return;
    this.#idleCheckQueued = true;
    queueMicrotask(() => {
      this.#idleCheckQueued = false;
      if (!this.#isIdle() || this.#idle.size === 0) return;
      const waiters = [...this.#idle];
      this.#idle.clear();
      for (const w of waiters) w.resolve();
    });
  }
}
