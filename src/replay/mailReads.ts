/**
 * The recorded mailbox reads in a replay (issue 37): when a turn or a wait reads its mailbox is not
 * recorded, only how many messages each read took (`replay.read`), and whether the wait reading
 * them was told they were the last (`last`: whether anything else is still active then is timing).
 * Each read of the code takes as many as the recording's did, and is told `last` as it was, once
 * that many have come — held until then — so a wait counts the messages its recording counted
 * whatever the commits around it. A read the recording has none of
 * took none: a turn's leaves the mail waiting; a wait's parks (or answers as it did: stopped, no
 * active agents) though mail waits — mail that came while the recording's wait was parked, here
 * first, and as it woke that wait it wakes this one as it parks (lifecycle.ts `#rewakeIfMail`).
 * A recording without reads (an older one) keeps the old rule: every read takes what waits.
 * @module
 */
import type { Read } from '../tools/ports.js';
import type { MailRead } from '../turn/ports.js';
import type { Divergence } from './compare.js';
import { readKey, type Recording } from './recording.js';

/** A mailbox read held until the messages the recording's read took have come. */
interface HeldRead {
  agentId: string;
  read: MailRead;
  taken: Read;
  waiting(): number;
  give(taken: Read | null): void;
}

/** A read the recording has none of: it took none. */
const NONE: Read = { count: 0, last: false };

export class RecordedReads {
  /** The recorded reads not taken yet, by agent and read (recording.ts `reads`); null: an older recording. */
  readonly #reads: Map<string, Read[]> | null;
  readonly #agents: Recording['agents'];
  #held: HeldRead[] = [];

  constructor(recording: Pick<Recording, 'reads' | 'agents'>) {
    this.#reads = recording.reads && new Map([...recording.reads].map(([k, v]) => [k, [...v]]));
    this.#agents = recording.agents;
  }

  /**
   * What read `read` of process `epoch` takes (the recording's count and `last`): synchronous
   * unless it must wait for messages (an await would move the read later than the recording's);
   * null, the code's own read (`off`: the replay went live or diverged, or an older recording).
   */
  take(epoch: number, agentId: string, read: MailRead, waiting: () => number, off: boolean): Read | null | Promise<Read | null> {
    if (!this.#reads || off) return null;
    const taken = this.#reads.get(readKey(epoch, agentId, read))?.shift() ?? NONE;
    if (waiting() >= taken.count) return taken;
    return new Promise((give) => this.#held.push({ agentId, read, taken, waiting, give }));
  }

  /** Give the held reads whose messages have come (all of them, with the code's own count, if `over`); whether any was. */
  release(over: boolean): boolean {
    const due = this.#held.filter((h) => over || h.waiting() >= h.taken.count);
    if (due.length === 0) return false;
    this.#held = this.#held.filter((h) => !due.includes(h));
    for (const h of due) h.give(over ? null : h.taken);
    return true;
  }

  /** A restart: the dead process's held reads never end. */
  clearHeld(): void {
    this.#held = [];
  }

  /** A read held for messages that never came (the code reads a mailbox the recording's did not), or null; `turnOf` its agent's turn. */
  heldDivergence(turnOf: (agentId: string) => number): Divergence | null {
    const [held] = this.#held;
    if (!held) return null;
    return {
      agent: this.#name(held.agentId),
      agentId: held.agentId,
      turn: turnOf(held.agentId),
      kind: 'notice',
      diff: `the recording's ${'turn' in held.read ? `turn ${held.read.turn}` : `wait ${held.read.callId}`} read ${held.taken.count} waiting messages; only ${held.waiting()} came`,
    };
  }

  /** A read of the recording's the code never made (it read that agent's mail elsewhere, or not at all), or null. */
  unread(): Divergence | null {
    for (const [key, reads] of this.#reads ?? []) {
      if (reads.length === 0) continue;
      const [, agentId, read] = key.split('\u0000') as [string, string, string];
      return {
        agent: this.#name(agentId),
        agentId,
        turn: 0,
        kind: 'notice',
        diff: `the recording's ${read.replace('call ', 'wait ')} read ${reads[0]!.count} waiting messages; the code never made that read`,
      };
    }
    return null;
  }

  #name(agentId: string): string {
    return this.#agents.find((a) => a.id === agentId)?.name ?? agentId;
  }
}
