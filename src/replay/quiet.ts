/**
 * When the replayed code has stopped moving (issue 37's driver): a few turns of the event loop in
 * which no request, tool or view event came (`moved`). Nothing here waits on the wall clock.
 *
 * A state found quiet stays quiet until the code moves or the driver does something that may set
 * it going (`acted`: an answer given, an input applied, a timer fired, a restart): asked again, it
 * is still quiet without turning the loop. A replayed call's effects settle, then its successor's
 * step settles first — half a replay's event-loop turns were that second, empty wait.
 * @module
 */

/** How many quiet turns of the event loop mean the code has stopped moving. */
const QUIET = 3;
/** A bound on one wait for the code to move (each turn is a setImmediate). */
const MAX_TURNS = 100_000;

export class Quiet {
  #moves = 0;
  #acts = 0;
  /** `#moves` and `#acts` when the code was last found quiet. */
  #calm = { moves: -1, acts: -1 };

  /** The code moved: a request, a tool, a view event. */
  moved(): void {
    this.#moves++;
  }

  /** The driver did something that may set the code going. */
  acted(): void {
    this.#acts++;
  }

  /**
   * Let the code move until `done()` or it stops moving. `release()` gives what was held for the
   * code to be quiet (held tool results), true if it gave any: the code then moves again.
   */
  async settle(done: () => boolean, release: () => boolean): Promise<void> {
    const calm = this.#calm;
    // Still quiet: only something held may be due now (the driver's cursor moved).
    if (calm.moves === this.#moves && calm.acts === this.#acts && !done() && !release()) return;
    let quiet = 0;
    for (let i = 0; i < MAX_TURNS && quiet < QUIET && !done(); i++) {
      const before = this.#moves;
      await new Promise<void>((resolve) => setImmediate(resolve));
      quiet = this.#moves === before ? quiet + 1 : 0;
      // Held tool results come once what their steps set going has settled (a send's commit), as
      // they came after it in the recording.
      if (quiet === QUIET && release()) quiet = 0;
    }
    if (quiet === QUIET) this.#calm = { moves: this.#moves, acts: this.#acts };
  }
}
