/**
 * The rules every message to an agent must pass before it is queued, in one place: the live
 * coordinator applies them to `send()` and to agents' messages, and `troupe send` applies the same
 * ones to a run no process is driving (against the rows in the database).
 * @module
 */
import type { AgentStatus } from '../../../machines/types.js';
import { TroupeError } from '../../errors.js';
import type { Limits } from '../options.js';

/** What the rules need to know of the recipient. */
export interface MessageRecipient {
  id: string;
  name: string;
  status: AgentStatus;
  parentId: string | null;
}

export interface MessageRuleContext {
  /** Whether the run is interactive (a finished agent may then be revived by a message). */
  interactive: boolean;
  limits: Pick<Limits, 'maxMessageBytes' | 'maxMailbox' | 'maxChildren'>;
  /** The message comes from the user (only the user's messages revive a failed or crashed agent). */
  fromUser: boolean;
  /** Undelivered messages already waiting for the recipient (asked only if the other rules pass). */
  pending: () => number;
  /** Active children of the recipient's parent (asked only if the message would revive the recipient). */
  parentActiveChildren: () => number;
}

/** Whether a message revives `target`: the agent machine's revival guards, for a finished child. */
function revives(target: MessageRecipient, ctx: MessageRuleContext): boolean {
  if (target.status === 'failed' || target.status === 'crashed') return ctx.fromUser;
  return (target.status === 'completed' || target.status === 'stopped') && ctx.interactive;
}

/**
 * Why `content` may not be queued for `target` — CONFIG_INVALID (not a non-empty string),
 * MESSAGE_TOO_LARGE, AGENT_NOT_REACHABLE (completed or stopped in a run that is not interactive:
 * nothing would ever read it), MAX_CHILDREN_EXCEEDED (it would revive a finished child while its
 * parent already has limits.maxChildren active children: a revival starts a child again, so it
 * obeys spawn_agent's rule) or MAILBOX_FULL — or null when it may.
 */
export function messageRefusal(target: MessageRecipient, content: unknown, ctx: MessageRuleContext): TroupeError | null {
  if (typeof content !== 'string' || content.length === 0) {
    return new TroupeError('CONFIG_INVALID', `Expected content to be a non-empty string, got ${JSON.stringify(content)}`);
  }
  const bytes = Buffer.byteLength(content);
  if (bytes > ctx.limits.maxMessageBytes) {
    return new TroupeError('MESSAGE_TOO_LARGE', `The message is ${bytes} bytes; maxMessageBytes is ${ctx.limits.maxMessageBytes}`);
  }
  if (!ctx.interactive && (target.status === 'completed' || target.status === 'stopped')) {
    return new TroupeError(
      'AGENT_NOT_REACHABLE',
      `${target.name} (${target.id}) is ${target.status} and this run is not interactive: nothing will read the message. Use its report or notice instead.`,
    );
  }
  if (target.parentId !== null && revives(target, ctx)) {
    const active = ctx.parentActiveChildren();
    if (active >= ctx.limits.maxChildren) {
      return new TroupeError(
        'MAX_CHILDREN_EXCEEDED',
        `${target.name} (${target.id}) is ${target.status} and this message would revive it, but its parent already has ${active} active children (maxChildren ${ctx.limits.maxChildren}); try again once one finishes`,
      );
    }
  }
  if (ctx.pending() >= ctx.limits.maxMailbox) {
    return new TroupeError('MAILBOX_FULL', `${target.name} (${target.id}) already has ${ctx.limits.maxMailbox} undelivered messages; try again later`);
  }
  return null;
}
