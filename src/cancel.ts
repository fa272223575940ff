/**
 * Cancellation without an AbortSignal per operation. An agent's cycle is a cancellation scope,
 * and each turn opens two under it (its model call, its user tools); most turns are never
 * cancelled and hand their signal to nobody who listens (an instant model, a synchronous tool).
 * Making an AbortController, adding a listener to the parent's signal and removing it again cost
 * ~3 µs of a ~15 µs in-memory turn (measured, Node 20: `createAbortSignal` alone was 5 % of the
 * profile). `LazyAbort` keeps the flag and the reason itself and makes the real AbortSignal only
 * when somebody reads `.signal` (a network model, an async tool, a retry's sleep).
 *
 * Weighed for issue 36 (item 6) by making every LazyAbort eager, as plain linked AbortControllers
 * would be: the in-memory turn went from 17.5 to 26.6 µs (alternating processes, 3 each), while
 * the scale bench (K = 1,000, 0.5-2 s calls, memory) moved within its noise (893 against 871 µs of
 * CPU per turn; the same build ranges 831-927 between runs). At realistic latency it does not show.
 * @module
 */

/** What an operation checks: whether it was cancelled, and the signal for those that listen. */
export interface Cancellation {
  readonly aborted: boolean;
  readonly reason: unknown;
  /** A real AbortSignal with the same state; made on first read. */
  readonly signal: AbortSignal;
}

/** What the host holds to cancel an operation in flight (a stop, an interrupting message). */
export interface Abortable {
  abort(reason: unknown): void;
}

/**
 * A cancellation scope under `parent` (a cycle's scope, or an AbortSignal a caller already has):
 * aborted when it is aborted itself or when the parent is. Invariants: the first abort wins and
 * fixes `reason` (the parent's if it came first, as with a forwarding listener); a signal made after
 * the abort is already aborted with that reason; a signal made before follows every later abort.
 * Scopes chain without AbortSignals: a cycle is a LazyAbort, and its turns' calls and tools are
 * LazyAborts under it, so the checks a turn makes read two fields, and only a reader of `.signal`
 * makes real signals (up the chain, linked by listeners).
 */
export class LazyAbort implements Cancellation, Abortable {
  readonly #parent: Cancellation | AbortSignal | null;
  #aborted = false;
  #reason: unknown = undefined;
  #controller: AbortController | null = null;
  #unlink: (() => void) | null = null;

  constructor(parent: Cancellation | AbortSignal | null = null) {
    this.#parent = parent;
  }

  get aborted(): boolean {
    return this.#aborted || (this.#parent !== null && this.#parent.aborted);
  }

  get reason(): unknown {
    if (this.#aborted) return this.#reason;
    const parent = this.#parent;
    return parent !== null && parent.aborted ? parent.reason : undefined;
  }

  get signal(): AbortSignal {
    if (this.#controller === null) {
      const controller = new AbortController();
      this.#controller = controller;
      const parent = this.#parent;
      if (this.aborted) controller.abort(this.reason);
      else if (parent !== null) {
        // The parent's own signal (a LazyAbort parent makes it now): its abort event reaches this one.
        const parentSignal = parent instanceof AbortSignal ? parent : parent.signal;
        const forward = () => this.abort(parentSignal.reason);
        parentSignal.addEventListener('abort', forward, { once: true });
        this.#unlink = () => parentSignal.removeEventListener('abort', forward);
      }
    }
    return this.#controller.signal;
  }

  abort(reason: unknown): void {
    if (this.#aborted) return;
    // Aborted through the parent already: that reason stands (a forwarding listener would have
    // aborted the child first).
    const parent = this.#parent;
    this.#aborted = true;
    this.#reason = parent !== null && parent.aborted ? parent.reason : reason;
    this.#controller?.abort(this.#reason);
  }

  /** The operation ended: stop listening to the parent (only if a signal was made). */
  close(): void {
    this.#unlink?.();
    this.#unlink = null;
  }
}

/** An AbortSignal seen as a cancellation (callers that already have one). */
export function cancellationOf(signal: AbortSignal): Cancellation {
  return {
    get aborted() {
      return signal.aborted;
    },
    get reason() {
      return signal.reason as unknown;
    },
    signal,
  };
}
