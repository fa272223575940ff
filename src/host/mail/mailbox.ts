/**
 * Every agent's mailbox, in memory: the owner is the single writer of its run, so what waits for
 * whom is known here; the store receives the same rows through the group commit. A message is in
 * the mailbox from the moment it is decided; nobody is told (the sender acknowledged, the recipient
 * woken) before the commit that holds it. Mail leaves the mailbox only into the recipient's session,
 * in the same group as the items that carry it (`take` + the session append), so it stays queued
 * until it is durably read.
 * @module
 */
import type { MessageRow, NewMessage } from '../../store/types.js';
import type { WriteOp } from '../../store/port.js';

/** A queued message as the owner holds it (the store adds its delivery order). */
export type Mail = NewMessage & { noticeKey: string | null };

export class Mailboxes {
  readonly #stage: (op: WriteOp) => void;
  readonly #pending = new Map<string, Mail[]>();
  /** Keys used in this run: a notice, or a keyed send, is queued once, across restarts. */
  readonly #noticeKeys = new Set<string>();

  constructor(stage: (op: WriteOp) => void) {
    this.#stage = stage;
  }

  /** After a restart: the run's undelivered messages (in delivery order) and the notice keys it used. */
  restore(pending: readonly MessageRow[], noticeKeys: readonly string[]): void {
    for (const m of pending) this.#box(m.to).push({ ...m });
    for (const key of noticeKeys) this.#noticeKeys.add(key);
  }

  count(agentId: string): number {
    return this.#pending.get(agentId)?.length ?? 0;
  }

  list(agentId: string): readonly Mail[] {
    return this.#pending.get(agentId) ?? [];
  }

  fromUser(agentId: string): boolean {
    return this.list(agentId).some((m) => m.from === 'user');
  }

  /** Whether a message with this key was already queued in this run (before a restart too). */
  used(key: string): boolean {
    return this.#noticeKeys.has(key);
  }

  /** Queue a message (staged for the next group). Null if its notice key was already used. */
  enqueue(message: Mail): Mail | null {
    if (message.noticeKey !== null) {
      if (this.#noticeKeys.has(message.noticeKey)) return null;
      this.#noticeKeys.add(message.noticeKey);
    }
    this.#box(message.to).push(message);
    this.#stage({ op: 'enqueueMessage', message });
    return message;
  }

  /**
   * Take the agent's waiting messages — every one, or the first `limit` (a replay's recorded read) —
   * marked delivered in the same group as the session items carrying them.
   */
  take(agentId: string, at: number, limit = Infinity): Mail[] {
    const box = this.#pending.get(agentId);
    if (!box || box.length === 0 || limit <= 0) return [];
    let taken = box;
    if (limit < box.length) taken = box.splice(0, limit);
    else this.#pending.delete(agentId);
    this.#stage({ op: 'markDelivered', agentId, upToId: taken.at(-1)!.id, at });
    return taken;
  }

  #box(agentId: string): Mail[] {
    let box = this.#pending.get(agentId);
    if (!box) this.#pending.set(agentId, (box = []));
    return box;
  }
}
