/**
 * One timer for every dormant wait (DESIGN §12, "parked costs nothing"): a parked agent has no
 * actor, so its idle auto-resume cannot live in an XState `after` timer. The deadlines sit in a
 * binary heap; one timeout on the injected clock is armed for the earliest. Removing an entry is
 * O(1) (a stale heap entry is skipped when it surfaces).
 * @module
 */
import type { Clock } from '../../clock.js';

interface Entry {
  id: string;
  at: number;
}

export class IdleTimers {
  readonly #clock: Clock;
  readonly #fire: (id: string) => void;
  readonly #heap: Entry[] = [];
  /** The live deadline of each id (heap entries that disagree are stale). */
  readonly #deadlines = new Map<string, number>();
  #armed: { at: number; handle: unknown } | null = null;

  constructor(clock: Clock, fire: (id: string) => void) {
    this.#clock = clock;
    this.#fire = fire;
  }

  get size(): number {
    return this.#deadlines.size;
  }

  /** Fire `id` at `at` (replacing any deadline it had). */
  set(id: string, at: number): void {
    this.#deadlines.set(id, at);
    this.#push({ id, at });
    this.#arm();
  }

  delete(id: string): void {
    this.#deadlines.delete(id);
  }

  has(id: string): boolean {
    return this.#deadlines.has(id);
  }

  /** Stop the clock timeout (shutdown). */
  close(): void {
    if (this.#armed) this.#clock.clearTimeout(this.#armed.handle);
    this.#armed = null;
    this.#deadlines.clear();
    this.#heap.length = 0;
  }

  #arm(): void {
    this.#dropStale();
    const next = this.#heap[0];
    if (!next) {
      if (this.#armed) this.#clock.clearTimeout(this.#armed.handle);
      this.#armed = null;
      return;
    }
    if (this.#armed && this.#armed.at <= next.at) return;
    if (this.#armed) this.#clock.clearTimeout(this.#armed.handle);
    const delay = Math.max(0, next.at - this.#clock.now());
    this.#armed = { at: next.at, handle: this.#clock.setTimeout(() => this.#due(), delay) };
  }

  #due(): void {
    this.#armed = null;
    const now = this.#clock.now();
    const due: string[] = [];
    for (;;) {
      this.#dropStale();
      const top = this.#heap[0];
      if (!top || top.at > now) break;
      this.#pop();
      this.#deadlines.delete(top.id);
      due.push(top.id);
    }
    for (const id of due) this.#fire(id);
    this.#arm();
  }

  #dropStale(): void {
    while (this.#heap.length > 0) {
      const top = this.#heap[0]!;
      if (this.#deadlines.get(top.id) === top.at) return;
      this.#pop();
    }
  }

  #push(entry: Entry): void {
    const heap = this.#heap;
    heap.push(entry);
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (heap[parent]!.at <= entry.at) break;
      heap[i] = heap[parent]!;
      i = parent;
    }
    heap[i] = entry;
  }

  #pop(): void {
    const heap = this.#heap;
    const last = heap.pop()!;
    if (heap.length === 0) return;
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= heap.length) break;
      const right = left + 1;
      const child = right < heap.length && heap[right]!.at < heap[left]!.at ? right : left;
      if (heap[child]!.at >= last.at) break;
      heap[i] = heap[child]!;
      i = child;
    }
    heap[i] = last;
  }
}
