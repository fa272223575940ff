/**
 * The recorded mailbox reads in a replay (issue 37): when a turn or a wait reads its mailbox is not
 * recorded, only how many messages each read took (`replay.read`). Each read of the code takes as
 * many as the recording's did, once that many have come — held until then — so a wait counts the
 * messages its recording counted whatever the commits around it. A read the recording has none of
 * took none: a turn's leaves the mail waiting; a wait's parks (or answers as it did: stopped, no
 * active agents) though mail waits — mail that came while the recording's wait was parked, here
 * first, and as it woke that wait it wakes this one as it parks (lifecycle.ts `#rewakeIfMail`).
 * A recording without reads (an older one) keeps the old rule: every read takes what waits.
 * @module
 */
import type { MailRead } from '../turn/ports.js';
import type { Divergence } from './compare.js';
import { readKey, type Recording } from './recording.js';

/** A mailbox read held until the messages the recording's read took have come. */
interface HeldRead {
  agentId: string;
  read: MailRead;
  count: number;
  waiting(): number;
  give(count: number | null): void;
}

export class RecordedReads {
  /** The recorded reads not taken yet, by agent and read (recording.ts `reads`); null: an older recording. */
  readonly #reads: Map<string, number[]> | null;
  readonly #agents: Recording['agents'];
  #held: HeldRead[] = [];

  constructor(recording: Pick<Recording, 'reads' | 'agents'>) {
    this.#reads = recording.reads && new Map([...recording.reads].map(([k, v]) => [k, [...v]]));
    this.#agents = recording.agents;
  }

  /**
   * The count read `read` of process `epoch` takes: synchronous unless it must wait for messages
   * (an await would move the read later than the recording's); null, what waits (`off`: the replay
   * went live or diverged, or an older recording).
   */
  take(epoch: number, agentId: string, read: MailRead, waiting: () => number, off: boolean): number | null | Promise<number | null> {
    if (!this.#reads || off) return null;
    const count = this.#reads.get(readKey(epoch, agentId, read))?.shift();
    if (count === undefined) return 0;
    if (waiting() >= count) return count;
    return new Promise((give) => this.#held.push({ agentId, read, count, waiting, give }));
  }

  /** Give the held reads whose messages have come (all of them, with the code's own count, if `over`); whether any was. */
  release(over: boolean): boolean {
    const due = this.#held.filter((h) => over || h.waiting() >= h.count);
    if (due.length === 0) return false;
    this.#held = this.#held.filter((h) => !due.includes(h));
    for (const h of due) h.give(over ? null : h.count);
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
      diff: `the recording's ${'turn' in held.read ? `turn ${held.read.turn}` : `wait ${held.read.callId}`} read ${held.count} waiting messages; only ${held.waiting()} came`,
    };
  }

  /** A read of the recording's the code never made (it read that agent's mail elsewhere, or not at all), or null. */
  unread(): Divergence | null {
    for (const [key, counts] of this.#reads ?? []) {
      if (counts.length === 0) continue;
      const [, agentId, read] = key.split('\u0000') as [string, string, string];
      return {
        agent: this.#name(agentId),
        agentId,
        turn: 0,
        kind: 'notice',
        diff: `the recording's ${read.replace('call ', 'wait ')} read ${counts[0]} waiting messages; the code never made that read`,
      };
    }
    return null;
  }

  #name(agentId: string): string {
    return this.#agents.find((a) => a.id === agentId)?.name ?? agentId;
  }
}
