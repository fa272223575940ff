/**
 * One error class with a stable `code` and a `retryable` flag for everything troupe throws or
 * returns to a model on purpose. Every code is listed in `ERROR_CODES` and in the README's error
 * table (a test keeps the two in sync).
 * @module
 */
import type { SerializedError } from '../machines/types.js';

/** Every stable error code, with whether repeating the operation may succeed and what it means. */
export const ERROR_CODES = {
  CONFIG_INVALID: { retryable: false, description: 'An option passed to troupe is invalid; nothing was changed.' },
  AGENT_NOT_FOUND: { retryable: false, description: 'No agent with that id (or name) exists in this run.' },
  AGENT_EXISTS: { retryable: false, description: 'An agent with that id is already registered.' },
  AGENT_NOT_REACHABLE: {
    retryable: false,
    description: 'The agent is completed or stopped and the run is not interactive, so nothing will read the message.',
  },
  ROOT_EXISTS: { retryable: false, description: 'The coordinator already started its root agent.' },
  RECIPIENT_NOT_ALLOWED: {
    retryable: false,
    description: 'An agent may message only its parent, children and siblings (unless messagePolicy is "any").',
  },
  MESSAGE_TOO_LARGE: { retryable: false, description: 'The message is larger than limits.maxMessageBytes.' },
  MAILBOX_FULL: { retryable: true, description: "The recipient's mailbox holds limits.maxMailbox undelivered messages." },
  MAX_DEPTH_EXCEEDED: { retryable: false, description: 'Spawning would go deeper than limits.maxDepth.' },
  MAX_CHILDREN_EXCEEDED: {
    retryable: true,
    description: 'The parent already has limits.maxChildren active children (for a spawn, or a message that would revive a finished child); retry when one finishes.',
  },
  MAX_AGENTS_EXCEEDED: { retryable: false, description: 'The run already registered limits.maxAgents agents.' },
  BUDGET_EXCEEDED: { retryable: false, description: 'The run budget is spent; agents are stopped and none may start.' },
  BUDGET_RESERVE_REACHED: {
    retryable: false,
    description: 'The sub-agent reserve tripped: sub-agents are stopped and no new ones may be spawned.',
  },
  TOOL_NOT_FOUND: { retryable: false, description: 'The model called a tool that this agent does not have.' },
  TOOL_INPUT_INVALID: {
    retryable: false,
    description: "The tool call's arguments are not valid JSON or do not match the tool's JSON Schema.",
  },
  TOOL_FAILED: { retryable: false, description: 'A tool threw; the error went back to the model as the tool result.' },
  TOOL_TIMEOUT: { retryable: true, description: "A tool did not finish within its timeout and was aborted." },
  TOOL_NOT_ALLOWED: {
    retryable: false,
    description: 'This agent may not call that tool now (a child calling finish, the root calling agent_finish, …).',
  },
  APPROVAL_DENIED: {
    retryable: false,
    description: 'A tool that mutates or destroys was not approved (by the approver, or because none is configured); the model gets this as the tool result.',
  },
  TOOL_IN_DOUBT: {
    retryable: false,
    description:
      'A crash cut this tool call between its start and its recorded result: it may or may not have taken effect. It is not re-run (unless read-only or idempotent); check before retrying.',
  },
  TOOL_NOT_RUN: {
    retryable: true,
    description: 'A crash, a shutdown or a stop cut the turn before this tool call started: it had no effect; call it again if it is still needed.',
  },
  TOOL_CANCELLED: {
    retryable: false,
    description:
      'The agent was stopped while this tool call ran: its AbortSignal was aborted (an MCP call is cancelled on the wire) and the call abandoned. Whether it took effect is unknown; check before calling it again.',
  },
  MCP_SERVER_UNAVAILABLE: {
    retryable: true,
    description:
      'The MCP server behind this tool died during the call, or is down and its restart failed; it is restarted with backoff. The effect of a call cut this way is unknown.',
  },
  MCP_RESULT_TOO_LARGE: { retryable: false, description: "An MCP tool's result is larger than its server's maxResultChars; the model is told to ask for less." },
  FINISH_REFUSED: {
    retryable: true,
    description: "finish / agent_finish was refused because other agents are still active, or the agent's own executions or delegations are still running.",
  },
  EXECUTION_NOT_FOUND: { retryable: false, description: 'No async execution with that id was linked to an agent of this run.' },
  PROVIDER_RATE_LIMITED: { retryable: true, description: 'The model provider answered 429.' },
  PROVIDER_UNAVAILABLE: { retryable: true, description: 'The model provider answered 5xx (or 408/409).' },
  PROVIDER_TIMEOUT: { retryable: true, description: 'The model call timed out.' },
  PROVIDER_CONNECTION: { retryable: true, description: 'The connection to the model provider failed.' },
  PROVIDER_AUTH: { retryable: false, description: 'The model provider rejected the credentials (401/403).' },
  PROVIDER_BAD_REQUEST: { retryable: false, description: 'The model provider rejected the request (other 4xx).' },
  PROVIDER_CONTEXT_OVERFLOW: { retryable: false, description: "The conversation no longer fits the model's context." },
  PROVIDER_REFUSAL: { retryable: false, description: 'The model refused the request.' },
  PROVIDER_INVALID_RESPONSE: { retryable: false, description: 'The model provider sent a response troupe cannot use.' },
  RECOVERY_EXHAUSTED: {
    retryable: false,
    description: 'An autonomous agent ended 3 turns in a row without calling a tool and was crashed.',
  },
  MAX_TURNS_EXCEEDED: { retryable: false, description: 'The agent used limits.maxTurns turns in this stint.' },
  WAIT_TIMEOUT: { retryable: true, description: 'coordinator.waitFor did not see the status within timeoutMs.' },
  COORDINATOR_SHUT_DOWN: { retryable: false, description: 'The coordinator was shut down.' },
  SCRIPT_EXHAUSTED: { retryable: false, description: 'The scripted model has no step left for this agent.' },
  SCRIPT_UNCONSUMED: { retryable: false, description: 'The scripted model still holds steps that were never used.' },
  RUN_LOCKED: {
    retryable: true,
    description: 'Another process owns this database (its single-writer lock is held); only one process may drive a run.',
  },
  RUN_NOT_LIVE: { retryable: true, description: 'No process drives this run now: an action that needs a live run (the dashboard\'s send, stop, pause) was refused; resume it first.' },
  RUN_NOT_FOUND: { retryable: false, description: 'The database holds no run to resume (or not the one asked for).' },
  STORE_OPEN_FAILED: {
    retryable: false,
    description:
      'The database file cannot be created or opened (missing or unwritable directory, permissions, a directory or a file in the way).',
  },
  STORE_CORRUPT: {
    retryable: false,
    description:
      'The file is not a troupe database (not SQLite, or another program\'s), failed its integrity check, or a row failed its checksum or its shape check; it is left untouched.',
  },
  STORE_SCHEMA_TOO_NEW: {
    retryable: false,
    description: 'The database was written by a newer troupe (a higher schema version); it is left untouched.',
  },
  STORE_IO: {
    retryable: false,
    description: 'A write failed with an I/O error or a full disk; the coordinator stops accepting work (restart and resume).',
  },
  STORE_UNREACHABLE: {
    retryable: true,
    description: 'The PostgreSQL server cannot be reached (refused, timed out, shutting down); nothing was written.',
  },
  STORE_AUTH_FAILED: { retryable: false, description: 'PostgreSQL refused the login (wrong user or password); nothing was written.' },
  STORE_FOREIGN: {
    retryable: false,
    description: "The PostgreSQL schema holds another application's tables; it is left untouched (give troupe its own database or schema).",
  },
  LEASE_LOST: {
    retryable: false,
    description: 'Another worker claimed this run (its lease epoch moved on): this worker stopped hosting it and wrote nothing more.',
  },
  INTERNAL: { retryable: false, description: 'A bug in troupe or in a user-supplied function escaped.' },
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

  constructor(
    code: Extract<ErrorCode, `PROVIDER_${string}`>,
    message: string,
    options: TroupeErrorOptions & { status?: number; retryAfterMs?: number } = {},
  ) {
    super(code, message, options);
    this.status = options.status;
    this.retryAfterMs = options.retryAfterMs;
  }
}

export const isErrorCode = (value: unknown): value is ErrorCode =>
  typeof value === 'string' && Object.prototype.hasOwnProperty.call(ERROR_CODES, value);

/** True for TroupeError instances and for their JSON form (prototypes do not survive JSON). */
export function isTroupeError(value: unknown): value is TroupeError {
  return (
    value instanceof TroupeError ||
    (typeof value === 'object' && value !== null && isErrorCode((value as { code?: unknown }).code))
  );
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
