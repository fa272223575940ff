/**
 * Cancellation at the ports is a plain AbortSignal (issue 32 item 5, issue 36 item 6): the gateway,
 * the budget and the tool runner receive real signals, and an agent's `inFlight` / `toolsInFlight`
 * are AbortControllers. What stays of the old lazy cancellation type is private to the turn loop
 * (src/turn/): this cycle scope, which decides when a turn needs a new signal.
 *
 * Why it stays, measured: on Node 20 making an AbortSignal costs ~8-15 µs here (a microbench of
 * `new AbortController().signal`: `createAbortSignal` sets the prototype of an EventTarget), and a
 * turn cancels its model call and its user tools apart from its cycle. With a fresh signal per
 * operation the in-memory turn cost 1.6-2.8× base's (`againstChild.js solo`, 5 alternating
 * processes each, medians 84.8 against 42.9 µs under load 12-16); handing a signal on, as below, it
 * is within noise of base's lazy scopes (46.8 against 42.9 µs, per-round ratios 0.74-1.49). The
 * scale bench at realistic latency showed no difference even when every scope was eager.
 * @module
 */
import { getEventListeners } from 'node:events';

/**
 * An agent's cycle: aborted when the cycle ends (its own reason), and the controller of the
 * operation now running (a model call, the tools of a turn, a held turn).
 *
 * Invariants: the first abort of an operation wins and fixes its reason (the cycle's, if the cycle
 * ended first); an operation opened after the cycle ended is already aborted with the cycle's
 * reason; an operation's signal is handed on to the next operation only if it was never aborted
 * and no listener is left on it (a consumer that keeps a signal past its call and only polls it may
 * see a later operation's abort: every consumer in troupe removes its listener when it settles).
 */
export class CycleScope {
  #aborted = false;
  #reason: unknown = undefined;
  #operation: AbortController | null = null;

  get aborted(): boolean {
    return this.#aborted;
  }

  get reason(): unknown {
    return this.#reason;
  }

  /** The controller of the next operation: the last one, while nobody aborted or listens to it. */
  operation(): AbortController {
    const last = this.#operation;
    if (last !== null && !last.signal.aborted && getEventListeners(last.signal, 'abort').length === 0) return last;
    const next = new AbortController();
    if (this.#aborted) next.abort(this.#reason);
    this.#operation = next;
    return next;
  }

  /** End the cycle: its operation in flight is aborted with the same reason (unless aborted already). */
  abort(reason: unknown): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#reason = reason;
    this.#operation?.abort(reason);
  }
}
