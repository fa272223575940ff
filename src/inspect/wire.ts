/**
 * What the `--inspect` relay sends: the sanitising allow-lists (whatever is not named here never
 * leaves the process) and the Stately wire format, built field by field.
 * @module
 */
import type { StatelyInspectionEvent } from '@statelyai/inspect';
import { shardedValues, type Sharded } from '../../machines/sharded.js';

/** Strings longer than this are dropped from events and contexts. */
const MAX_STRING = 200;
/** Nesting kept in events other than the known ones. */
const MAX_DEPTH = 6;
/** Keys dropped from any event (at any depth): credentials and conversation text. */
const SENSITIVE_KEY = /key|token|secret|authorization|password|content|task|summary|message/i;

// ---------------------------------------------------------------------------------------------
// Sanitising: allow-lists. Whatever is not named here never leaves the process.

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (!isRecord(value)) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** A JSON scalar, or undefined (dropped) for anything else and for long strings. */
function scalar(value: unknown): Json | undefined {
  if (value === null || typeof value === 'boolean') return value;
  if (typeof value === 'number') return Number.isFinite(value) ? value : null;
  if (typeof value === 'string') return value.length > MAX_STRING ? undefined : value;
  return undefined;
}

/** The named scalar fields of `source` (missing or non-scalar ones are left out). */
function pickScalars(source: unknown, keys: readonly string[]): { [key: string]: Json } {
  const out: { [key: string]: Json } = {};
  if (!isRecord(source)) return out;
  for (const key of keys) {
    const value = scalar(source[key]);
    if (value !== undefined) out[key] = value;
  }
  return out;
}

const AGENT_SCALARS = [
  'id',
  'name',
  'parentId',
  'turns',
  'stintTurns',
  'recoveries',
  'idleResumes',
  'waitKind',
  'waitingSince',
  'stopReason',
  'lastTool',
  'budgetEpoch',
] as const;
const BUDGET_FLAGS = ['limitUsd', 'budgetStopped', 'reserveStopped', 'paused', 'resumeEpoch', 'reserveNoticeClaimed'] as const;
const SPAWN_LIMITS = ['maxDepth', 'maxChildren', 'maxAgents'] as const;
const RECORD_FIELDS = ['id', 'name', 'parentId', 'depth', 'status'] as const;

/** An error as its code only: messages can quote a provider's answer or a tool's input. */
function errorCode(error: unknown): Json {
  return isRecord(error) && typeof error.code === 'string' ? { code: error.code.slice(0, MAX_STRING) } : null;
}

/** A completion report as success and a count: its text is the conversation's. */
function reportShape(report: unknown): Json {
  if (!isRecord(report)) return null;
  return {
    success: typeof report.success === 'boolean' ? report.success : null,
    findings: Array.isArray(report.findings) ? report.findings.length : 0,
  };
}

/** An agent's lifecycle fields (its context, or the `state` of its input). */
function sanitizeAgent(source: Record<string, unknown>): { [key: string]: Json } {
  const out = pickScalars(source, AGENT_SCALARS);
  if ('error' in source) out.error = errorCode(source.error);
  if ('report' in source) out.report = reportShape(source.report);
  return out;
}

/** The coordinator's agent records, as a list sorted by depth then name. */
function agentList(agents: unknown): Json[] {
  let records: unknown[] = [];
  // The coordinator's sharded records (machines/sharded.ts: an array of branches, each an array of
  // leaves mapping ids to records), or a plain list of records.
  const isLeaf = (value: unknown) => isRecord(value) && Object.values(value).every(isRecord);
  const isBranch = (value: unknown) => Array.isArray(value) && value.every(isLeaf);
  if (Array.isArray(agents)) records = agents.every(isBranch) ? [...shardedValues(agents as Sharded<unknown>)] : agents;
  return records
    .filter(isRecord)
    .map((record) => pickScalars(record, RECORD_FIELDS))
    .sort((a, b) => Number(a.depth ?? 0) - Number(b.depth ?? 0) || String(a.name).localeCompare(String(b.name)) || String(a.id).localeCompare(String(b.id)));
}

function sanitizeCoordinator(source: Record<string, unknown>): { [key: string]: Json } {
  return {
    ...pickScalars(source, ['runId', 'rootId', 'agentCount', 'activeNonRoot', 'running']),
    budget: pickScalars(source.budget, BUDGET_FLAGS),
    limits: pickScalars(source.limits, SPAWN_LIMITS),
    agents: agentList(source.agents),
  };
}

const isCoordinatorShape = (value: Record<string, unknown>) => typeof value.runId === 'string' && isRecord(value.limits);
const isAgentContextShape = (value: Record<string, unknown>) => isRecord(value.spec) && typeof value.spec.id === 'string' && typeof value.turns === 'number';

/**
 * The part of an actor's context the inspector may show: for an agent its ids, name, counters,
 * wait, stop reason, last tool, error code and report shape; for the coordinator its run ids,
 * counts, budget flags, limits and the agent list `{ id, name, parentId, depth, status }`.
 * Any other context (or none) becomes undefined.
 */
