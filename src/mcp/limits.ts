/**
 * What an MCP server can make troupe read, bounded while it is read:
 *
 * - every message (a result, a `tools/list` page, anything) is read up to `messageLimit` bytes —
 *   8 MiB, or 8 bytes per `maxResultChars` character when that is more. Over streamable HTTP the
 *   response is cut off there (the connection is dropped; the rest is never read); over stdio the
 *   rest of the line is skipped without being kept (the connection goes on). The request it
 *   answers fails at once with a JSON-RPC error troupe makes up (`isTooLarge`), which the
 *   connection reports as `MCP_RESULT_TOO_LARGE` naming the server;
 * - `tools/list` is read for at most `maxListPages` pages and `maxTools` tools (connection.ts).
 *
 * Before, a 700 MB HTTP result was read whole before its size was checked (1.5 GB of memory), and
 * a stdio result over the SDK's 10 MiB buffer closed the connection ("Connection closed").
 * @module
 */
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { TroupeError } from '../errors.js';
import type { McpServerOptions } from './config.js';

/** The most tools one server may list (per server; `maxTools` overrides it). */
export const DEFAULT_MAX_TOOLS = 256;
/** The most `tools/list` pages read per listing (`maxListPages` overrides it). */
export const DEFAULT_MAX_LIST_PAGES = 100;
/** The least any message may be (8 MiB): a tools/list page of hundreds of tools fits many times over. */
export const MIN_MESSAGE_BYTES = 8 << 20;
/**
 * Bytes on the wire per character of `maxResultChars`: JSON escapes (`\u0001` is 6 bytes), UTF-8
 * (3 bytes for one UTF-16 unit) and structured content sent beside its text all fit.
 */
const WIRE_BYTES_PER_CHAR = 8;

/** The default of `maxResultChars`. */
export const DEFAULT_MAX_RESULT_CHARS = 1_000_000;

/** The largest message troupe reads from this server, in bytes. */
export const messageLimit = (options: Pick<McpServerOptions, 'maxResultChars'>): number =>
  Math.max(MIN_MESSAGE_BYTES, Math.ceil(WIRE_BYTES_PER_CHAR * (options.maxResultChars ?? DEFAULT_MAX_RESULT_CHARS)));

/** The `data` key of the error troupe answers a request with when its response was too large. */
const TOO_LARGE = 'troupe/messageTooLarge';
/** JSON-RPC "internal error": the answer could not be used. */
const INTERNAL_ERROR = -32603;

type Id = string | number;

/** The JSON-RPC error that stands for a response over `limit` bytes. */
function tooLargeResponse(id: Id, limit: number): JSONRPCMessage {
  return {
    jsonrpc: '2.0',
    id,
    error: { code: INTERNAL_ERROR, message: `The answer is larger than ${limit} bytes; troupe did not read it`, data: { [TOO_LARGE]: limit } },
  };
}

/** The limit an error of the SDK says was passed, when it stands for a response troupe cut off. */
export function isTooLarge(err: unknown): number | null {
  const data = (err as { data?: unknown } | null)?.data;
  if (typeof data !== 'object' || data === null) return null;
  const limit = (data as Record<string, unknown>)[TOO_LARGE];
  return typeof limit === 'number' ? limit : null;
}

// ── stdio: one message per line ──────────────────────────────────────────────────────────────────

const LF = 0x0a;
const CR = 0x0d;
/** Bytes kept of each end of a line too large to read: enough to find its id. */
const PEEK = 512;

/** A line over the limit: its size and both ends (the id is first or last in every SDK's messages). */
export interface OversizedLine {
  bytes: number;
  head: string;
  tail: string;
}

/** What a line too large to read was, by its ends. */
export type OversizedKind = { kind: 'response'; id: Id } | { kind: 'request' } | { kind: 'unknown' };

