/**
 * Messages between agents, from the user and from the coordinator: who may message whom, the
 * rules every message passes (messageRules.ts), and the wake that follows — delivered only once
 * the message is committed.
 * @module
 */
import { createHash } from 'node:crypto';
import { customAlphabet } from 'nanoid';
import type { Actor } from 'xstate';
import { activeChildren, getAgentRecord, type coordinatorMachine, type CoordinatorEmitted } from '../../../machines/coordinatorMachine.js';
import { isReport } from '../../../machines/notices.js';
import type { Clock } from '../../clock.js';
import { TroupeError } from '../../errors.js';
import type { Logger } from 'pino';
import type { MessagePriority, MessageRow } from '../../store/types.js';
import { INTERRUPTED } from '../../turn/turn.js';
import type { AgentHandle, Agents } from '../agents/agents.js';
import type { Mail, Mailboxes } from './mailbox.js';
import type { CallLog } from '../calls/callLog.js';
import { messageRefusal } from './messageRules.js';
import type { IdSource, ResolvedOptions } from '../options.js';

export const newId = customAlphabet('0123456789abcdefghijklmnopqrstuvwxyz', 10);

/** Random ids: the default source. */
export const randomIds: IdSource = { agent: () => newId(), message: () => `msg_${newId()}` };

/**
 * The stored key and message id of a keyed send: both follow from the run and the key, so a repeat
 * finds the first (the key is unique in the store, across runs: it names its run).
 */
function sendKey(runId: string, key: string): { key: string; id: string } {
  if (typeof key !== 'string' || key.length === 0 || key.length > 200) {
    throw new TroupeError(
      'CONFIG_INVALID',
      `Expected key to be a string of 1 to 200 characters, got ${typeof key === 'string' ? `${key.length} characters` : String(key)}`,
    );
  }
  const stored = `send:${runId}:${key}`;
  return { key: stored, id: `msg_k${createHash('sha256').update(stored).digest('hex').slice(0, 20)}` };
}

const notAllowed = (target: { id: string; name: string }) =>
  new TroupeError('RECIPIENT_NOT_ALLOWED', `You may message only your parent, children and siblings; ${target.name} (${target.id}) is none of them.`);

/** A message from outside the team: what `send` takes (the API's, the inbox's). */
export interface SendOptions {
  content: string;
  /** Messages from the API come from `user` (default) or `system`; agents message through tools. */
  from?: 'user' | 'system';
  type?: string;
  priority?: MessagePriority;
  /**
   * An idempotency key: a message is queued at most once per key and run, across restarts. A
   * repeat queues nothing and resolves with the first message's id (the inbox keys each request's
   * message by the request, so a request applied twice delivers one message).
   */
  key?: string;
}

/** What `send` answers once its message is committed. */
export type SentMessage = Pick<MessageRow, 'id' | 'to' | 'from' | 'createdAt'>;

/** The message type stamped on every message a proactive trigger sends (`[Message from user … | type=proactive …]`). */
export const PROACTIVE_MESSAGE_TYPE = 'proactive';

export interface MessagingHost {
  readonly runId: string;
  readonly ids: IdSource;
  /** Where a message from outside is recorded for replay. */
  readonly callLog: Pick<CallLog, 'input'>;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly options: Pick<ResolvedOptions, 'interactive' | 'limits' | 'messagePolicy' | 'interruptOnMessage'>;
  readonly agents: Agents;
  readonly mailboxes: Mailboxes;
  readonly coordinator: Actor<typeof coordinatorMachine>;
  /** A wake waits for the commit of its message (commit.ts); `send` answers once it is durable. */
  readonly commit: { after(effect: () => void): void; durable(): Promise<void> };
  /** Throws if the run can take no more input (shut down, or a commit failed). */
  assertUsable(): void;
  /** A message from the user reached this agent (its self-wake count starts again). */
  userSpoke(agentId: string): void;
  /**
   * May a proactive trigger's message wake this agent? It is one of its self-wakes (counted, never
   * put off); false: the budget is spent and the agent is being stopped (async/selfWakes.ts).
   */
  proactiveWake(agentId: string): boolean;
}

/** What a wake needs of its message. */
export type WakingMail = Pick<Mail, 'from' | 'noticeKey' | 'interrupt' | 'type'>;

export class Messaging {
  readonly #host: MessagingHost;

  constructor(host: MessagingHost) {
    this.#host = host;
  }

