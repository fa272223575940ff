/**
 * What the replay hands the code for a model call: a recorded failure as the error it was, a call
 * that is never answered, and a call the recording does not have, held as a divergence until the
 * code cancels it. The replay's ids, handed out as the recording's were.
 * @module
 */
import { ProviderError, TroupeError, isErrorCode, type ErrorCode } from '../errors.js';
import type { RecordedCall } from '../host/calls/callLog.js';
import type { IdSource } from '../host/options.js';
import type { ModelCallOptions, ModelRequest, ModelTurn } from '../model/types.js';
import type { Divergence } from './compare.js';
import type { Recording } from './recording.js';

/** A call the replay will not answer: it ends only when the code cancels it. */
export function never(options: ModelCallOptions): Promise<ModelTurn> {
  return new Promise((_resolve, reject) => options.signal.addEventListener('abort', () => reject(options.signal.reason), { once: true }));
}

/** The recorded failure of `call`, as the error the code saw. */
export function errorOf(call: RecordedCall): Error {
  const e = call.error!;
  if (e.provider && e.code.startsWith('PROVIDER_')) {
    return new ProviderError(e.code as Extract<ErrorCode, `PROVIDER_${string}`>, e.message, {
      ...(e.status === undefined ? {} : { status: e.status }),
      ...(e.retryAfterMs === undefined ? {} : { retryAfterMs: e.retryAfterMs }),
    });
  }
  return isErrorCode(e.code) && e.code !== 'INTERNAL' ? new TroupeError(e.code, e.message) : new Error(e.message);
}

/**
 * A call the recording does not have: not yet a divergence — the recording may have cut it short
 * before it began (a stop applied before the agent's turn reached the model, where here it got
 * there first). It stays in `extras` until cancelled; still asked when the replay ends, it is the
 * first divergence.
 */
export function extraCall(extras: Set<Divergence>, request: ModelRequest, purpose: string, options: ModelCallOptions): Promise<ModelTurn> {
  const extra: Divergence = {
    agent: request.agent.name,
    agentId: request.agent.id,
    turn: request.turn,
    kind: 'request',
    diff: `the code asked for a ${purpose} call the recording does not have`,
  };
  extras.add(extra);
  return new Promise<ModelTurn>((_resolve, reject) =>
    options.signal.addEventListener(
      'abort',
      () => {
        extras.delete(extra);
        reject(options.signal.reason);
      },
      { once: true },
    ),
  );
}

/** The recording's agent and message ids, handed out in order; past them, ids no run has. */
export class RecordedIds {
  readonly #recording: Pick<Recording, 'agentIds' | 'messageIds'>;
  #agentIds: string[];
  #messageIds: string[];
  readonly source: IdSource;

  constructor(recording: Pick<Recording, 'agentIds' | 'messageIds'>) {
    this.#recording = recording;
    this.#agentIds = [...recording.agentIds];
    this.#messageIds = [...recording.messageIds];
    let extra = 0;
    this.source = { agent: () => this.#agentIds.shift() ?? `replay${++extra}`, message: () => this.#messageIds.shift() ?? `msg_replay${++extra}` };
  }

  /**
   * At a restart: the ids still to hand out are the recording's not committed yet — what the dead
   * process handed out and never committed was lost with it, in the recording as here.
   */
  resync(committed: { agents: ReadonlySet<string>; messages: ReadonlySet<string> }): void {
    this.#agentIds = this.#recording.agentIds.filter((id) => !committed.agents.has(id));
    this.#messageIds = this.#recording.messageIds.filter((id) => !committed.messages.has(id));
  }
}
