import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { boundedFetch, MAX_RESPONSE_BYTES, MAX_SSE_EVENT_BYTES } from '../../../src/model/boundedFetch.js';
import { createFakeOpenAIServer, type FakeOpenAIServer, type FakeReply } from '../../../src/testing/fakeOpenAIServer.js';

const open: FakeOpenAIServer[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
});

/** The body of one reply as the bounded fetch hands it over: every piece, or the error. */
async function read(reply: FakeReply, stream: boolean) {
  const server = await createFakeOpenAIServer([reply]);
  open.push(server);
  const res = await boundedFetch(stream)(`${server.url}/chat/completions`, { method: 'POST', body: '{}' });
  const reader = res.body!.getReader();
  const pieces: string[] = [];
  try {
    for (let r = await reader.read(); !r.done; r = await reader.read()) pieces.push(Buffer.from(r.value).toString('latin1'));
  } catch (error) {
    return { status: res.status, pieces, error, server };
  }
  return { status: res.status, pieces, error: undefined, server };
}

/** One SSE event of exactly `bytes` bytes. */
const eventOf = (bytes: number) => `data: "${'x'.repeat(bytes - 10)}"\n\n`;

const sseReply = (raw: string): FakeReply => ({ raw, headers: { 'content-type': 'text/event-stream' } });
const every = (n: number, step: number) => Array.from({ length: Math.ceil(n / step) }, (_, i) => i * step);

describe('boundedFetch', () => {
  it('hands a stream over whole events whatever the network pieces (LF, CRLF and CR boundaries)', async () => {
    const events = [
      'data: {"a":1}\n\n',
      'data: {"b":"x\\ny"}\r\n\r\n',
      ': comment\r\r',
      `data: ${JSON.stringify({ c: 'z'.repeat(5_000) })}\n\n`,
      'data: [DONE]\n\n',
    ];
    const body = events.join('');
    const { pieces, error } = await read({ raw: body, headers: { 'content-type': 'text/event-stream' }, splitAt: every(body.length, 7) }, true);
    expect(error).toBeUndefined();
    expect(pieces.join('')).toBe(body);
    // Every piece ends on a boundary: the client's buffer is empty after each one.
    for (const piece of pieces) expect(piece).toMatch(/(\n\n|\r\r|\r\n\r\n)$/);
    expect(pieces.length).toBeGreaterThan(1);
  });

  it('passes on a stream that ends without a boundary, as it is', async () => {
    const body = 'data: {"a":1}\n\ndata: {"b":2}';
    const { pieces, error } = await read({ raw: body, headers: { 'content-type': 'text/event-stream' }, splitAt: every(body.length, 3) }, true);
    expect(error).toBeUndefined();
    expect(pieces.join('')).toBe(body);
  });

  it(`fails a stream event over ${MAX_SSE_EVENT_BYTES} bytes with PROVIDER_INVALID_RESPONSE (the client would rescan it per network piece)`, async () => {
    const body = `data: "${'x'.repeat(MAX_SSE_EVENT_BYTES)}"`;
    const { error } = await read({ raw: body, headers: { 'content-type': 'text/event-stream' } }, true);
    expect(error).toMatchObject({ code: 'PROVIDER_INVALID_RESPONSE', message: expect.stringMatching(/stream event larger/) });
  });

  it('an event up to the limit is accepted', async () => {
    const body = `data: "${'x'.repeat(MAX_SSE_EVENT_BYTES - 20)}"\n\ndata: [DONE]\n\n`;
    const { pieces, error } = await read({ raw: body, headers: { 'content-type': 'text/event-stream' } }, true);
    expect(error).toBeUndefined();
    expect(pieces.join('')).toBe(body);
  });

  it(`caps a stream of small events at ${MAX_RESPONSE_BYTES} bytes in all, as they arrive: the connection is dropped there`, async () => {
    const event = eventOf(1 << 16);
    // 64 MiB offered (never built: the server writes one event 1024 times); the cap is 8 MiB.
    const { pieces, error, server } = await read({ ...sseReply(event), repeat: 1024 }, true);
    expect(error).toMatchObject({ code: 'PROVIDER_INVALID_RESPONSE', message: expect.stringMatching(/response larger than 8388608 bytes/) });
    expect(pieces.reduce((n, p) => n + p.length, 0)).toBeLessThanOrEqual(MAX_RESPONSE_BYTES);
    // The client went away before the server had written it all.
    await server.clientAborted(0);
  });

  it(`a stream of exactly ${MAX_RESPONSE_BYTES} bytes is read whole`, async () => {
    const { pieces, error } = await read({ ...sseReply(eventOf(1 << 16)), repeat: MAX_RESPONSE_BYTES / (1 << 16) }, true);
    expect(error).toBeUndefined();
    expect(pieces.reduce((n, p) => n + p.length, 0)).toBe(MAX_RESPONSE_BYTES);
  });

  it(`caps any other body at ${MAX_RESPONSE_BYTES} bytes; smaller ones pass unchanged, error answers to a stream too`, async () => {
    const big = await read({ raw: `"${'x'.repeat(MAX_RESPONSE_BYTES)}"` }, false);
    expect(big.error).toMatchObject({ code: 'PROVIDER_INVALID_RESPONSE', message: expect.stringMatching(/response larger/) });
    const json = JSON.stringify({ choices: [], pad: 'y'.repeat(100_000) });
    const small = await read({ raw: json, splitAt: every(json.length, 1_000) }, false);
    expect(small.pieces.join('')).toBe(json);
    // A 4xx to a streamed request is read as an error body, not regrouped into events.
    const failed = await read({ status: 429, body: { error: { message: 'slow down' } } }, true);
    expect(failed.status).toBe(429);
    expect(JSON.parse(failed.pieces.join(''))).toEqual({ error: { message: 'slow down' } });
  });
});