  /** A notice the coordinator decided: queued with the change that caused it, the parent woken once committed. */
  deliverNotice(e: Extract<CoordinatorEmitted, { type: 'notice' }>): void {
    const host = this.#host;
    const from = e.from === 'system' ? undefined : host.agents.find(e.from);
    const mail = host.mailboxes.enqueue({
      noticeKey: e.key,
      id: host.ids.message(),
      runId: host.runId,
      to: e.to,
      from: e.from,
      fromName: from?.name ?? 'system',
      type: e.kind,
      priority: 'high',
      content: e.content,
      // The notice's facts as data (stop reason, error code, the child's value), with its text.
      ...(e.data ? { data: e.data as unknown as Record<string, unknown> } : {}),
      // Notices never cut into the parent's turn.
      interrupt: false,
      createdAt: host.clock.now(),
    });
    if (!mail) {
      // The coordinator's claim makes this impossible; the used keys are the backstop.
      host.logger.error({ key: e.key, to: e.to }, 'a notice for this stint was already sent; not sending it twice');
      return;
    }
    const target = host.agents.find(e.to);
    if (target) host.commit.after(this.#wakeOf(target, mail));
  }

  /** Wake the recipient of a committed message (a running agent's model call may be cut short). */
  wake(target: AgentHandle, mail: WakingMail): void {
    this.#wakeOf(target, mail)();
  }

  /**
   * The wake as the effect that runs once its message is committed: the effect itself delivers the
   * event (no forwarding call between the commit and the agent). A report says whether another of
   * the recipient's children is still active then (`more`: a wait for all of them gathers it).
   */
  #wakeOf(target: AgentHandle, mail: WakingMail): () => void {
    const { agents, options, coordinator } = this.#host;
    const report = isReport(mail);
    return () => {
      const more = report && activeChildren(coordinator.getSnapshot().context, target.id) > 0;
      agents.awake(target)?.send({ type: 'agent.message', from: mail.from, user: mail.from === 'user', notice: mail.noticeKey !== null, more });
      if (mail.interrupt && options.interruptOnMessage) target.inFlight?.abort(INTERRUPTED);
    };
  }

  /**
   * A system message to an agent (delegation results), queued now and, once committed, woken
   * through `gate` (the re-entry budget: it may wake it later, or not at all).
   */
  notify(
    agentId: string,
    m: { type: string; content: string; noticeKey: string; data?: Record<string, unknown> },
    gate?: (target: AgentHandle, wake: () => void) => void,
  ): void {
    const host = this.#host;
    const target = host.agents.get(agentId);
    const mail = host.mailboxes.enqueue({
      id: host.ids.message(),
      runId: host.runId,
      to: agentId,
      from: 'system',
      fromName: 'system',
      type: m.type,
      priority: 'high',
      content: m.content,
      interrupt: false,
      createdAt: host.clock.now(),
      noticeKey: m.noticeKey,
      ...(m.data ? { data: m.data } : {}),
    });
    if (mail) host.commit.after(gate ? () => gate(target, this.#wakeOf(target, mail)) : this.#wakeOf(target, mail));
  }

  #check(target: AgentHandle, content: unknown, fromUser: boolean): string {
    const host = this.#host;
    const refusal = messageRefusal({ id: target.id, name: target.name, status: host.agents.status(target), parentId: target.parentId }, content, {
      interactive: host.options.interactive,
      limits: host.options.limits,
      fromUser,
      pending: () => host.mailboxes.count(target.id),
      parentActiveChildren: () =>
        target.parentId === null ? 0 : (getAgentRecord(host.coordinator.getSnapshot().context, target.parentId)?.aliveChildren ?? 0),
    });
    if (refusal) throw refusal;
    return content as string;
  }

  /** Queue a message, staged with the change that sends it (its wake is the caller's, after the commit). */
  #queue(message: Omit<Mail, 'id' | 'runId' | 'createdAt' | 'noticeKey'>, keyed?: { id: string; key: string }): Mail {
    const host = this.#host;
    // Only notices and keyed sends carry a key, so an ordinary message is never refused as a repeat.
    return host.mailboxes.enqueue({
      ...message,
      id: keyed?.id ?? host.ids.message(),
      runId: host.runId,
      createdAt: host.clock.now(),
      noticeKey: keyed?.key ?? null,
    })!;
  }

