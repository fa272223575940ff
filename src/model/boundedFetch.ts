/**
 * A `fetch` for the `openai` client that bounds what a model server can make troupe read. The
 * client's SSE reader copies and rescans everything buffered since the last event boundary on
 * every network chunk: one event of a few megabytes without a blank line kept the event loop busy
 * for hundreds of milliseconds at a time (measured: 4 MB, up to 258 ms per stretch, ~1 s in all;
 * the cost grows with the square of the size). Streamed bodies are therefore handed to the client
 * whole events at a time — its buffer is empty after each piece, so its reading stays linear — and
 * an event over `MAX_SSE_EVENT_BYTES`, or any other body over `MAX_RESPONSE_BYTES`, fails the read
 * with `PROVIDER_INVALID_RESPONSE`.
 * @module
 */
import { ProviderError } from '../errors.js';

/** The largest SSE event troupe reads (1 MiB): servers send a token or a piece of a tool call per event. */
export const MAX_SSE_EVENT_BYTES = 1 << 20;

/** The largest response body troupe reads (8 MiB), far beyond any completion a model returns. */
export const MAX_RESPONSE_BYTES = 8 << 20;

const LF = 0x0a;
const CR = 0x0d;

/**
 * Regroup an SSE byte stream into whole events. Boundaries are the ones the `openai` client looks
 * for (`\n\n`, `\r\r`, `\r\n\r\n`), found by one pass over each byte.
 */
function wholeEvents(): TransformStream<Uint8Array, Uint8Array> {
  let pending: Uint8Array[] = [];
  // Bytes of the event being read, so far.
  let eventBytes = 0;
  // The bytes before the one being read, since the last boundary (0: none).
  let b1 = 0;
  let b2 = 0;
  let b3 = 0;
  const tooLarge = () => new ProviderError('PROVIDER_INVALID_RESPONSE', `The server sent a stream event larger than ${MAX_SSE_EVENT_BYTES} bytes`);
  return new TransformStream({
    transform(chunk, controller) {
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
function capped(): TransformStream<Uint8Array, Uint8Array> {
  let total = 0;
  return new TransformStream({
    transform(chunk, controller) {
      total += chunk.length;
      if (total > MAX_RESPONSE_BYTES) {
        controller.error(new ProviderError('PROVIDER_INVALID_RESPONSE', `The server sent a response larger than ${MAX_RESPONSE_BYTES} bytes`));
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
 * `fetch` with bounded bodies: a successful answer to a streamed request is regrouped into whole
 * events (each at most MAX_SSE_EVENT_BYTES), every other body is capped at MAX_RESPONSE_BYTES.
 */
export function boundedFetch(stream: boolean): typeof fetch {
  return async (input, init) => {
    const res = await fetch(input, init);
    if (!res.body) return res;
    const body = res.body.pipeThrough(stream && res.ok ? wholeEvents() : capped());
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}
