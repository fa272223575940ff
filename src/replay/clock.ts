/**
 * The replay's clock: xstate's SimulatedClock, counting the timers it has fired, so the driver
 * knows whether moving it set the code going (a timer ran) or only changed what `now()` says.
 * @module
 */
import { SimulatedClock } from 'xstate';

export class ReplayClock extends SimulatedClock {
  /** Timers fired so far. */
  fired = 0;

  override setTimeout(fn: (...args: unknown[]) => void, timeout: number): number {
    return super.setTimeout((...args: unknown[]) => {
      this.fired++;
      fn(...args);
    }, timeout);
  }
}
