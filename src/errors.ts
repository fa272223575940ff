/**
 * One error class with a stable `code` and a `retryable` flag for everything troupe throws or
 * returns to a model on purpose. Every code is listed in `ERROR_CODES` and in the README's error
 * table (a test keeps the two in sync).
 * @module
 */
import type { SerializedError } from '../machines/types.js';

/** Every stable error code, with whether repeating the operation may succeed and what it means. */
export const ERROR_CODES = {
  CONFIG_INVALID: { retryable: false, description: 'An option or setting is invalid; nothing was changed.' },
  AGENT_NOT_FOUND: { retryable: false, description: 'No agent with that id or name in this run.' },
  AGENT_EXISTS: { retryable: false, description: 'An agent with that id is already registered.' },
  AGENT_NOT_REACHABLE: { retryable: false, description: 'The agent finished and the run is not interactive: nobody will read it.' },
  ROOT_EXISTS: { retryable: false, description: 'The root agent was already started.' },
  RECIPIENT_NOT_ALLOWED: { retryable: false, description: 'Only parent, children and siblings (unless messagePolicy is "any").' },
  MESSAGE_TOO_LARGE: { retryable: false, description: 'Larger than limits.maxMessageBytes.' },
  MAILBOX_FULL: { retryable: true, description: 'The recipient holds limits.maxMailbox undelivered messages.' },
  MAX_DEPTH_EXCEEDED: { retryable: false, description: 'Deeper than limits.maxDepth.' },
  MAX_CHILDREN_EXCEEDED: {
    retryable: true,
    description: 'The parent has limits.maxChildren active children (a spawn_agents batch counts whole: none is spawned).',
  },
  MAX_AGENTS_EXCEEDED: { retryable: false, description: 'The run has limits.maxAgents agents (a spawn_agents batch counts whole: none is spawned).' },
  BUDGET_EXCEEDED: { retryable: false, description: 'The budget is spent; every agent is stopped.' },
  BUDGET_ALLOWANCE_EXCEEDED: {
    retryable: false,
    description: "A spawn's allowance does not fit what its parent's account has left under its reserve line: nothing spawned.",
  },
  BUDGET_RESERVE_REACHED: { retryable: false, description: 'The sub-agent reserve tripped: sub-agents stopped, no new ones.' },
  TOOL_NOT_FOUND: { retryable: false, description: 'The agent has no such tool.' },
  TOOL_INPUT_INVALID: { retryable: false, description: "Arguments are not JSON or do not match the tool's schema." },
  TOOL_FAILED: { retryable: false, description: 'The tool threw; the model got the error as the result.' },
  TOOL_TIMEOUT: { retryable: true, description: 'The tool overran its timeout and was aborted.' },
  TOOL_NOT_ALLOWED: { retryable: false, description: "Not this agent's tool now (a child calling finish, …)." },
  APPROVAL_DENIED: { retryable: false, description: 'A mutating or destructive call was not approved (or no approver is set).' },
  TOOL_IN_DOUBT: { retryable: false, description: 'A crash cut the call after it started: it may have taken effect; not re-run; check first.' },
  TOOL_NOT_RUN: { retryable: true, description: 'A crash, shutdown or stop cut the turn before the call started: no effect; call again if needed.' },
  TOOL_CANCELLED: { retryable: false, description: 'A stop aborted the running call (MCP: cancelled on the wire); its effect is unknown; check first.' },
  MCP_SERVER_UNAVAILABLE: { retryable: true, description: "The tool's MCP server died or is down; a cut call's effect is unknown." },
  MCP_RESULT_TOO_LARGE: {
    retryable: false,
    description: "The result exceeds the server's maxResultChars (or its message 8 bytes per such character, at least 8 MiB: cut off while read).",
  },
  MCP_TOO_MANY_TOOLS: {
    retryable: false,
    description: 'The MCP server lists more than its maxTools tools (256): it fails to start and is retried with backoff.',
  },
  MCP_LIST_TOO_LONG: {
    retryable: false,
    description: 'The MCP server has more than maxListPages pages of tools/list (100): it fails to start and is retried with backoff.',
  },
  RESULT_INVALID: {
    retryable: true,
    description: "The finish call's value is missing or does not match the agent's output schema: the agent is told the errors and may call again.",
  },
  RESULT_SCHEMA_FAILED: {
    retryable: false,
    description: 'The agent finished with a value that failed its output schema limits.maxResultTries times (3) in a stint: it ended failed.',
  },
  FINISH_REFUSED: { retryable: true, description: "Agents below, or the agent's own executions or delegations, are still active." },
  EXECUTION_NOT_FOUND: { retryable: false, description: 'No execution with that id is linked to an agent of this run.' },
  APPROVAL_NOT_FOUND: { retryable: false, description: 'The run has no approval with that id (`troupe approvals` lists them).' },
  NOTE_NOT_FOUND: { retryable: false, description: 'The store has no note with that id (`troupe notes` lists them).' },
  NOTE_ALREADY_DECIDED: { retryable: false, description: 'The note was promoted or rejected already: a note is decided once.' },
  PROVIDER_RATE_LIMITED: { retryable: true, description: 'The provider answered 429.' },
  PROVIDER_UNAVAILABLE: { retryable: true, description: 'The provider answered 5xx (or 408/409).' },
  PROVIDER_TIMEOUT: { retryable: true, description: 'The model call timed out.' },
  PROVIDER_CONNECTION: { retryable: true, description: 'The connection to the provider failed.' },
  PROVIDER_CIRCUIT_OPEN: {
    retryable: false,
    description: "The endpoint's circuit breaker stayed open for breaker.openTimeoutMs (10 min): the agents waiting on it fail.",
  },
  PROVIDER_AUTH: { retryable: false, description: 'The provider rejected the credentials (401/403).' },
  PROVIDER_BAD_REQUEST: { retryable: false, description: 'The provider rejected the request (other 4xx).' },
  PROVIDER_CONTEXT_OVERFLOW: { retryable: false, description: "The conversation no longer fits the model's context." },
  PROVIDER_REFUSAL: { retryable: false, description: 'The model refused.' },
  PROVIDER_INVALID_RESPONSE: { retryable: false, description: 'A response troupe cannot use.' },
  REENTRY_SPENT: {
    retryable: false,
    description: 'The agent spent its self-wake budget (reentry.maxWakes): it was stopped, and a proactive message to it was refused.',
  },
  RECOVERY_EXHAUSTED: { retryable: false, description: 'An autonomous agent ended 3 turns in a row without a tool call.' },
  MAX_TURNS_EXCEEDED: { retryable: false, description: 'limits.maxTurns turns in this stint.' },
  PROFILE_UNKNOWN: {
    retryable: false,
    description: "A spawn named a profile the run does not configure, or a resumed agent's profile is no longer configured.",
  },
  WAIT_TIMEOUT: { retryable: true, description: 'waitFor did not see the status within timeoutMs.' },
  COORDINATOR_SHUT_DOWN: { retryable: false, description: 'The coordinator was shut down.' },
  SCRIPT_EXHAUSTED: { retryable: false, description: 'The scripted model has no step left for this agent.' },
  SCRIPT_UNCONSUMED: { retryable: false, description: 'The scripted model holds steps never used.' },
  RUN_LOCKED: { retryable: true, description: 'Another process owns the database (or another worker the run).' },
  RUN_NOT_LIVE: { retryable: true, description: 'No process drives the run: a live action was refused.' },
  RUN_NOT_FOUND: { retryable: false, description: 'No such run in the database.' },
  FORK_POINT_NOT_FOUND: { retryable: false, description: 'The agent has no committed turn of that number in the run (`troupe fork`).' },
  STORE_OPEN_FAILED: { retryable: false, description: 'The database file cannot be created or opened.' },
  STORE_CORRUPT: { retryable: false, description: 'Not a troupe database, or a row failed its checksum or shape check; left untouched.' },
  STORE_SCHEMA_TOO_NEW: { retryable: false, description: 'Written by a newer troupe; left untouched.' },
  STORE_IO: { retryable: false, description: 'A write failed (I/O, full disk): the coordinator stops; resume.' },
  STORE_UNREACHABLE: { retryable: true, description: 'The PostgreSQL server cannot be reached; nothing written.' },
  STORE_AUTH_FAILED: { retryable: false, description: 'PostgreSQL refused the login; nothing written.' },
  STORE_FOREIGN: { retryable: false, description: "The PostgreSQL schema holds another application's tables; left untouched." },
  LEASE_LOST: {
    retryable: false,
    description:
      "Another worker claimed the run, or this host's lease may have expired by its own clock (stopped, partitioned): it makes no model or tool call and writes nothing more.",
  },
  INTERNAL: { retryable: false, description: 'A bug in troupe or in a user-supplied function.' },
} as const satisfies Record<string, { retryable: boolean; description: string }>;

