/**
 * Agents' conversations in memory. A new agent's session starts with its first input; after a
 * restart a session is read from the store once, when its agent first needs it (a run of 10,000
 * parked agents reads none at resume). Appends and rewrites go to memory at once and to the store
 * with the group commit. A finished agent's session is dropped from memory and read again if it is
 * revived.
 *
 * A session array is only ever appended to; a rewrite (compaction, stripped images) replaces it
 * with a new array. A model request reads the first items of one lazily (gateway.ts) and relies on
 * that.
 * @module
 */
import { TroupeError } from '../errors.js';
import type { SessionItem } from '../model/types.js';
import type { StorePort, WriteOp } from '../store/port.js';
import type { AgentRef, SessionPort } from '../turn/ports.js';
import { messageToItem } from '../turn/texts.js';
import type { Mailboxes } from './mailbox.js';

export class Sessions implements SessionPort {
  readonly #port: StorePort;
  readonly #stage: (op: WriteOp) => void;
  readonly #mail: Mailboxes;
  readonly #now: () => number;
  readonly #items = new Map<string, SessionItem[]>();
  readonly #loading = new Map<string, Promise<void>>();

  constructor(deps: { port: StorePort; stage: (op: WriteOp) => void; mailboxes: Mailboxes; now: () => number }) {
    this.#port = deps.port;
    this.#stage = deps.stage;
    this.#mail = deps.mailboxes;
    this.#now = deps.now;
  }

  /** A new agent: its session is its first input (staged with its registration). */
  seed(agentId: string, items: SessionItem[]): void {
    this.#items.set(agentId, [...items]);
  }

  isLoaded(agentId: string): boolean {
    return this.#items.has(agentId);
  }

  load(agent: Pick<AgentRef, 'id'>): Promise<void> {
    if (this.#items.has(agent.id)) return Promise.resolve();
    let loading = this.#loading.get(agent.id);
    if (!loading) {
      loading = this.#port.loadSession(agent.id).then(
        (items) => {
          this.#loading.delete(agent.id);
          if (!this.#items.has(agent.id)) this.#items.set(agent.id, items);
        },
        (err: unknown) => {
          this.#loading.delete(agent.id);
          throw err;
        },
      );
      this.#loading.set(agent.id, loading);
    }
    return loading;
  }

  items(agent: Pick<AgentRef, 'id'>): readonly SessionItem[] {
    const items = this.#items.get(agent.id);
    if (!items) throw new TroupeError('INTERNAL', `the session of ${agent.id} is not loaded`);
    return items;
  }

  append(agent: Pick<AgentRef, 'id'>, items: SessionItem[]): void {
    if (items.length === 0) return;
    const list = this.#items.get(agent.id);
    if (!list) throw new TroupeError('INTERNAL', `the session of ${agent.id} is not loaded`);
    for (const item of items) list.push(item);
    this.#stage({ op: 'appendSession', agentId: agent.id, items });
  }

  replace(agent: Pick<AgentRef, 'id'>, items: SessionItem[], expectedLength: number): boolean {
    const list = this.#items.get(agent.id);
    // A slow rewrite (a compaction) never drops items added since it read the session.
    if (!list || list.length !== expectedLength) return false;
    this.#items.set(agent.id, [...items]);
    this.#stage({ op: 'replaceSession', agentId: agent.id, items });
    return true;
  }

  /** Forget a finished agent's session (read again if it is revived). */
  evict(agentId: string): void {
    this.#items.delete(agentId);
  }

  pending(agent: Pick<AgentRef, 'id'>): number {
    return this.#mail.count(agent.id);
  }

  pendingFromUser(agent: Pick<AgentRef, 'id'>): boolean {
    return this.#mail.fromUser(agent.id);
  }

  drain(agent: Pick<AgentRef, 'id'>): void {
    const taken = this.#mail.take(agent.id, this.#now());
    if (taken.length > 0) this.append(agent, taken.map((m) => messageToItem({ ...m, seq: 0, deliveredAt: null })));
  }
}
