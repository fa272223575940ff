/**
 * A wire-accurate fake of the OpenAI Chat Completions endpoint on `node:http`, bound to
 * 127.0.0.1 on an ephemeral port. Point the real `openai` client at `server.url` and script the
 * replies: text, tool calls, refusals, SSE streams (optionally cut mid-way), error statuses with
 * headers, raw bodies, dropped connections and requests that never answer.
 * @module
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { answerOf, completionBody, sseEvents } from './fakeCompletion.js';

export type { FakeReply, FakeToolCall, FakeUsage } from './fakeReply.js';
import type { FakeReply } from './fakeReply.js';

/** A request the fake received (every one, including 404s and unparseable bodies). */
export interface FakeRequest {
  /** Position in `server.requests` (0-based). */
  index: number;
  method: string;
  /** The URL path including any query string, e.g. `/v1/chat/completions`. */
  path: string;
  /** Lower-cased header names; repeated headers are joined with `, `. */
  headers: Record<string, string>;
  /** The parsed JSON body, or the raw string if it is not JSON. */
  body: unknown;
  /** `Date.now()` when the request body was fully received. */
  at: number;
}

/** Replies served in order, or a function that picks the reply for each request. */
export type FakeScript = FakeReply[] | ((request: FakeRequest) => FakeReply | Promise<FakeReply>);

/** A running fake server; `await using` closes it. */
export interface FakeOpenAIServer extends AsyncDisposable {
  /** e.g. http://127.0.0.1:PORT/v1 — pass as baseURL */
  readonly url: string;
  readonly port: number;
  /** Every request received, in arrival order, including 404s. */
  readonly requests: FakeRequest[];
  /** Replies of an array script not yet served (always 0 for a function script). */
  remaining(): number;
  /**
   * Resolves once the client of request `index` goes away before its reply was complete (an
   * aborted or timed-out call); at once if it already has.
   */
  clientAborted(index: number): Promise<void>;
  /** Throws an Error listing how many replies were never served (array scripts only). */
  assertComplete(): void;
  /** Closes the server and destroys open sockets (hanging ones too); idempotent. */
  close(): Promise<void>;
}

/** Options of `createFakeOpenAIServer`. */
export interface FakeOpenAIServerOptions {
  /** The `model` reported in responses; default `fake-model`. */
  model?: string;
}

const errorBody = (message: string, type: string, code: string | null = null) => ({
  error: { message, type, param: null, code },
});

