/**
 * The fingerprint of a tool failure: the tool, its normalised arguments and the error's class —
 * what makes "the same tool failing the same way" comparable across agents (issue 34 item 9).
 *
 * Normalisation rule (so volatile parts do not split one failure into many):
 * - the arguments are parsed as JSON (malformed text is kept as one string) and written back as
 *   stable JSON: object keys sorted at every depth, array order kept;
 * - every number becomes `<n>`; booleans and null stay;
 * - inside strings: ISO-8601 timestamps become `<time>`, UUIDs `<uuid>`, hex runs of 8+ `<hex>`,
 *   prefixed ids (`run_…`, `msg_…`: letters, `_` or `-`, then 6+ letters/digits with a digit) `<id>`,
 *   and any other run of digits `<n>` (so `/tmp/job-123/out.txt` and `/tmp/job-9/out.txt` agree);
 * - a string still longer than 200 characters after that becomes `<sha256:first 16 hex>` of it;
 * - a string longer than 4,096 characters is judged by its first 4,096: a model's megabyte
 *   argument made every failure of it cost ~100 ms of regexes and hashing on the event loop
 *   (wireFuzz: 1 MB arguments, 205 ms stalls), and what makes two failures the same shows early.
 * The error class is the error's `code` (e.g. `TOOL_TIMEOUT`), never its message; for a tool that
 * threw something else (`TOOL_FAILED`), that thing's own string `code` (`ENOENT`) or else its
 * constructor's name: `TOOL_FAILED:ENOENT`, `TOOL_FAILED:TypeError` (`errorClassOf`).
 * @module
 */
import { createHash } from 'node:crypto';

export interface FailureFingerprint {
  /** sha256 of the three parts, 16 hex characters (what notices and events name). */
  id: string;
  tool: string;
  /** The normalised arguments as stable JSON. */
  args: string;
  errorClass: string;
}

const LONG_STRING = 200;
const JUDGED = 4_096;

const sha = (text: string, chars: number) => createHash('sha256').update(text).digest('hex').slice(0, chars);

/** Volatile parts of a string replaced by placeholders (see the module's rule). */
export function normaliseString(s: string): string {
  const out = (s.length > JUDGED ? s.slice(0, JUDGED) : s)
    .replace(/\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?/g, '<time>')
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi, '<uuid>')
    .replace(/\b[a-z]+[_-](?=[A-Za-z0-9]*\d)[A-Za-z0-9]{6,}\b/g, '<id>')
    .replace(/\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b/gi, '<hex>')
    .replace(/\d+/g, '<n>');
  return out.length > LONG_STRING ? `<sha256:${sha(out, 16)}>` : out;
}

function normalise(value: unknown): unknown {
  if (typeof value === 'number') return '<n>';
  if (typeof value === 'string') return normaliseString(value);
  if (Array.isArray(value)) return value.map(normalise);
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(value).sort()) out[key] = normalise((value as Record<string, unknown>)[key]);
    return out;
  }
  return value;
}

/** The arguments (raw JSON text as the model wrote it, or already parsed) normalised to stable JSON. */
export function normaliseArgs(args: string | unknown): string {
  let parsed: unknown = args;
  if (typeof args === 'string') {
    try {
      parsed = JSON.parse(args);
    } catch {
      parsed = args; // malformed: the text as one string
    }
  }
  return JSON.stringify(normalise(parsed)) ?? 'null';
}

/** The fingerprint of `tool` failing with `errorClass` (its code) on `args`. Pure. */
export function failureFingerprint(tool: string, args: string | unknown, errorClass: string): FailureFingerprint {
  const normal = normaliseArgs(args);
  return { id: sha(JSON.stringify([tool, normal, errorClass]), 16), tool, args: normal, errorClass };
}

/** The class of a failed call's error: its code, refined by the cause a `TOOL_FAILED` wraps. */
export function errorClassOf(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return err instanceof Error ? err.constructor.name : 'TOOL_FAILED';
  if (code !== 'TOOL_FAILED') return code;
  const cause = (err as { cause?: unknown }).cause;
  if (cause === undefined || cause === null) return code;
  const inner = (cause as { code?: unknown }).code;
  if (typeof inner === 'string') return `${code}:${inner}`;
  return typeof cause === 'object' ? `${code}:${(cause as object).constructor.name}` : code;
}