const SCALAR = String.raw`(?:-?\d+|"[^"\\]{0,200}")`;
// `{"method": …` possibly after "jsonrpc" and "id" (Python's order): a request or a notification.
const HEAD_REQUEST = new RegExp(String.raw`^\s*\{\s*(?:"(?:jsonrpc|id)"\s*:\s*${SCALAR}\s*,\s*){0,2}"method"\s*:`);
// `{"jsonrpc":"2.0","id":5,` (Python, Go): the id first.
const HEAD_ID = new RegExp(String.raw`^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(${SCALAR})\s*,`);
// `…,"jsonrpc":"2.0","id":5}` (the TypeScript SDK): the id last, closing the top-level object
// (an id nested deeper would be followed by more than one brace).
const TAIL_ID = new RegExp(String.raw`[{,]\s*"id"\s*:\s*(${SCALAR})\s*\}\s*$`);

/** Which request a line too large to read answers, from its ends. */
export function oversizedKind({ head, tail }: Pick<OversizedLine, 'head' | 'tail'>): OversizedKind {
  if (HEAD_REQUEST.test(head)) return { kind: 'request' };
  const id = HEAD_ID.exec(head)?.[1] ?? TAIL_ID.exec(tail)?.[1];
  if (id === undefined) return { kind: 'unknown' };
  return { kind: 'response', id: id.startsWith('"') ? (JSON.parse(id) as string) : Number(id) };
}

/** The last `n` bytes of `parts`, copied (nothing of a large chunk stays referenced). */
function lastBytes(parts: readonly Buffer[], n: number): Buffer {
  const out: Buffer[] = [];
  let have = 0;
  for (let i = parts.length - 1; i >= 0 && have < n; i--) {
    const part = parts[i]!;
    const take = Math.min(part.length, n - have);
    out.unshift(part.subarray(part.length - take));
    have += take;
  }
  return Buffer.concat(out);
}

/**
 * The stdio transport's reader (in place of the SDK's `ReadBuffer`, same three methods): lines up
 * to `limit` bytes are parsed as messages; of a longer line only its ends are kept while the rest
 * streams past. A response too large becomes `tooLargeResponse` for its id (the connection goes
 * on); a request or notification too large is dropped; a line whose id cannot be found throws from
 * `append`, and the SDK closes the connection as it did for any message over its buffer.
 * Chunks are joined once per line (the SDK's joins on every chunk, quadratic in a long line).
 */
export class BoundedLineBuffer {
  readonly #limit: number;
  readonly #parse: (line: string) => JSONRPCMessage;
  readonly #onOversized: (line: OversizedLine, kind: OversizedKind) => void;
  #parts: Buffer[] = [];
  #size = 0;
  /** While a line over the limit streams past: its first bytes, and its last ones so far. */
  #skipping: { head: Buffer; tail: Buffer } | null = null;
  #ready: (Buffer | JSONRPCMessage)[] = [];

  constructor(limit: number, parse: (line: string) => JSONRPCMessage, onOversized: (line: OversizedLine, kind: OversizedKind) => void) {
    this.#limit = limit;
    this.#parse = parse;
    this.#onOversized = onOversized;
  }

  append(chunk: Buffer): void {
    let from = 0;
    for (;;) {
      const nl = chunk.indexOf(LF, from);
      const end = nl === -1 ? chunk.length : nl;
      if (end > from) this.#take(chunk.subarray(from, end));
      if (nl === -1) return;
      this.#endLine();
      from = nl + 1;
    }
  }

  /** The next message, or null when no whole line is buffered. */
  readMessage(): JSONRPCMessage | null {
    const next = this.#ready.shift();
    if (next === undefined) return null;
    if (!Buffer.isBuffer(next)) return next;
    // Taken off the queue first: a line that does not parse is reported once (the SDK goes on).
    return this.#parse(next.toString('utf8'));
  }

  clear(): void {
    this.#parts = [];
    this.#size = 0;
    this.#skipping = null;
    this.#ready = [];
  }

  #take(piece: Buffer): void {
    this.#size += piece.length;
    if (this.#skipping) {
      this.#skipping.tail = lastBytes([this.#skipping.tail, piece], PEEK);
    } else if (this.#size <= this.#limit) {
      this.#parts.push(piece);
    } else {
      const parts = [...this.#parts, piece];
      this.#skipping = { head: Buffer.concat(parts, Math.min(PEEK, this.#size)), tail: lastBytes(parts, PEEK) };
      this.#parts = [];
    }
  }