  /**
   * The API's `send`: a message from outside, answered once it is committed (a repeat's first send
   * may still be in the commit under way). It registers its wake itself, like `sendExternal`: from
   * here the message's way to its agent is the commit and the wake, nothing between.
   */
  async send(to: string, message: SendOptions): Promise<SentMessage> {
    const host = this.#host;
    host.assertUsable();
    if (typeof message !== 'object' || message === null) {
      throw new TroupeError('CONFIG_INVALID', `Expected a message object, got ${String(message)}`);
    }
    const { mail, wake } = this.#external(to, message);
    if (wake) host.commit.after(wake);
    await host.commit.durable();
    return { id: mail.id, to: mail.to, from: mail.from, createdAt: mail.createdAt };
  }

  /** A message from outside, staged with the change that applies it (the inbox's request); its wake follows the commit. */
  sendExternal(to: string, msg: SendOptions): Mail {
    const { mail, wake } = this.#external(to, msg);
    if (wake) this.#host.commit.after(wake);
    return mail;
  }

  /**
   * A message from outside the team (`user` by default), checked, queued and recorded; its wake is
   * the caller's to register once everything is staged. With `key`, at most once per run: a send
   * whose key was already used queues nothing (no wake) and returns the first one's id, so
   * applying the same outside request twice (a host that died before answering it) is a no-op.
   */
  #external(to: string, msg: SendOptions): { mail: Mail; wake: (() => void) | null } {
    const host = this.#host;
    const target = host.agents.resolve(to);
    const from = msg.from ?? 'user';
    if (from !== 'user' && from !== 'system') {
      throw new TroupeError('CONFIG_INVALID', `Expected from to be "user" or "system", got ${JSON.stringify(from)}`);
    }
    const keyed = msg.key === undefined ? undefined : sendKey(host.runId, msg.key);
    const message = { to: target.id, from, fromName: from, type: msg.type ?? 'instruction', priority: msg.priority ?? 'normal', interrupt: true } as const;
    if (keyed && host.mailboxes.used(keyed.key)) {
      return {
        mail: { ...message, content: String(msg.content), id: keyed.id, runId: host.runId, createdAt: host.clock.now(), noticeKey: keyed.key },
        wake: null,
      };
    }
    const content = this.#check(target, msg.content, from === 'user');
    const proactive = from === 'user' && message.type === PROACTIVE_MESSAGE_TYPE;
    // Refused before it is queued: a message from outside would revive the agent being stopped.
    if (proactive && !host.proactiveWake(target.id)) {
      throw new TroupeError('REENTRY_SPENT', `${target.name} (${target.id}) has spent its self-wake budget: the proactive message was not delivered`);
    }
    const mail = this.#queue({ ...message, content }, keyed);
    const { type, priority } = message;
    host.callLog.input(
      { kind: 'send', payload: { agent: target.id, content, from, type, priority, ...(msg.key === undefined ? {} : { key: msg.key }) } },
      target.id,
    );
    if (from === 'user' && !proactive) host.userSpoke(target.id);
    return { mail, wake: this.#wakeOf(target, mail) };
  }

  /** Agents an agent may message: parent, children and siblings (or everyone with messagePolicy "any"). */
  recipientsOf(agent: AgentHandle): AgentHandle[] {
    const { agents, options } = this.#host;
    if (options.messagePolicy === 'any') return [...agents.values()].filter((h) => h.id !== agent.id);
    const out: AgentHandle[] = [];
    const parent = agent.parentId === null ? undefined : agents.find(agent.parentId);
    if (parent) {
      out.push(parent);
      for (const id of parent.children) if (id !== agent.id) out.push(agents.get(id));
    }
    for (const id of agent.children) out.push(agents.get(id));
    return out;
  }

  sendFromAgent(from: AgentHandle, to: string, content: string, opts: { type: string; priority: MessagePriority }): { mail: Mail; target: AgentHandle } {
    const { agents } = this.#host;
    const allowed = this.recipientsOf(from);
    // A name is looked up among the sender's recipients first, then in the whole run (to refuse it clearly).
    const target = agents.find(to) || !allowed.some((h) => h.name === to) ? agents.resolve(to) : agents.resolve(to, allowed);
    if (target.id === from.id) {
      throw new TroupeError('RECIPIENT_NOT_ALLOWED', 'You cannot message yourself; continue your work or call a lifecycle tool.');
    }
    if (!allowed.includes(target)) throw notAllowed(target);
    const body = this.#check(target, content, false);
    const mail = this.#queue({
      to: target.id,
      from: from.id,
      fromName: from.name,
      type: opts.type,
      priority: opts.priority,
      content: body,
      interrupt: true,
    });
    this.#host.commit.after(this.#wakeOf(target, mail));
    return { mail, target };
  }
}
