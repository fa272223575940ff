/**
 * A parked run's deadline (an agent's timer) would otherwise wait for the worker's next poll: one
 * timeout is armed for the earliest deadline ahead, re-read at every poll and after every release,
 * so the run is claimed within moments of it on whichever worker is free, not up to a poll later.
 * @module
 */
import type { Logger } from 'pino';
import type { HostingStore } from '../hosting/hostingStore.js';

export interface WakeTimer {
  /** Re-read the earliest deadline ahead and arm for it (a failed read leaves it to the poll). */
  arm(): Promise<void>;
  /** Disarm for good. */
  stop(): void;
}

/** `due` runs once the earliest parked deadline of `store` has passed (unref'd: it never holds the process). */
export function wakeTimer(store: Pick<HostingStore, 'nextWakeIn'>, due: () => Promise<void>, logger: Logger): WakeTimer {
  let timer: NodeJS.Timeout | null = null;
  let stopped = false;
  const arm = async (): Promise<void> => {
    let wait: number | null;
    try {
      wait = await store.nextWakeIn();
    } catch (err) {
      logger.warn({ err }, 'reading the next parked deadline failed; the poll stands in');
      return;
    }
    if (timer) clearTimeout(timer);
    timer = null;
    if (wait === null || stopped) return;
    // Past the deadline by a millisecond: the claim compares on the store's clock, in whole ms.
    timer = setTimeout(
      () => {
        timer = null;
        void due().then(arm);
      },
      Math.max(0, wait) + 1,
    );
    timer.unref();
  };
  return {
    arm,
    stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
    },
  };
}
