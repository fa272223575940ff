/**
 * A small synchronous event bus for the autonomy subsystems (watchdog health checks, proactive
 * triggers, approvals): audit events anyone can subscribe to. A listener that throws is isolated
 * and reported to the optional `onListenerError`.
 * @module
 */

export interface AuditEvent {
  /** e.g. `watchdog.health_check`, `proactive.trigger_fired`, `approval.denied`. */
  type: string;
  /** Milliseconds on the injected clock. */
  at: number;
  [key: string]: unknown;
}

export type AuditListener = (event: AuditEvent) => void;

export class EventBus {
  readonly #listeners = new Set<AuditListener>();
  readonly #onListenerError: ((err: unknown, event: AuditEvent) => void) | undefined;

  constructor(options: { onListenerError?: (err: unknown, event: AuditEvent) => void } = {}) {
    this.#onListenerError = options.onListenerError;
  }

  /** Subscribe; returns the unsubscribe function. */
  on(listener: AuditListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  emit(event: AuditEvent): void {
    for (const listener of this.#listeners) {
      try {
        listener(event);
      } catch (err) {
        this.#onListenerError?.(err, event);
      }
    }
  }
}
