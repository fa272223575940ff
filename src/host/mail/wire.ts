/**
 * The mail family put together: the mailboxes, the sessions that read them, and messaging. A
 * message from the user, or a proactive one, is a fact of the re-entry budget (async/selfWakes.ts,
 * built after the mail): asked when it happens.
 * @module
 */
import type { Logger } from 'pino';
import type { Actor } from 'xstate';
import type { coordinatorMachine } from '../../../machines/coordinatorMachine.js';
import type { Clock } from '../../clock.js';
import type { StorePort } from '../../store/port.js';
import type { Agents } from '../agents/agents.js';
import type { SelfWakes } from '../async/selfWakes.js';
import type { CallLog } from '../calls/callLog.js';
import type { CommitPort } from '../commit.js';
import type { IdSource, ResolvedOptions } from '../options.js';
import { Mailboxes } from './mailbox.js';
import { Messaging } from './messaging.js';
import { Sessions } from './sessions.js';

export interface MailFamilyPorts {
  readonly runId: string;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly ids: IdSource;
  readonly callLog: Pick<CallLog, 'input'>;
  readonly options: Pick<ResolvedOptions, 'interactive' | 'limits' | 'messagePolicy' | 'interruptOnMessage'>;
  readonly port: StorePort;
  readonly agents: Agents;
  readonly coordinator: Actor<typeof coordinatorMachine>;
  readonly commit: Pick<CommitPort, 'stage' | 'after' | 'durable'>;
  assertUsable(): void;
  /** The re-entry budget's gate on self-wakes. */
  selfWakes(): Pick<SelfWakes, 'userSpoke' | 'admit'>;
}

export function wireMail(p: MailFamilyPorts) {
  const { clock, commit, agents } = p;
  const mailboxes = new Mailboxes((op) => commit.stage(op));
  const sessions = new Sessions({ port: p.port, stage: (op) => commit.stage(op), mailboxes, now: () => clock.now() });
  const messaging = new Messaging({
    runId: p.runId,
    clock,
    logger: p.logger,
    ids: p.ids,
    callLog: p.callLog,
    options: p.options,
    agents,
    mailboxes,
    coordinator: p.coordinator,
    commit,
    assertUsable: p.assertUsable,
    userSpoke: (id) => p.selfWakes().userSpoke(id),
    // A proactive message is a self-wake, counted and never put off: false when the budget refuses it.
    proactiveWake: (id) => p.selfWakes().admit(agents.get(id), 'proactive', () => undefined) !== 'refused',
  });
  return { mailboxes, sessions, messaging };
}