export function sanitizeContext(context: unknown): unknown {
  if (!isRecord(context)) return undefined;
  if (isCoordinatorShape(context)) return sanitizeCoordinator(context);
  // An agent's identity lives in its fixed `spec`; shown flat, with the counters.
  if (isAgentContextShape(context)) return { ...pickScalars(context.spec, ['id', 'name', 'parentId']), ...sanitizeAgent(context) };
  return undefined;
}

/** An actor's input in `xstate.init`: an agent's or the coordinator's, through the same allow-lists. */
function sanitizeInput(input: unknown): Json | undefined {
  if (!isRecord(input)) return undefined;
  if (isCoordinatorShape(input)) return sanitizeCoordinator(input);
  if (typeof input.id === 'string' && typeof input.name === 'string') {
    const state = isRecord(input.state) ? sanitizeAgent(input.state) : {};
    return { ...state, ...pickScalars(input, ['id', 'name', 'parentId', 'status']) };
  }
  return undefined;
}

/**
 * Plain data only (no class instances, functions, actor refs), without long strings, to a bounded
 * depth; with `dropSensitive`, also without keys that look like credentials or conversation text.
 */
function scrub(value: unknown, depth: number, dropSensitive = true): Json | undefined {
  const s = scalar(value);
  if (s !== undefined || value === null) return s;
  if (depth >= MAX_DEPTH) return undefined;
  if (Array.isArray(value)) {
    return value.map((item) => scrub(item, depth + 1, dropSensitive)).filter((item): item is Json => item !== undefined);
  }
  if (value instanceof Error) {
    const code = (value as { code?: unknown }).code;
    return typeof code === 'string' ? { name: value.name, code } : { name: value.name };
  }
  if (!isPlainObject(value)) return undefined; // actor refs, class instances, functions
  const out: { [key: string]: Json } = {};
  for (const [key, item] of Object.entries(value)) {
    if (dropSensitive && SENSITIVE_KEY.test(key)) continue;
    const kept = scrub(item, depth + 1, dropSensitive);
    if (kept !== undefined) out[key] = kept;
  }
  return out;
}

/**
 * The part of an event the inspector may show. `turn.done` keeps only the outcome's kind,
 * `agent.changed` only the id and status, `xstate.init` its input through the context
 * allow-lists; any other event loses strings over 200 characters and every key that looks like
 * a credential or conversation text (key, token, secret, authorization, password, content, task,
 * summary, message), at any depth.
 */
export function sanitizeEvent(event: unknown): unknown {
  if (!isRecord(event) || typeof event.type !== 'string') return { type: 'unknown' };
  const type = event.type.slice(0, MAX_STRING);
  switch (type) {
    case 'turn.done': {
      const kind = isRecord(event.outcome) ? scalar(event.outcome.kind) : undefined;
      return { type, outcome: { kind: typeof kind === 'string' ? kind : null } };
    }
    case 'agent.changed':
      return { type, ...pickScalars(event, ['id', 'status']) };
    case 'xstate.init': {
      const input = sanitizeInput(event.input);
      return input === undefined ? { type } : { type, input };
    }
    default: {
      const out = scrub(event, 0);
      return { ...(isRecord(out) ? out : {}), type };
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Wire format: what each message carries, built field by field (the adapter gets raw snapshots).

/** A snapshot's viewable fields; `machine`, `_nodes`, `input`, `output`, `historyValue` stay home. */
function wireSnapshot(snapshot: unknown): Json {
  if (!isRecord(snapshot)) return { status: 'active' };
  const out: { [key: string]: Json } = {};
  const status = scalar(snapshot.status);
  if (status !== undefined) out.status = status;
  // State values are state names (strings, or nested objects of them).
  const value = scrub(snapshot.value, 0, false);
  if (value !== undefined) out.value = value;
  // Already sanitised by createInspector: plain JSON from the allow-lists above.
  const context = scrub(snapshot.context, 0, false);
  if (context !== undefined) out.context = context;
  if (snapshot.error !== undefined) out.error = errorCode(snapshot.error);
  const tags: unknown = snapshot.tags;
  if (tags instanceof Set || Array.isArray(tags)) out.tags = [...(tags as Iterable<unknown>)].filter((t): t is string => typeof t === 'string');
  if (isRecord(snapshot.children)) {
    const children: { [key: string]: Json } = {};
    for (const [key, child] of Object.entries(snapshot.children)) {
      const id = isRecord(child) && typeof child.id === 'string' ? child.id : key;
      children[key] = { xstate$$type: 1, id };
    }
    out.children = children;
  }
  return out;
}

/** One inspection event as the JSON text the bridge page posts into the Stately iframe. */
export function toWire(event: StatelyInspectionEvent): string {
  const base = {
    type: event.type,
    sessionId: event.sessionId,
    rootId: event.rootId,
    id: event.id,
    createdAt: event.createdAt,
    _version: event._version,
  };
  switch (event.type) {
    case '@xstate.actor':
      return JSON.stringify({
        ...base,
        name: event.name,
        parentId: event.parentId,
        definition: event.definition,
        snapshot: wireSnapshot(event.snapshot),
      });
    case '@xstate.event':
      return JSON.stringify({ ...base, sourceId: event.sourceId, event: event.event });
    case '@xstate.snapshot':
      return JSON.stringify({ ...base, event: event.event, snapshot: wireSnapshot(event.snapshot) });
  }
}
