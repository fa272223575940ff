/**
 * Provider failures are classified once, here at the boundary, into `ProviderError`s with a stable
 * code and `retryable` flag (DESIGN §4). The run loop reacts to the code, never to HTTP details.
 * @module
 */
import { ProviderError } from '../errors.js';

/**
 * The longest server-requested delay read from a header (a larger one is clamped to it). The wait
 * itself is also capped at the run's `retry.maxDelayMs` (recovery.ts `backoffMs`).
 */
export const MAX_RETRY_AFTER_MS = 600_000;

/** Header lookup that works for fetch `Headers` and plain records. */
export type HeaderSource = { get(name: string): string | null } | Record<string, string | undefined> | undefined;

function header(headers: HeaderSource, name: string): string | undefined {
  if (!headers) return undefined;
  if (typeof (headers as { get?: unknown }).get === 'function') {
    return (headers as { get(name: string): string | null }).get(name) ?? undefined;
  }
  const record = headers as Record<string, string | undefined>;
  return record[name] ?? record[name.toLowerCase()];
}

/**
 * The delay a server asked for: `retry-after-ms` (milliseconds), else `retry-after` (seconds or an
 * HTTP date). Unparseable or negative values are ignored; huge ones are clamped.
 */
export function retryAfterMs(headers: HeaderSource, now: number = Date.now()): number | undefined {
  const ms = header(headers, 'retry-after-ms');
  if (ms !== undefined && ms.trim() !== '') {
    const value = Number(ms);
    if (Number.isFinite(value) && value >= 0) return Math.min(value, MAX_RETRY_AFTER_MS);
  }
  const after = header(headers, 'retry-after');
  if (after === undefined || after.trim() === '') return undefined;
  const seconds = Number(after);
  if (Number.isFinite(seconds)) return seconds >= 0 ? Math.min(seconds * 1000, MAX_RETRY_AFTER_MS) : undefined;
  const date = Date.parse(after);
  if (Number.isNaN(date)) return undefined;
  return Math.min(Math.max(0, date - now), MAX_RETRY_AFTER_MS);
}

// OpenAI's codes, and llama.cpp server's error type.
const OVERFLOW_CODES = new Set(['context_length_exceeded', 'string_above_max_length', 'exceed_context_size_error']);
const OVERFLOW_TEXT =
  /context[ _-]?(length|window|size)|maximum context|too many tokens|prompt is too long|input is too long|exceeds? the (model'?s? )?(maximum|max)/i;

/** A 400 that says the conversation no longer fits (OpenAI's code, or the wording of other servers). */
export function isContextOverflow(status: number | undefined, code: unknown, message: string): boolean {
  if (typeof code === 'string' && OVERFLOW_CODES.has(code)) return true;
  return (status === 400 || status === 413 || status === undefined) && OVERFLOW_TEXT.test(message);
}

export interface HttpFailure {
  status: number | undefined;
  headers?: HeaderSource;
  /** The provider's error code (`error.code` in OpenAI's body), if any. */
  code?: unknown;
  message: string;
  cause?: unknown;
}

/**
 * An HTTP error response as a ProviderError. `x-should-retry` overrides the status-based choice
 * (a server that says "do not retry" is believed, and so is one that says "retry").
 */
export function classifyHttpFailure(failure: HttpFailure, now?: number): ProviderError {
  const { status, headers, code, message, cause } = failure;
  const shouldRetry = header(headers, 'x-should-retry');
  const override = shouldRetry === 'true' ? true : shouldRetry === 'false' ? false : undefined;
  const delay = retryAfterMs(headers, now);
  const base = {
    ...(status === undefined ? {} : { status }),
    ...(delay === undefined ? {} : { retryAfterMs: delay }),
    details: { status: status ?? null, providerCode: typeof code === 'string' ? code : null },
    ...(cause === undefined ? {} : { cause }),
  };
  // The openai client's messages already start with the status ("401 Incorrect API key"): say it once.
  const said = status !== undefined && message.startsWith(`${status} `) ? message.slice(`${status} `.length) : message;
  const text = `${status === undefined ? 'provider error' : `HTTP ${status}`}: ${said}`;
  if (isContextOverflow(status, code, message)) return new ProviderError('PROVIDER_CONTEXT_OVERFLOW', text, base);
  if (status === 429) {
    // Out of credit is not a rate limit that waiting fixes.
    const retryable = override ?? code !== 'insufficient_quota';
    return new ProviderError('PROVIDER_RATE_LIMITED', text, { ...base, retryable });
  }
  if (status === undefined || status === 408 || status === 409 || status >= 500) {
    return new ProviderError('PROVIDER_UNAVAILABLE', text, { ...base, retryable: override ?? true });
  }
  if (status === 401 || status === 403) return new ProviderError('PROVIDER_AUTH', text, { ...base, retryable: override ?? false });
  return new ProviderError('PROVIDER_BAD_REQUEST', text, { ...base, retryable: override ?? false });
}
