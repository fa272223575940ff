/**
 * A fork's own names: every id the original's history minted that is unique across the store (the
 * run, its agents, messages and executions) gets a fresh one, everywhere it occurs — in rows, in
 * notice keys, and in the text of sessions and events, where a parent reads its children's ids and
 * uses them later. Ids are whole alphanumeric tokens, so one pass over the history's JSON renames
 * them consistently.
 * @module
 */
import { customAlphabet } from 'nanoid';
import type { WriteOp } from '../store/port.js';

/** The shape of the ids a run mints (host/mail/messaging.ts). */
const freshId = customAlphabet('0123456789abcdefghijklmnopqrstuvwxyz', 10);

/** Old id → new id, for the run and what its history registered, queued and linked. */
export function renames(runId: string, newRunId: string, ops: Iterable<WriteOp>): Map<string, string> {
  const map = new Map<string, string>([[runId, newRunId]]);
  for (const w of ops) {
    if (w.op === 'registerAgent') map.set(w.agent.id, freshId());
    else if (w.op === 'enqueueMessage') map.set(w.message.id, `msg_${freshId()}`);
    else if (w.op === 'linkExecution' && !map.has(w.row.id)) map.set(w.row.id, `${w.row.id}_${freshId()}`);
  }
  return map;
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Letters and digits, joined by underscores: an id, or ids joined (`msg_<agent>_deleg_0001_interrupted`). */
const TOKEN = /[A-Za-z0-9]+(?:_[A-Za-z0-9]+)*/g;

/**
 * `value` with the run renamed and every other id of `map` renamed where it is a whole token or a
 * whole part of one between underscores (never inside a longer run of letters and digits). One
 * pass with a map lookup per token: the cost grows with the history, not with the number of ids.
 */
export function rename<T>(value: T, runId: string, map: ReadonlyMap<string, string>): T {
  // The run's id may be the user's (any characters): renamed on its own, as a whole token.
  const run = new RegExp(`(?<![A-Za-z0-9])${escape(runId)}(?![A-Za-z0-9])`, 'g');
  const text = JSON.stringify(value).replace(run, map.get(runId)!);
  const renamed = text.replace(
    TOKEN,
    (t) =>
      map.get(t) ??
      (t.includes('_')
        ? t
            .split('_')
            .map((part) => map.get(part) ?? part)
            .join('_')
        : t),
  );
  return JSON.parse(renamed) as T;
}

/** A fresh run id. */
export const freshRunId = () => `run_${freshId()}`;
