/**
 * Waits released a few per turn of the event loop. The gateway makes the first calls of the
 * children a parent spawned wait here (gateway.ts `call`): released all in one check phase, a
 * batch of 128 first calls (each builds and writes its request) held the loop ~40 ms on top of the
 * parent's spawn turn, and at 10,000 children those stretches set the event-loop delay's p99.
 * @module
 */

/** Waits released per turn of the event loop. */
const RELEASED_PER_TURN = 16;

export class LoopPacer {
  readonly #perTurn: number;
  #waiting: (() => void)[] = [];
  #scheduled = false;

  constructor(perTurn = RELEASED_PER_TURN) {
    this.#perTurn = perTurn;
  }

  /**
   * Resolves in the check phase of a later turn of the event loop (after the I/O and the immediates
   * already queued): the first `perTurn` waits in the next turn, the rest `perTurn` a turn after.
   */
  next(): Promise<void> {
    return new Promise((resolve) => {
      this.#waiting.push(resolve);
      if (!this.#scheduled) {
        this.#scheduled = true;
        setImmediate(this.#release);
      }
    });
  }

  /** An immediate queued from an immediate runs in the next turn of the loop, after its I/O. */
  readonly #release = (): void => {
    const now = this.#waiting.splice(0, this.#perTurn);
    if (this.#waiting.length > 0) setImmediate(this.#release);
    else this.#scheduled = false;
    for (const resolve of now) resolve();
  };
}
