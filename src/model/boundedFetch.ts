/**
 * The `fetch` the `openai` client calls, on `node:http`/`node:https` with one keep-alive pool per
 * protocol shared by every model of the process, bounding what a model server can make troupe read.
 *
 * Why not the global `fetch`: with many calls in flight its CPU per call was several times that of
 * `node:http` sending the same request (test/bench/modelCall.bench.ts measures both), and troupe then
 * wrapped every body in a second web stream to count it. Here the body is read once, as Node
 * buffers: a JSON answer is collected (counted as it arrives) and handed to the client whole, and
 * only a streamed answer becomes a web stream, one, fed whole SSE events.
 *
 * Whole events: the client's SSE reader copies and rescans everything buffered since the last
 * event boundary on every network chunk: one event of a few megabytes without a blank line kept
 * the event loop busy for hundreds of milliseconds at a time (measured: 4 MB, up to 258 ms per
 * stretch, ~1 s in all; the cost grows with the square of the size). Streamed bodies are therefore
 * handed over whole events at a time — the client's buffer is empty after each piece, so its
 * reading stays linear.
 *
 * Every body, streamed or not, is counted as it arrives against one cap, `MAX_RESPONSE_BYTES`: the
 * read fails with `PROVIDER_INVALID_RESPONSE` the moment the total passes it, and the connection is
 * dropped (the rest is never read). A streamed answer of many small events used to be read whole
 * (105 MB: a 4 s event-loop block, 732 MB of memory, all of it kept in the session). An event over
 * `MAX_SSE_EVENT_BYTES` fails the same way. Failures of the body surface when the client reads it,
 * as with `fetch` (a dropped connection as `TypeError('terminated')`).
 *
 * A call may pass `fetchOptions: { [ON_BYTES]: fn }` (the client spreads it into this fetch's
 * init): `fn` is called whenever bytes of the response arrive, headers first (the silent-stream
 * guard of openaiModel.ts re-arms on it).
 *
 * What it does not do that `fetch` does: follow redirects (an API answers a POST, it does not
 * move it), ask for compressed bodies (a body compressed anyway is decoded), or send bodies other
 * than a string or bytes (the client sends JSON text).
 * @module
 */
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage, type OutgoingHttpHeaders, type RequestOptions } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { Readable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import { urlToHttpOptions } from 'node:url';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
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

/**
 * One keep-alive pool per protocol for the whole process: every call to a server reuses the
 * connections its earlier calls opened, however many models point at it. Most recently used
 * first, so that connections a quieter moment no longer needs go idle and are closed: by the
 * server, or by Node at the server's `Keep-Alive: timeout` hint.
 *
 * Every connection a burst opened stays pooled until then (the model queue bounds how many calls,
 * hence connections, are ever out at once). Node's default keeps 256 idle and closes the rest, so
 * each burst past 256 calls (a parent's fan-out, a team of 1,000) opened them again: a TCP connect
 * each, a TLS handshake each on https. Measured, 1,000 calls at once to the fake server in rounds:
 * 212 → 160 µs of CPU per `openaiModel.complete` (loopback http; a handshake costs far more).
 */
const POOL = { keepAlive: true, scheduling: 'lifo', maxFreeSockets: Number.POSITIVE_INFINITY } as const;
const agents = { http: new HttpAgent(POOL), https: new HttpsAgent(POOL) };

const LF = 0x0a;
const CR = 0x0d;

/**
 * Regroups an SSE byte stream into whole events. Boundaries are the ones the `openai` client looks
 * for (`\n\n`, `\r\r`, `\r\n\r\n`), found by one pass over each byte.
 */
class EventFramer {
  #pending: Buffer[] = [];
  /** Bytes of the event being read, so far. */
  #eventBytes = 0;
  // The bytes before the one being read, since the last boundary (0: none).
  #b1 = 0;
  #b2 = 0;
  #b3 = 0;

  /** The events `chunk` completes, with what was pending before them (undefined: none yet); throws on an event over its cap. */
  push(chunk: Buffer): Buffer | undefined {
    let cut = -1;
    for (let i = 0; i < chunk.length; i++) {
      const b = chunk[i]!;
      this.#eventBytes++;
      if ((b === LF && this.#b1 === LF) || (b === CR && this.#b1 === CR) || (b === LF && this.#b1 === CR && this.#b2 === LF && this.#b3 === CR)) {
        if (this.#eventBytes > MAX_SSE_EVENT_BYTES) throw overLimit('a stream event', MAX_SSE_EVENT_BYTES);
        cut = i + 1;
        this.#eventBytes = this.#b1 = this.#b2 = this.#b3 = 0;
      } else {
        this.#b3 = this.#b2;
        this.#b2 = this.#b1;
        this.#b1 = b;
      }
    }
    if (this.#eventBytes > MAX_SSE_EVENT_BYTES) throw overLimit('a stream event', MAX_SSE_EVENT_BYTES);
    if (cut < 0) {
      this.#pending.push(chunk);
      return undefined;
    }
    const whole = this.#pending.length === 0 ? chunk.subarray(0, cut) : Buffer.concat([...this.#pending, chunk.subarray(0, cut)]);
    this.#pending = cut < chunk.length ? [chunk.subarray(cut)] : [];
    return whole;
  }

  /** What is left once the body ended (a last event without its boundary), passed on as it is. */
  rest(): Buffer | undefined {
    return this.#pending.length === 0 ? undefined : Buffer.concat(this.#pending);
  }
}

/**
 * A body read whole: its text, decoded as the bytes arrived, and the bytes. `json()` and `text()`
 * use the text (the client reads a JSON answer with `json()`: one parse, no web stream), and a web
 * stream is only made for whoever asks for `body`.
 */
class WholeResponse extends Response {
  /** The pieces as they came; joined only for whoever asks for bytes (a copy of the whole body). */
  readonly #chunks: Buffer[];
  readonly #text: string;
  #stream: ReadableStream<Uint8Array> | null | undefined;

  constructor(chunks: Buffer[], text: string, init: ResponseInit) {
    super(null, init);
    this.#chunks = chunks;
    // UTF-8 text as `fetch` decodes it: a byte-order mark dropped.
    this.#text = text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
    Object.defineProperty(this, 'body', { get: () => (this.#stream ??= new Response(this.#bytes()).body), configurable: true });
  }

  #bytes(): Buffer {
    return this.#chunks.length === 1 ? this.#chunks[0]! : Buffer.concat(this.#chunks);
  }

  override text = (): Promise<string> => Promise.resolve(this.#text);

  override json = (): Promise<unknown> => {
    try {
      return Promise.resolve(JSON.parse(this.#text) as unknown);
    } catch (err) {
      return Promise.reject(err as Error);
    }
  };

  override arrayBuffer = (): Promise<ArrayBuffer> => {
    const bytes = this.#bytes();
    return Promise.resolve(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length) as ArrayBuffer);
  };
}

/** A body that fails as soon as it is read. */
const failedBody = (err: unknown) => new ReadableStream<Uint8Array>({ start: (controller) => controller.error(err) });

/** The decoded body: a server may compress even unasked. */
function decoded(res: IncomingMessage): Readable {
  const encoding = res.headers['content-encoding']?.trim().toLowerCase();
  const decoder =
    encoding === 'gzip' || encoding === 'x-gzip'
      ? createGunzip()
      : encoding === 'deflate'
        ? createInflate()
        : encoding === 'br'
          ? createBrotliDecompress()
          : undefined;
  if (!decoder) return res;
  res.on('error', (err) => decoder.destroy(err));
  return res.pipe(decoder);
}

/** The answer's headers as name-value pairs, as they came: `Response` builds its `Headers` from them once. */
function responseHeaders(res: IncomingMessage): [string, string][] {
  const raw = res.rawHeaders;
  const pairs: [string, string][] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) pairs.push([raw[i]!, raw[i + 1]!]);
  return pairs;
}

/** Where a request goes, as `node:http` reads a URL; parsed once per URL (a client asks the same few). */
interface Target {
  secure: boolean;
  options: RequestOptions;
}

const targets = new Map<string, Target>();
/** Bounds the cache: a process that asks more distinct URLs starts it again (each is parsed anew). */
const MAX_TARGETS = 256;

function targetOf(url: string): Target {
  let target = targets.get(url);
  if (target) return target;
  const parsed = new URL(url);
  target = { secure: parsed.protocol === 'https:', options: urlToHttpOptions(parsed) };
  if (targets.size >= MAX_TARGETS) targets.clear();
  targets.set(url, target);
  return target;
}

/**
 * The request's headers as `node:http` takes them. The client passes a `Headers`: read once
 * (copying it into another `Headers` first sorted and copied it twice, ~6 KB of garbage a call).
 */
function requestHeaders(init: RequestInit['headers']): OutgoingHttpHeaders {
  const headers: OutgoingHttpHeaders = {};
  const source = init instanceof Headers ? init : new Headers(init);
  source.forEach((value, name) => {
    headers[name] = value;
  });
  return headers;
}

/** Statuses a `Response` cannot carry a body with. */
const NULL_BODY = new Set([101, 204, 205, 304]);

type Init = RequestInit & { [ON_BYTES]?: () => void };

/**
 * One request. Settles as `fetch` does: rejects when no response came (the signal's reason when
 * aborted), else resolves with the response, whose body then carries any later failure.
 */
function send(url: string, init: Init, stream: boolean, isRetry: boolean): Promise<Response> {
  const hook = init[ON_BYTES];
  const onBytes = typeof hook === 'function' ? hook : () => undefined;
  const signal = init.signal ?? undefined;
  const body = init.body;
  return new Promise<Response>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    if (body !== undefined && body !== null && typeof body !== 'string' && !(body instanceof Uint8Array)) {
      return reject(new TypeError('boundedFetch sends a string or bytes as a body'));
    }
    const { secure, options } = targetOf(url);
    const headers = requestHeaders(init.headers);
    if (body !== undefined && body !== null) headers['content-length'] = typeof body === 'string' ? Buffer.byteLength(body) : body.length;
    const req = (secure ? httpsRequest : httpRequest)({ ...options, method: init.method ?? 'GET', headers, agent: secure ? agents.https : agents.http });
    let responded = false;
    let settled = false;
    const onAbort = () => req.destroy(signal?.reason as Error);
    signal?.addEventListener('abort', onAbort, { once: true });
    const done = () => {
      settled = true;
      signal?.removeEventListener('abort', onAbort);
    };
    /** Why the body could not be read whole. */
    const bodyFailure = (err: unknown) => (signal?.aborted ? signal.reason : err instanceof ProviderError ? err : new TypeError('terminated', { cause: err }));

    req.on('error', (err) => {
      if (responded) return; // the body reports it
      done();
      // A kept-alive connection the server closed just as it was reused: the request never reached
      // the server. Once, on a fresh connection (as Node's documentation advises).
      if (req.reusedSocket && !isRetry && (err as { code?: string }).code === 'ECONNRESET' && !signal?.aborted) {
        resolve(send(url, init, stream, true));
        return;
      }
      reject(signal?.aborted ? signal.reason : err);
    });
    req.on('response', (res) => {
      responded = true;
      onBytes();
      const status = res.statusCode ?? 0;
      const meta = { status, statusText: res.statusMessage ?? '', headers: responseHeaders(res) };
      if (status < 200 || status > 599) {
        done();
        req.destroy();
        reject(new TypeError(`The server answered with status ${status}`));
        return;
      }
      if (NULL_BODY.has(status)) {
        done();
        res.resume();
        resolve(new Response(null, meta));
        return;
      }
      const source = decoded(res);
      let total = 0;
      /** Counts a piece of the body; false once the body is over the cap (the connection is then dropped). */
      const count = (chunk: Buffer): boolean => {
        onBytes();
        total += chunk.length;
        return total <= MAX_RESPONSE_BYTES;
      };
      if (stream && status >= 200 && status < 300) {
        resolve(
          new Response(
            eventStream(source, count, () => req.destroy(), bodyFailure, done),
            meta,
          ),
        );
        return;
      }
      // A JSON answer, or an error body: collected, then handed over whole. Each piece is decoded
      // as it arrives: decoding a 5 MB answer of non-ASCII text at the end took ~60 ms in one
      // stretch of the event loop (wireFuzz), on top of the parse.
      const chunks: Buffer[] = [];
      const decoder = new StringDecoder('utf8');
      const texts: string[] = [];
      const fail = (err: unknown) => {
        if (settled) return;
        done();
        req.destroy();
        if (signal?.aborted) reject(signal.reason);
        else resolve(new Response(failedBody(bodyFailure(err)), meta));
      };
      source.on('data', (chunk: Buffer) => {
        if (settled) return;
        if (!count(chunk)) return fail(overLimit('a response', MAX_RESPONSE_BYTES));
        chunks.push(chunk);
        texts.push(decoder.write(chunk));
      });
      source.on('end', () => {
        if (settled) return;
        done();
        texts.push(decoder.end());
        resolve(new WholeResponse(chunks, texts.join(''), meta));
      });
      source.on('error', fail);
      // Once the body ended (every answer) there is nothing to fail, so no Error is built: its stack
      // capture was 2.2 % of the main thread's CPU at K = 10,000 (scale bench, CPU profile).
      source.on('close', () => settled || fail(new Error('the connection closed before the body ended')));
    });
    req.end(body ?? undefined);
  });
}

/** A streamed answer as one web stream of whole events, read as the client pulls it. */
function eventStream(
  source: Readable,
  count: (chunk: Buffer) => boolean,
  drop: () => void,
  failure: (err: unknown) => unknown,
  done: () => void,
): ReadableStream<Uint8Array> {
  const framer = new EventFramer();
  let over = false;
  return new ReadableStream<Uint8Array>(
    {
      start(controller) {
        const fail = (err: unknown) => {
          if (over) return;
          over = true;
          done();
          drop();
          controller.error(failure(err));
        };
        source.on('data', (chunk: Buffer) => {
          if (over) return;
          if (!count(chunk)) return fail(overLimit('a response', MAX_RESPONSE_BYTES));
          let events: Buffer | undefined;
          try {
            events = framer.push(chunk);
          } catch (err) {
            return fail(err);
          }
          if (events) controller.enqueue(events);
          if ((controller.desiredSize ?? 1) <= 0) source.pause();
        });
        source.on('end', () => {
          if (over) return;
          over = true;
          done();
          const rest = framer.rest();
          if (rest) controller.enqueue(rest);
          controller.close();
        });
        source.on('error', fail);
        source.on('close', () => over || fail(new Error('the connection closed before the body ended')));
      },
      pull() {
        source.resume();
      },
      cancel() {
        over = true;
        done();
        drop();
      },
    },
    { highWaterMark: 1 },
  );
}

/**
 * `fetch` with bounded bodies (see the module comment): every body is capped at
 * MAX_RESPONSE_BYTES as it arrives (past it, the connection is dropped), and a successful answer to
 * a streamed request is handed over in whole events, each at most MAX_SSE_EVENT_BYTES.
 */
export function boundedFetch(stream: boolean): typeof fetch {
  return (input, init) => send(input instanceof Request ? input.url : String(input), (init ?? {}) as Init, stream, false);
}
