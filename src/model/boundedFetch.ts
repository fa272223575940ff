/**
 * A `fetch` for the `openai` client that bounds what a model server can make troupe read. The
 * client's SSE reader copies and rescans everything buffered since the last event boundary on
 * every network chunk: one event of a few megabytes without a blank line kept the event loop busy
 * for hundreds of milliseconds at a time (measured: 4 MB, up to 258 ms per stretch, ~1 s in all;
 * the cost grows with the square of the size). Streamed bodies are therefore handed to the client
 * whole events at a time — its buffer is empty after each piece, so its reading stays linear.
 *
 * Every body, streamed or not, is counted as it arrives against one cap, `MAX_RESPONSE_BYTES`: the
 * read fails with `PROVIDER_INVALID_RESPONSE` the moment the total passes it, and the connection is
 * dropped (the rest is never read). A streamed answer of many small events used to be read whole
 * (105 MB: a 4 s event-loop block, 732 MB of memory, all of it kept in the session). An event over
 * `MAX_SSE_EVENT_BYTES` fails the same way.
 *
 * A call may pass `fetchOptions: { [ON_BYTES]: fn }` (the client spreads it into this fetch's
 * init): `fn` is called whenever bytes of the response arrive, headers first (the silent-stream
 * guard of openaiModel.ts re-arms on it).
 * @module
 */
import { ProviderError } from '../errors.js';

/** The `fetchOptions` key of a call's byte hook (see the module comment). */
export const ON_BYTES = 'troupeOnBytes';

/** The largest SSE event troupe reads (1 MiB): servers send a token or a piece of a tool call per event. */
export const MAX_SSE_EVENT_BYTES = 1 << 20;

/**
 * The largest response body troupe reads (8 MiB), streamed or not: far beyond any completion a
 * model returns.
 */
export const MAX_RESPONSE_BYTES = 8 << 20;

/** Marks the errors of a body troupe stopped reading (`details.overLimitBytes`): nothing of it is kept. */
const OVER_LIMIT = 'overLimitBytes';

const overLimit = (what: string, limit: number) =>
  new ProviderError('PROVIDER_INVALID_RESPONSE', `The server sent ${what} larger than ${limit} bytes`, { details: { [OVER_LIMIT]: limit } });

/** Whether `err` is a body or an event over its cap (its text is not salvaged: the answer is refused whole). */
export const isOverLimit = (err: unknown): boolean => err instanceof ProviderError && typeof err.details?.[OVER_LIMIT] === 'number';

const LF = 0x0a;
const CR = 0x0d;

/**
 * Regroup an SSE byte stream into whole events. Boundaries are the ones the `openai` client looks
 * for (`\n\n`, `\r\r`, `\r\n\r\n`), found by one pass over each byte.
 */
function wholeEvents(onBytes: () => void): TransformStream<Uint8Array, Uint8Array> {
  let pending: Uint8Array[] = [];
  // Bytes of the whole body so far.
  let total = 0;
  // Bytes of the event being read, so far.
  let eventBytes = 0;
  // The bytes before the one being read, since the last boundary (0: none).
  let b1 = 0;
  let b2 = 0;
  let b3 = 0;
  const tooLarge = () => overLimit('a stream event', MAX_SSE_EVENT_BYTES);
  return new TransformStream({
    transform(chunk, controller) {
      onBytes();
      total += chunk.length;
      if (total > MAX_RESPONSE_BYTES) return controller.error(overLimit('a response', MAX_RESPONSE_BYTES));
      let cut = -1;
      for (let i = 0; i < chunk.length; i++) {
        const b = chunk[i]!;
        eventBytes++;
        if ((b === LF && b1 === LF) || (b === CR && b1 === CR) || (b === LF && b1 === CR && b2 === LF && b3 === CR)) {
          if (eventBytes > MAX_SSE_EVENT_BYTES) return controller.error(tooLarge());
          cut = i + 1;
          eventBytes = b1 = b2 = b3 = 0;
        } else {
          b3 = b2;
          b2 = b1;
          b1 = b;
        }
      }
      if (eventBytes > MAX_SSE_EVENT_BYTES) return controller.error(tooLarge());
      if (cut < 0) {
        pending.push(chunk);
      } else {
        controller.enqueue(concat([...pending, chunk.subarray(0, cut)]));
        pending = cut < chunk.length ? [chunk.subarray(cut)] : [];
      }
    },
    flush(controller) {
      if (pending.length > 0) controller.enqueue(concat(pending));
    },
  });
}

/** A body of at most MAX_RESPONSE_BYTES, passed through as it arrives. */
function capped(onBytes: () => void): TransformStream<Uint8Array, Uint8Array> {
  let total = 0;
  return new TransformStream({
    transform(chunk, controller) {
      onBytes();
      total += chunk.length;
      if (total > MAX_RESPONSE_BYTES) {
        controller.error(overLimit('a response', MAX_RESPONSE_BYTES));
        return;
      }
      controller.enqueue(chunk);
    },
  });
}

function concat(parts: Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0]!;
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/**
 * `fetch` with bounded bodies: every body is capped at MAX_RESPONSE_BYTES as it arrives (erroring
 * the body cancels the response, which drops the connection), and a successful answer to a
 * streamed request is regrouped into whole events, each at most MAX_SSE_EVENT_BYTES.
 */
export function boundedFetch(stream: boolean): typeof fetch {
  return async (input, given) => {
    const { [ON_BYTES]: hook, ...init } = (given ?? {}) as RequestInit & { [ON_BYTES]?: () => void };
    const onBytes = typeof hook === 'function' ? hook : () => undefined;
    const res = await fetch(input, init);
    onBytes();
    if (!res.body) return res;
    const body = res.body.pipeThrough(stream && res.ok ? wholeEvents(onBytes) : capped(onBytes));
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}
