/**
 * The breakers a run's calls go through (providers/breaker.ts): one per endpoint its models call,
 * shared with every run of the process (and, with a store, the cluster). Each is heard once by this run, however many of its
 * models share it, and no longer once the run closes.
 * @module
 */
import type { Clock } from '../../clock.js';
import type { Model } from '../../model/types.js';
import { breakerFor, type Breaker, type BreakerChange, type BreakerPolicy, type BreakerShare } from '../../providers/breaker.js';

export class RunBreakers {
  readonly #policy: (BreakerPolicy & { share: BreakerShare | null }) | null;
  readonly #clock: Clock;
  readonly #changed: (change: BreakerChange) => void;
  readonly #byModel = new Map<Model, Breaker | null>();
  readonly #heard = new Map<Breaker, () => void>();

  readonly #shareFailed: (err: unknown) => void;

  constructor(
    policy: (BreakerPolicy & { share: BreakerShare | null }) | null,
    clock: Clock,
    changed: (change: BreakerChange) => void,
    shareFailed: (err: unknown) => void,
  ) {
    this.#policy = policy;
    this.#clock = clock;
    this.#changed = changed;
    this.#shareFailed = shareFailed;
  }

  /** The breaker of `model`'s endpoint (null: breakers are off). */
  of(model: Model): Breaker | null {
    let breaker = this.#byModel.get(model);
    if (breaker === undefined) {
      breaker = this.#policy ? breakerFor(model, this.#clock, this.#policy, this.#policy.share) : null;
      this.#byModel.set(model, breaker);
      // The breaker outlives runs: told by the latest run to use it.
      if (breaker) breaker.onShareError = this.#shareFailed;
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
