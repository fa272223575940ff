/**
 * The breakers a run's calls go through (providers/breaker.ts): one per endpoint its models call,
 * shared with every run of the process. Each is heard once by this run, however many of its
 * models share it, and no longer once the run closes.
 * @module
 */
import type { Clock } from '../../clock.js';
import type { Model } from '../../model/types.js';
import { breakerFor, type Breaker, type BreakerChange, type BreakerPolicy } from '../../providers/breaker.js';

export class RunBreakers {
  readonly #policy: BreakerPolicy | null;
  readonly #clock: Clock;
  readonly #changed: (change: BreakerChange) => void;
  readonly #byModel = new Map<Model, Breaker | null>();
  readonly #heard = new Map<Breaker, () => void>();

  constructor(policy: BreakerPolicy | null, clock: Clock, changed: (change: BreakerChange) => void) {
    this.#policy = policy;
    this.#clock = clock;
    this.#changed = changed;
  }

  /** The breaker of `model`'s endpoint (null: breakers are off). */
  of(model: Model): Breaker | null {
    let breaker = this.#byModel.get(model);
    if (breaker === undefined) {
      breaker = this.#policy ? breakerFor(model, this.#clock, this.#policy) : null;
      this.#byModel.set(model, breaker);
      if (breaker && !this.#heard.has(breaker)) this.#heard.set(breaker, breaker.listen(this.#changed));
    }
    return breaker;
  }

  /** Stop hearing every breaker (the run shuts down; the breakers live on for the process). */
  close(): void {
    for (const stop of this.#heard.values()) stop();
    this.#heard.clear();
  }
}