  #endLine(): void {
    const skipped = this.#skipping;
    const parts = this.#parts;
    const bytes = this.#size;
    this.#parts = [];
    this.#size = 0;
    this.#skipping = null;
    if (skipped) {
      const line = { bytes, head: skipped.head.toString('utf8'), tail: skipped.tail.toString('utf8').replace(/\r$/, '') };
      const kind = oversizedKind(line);
      this.#onOversized(line, kind);
      if (kind.kind === 'response') this.#ready.push(tooLargeResponse(kind.id, this.#limit));
      else if (kind.kind === 'unknown') {
        throw new TroupeError(
          'MCP_RESULT_TOO_LARGE',
          `The MCP server sent a message of ${bytes} bytes, over the limit of ${this.#limit}, answering no request troupe can tell`,
        );
      }
      return;
    }
    const line = parts.length === 1 ? parts[0]! : Buffer.concat(parts);
    // A blank line (or a lone CR) is no message.
    if (line.length === 0 || (line.length === 1 && line[0] === CR)) return;
    this.#ready.push(line[line.length - 1] === CR ? line.subarray(0, -1) : line);
  }
}

// ── streamable HTTP: a fetch that counts ─────────────────────────────────────────────────────────

/** The ids of the requests in a JSON-RPC body troupe sends (a message or a batch). */
function requestIds(body: unknown): Id[] {
  if (typeof body !== 'string') return [];
  try {
    const parsed: unknown = JSON.parse(body);
    return (Array.isArray(parsed) ? parsed : [parsed]).flatMap((m: unknown) => {
      const msg = m as { method?: unknown; id?: unknown } | null;
      return msg && typeof msg.method === 'string' && (typeof msg.id === 'number' || typeof msg.id === 'string') ? [msg.id] : [];
    });
  } catch {
    return [];
  }
}

/**
 * Counts a body as it arrives: an SSE stream per event (bytes since the last blank line), any other
 * body in all. Past `limit` it calls `trip` and errors, which cancels the response (and drops the
 * connection) before anything more is read.
 */
function counting(limit: number, sse: boolean, trip: () => Error): TransformStream<Uint8Array, Uint8Array> {
  let count = 0;
  let b1 = 0;
  let b2 = 0;
  let b3 = 0;
  return new TransformStream({
    transform(chunk, controller) {
      if (!sse) count += chunk.length;
      else {
        for (let i = 0; i < chunk.length; i++) {
          const b = chunk[i]!;
          count++;
          if ((b === LF && b1 === LF) || (b === CR && b1 === CR) || (b === LF && b1 === CR && b2 === LF && b3 === CR)) {
            count = b1 = b2 = b3 = 0;
          } else {
            b3 = b2;
            b2 = b1;
            b1 = b;
            if (count > limit) break;
          }
        }
      }
      if (count > limit) controller.error(trip());
      else controller.enqueue(chunk);
    },
  });
}

/**
 * The `fetch` of a streamable HTTP transport, bounded: a response (an SSE event of one) over
 * `limit` bytes is cut off as it is read, and each request of the body sent is answered at once
 * with `tooLargeResponse` through `deliver` (the transport's `onmessage`).
 */
export function boundedHttpFetch(limit: number, deliver: (message: JSONRPCMessage) => void, base: typeof fetch = fetch): typeof fetch {
  return async (input, init) => {
    const res = await base(input, init);
    if (!res.body) return res;
    const sse = (res.headers.get('content-type') ?? '').split(';')[0]!.trim().toLowerCase() === 'text/event-stream';
    let tripped = false;
    const trip = () => {
      if (!tripped) {
        tripped = true;
        for (const id of requestIds(init?.body)) deliver(tooLargeResponse(id, limit));
      }
      return new TroupeError('MCP_RESULT_TOO_LARGE', `The MCP server sent ${sse ? 'an event' : 'a response'} over ${limit} bytes; it was cut off`);
    };
    return new Response(res.body.pipeThrough(counting(limit, sse, trip)), { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}
