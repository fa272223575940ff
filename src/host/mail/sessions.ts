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
 *
 * Every item is scrubbed of known secrets on its way in (the store's redactor, else the known keys):
 * a session is what every model request is built from, so a key a provider echoed in an error —
 * in a child's failure notice, a tool's error result, a cut-off answer — never reaches a model.
 * @module
 */
import { TroupeError } from '../../errors.js';
import { createRedactor, type Redactor } from '../../logging/redact.js';
import type { ContentPart, SessionItem } from '../../model/types.js';
import type { StorePort, WriteOp } from '../../store/port.js';
import type { AgentRef, SessionPort } from '../../turn/ports.js';
import { messageToItem } from '../../turn/texts.js';
import type { Mailboxes } from './mailbox.js';

export class Sessions implements SessionPort {
  readonly #port: StorePort;
  readonly #stage: (op: WriteOp) => void;
  readonly #mail: Mailboxes;
  readonly #now: () => number;
  readonly #items = new Map<string, SessionItem[]>();
  /** Images in each session, counted once and then kept by every append and rewrite (the image budget asks every turn). */
  readonly #images = new Map<string, number>();
  readonly #loading = new Map<string, Promise<void>>();

  readonly #redactor: Redactor;

  constructor(deps: { port: StorePort; stage: (op: WriteOp) => void; mailboxes: Mailboxes; now: () => number; redactor?: Redactor }) {
    this.#port = deps.port;
    this.#stage = deps.stage;
    this.#mail = deps.mailboxes;
    this.#now = deps.now;
    this.#redactor = deps.redactor ?? deps.port.redactor ?? createRedactor();
  }

  /** `text` without known secrets: for model-bound text that does not pass through a session (notes). */
  scrub(text: string): string {
    return this.#redactor.scrub(text);
  }

  /** A new agent: its session is its first input (staged with its registration). */
  seed(agentId: string, items: SessionItem[]): void {
    this.#images.delete(agentId);
    this.#items.set(
      agentId,
      items.map((item) => scrubItem(item, this.#redactor)),
    );
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
          if (!this.#items.has(agent.id)) {
            this.#images.delete(agent.id);
            this.#items.set(agent.id, items);
          }
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

  append(agent: Pick<AgentRef, 'id'>, given: SessionItem[]): void {
    if (given.length === 0) return;
    const list = this.#items.get(agent.id);
    if (!list) throw new TroupeError('INTERNAL', `the session of ${agent.id} is not loaded`);
    const items = scrubItems(given, this.#redactor);
    const from = list.length;
    for (const item of items) list.push(item);
    const counted = this.#images.get(agent.id);
    if (counted !== undefined) this.#images.set(agent.id, counted + imagesIn(items));
    this.#stage({ op: 'appendSession', agentId: agent.id, items, from });
  }

  /** How many images the agent's session holds (loaded). */
  images(agent: Pick<AgentRef, 'id'>): number {
    let counted = this.#images.get(agent.id);
    if (counted === undefined) {
      counted = imagesIn(this.items(agent));
      this.#images.set(agent.id, counted);
    }
    return counted;
  }

  replace(agent: Pick<AgentRef, 'id'>, given: SessionItem[], expectedLength: number): boolean {
    const list = this.#items.get(agent.id);
    // A slow rewrite (a compaction) never drops items added since it read the session.
    if (!list || list.length !== expectedLength) return false;
    const items = scrubItems(given, this.#redactor);
    this.#items.set(agent.id, [...items]);
    this.#images.delete(agent.id);
    this.#stage({ op: 'replaceSession', agentId: agent.id, items, replaced: list });
    return true;
  }

  /** Forget a finished agent's session (read again if it is revived). */
  evict(agentId: string): void {
    this.#items.delete(agentId);
    this.#images.delete(agentId);
  }

  pending(agent: Pick<AgentRef, 'id'>): number {
    return this.#mail.count(agent.id);
  }

  pendingFromUser(agent: Pick<AgentRef, 'id'>): boolean {
    return this.#mail.fromUser(agent.id);
  }

  drain(agent: Pick<AgentRef, 'id'>, limit?: number): void {
    const taken = this.#mail.take(agent.id, this.#now(), limit);
    if (taken.length > 0)
      this.append(
        agent,
        taken.map((m) => messageToItem({ ...m, seq: 0, deliveredAt: null, data: m.data ?? null })),
      );
  }
}

/** `items` with known secrets scrubbed: the same array when none holds one (the common case). */
function scrubItems(items: SessionItem[], redactor: Redactor): SessionItem[] {
  let out: SessionItem[] | null = null;
  for (let i = 0; i < items.length; i++) {
    const item = items[i]!;
    const clean = scrubItem(item, redactor);
    if (clean !== item) (out ??= items.slice())[i] = clean;
  }
  return out ?? items;
}

/** One item with every text a model reads scrubbed; the same object when nothing changed (no allocation). */
function scrubItem(item: SessionItem, redactor: Redactor): SessionItem {
  switch (item.role) {
    case 'user': {
      const content = typeof item.content === 'string' ? redactor.scrub(item.content) : scrubParts(item.content, redactor);
      return content === item.content ? item : { ...item, content };
    }
    case 'tool': {
      const content = redactor.scrub(item.content);
      return content === item.content ? item : { ...item, content };
    }
    case 'assistant': {
      const content = item.content === null ? null : redactor.scrub(item.content);
      const refusal = item.refusal === undefined ? undefined : redactor.scrub(item.refusal);
      let toolCalls = item.toolCalls;
      for (let i = 0; toolCalls && i < toolCalls.length; i++) {
        const call = toolCalls[i]!;
        const args = redactor.scrub(call.arguments);
        if (args === call.arguments) continue;
        if (toolCalls === item.toolCalls) toolCalls = toolCalls.slice();
        toolCalls[i] = { ...call, arguments: args };
      }
      if (content === item.content && refusal === item.refusal && toolCalls === item.toolCalls) return item;
      return { ...item, content, ...(refusal === undefined ? {} : { refusal }), ...(toolCalls === undefined ? {} : { toolCalls }) };
    }
  }
}

function scrubParts(parts: ContentPart[], redactor: Redactor): ContentPart[] {
  let out: ContentPart[] | null = null;
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]!;
    if (part.type === 'text') {
      const text = redactor.scrub(part.text);
      if (text !== part.text) (out ??= parts.slice())[i] = { ...part, text };
    } else {
      const url = redactor.scrub(part.url);
      if (url !== part.url) (out ??= parts.slice())[i] = { ...part, url };
    }
  }
  return out ?? parts;
}

/** Image parts in these items (only user items carry images). */
function imagesIn(items: readonly SessionItem[]): number {
  let n = 0;
  for (const item of items) {
    if (item.role !== 'user' || typeof item.content === 'string') continue;
    for (const part of item.content) if (part.type === 'image') n += 1;
  }
  return n;
}
