/**
 * Failure patterns across a team (issue 34 item 9): one tracker per run counts, per failure
 * fingerprint (turn/fingerprint.ts), the distinct agents whose call failed that way within a
 * window of troupe's clock. When `threshold` agents have, it trips — once per fingerprint per
 * window — and the host journals a `team.failure_pattern` event and tells each distinct parent of
 * those agents once, with a notice whose key is the claim (`failure_pattern:<id>:<at>:<parent>`).
 *
 * Across a restart: the trips are restored from those notice keys (the same commit as the event),
 * so a pattern is never told twice within its window. The counts are not kept: an agent that
 * still fails after the resume counts again (a window is minutes; counting anew can only delay a
 * trip, never repeat one).
 * @module
 */
import type { Logger } from 'pino';
import type { WriteOp } from '../../store/port.js';
import { failureFingerprint, type FailureFingerprint } from '../../turn/fingerprint.js';
import type { TroupeEvent } from '../views/views.js';

export interface FailurePatternPolicy {
  /** Distinct agents that must fail the same way within the window. */
  threshold: number;
  windowMs: number;
}

/** A tripped pattern: which agents failed the same way, and when it tripped. */
export interface FailurePatternTrip {
  fingerprint: FailureFingerprint;
  /** The agents that failed that way within the window, in the order they first did. */
  agents: string[];
  at: number;
}

const KEY_PREFIX = 'failure_pattern:';

/** The notice key that claims telling `parentId` about a trip (its fingerprint and time). */
export const failurePatternNoticeKey = (fingerprintId: string, at: number, parentId: string): string => `${KEY_PREFIX}${fingerprintId}:${at}:${parentId}`;

export class FailurePatterns {
  readonly policy: FailurePatternPolicy;
  /** fingerprint id → agent id → when it last failed that way. */
  #seen = new Map<string, Map<string, number>>();
  /** fingerprint id → when it last tripped. */
  #tripped = new Map<string, number>();

  constructor(policy: FailurePatternPolicy) {
    this.policy = policy;
  }

  /** Record one failed call; the trip when this failure makes the pattern (at most once per window). */
  record(agentId: string, fingerprint: FailureFingerprint, at: number): FailurePatternTrip | null {
    const { threshold, windowMs } = this.policy;
    let agents = this.#seen.get(fingerprint.id);
    if (!agents) this.#seen.set(fingerprint.id, (agents = new Map()));
    for (const [id, last] of agents) if (at - last >= windowMs) agents.delete(id);
    agents.set(agentId, at);
    if (agents.size < threshold) return null;
    const last = this.#tripped.get(fingerprint.id);
    if (last !== undefined && at - last < windowMs) return null;
    this.#tripped.set(fingerprint.id, at);
    return { fingerprint, agents: [...agents.keys()], at };
  }

  /** After a restart: the trips whose notices were already queued (their keys) are not repeated. */
  restore(noticeKeys: readonly string[]): void {
    for (const key of noticeKeys) {
      if (!key.startsWith(KEY_PREFIX)) continue;
      const [id, at] = key.slice(KEY_PREFIX.length).split(':');
      const when = Number(at);
      if (!id || !Number.isFinite(when)) continue;
      if ((this.#tripped.get(id) ?? -Infinity) < when) this.#tripped.set(id, when);
    }
  }
}

/** The notice's text: which tool fails the same way for which agents. */
function failurePatternText(trip: FailurePatternTrip, names: readonly string[]): string {
  const { tool, errorClass, args } = trip.fingerprint;
  return [
    `[Team failure pattern] The tool '${tool}' fails the same way (${errorClass}) for ${names.join(', ')}, with the same arguments (normalised: ${args}).`,
    "This looks like a broken tool or a shared wrong assumption, not one agent's mistake. Fix the cause, or tell those agents to stop using this tool and try another approach.",
  ].join('\n');
}

/** What journaling and telling a trip needs of the host. */
export interface FailurePatternHost {
  readonly runId: string;
  readonly logger: Logger;
  readonly failurePatterns: FailurePatterns | null;
  find(id: string): { id: string; name: string; parentId: string | null } | undefined;
  stage(op: WriteOp): void;
  emit(event: Extract<TroupeEvent, { type: 'team.failure_pattern' }>): void;
  notify(agentId: string, m: { type: string; content: string; noticeKey: string; data: Record<string, unknown> }): void;
}

/**
 * A tool call of `agent` failed with `errorClass` (its code): count it, and on a trip journal the
 * `team.failure_pattern` event and tell each distinct parent of the agents once (same commit).
 */
export function recordToolFailure(host: FailurePatternHost, agentId: string, tool: string, args: string, errorClass: string, at: number): void {
  const tracker = host.failurePatterns;
  if (!tracker) return;
  const trip = tracker.record(agentId, failureFingerprint(tool, args, errorClass), at);
  if (!trip) return;
  const agents = trip.agents.map((id) => ({ id, name: host.find(id)?.name ?? id, parentId: host.find(id)?.parentId ?? null }));
  const { fingerprint } = trip;
  const facts = { tool, fingerprint: fingerprint.id, errorClass, args: fingerprint.args, agents: agents.map(({ id, name }) => ({ id, name })) };
  host.stage({ op: 'appendEvent', row: { runId: host.runId, agentId: null, type: 'team.failure_pattern', data: { ...facts }, at } });
  host.logger.warn({ tool, errorClass, fingerprint: fingerprint.id, agents: trip.agents }, 'the same tool fails the same way across the team');
  const text = failurePatternText(
    trip,
    agents.map((a) => a.name),
  );
  for (const parentId of new Set(agents.map((a) => a.parentId))) {
    if (parentId === null) continue; // the root has no one to tell; the event still says it
    const children = agents.filter((a) => a.parentId === parentId).map((a) => a.id);
    host.notify(parentId, {
      type: 'failure_pattern',
      content: text,
      noticeKey: failurePatternNoticeKey(fingerprint.id, at, parentId),
      data: { ...facts, children },
    });
  }
  host.emit({ type: 'team.failure_pattern', ...facts, at });
}