describe('boundedFetch on node:http', () => {
  /**
   * A server that answers the first request of each connection (keeping it alive) and drops the
   * connection on its second, as a server closing an idle keep-alive connection just when the
   * client reuses it does.
   */
  async function dropOnReuse(): Promise<{ url: string; connections: () => number; close: () => Promise<void> }> {
    let connections = 0;
    const server = createServer((req, res) => {
      const socket = req.socket as { served?: number } & typeof req.socket;
      socket.served = (socket.served ?? 0) + 1;
      if (socket.served > 1) return void req.socket.destroy();
      req.resume();
      req.on('end', () => res.writeHead(200, { 'content-type': 'application/json', connection: 'keep-alive' }).end('{"ok":true}'));
    });
    server.on('connection', () => connections++);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    return {
      url: `http://127.0.0.1:${port}/v1/chat/completions`,
      connections: () => connections,
      close: () => new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve()))),
    };
  }

  it('sends a request again, once, on a fresh connection when the kept-alive one it reused was closed under it', async () => {
    const server = await dropOnReuse();
    try {
      const first = await boundedFetch(false)(server.url, { method: 'POST', body: '{}' });
      expect(await first.json()).toEqual({ ok: true });
      const second = await boundedFetch(false)(server.url, { method: 'POST', body: '{}' });
      expect(await second.json()).toEqual({ ok: true });
      expect(server.connections()).toBe(2);
    } finally {
      await server.close();
    }
  });

  it("keeps every connection a burst opened for the next burst (Node's default keeps 256 and closes the rest)", async () => {
    // 300 calls held until all 300 are out (so each has its own connection), twice.
    const BURST = 300;
    let connections = 0;
    let waiting: (() => void)[] = [];
    const server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        waiting.push(() => res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}'));
        if (waiting.length === BURST) for (const answer of waiting.splice(0)) answer();
      });
    });
    server.on('connection', () => connections++);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/chat/completions`;
    try {
      for (let round = 0; round < 2; round++) {
        const answers = await Promise.all(Array.from({ length: BURST }, () => boundedFetch(false)(url, { method: 'POST', body: '{}' }).then((r) => r.json())));
        expect(answers).toHaveLength(BURST);
        waiting = [];
      }
      expect(connections).toBe(BURST);
    } finally {
      await new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve())));
    }
  });

  it('a connection dropped before any answer on a fresh connection fails the call (never sent twice)', async () => {
    const fake = await createFakeOpenAIServer([{ drop: true }, { message: { content: 'x' } }]);
    open.push(fake);
    await expect(boundedFetch(false)(`${fake.url}/chat/completions`, { method: 'POST', body: '{}' })).rejects.toMatchObject({ code: 'ECONNRESET' });
    expect(fake.requests).toHaveLength(1);
  });

  it("sends each request to its own URL (path, query, port, credentials) with its headers, and hands the answer's headers over as they came", async () => {
    const seen: { url: string; host: string; auth: string | undefined; custom: string | undefined; length: string | undefined }[] = [];
    const server = createServer((req, res) => {
      seen.push({
        url: req.url!,
        host: req.headers.host!,
        auth: req.headers.authorization,
        custom: req.headers['x-custom'] as string | undefined,
        length: req.headers['content-length'],
      });
      req.resume();
      req.on('end', () =>
        res
          .writeHead(200, [
            ['content-type', 'application/json'],
            ['set-cookie', 'a=1'],
            ['set-cookie', 'b=2'],
            ['x-request-id', req.url!],
          ])
          .end('{"ok":true}'),
      );
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    try {
      const fetch = boundedFetch(false);
      const headers = new Headers({ 'x-custom': 'v', 'content-type': 'application/json' });
      // More distinct URLs than the parsed-URL cache holds (256): each still goes where it says.
      for (let i = 0; i < 300; i++) {
        const res = await fetch(`http://127.0.0.1:${port}/v${i % 7}/chat/completions?n=${i}#frag`, { method: 'POST', body: `{"i":${i}}`, headers });
        expect(await res.json()).toEqual({ ok: true });
        expect(res.headers.get('x-request-id')).toBe(`/v${i % 7}/chat/completions?n=${i}`);
        expect(res.headers.getSetCookie()).toEqual(['a=1', 'b=2']);
      }
      expect(seen.map((r) => r.url)).toEqual(Array.from({ length: 300 }, (_, i) => `/v${i % 7}/chat/completions?n=${i}`));
      expect(seen.every((r) => r.host === `127.0.0.1:${port}` && r.custom === 'v' && r.auth === undefined)).toBe(true);
      expect(seen[12]!.length).toBe(String(Buffer.byteLength('{"i":12}')));
      // Credentials in the URL go as basic auth, decoded (as node:http reads a URL); plain-object headers too.
      await fetch(`http://us%40er:p%3Ass@127.0.0.1:${port}/x`, { method: 'POST', body: '{}', headers: { 'x-custom': 'w' } });
      expect(seen.at(-1)).toMatchObject({ url: '/x', custom: 'w', auth: `Basic ${Buffer.from('us@er:p:ss').toString('base64')}` });
    } finally {
      await new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve())));
    }
  });

  it('decodes a body the server compressed unasked, and counts its decoded bytes', async () => {
    const json = JSON.stringify({ choices: [], pad: 'z'.repeat(10_000) });
    const { pieces, error } = await read({ raw: gzipSync(json), headers: { 'content-encoding': 'gzip' } }, false);
    expect(error).toBeUndefined();
    expect(pieces.join('')).toBe(json);
    const bomb = await read({ raw: gzipSync('"'.padEnd(MAX_RESPONSE_BYTES + 10, 'x')), headers: { 'content-encoding': 'gzip' } }, false);
    expect(bomb.error).toMatchObject({ code: 'PROVIDER_INVALID_RESPONSE', message: expect.stringMatching(/response larger/) });
  });

  it('rejects with the reason when aborted before the answer, and fails the body when aborted during it', async () => {
    const hanging = await createFakeOpenAIServer([{ hang: true }]);
    const stalling = await createFakeOpenAIServer([{ message: { content: 'a b c d' }, stallAfterChunks: 2 }]);
    open.push(hanging, stalling);
    const reason = new Error('stop');
    const early = new AbortController();
    const pending = boundedFetch(false)(`${hanging.url}/chat/completions`, { method: 'POST', body: '{}', signal: early.signal });
    early.abort(reason);
    await expect(pending).rejects.toBe(reason);
    const late = new AbortController();
    const res = await boundedFetch(true)(`${stalling.url}/chat/completions`, { method: 'POST', body: '{"stream":true}', signal: late.signal });
    const reader = res.body!.getReader();
    await reader.read();
    late.abort(reason);
    await expect(
      (async () => {
        for (;;) if ((await reader.read()).done) return;
      })(),
    ).rejects.toBe(reason);
  });
});