/** Start a fake OpenAI-compatible Chat Completions server on 127.0.0.1 (ephemeral port). */
export async function createFakeOpenAIServer(script: FakeScript, options: FakeOpenAIServerOptions = {}): Promise<FakeOpenAIServer> {
  const model = options.model ?? 'fake-model';
  const requests: FakeRequest[] = [];
  const sockets = new Set<Socket>();
  const waits = new Set<{ timer: ReturnType<typeof setTimeout>; resolve: () => void }>();
  let served = 0;
  let completions = 0;
  let toolCallIds = 0;
  let closing: Promise<void> | undefined;
  /** Requests whose client left before the reply ended, and who is waiting to hear of it. */
  const abortedRequests = new Set<number>();
  const abortWatchers = new Map<number, (() => void)[]>();
  const markAborted = (index: number) => {
    abortedRequests.add(index);
    for (const resolve of abortWatchers.get(index) ?? []) resolve();
    abortWatchers.delete(index);
  };

  const wait = (ms: number) =>
    new Promise<void>((resolve) => {
      const entry = {
        timer: setTimeout(() => {
          waits.delete(entry);
          resolve();
        }, ms),
        resolve,
      };
      waits.add(entry);
    });

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      // A bug here (or a throwing function script) answers 500 rather than escaping.
      const message = error instanceof Error ? error.message : String(error);
      if (!res.headersSent && !res.destroyed) {
        sendJson(res, 500, errorBody(`fake OpenAI server: ${message}`, 'server_error'));
      } else {
        res.destroy();
      }
    });
  });
  // Idle keep-alive connections outlive the client's (undici: 4 s, node:http: 5 s), as a real
  // provider's do: the client closes first, so it never reuses a socket the server is closing.
  server.keepAliveTimeout = 65_000;
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });

  function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
    if (res.destroyed) return;
    const text = typeof body === 'string' ? body : JSON.stringify(body);
    const all: Record<string, string> = {
      'content-type': 'application/json',
      'content-length': String(Buffer.byteLength(text)),
    };
    for (const [name, value] of Object.entries(headers)) all[name.toLowerCase()] = value;
    res.writeHead(status, all);
    res.end(text);
  }

  /**
   * A body as given, `repeat` times over, in pieces cut at `splitAt`; each piece reaches the socket
   * before the next is written, and writing stops when the client goes away.
   */
  async function sendRaw(
    res: ServerResponse,
    status: number,
    body: string | Uint8Array,
    headers: Record<string, string>,
    splitAt: readonly number[],
    repeat: number,
  ) {
    if (res.destroyed) return;
    const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : Buffer.from(body);
    const all: Record<string, string> = { 'content-type': 'application/json', 'content-length': String(bytes.length * repeat) };
    for (const [name, value] of Object.entries(headers)) all[name.toLowerCase()] = value;
    res.writeHead(status, all);
    const cuts = [...new Set(splitAt)].filter((at) => at > 0 && at < bytes.length).sort((a, b) => a - b);
    for (let copy = 0; copy < repeat; copy++) {
      let from = 0;
      for (const at of [...cuts, bytes.length]) {
        const piece = bytes.subarray(from, at);
        from = at;
        if (res.destroyed) return;
        // A write to a socket the client closed may never call back: 'close' settles it too.
        await new Promise<void>((resolve) => {
          res.once('close', resolve);
          res.write(piece, () => {
            res.off('close', resolve);
            resolve();
          });
        });
        // One macrotask turn, so the client reads this piece before the next one arrives.
        await new Promise<void>((resolve) => setImmediate(resolve));
      }
    }
    if (!res.destroyed) res.end();
  }

  async function readBody(req: IncomingMessage): Promise<string> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    // Swallow errors of a client that goes away mid-response; `gone` guards every later write.
    req.on('error', () => undefined);
    res.on('error', () => undefined);
    let gone = false;
    // Known once the body is read; a client that leaves earlier was never a recorded request.
    const recorded: { index?: number } = {};
    res.on('close', () => {
      gone = true;
      if (!res.writableEnded && recorded.index !== undefined) markAborted(recorded.index);
    });

    const raw = await readBody(req);
    let body: unknown = raw;
    let parsed = false;
    try {
      body = JSON.parse(raw);
      parsed = true;
    } catch {
      // Keep the raw string.
    }
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value;
    }
    const request: FakeRequest = {
      index: requests.length,
      method: req.method ?? 'GET',
      path: req.url ?? '/',
      headers,
      body,
      at: Date.now(),
    };
    requests.push(request);
    recorded.index = request.index;

    const pathname = request.path.split('?')[0];
    const known = pathname === '/v1/chat/completions' || pathname === '/chat/completions';
    if (!known || request.method !== 'POST') {
      sendJson(res, 404, errorBody(`Unknown request URL: ${request.method} ${request.path}.`, 'invalid_request_error', 'unknown_url'));
      return;
    }
    if (!parsed) {
      sendJson(
        res,
        400,
        errorBody('We could not parse the JSON body of your request. (fake OpenAI server: the body is not valid JSON.)', 'invalid_request_error'),
      );
      return;
    }

    let reply: FakeReply;
    if (typeof script === 'function') {
      reply = await script(request);
    } else {
      const next = script[served];
      if (next === undefined) {
        sendJson(res, 500, errorBody(`fake OpenAI server: script exhausted (request ${request.index})`, 'server_error'));
        return;
      }
      served += 1;
      reply = next;
    }

    if ('hang' in reply) return;
    if (reply.delayMs !== undefined && reply.delayMs > 0) await wait(reply.delayMs);
    if (gone || closing) return;

    if ('drop' in reply) {
      req.socket.destroy();
      return;
    }
    const requestId = `req_fake_${request.index}`;
    if ('raw' in reply) {
      const repeat = reply.repeat ?? 1;
      if (!Number.isInteger(repeat) || repeat < 1) throw new Error(`fake OpenAI server: repeat must be an integer >= 1, got ${repeat}`);
      await sendRaw(res, reply.status ?? 200, reply.raw, { 'x-request-id': requestId, ...reply.headers }, reply.splitAt ?? [], repeat);
      return;
    }
    if ('status' in reply) {
      const errorPayload = reply.body === undefined ? errorBody(`fake status ${reply.status}`, 'fake_error') : reply.body;
      sendJson(res, reply.status, errorPayload, { 'x-request-id': requestId, ...reply.headers });
      return;
    }
    if (!('message' in reply)) {
      sendJson(res, 500, errorBody('fake OpenAI server: the scripted reply has no known shape', 'server_error'));
      return;
    }

    completions += 1;
    const meta = { id: `chatcmpl-fake-${completions}`, created: Math.floor(Date.now() / 1000), model };
    const answer = answerOf(reply, () => `call_fake_${++toolCallIds}`);
    const streamed = typeof body === 'object' && body !== null && (body as { stream?: unknown }).stream === true;
    if (!streamed) {
      sendJson(res, 200, completionBody(answer, meta), { 'x-request-id': requestId });
      return;
    }
    const includeUsage = (body as { stream_options?: { include_usage?: unknown } | null }).stream_options?.include_usage === true;
    const events = sseEvents(answer, meta, includeUsage);

    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-request-id': requestId,
    });
    if (reply.stallAfterChunks !== undefined || reply.eventGapMs !== undefined) {
      const shown = events.slice(0, reply.stallAfterChunks ?? events.length);
      for (const [i, event] of shown.entries()) {
        if (i > 0 && reply.eventGapMs) await new Promise((resolve) => setTimeout(resolve, reply.eventGapMs));
        if (res.destroyed) return;
        res.write(event);
      }
      // Gone silent: the socket stays open until the client gives up or the server closes.
      if (reply.stallAfterChunks === undefined) res.end();
      return;
    }
    const cut = reply.cutAfterChunks;
    if (cut === undefined) {
      for (const event of events) res.write(event);
      res.end();
      return;
    }
    const written = events.slice(0, Math.max(0, cut));
    // Destroy only once the written events reached the socket, so the client sees them before the cut.
    // With nothing to write, an SSE comment (ignored by clients) still sends the headers.
    const payload = written.length > 0 ? written.join('') : ': fake OpenAI server cut\n\n';
    res.write(payload, () => req.socket.destroy());
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    // A deep accept queue: a client opening a thousand connections at once must not see resets.
    server.listen({ port: 0, host: '127.0.0.1', backlog: 4096 }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;

  const close = (): Promise<void> => {
    closing ??= new Promise<void>((resolve) => {
      for (const entry of waits) {
        clearTimeout(entry.timer);
        entry.resolve();
      }
      waits.clear();
      server.close(() => resolve());
      for (const socket of sockets) socket.destroy();
    });
    return closing;
  };

  return {
    url: `http://127.0.0.1:${port}/v1`,
    port,
    requests,
    remaining: () => (typeof script === 'function' ? 0 : Math.max(0, script.length - served)),
    clientAborted: (index: number) =>
      abortedRequests.has(index)
        ? Promise.resolve()
        : new Promise<void>((resolve) => {
            const list = abortWatchers.get(index) ?? [];
            list.push(resolve);
            abortWatchers.set(index, list);
          }),
    assertComplete: () => {
      if (typeof script === 'function') return;
      const left = script.length - served;
      if (left > 0) {
        throw new Error(`fake OpenAI server: ${left} of ${script.length} scripted replies were never served (${served} served)`);
      }
    },
    close,
    [Symbol.asyncDispose]: close,
  };
}