export type ErrorCode = keyof typeof ERROR_CODES;

export interface TroupeErrorOptions extends ErrorOptions {
  retryable?: boolean;
  /** Extra structured data, returned to models and kept in logs. */
  details?: Record<string, unknown>;
}

/** Base class of every error troupe raises on purpose. */
export class TroupeError extends Error {
  readonly code: ErrorCode;
  /** Whether repeating the same operation may succeed. */
  readonly retryable: boolean;
  readonly details: Record<string, unknown> | undefined;

  constructor(code: ErrorCode, message: string, options: TroupeErrorOptions = {}) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    this.retryable = options.retryable ?? ERROR_CODES[code].retryable;
    this.details = options.details;
  }
}

/** An option passed to troupe is invalid. */
export class ConfigError extends TroupeError {
  constructor(message: string, options?: TroupeErrorOptions) {
    super('CONFIG_INVALID', message, options);
  }
}

/** A model provider failure, classified once at the provider boundary. */
export class ProviderError extends TroupeError {
  readonly status: number | undefined;
  /** Server-requested delay before a retry (retry-after / retry-after-ms). */
  readonly retryAfterMs: number | undefined;

  constructor(code: Extract<ErrorCode, `PROVIDER_${string}`>, message: string, options: TroupeErrorOptions & { status?: number; retryAfterMs?: number } = {}) {
    super(code, message, options);
    this.status = options.status;
    this.retryAfterMs = options.retryAfterMs;
  }
}

export const isErrorCode = (value: unknown): value is ErrorCode => typeof value === 'string' && Object.prototype.hasOwnProperty.call(ERROR_CODES, value);

/** True for TroupeError instances and for their JSON form (prototypes do not survive JSON). */
export function isTroupeError(value: unknown): value is TroupeError {
  return value instanceof TroupeError || (typeof value === 'object' && value !== null && isErrorCode((value as { code?: unknown }).code));
}

/** The message of anything thrown: an Error's message, a string, or the value as JSON. Never throws. */
export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message || err.name || 'Error';
  if (typeof err === 'string') return err;
  try {
    return JSON.stringify(err) ?? String(err);
  } catch {
    return String(err);
  }
}

/** Any thrown value as an Error (strings and plain objects included). */
export function toError(value: unknown): Error {
  if (value instanceof Error) return value;
  return new Error(typeof value === 'string' ? value : JSON.stringify(value));
}

export function serializeError(error: unknown): SerializedError {
  if (error instanceof TroupeError) return { code: error.code, message: error.message, retryable: error.retryable };
  return { code: 'INTERNAL', message: toError(error).message, retryable: false };
}
