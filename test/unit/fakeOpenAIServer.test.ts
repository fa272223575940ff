import OpenAI from 'openai';
import type { ChatCompletionChunk, ChatCompletionCreateParamsNonStreaming } from 'openai/resources/chat/completions';
import { afterEach, describe, expect, it } from 'vitest';
import { createFakeOpenAIServer, type FakeOpenAIServer, type FakeScript } from '../../src/testing/index.js';

const params: ChatCompletionCreateParamsNonStreaming = {
  model: 'gpt-test',
  messages: [{ role: 'user', content: 'hi' }],
};

const open: FakeOpenAIServer[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((server) => server.close()));
});

/** A started fake server (closed after the test) and a real openai client pointed at it. */
async function setup(script: FakeScript, options?: { model?: string }) {
  const server = await createFakeOpenAIServer(script, options);
  open.push(server);
  const client = new OpenAI({ apiKey: 'test-key', baseURL: server.url, maxRetries: 0 });
  return { server, client };
}

const failure = (promise: Promise<unknown>): Promise<unknown> =>
  promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (error: unknown) => error,
  );

async function collect(stream: AsyncIterable<ChatCompletionChunk>): Promise<ChatCompletionChunk[]> {
  const chunks: ChatCompletionChunk[] = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

/** A promise resolved from outside, to wait for the server to see a request without sleeping. */
function deferred<T = void>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

describe('createFakeOpenAIServer through the real openai client', () => {
  it('serves a text completion with usage (cached tokens included)', async () => {
    const { server, client } = await setup([{ message: { content: 'Hello world' }, usage: { promptTokens: 120, completionTokens: 7, cachedTokens: 64 } }], {
      model: 'gpt-fake',
    });
    const completion = await client.chat.completions.create(params);
    expect(server.url).toBe(`http://127.0.0.1:${server.port}/v1`);
    expect(completion).toMatchObject({ id: 'chatcmpl-fake-1', object: 'chat.completion', model: 'gpt-fake' });
    const choice = completion.choices[0];
    expect(choice?.finish_reason).toBe('stop');
    expect(choice?.message).toEqual({ role: 'assistant', content: 'Hello world', refusal: null, annotations: [] });
    expect(completion.usage).toMatchObject({
      prompt_tokens: 120,
      completion_tokens: 7,
      total_tokens: 127,
      prompt_tokens_details: { cached_tokens: 64 },
    });
    expect(server.remaining()).toBe(0);
    server.assertComplete();
  });

  it('applies default usage, and omits usage when it is null', async () => {
    const { client } = await setup([{ message: { content: 'a' } }, { message: { content: 'b' }, usage: null }]);
    const first = await client.chat.completions.create(params);
    expect(first.usage).toMatchObject({ prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 });
    expect(first.usage?.prompt_tokens_details?.cached_tokens).toBe(0);
    const second = await client.chat.completions.create(params);
    expect(second.usage).toBeUndefined();
    expect(second.id).toBe('chatcmpl-fake-2');
  });

  it('serves tool calls with given or unique default ids, object or verbatim string arguments', async () => {
    const { client } = await setup([
      {
        message: {
          content: null,
          toolCalls: [
            { id: 'call_mine', name: 'read_file', arguments: { path: 'a.txt' } },
            { name: 'spawn_agent', arguments: '{"name": "x"' },
            { name: 'finish', arguments: {} },
          ],
        },
      },
    ]);
    const completion = await client.chat.completions.create(params);
    const choice = completion.choices[0];
    expect(choice?.finish_reason).toBe('tool_calls');
    expect(choice?.message.content).toBeNull();
    expect(choice?.message.tool_calls).toEqual([
      { id: 'call_mine', type: 'function', function: { name: 'read_file', arguments: '{"path":"a.txt"}' } },
      { id: 'call_fake_1', type: 'function', function: { name: 'spawn_agent', arguments: '{"name": "x"' } },
      { id: 'call_fake_2', type: 'function', function: { name: 'finish', arguments: '{}' } },
    ]);
  });

  it('streams content word by word, tool-call arguments in pieces, the finish reason and a usage chunk', async () => {
    const { client } = await setup([
      {
        message: {
          content: 'Let me look at that file.',
          toolCalls: [
            { id: 'call_a', name: 'read_file', arguments: { path: 'src/index.ts', lines: [1, 20] } },
            { name: 'grep', arguments: '{"pattern":"TODO"}' },
          ],
        },
        usage: { promptTokens: 50, completionTokens: 9, cachedTokens: 32 },
      },
    ]);
    const stream = await client.chat.completions.create({
      ...params,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = await collect(stream);
    expect(chunks.every((c) => c.id === 'chatcmpl-fake-1' && c.object === 'chat.completion.chunk')).toBe(true);
    expect(chunks[0]?.choices[0]?.delta).toMatchObject({ role: 'assistant', content: '' });

    const deltas = chunks.flatMap((c) => c.choices.map((choice) => choice.delta));
    const contentDeltas = deltas.map((d) => d.content).filter((c): c is string => typeof c === 'string' && c !== '');
    expect(contentDeltas.length).toBeGreaterThan(1);
    expect(contentDeltas.join('')).toBe('Let me look at that file.');

    const calls: { id?: string; name?: string; arguments: string }[] = [];
    let argumentDeltas = 0;
    for (const delta of deltas) {
      for (const call of delta.tool_calls ?? []) {
        const entry = (calls[call.index] ??= { arguments: '' });
        if (call.id) entry.id = call.id;
        if (call.function?.name) entry.name = call.function.name;
        if (call.function?.arguments) {
          entry.arguments += call.function.arguments;
          argumentDeltas += 1;
        }
      }
    }
    expect(calls).toEqual([
      { id: 'call_a', name: 'read_file', arguments: '{"path":"src/index.ts","lines":[1,20]}' },
      { id: 'call_fake_1', name: 'grep', arguments: '{"pattern":"TODO"}' },
    ]);
    expect(argumentDeltas).toBeGreaterThanOrEqual(4);

    const finishing = chunks.filter((c) => c.choices[0]?.finish_reason);
    expect(finishing.map((c) => c.choices[0]?.finish_reason)).toEqual(['tool_calls']);
    const last = chunks.at(-1);
    expect(last?.choices).toEqual([]);
    expect(last?.usage).toMatchObject({
      prompt_tokens: 50,
      completion_tokens: 9,
      total_tokens: 59,
      prompt_tokens_details: { cached_tokens: 32 },
    });
    // Like OpenAI, every other chunk carries `usage: null` when include_usage is set.
    expect(chunks.slice(0, -1).every((c) => c.usage === null)).toBe(true);
  });

  it('sends no usage chunk when the request does not ask for one', async () => {
    const { client } = await setup([{ message: { content: 'one two' } }]);
    const chunks = await collect(await client.chat.completions.create({ ...params, stream: true }));
    expect(chunks.at(-1)?.choices[0]?.finish_reason).toBe('stop');
    expect(chunks.some((c) => c.usage !== undefined || c.choices.length === 0)).toBe(false);
  });

  it('serves refusals, non-streamed and streamed', async () => {
    const refusal = "I'm sorry, I can't help with that.";
    const { client } = await setup([{ message: { refusal } }, { message: { refusal }, finishReason: 'stop' }]);
    const completion = await client.chat.completions.create(params);
    expect(completion.choices[0]?.message).toMatchObject({ content: null, refusal });
    expect(completion.choices[0]?.finish_reason).toBe('stop');

    const chunks = await collect(await client.chat.completions.create({ ...params, stream: true }));
    const pieces = chunks.flatMap((c) => c.choices.map((choice) => choice.delta.refusal)).filter((r) => !!r);
    expect(pieces.length).toBeGreaterThan(1);
    expect(pieces.join('')).toBe(refusal);
    expect(chunks.flatMap((c) => c.choices.map((choice) => choice.delta.content)).join('')).toBe('');
  });

  it('answers 429 with retry headers as an OpenAI.RateLimitError', async () => {
    const { client } = await setup([{ status: 429, headers: { 'retry-after-ms': '1500', 'x-should-retry': 'true' } }]);
    const error = await failure(client.chat.completions.create(params));
    expect(error).toBeInstanceOf(OpenAI.RateLimitError);
    const rateLimit = error as InstanceType<typeof OpenAI.RateLimitError>;
    expect(rateLimit.status).toBe(429);
    expect(rateLimit.headers?.get('retry-after-ms')).toBe('1500');
    expect(rateLimit.headers?.get('x-should-retry')).toBe('true');
    expect(rateLimit.message).toContain('fake status 429');
    expect(rateLimit.type).toBe('fake_error');
  });

  it('answers a context overflow as an OpenAI.BadRequestError with its code', async () => {
    const { client } = await setup([
      {
        status: 400,
        body: {
          error: {
            message: "This model's maximum context length is 8192 tokens",
            type: 'invalid_request_error',
            code: 'context_length_exceeded',
          },
        },
      },
    ]);
    const error = await failure(client.chat.completions.create(params));
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect(error).toMatchObject({ status: 400, code: 'context_length_exceeded', type: 'invalid_request_error' });
    expect((error as Error).message).toContain('maximum context length is 8192 tokens');
  });

  it('sends a string error body verbatim', async () => {
    const { client } = await setup([{ status: 502, body: '<html>Bad gateway</html>', headers: { 'Content-Type': 'text/html' } }]);
    const error = await failure(client.chat.completions.create(params));
    expect(error).toBeInstanceOf(OpenAI.InternalServerError);
    expect(error).toMatchObject({ status: 502, message: '502 <html>Bad gateway</html>' });
    expect((error as InstanceType<typeof OpenAI.InternalServerError>).headers?.get('content-type')).toBe('text/html');
  });

  it('passes a raw body with no choices through; the client does not complain (non-streamed or streamed)', async () => {
    const empty = { id: 'chatcmpl-raw', object: 'chat.completion', created: 1, model: 'm', choices: [] };
    const emptyChunk = { id: 'chatcmpl-raw', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [] };
    const { client } = await setup([
      { raw: JSON.stringify(empty) },
      {
        raw: `data: ${JSON.stringify(emptyChunk)}\n\ndata: [DONE]\n\n`,
        headers: { 'content-type': 'text/event-stream' },
      },
    ]);
    // The client returns the completion as is: `choices[0]` is simply undefined.
    const completion = await client.chat.completions.create(params);
    expect(completion).toEqual(empty);
    expect(completion.choices[0]).toBeUndefined();
    // Streamed, the chunk with `choices: []` is yielded like any other and the stream ends normally.
    const chunks = await collect(await client.chat.completions.create({ ...params, stream: true }));
    expect(chunks).toEqual([emptyChunk]);
  });

  it('serves raw bytes cut at the given offsets; the client meets the cuts and reassembles the stream', async () => {
    const chunkWithText = {
      id: 'c',
      object: 'chat.completion.chunk',
      created: 1,
      model: 'm',
      choices: [{ index: 0, delta: { content: 'héllo ✓' }, finish_reason: null }],
    };
    const body = `data: ${JSON.stringify(chunkWithText)}\n\ndata: [DONE]\n\n`;
    const bytes = new TextEncoder().encode(body);
    const everyByte = Array.from({ length: bytes.length }, (_, i) => i);
    const { server, client } = await setup([
      { raw: bytes, headers: { 'content-type': 'text/event-stream' }, splitAt: everyByte },
      { raw: body, headers: { 'content-type': 'text/event-stream' }, splitAt: everyByte },
    ]);
    // Read at the byte level: the pieces arrive as separate reads (TCP may merge a few).
    const res = await fetch(`${server.url}/chat/completions`, { method: 'POST', body: '{}' });
    const reader = res.body!.getReader();
    const reads: Uint8Array[] = [];
    for (let r = await reader.read(); !r.done; r = await reader.read()) reads.push(r.value);
    expect(Buffer.concat(reads)).toEqual(Buffer.from(bytes));
    expect(reads.length).toBeGreaterThan(bytes.length / 2);
    // Through the client, a character cut in the middle of its UTF-8 bytes comes out whole.
    const chunks = await collect(await client.chat.completions.create({ ...params, stream: true }));
    expect(chunks).toEqual([chunkWithText]);
  });

  it('drops the connection: the client throws OpenAI.APIConnectionError', async () => {
    const { server, client } = await setup([{ drop: true }]);
    const error = await failure(client.chat.completions.create(params));
    expect(error).toBeInstanceOf(OpenAI.APIConnectionError);
    expect(error).not.toBeInstanceOf(OpenAI.APIUserAbortError);
    expect(server.requests).toHaveLength(1);
  });

  it('cuts a stream mid-way: iteration throws a plain TypeError, not an OpenAI error', async () => {
    const { client } = await setup([{ message: { content: 'Hello there world' }, cutAfterChunks: 2 }]);
    const stream = await client.chat.completions.create({ ...params, stream: true });
    const seen: ChatCompletionChunk[] = [];
    let error: unknown;
    try {
      for await (const chunk of stream) seen.push(chunk);
    } catch (e) {
      error = e;
    }
    // What openai v6 really does on a truncated SSE body: the chunks before the cut are yielded, then
    // the iterator rethrows undici's `TypeError: terminated` (cause: SocketError 'other side closed',
    // code UND_ERR_SOCKET). It is NOT an OpenAI.APIError / APIConnectionError, and the stream does not
    // end quietly, so a caller must classify it itself (e.g. as a connection failure).
    expect(seen.map((c) => c.choices[0]?.delta.content)).toEqual(['', 'Hello ']);
    expect(error).toBeInstanceOf(TypeError);
    expect(error).not.toBeInstanceOf(OpenAI.OpenAIError);
    expect((error as Error).message).toBe('terminated');
    expect(((error as Error).cause as { code?: string }).code).toBe('UND_ERR_SOCKET');
  });

  it('cuts a stream before any event: the same TypeError on the first read', async () => {
    const { client } = await setup([{ message: { content: 'x' }, cutAfterChunks: 0 }]);
    const stream = await client.chat.completions.create({ ...params, stream: true });
    const error = await failure(collect(stream));
    expect(error).toBeInstanceOf(TypeError);
    expect((error as Error).message).toBe('terminated');
  });

  it('hangs until the client aborts (OpenAI.APIUserAbortError); close() still returns at once', async () => {
    const received = deferred();
    const { server, client } = await setup(() => {
      received.resolve();
      return { hang: true };
    });
    const controller = new AbortController();
    const pending = failure(client.chat.completions.create(params, { signal: controller.signal }));
    await received.promise;
    controller.abort();
    expect(await pending).toBeInstanceOf(OpenAI.APIUserAbortError);
    const started = Date.now();
    await server.close();
    expect(Date.now() - started).toBeLessThan(1000);
    await server.close(); // idempotent
  });

  it('close() destroys a hanging request the client never aborts', async () => {
    const received = deferred();
    const { server, client } = await setup(() => {
      received.resolve();
      return { hang: true };
    });
    const pending = failure(client.chat.completions.create(params));
    await received.promise;
    await server.close();
    expect(await pending).toBeInstanceOf(OpenAI.APIConnectionError);
  });

  it('waits delayMs before answering, and survives a client that leaves during the delay', async () => {
    const received = deferred();
    let calls = 0;
    const { server, client } = await setup(() => {
      calls += 1;
      if (calls === 1) {
        received.resolve();
        return { message: { content: 'too late' }, delayMs: 200 };
      }
      return { message: { content: 'slow' }, delayMs: 50 };
    });
    const controller = new AbortController();
    const aborted = failure(client.chat.completions.create(params, { signal: controller.signal }));
    await received.promise;
    controller.abort();
    expect(await aborted).toBeInstanceOf(OpenAI.APIUserAbortError);

    const started = Date.now();
    const completion = await client.chat.completions.create(params);
    expect(Date.now() - started).toBeGreaterThanOrEqual(45);
    expect(completion.choices[0]?.message.content).toBe('slow');
    expect(server.requests).toHaveLength(2);
  });

  it('records every request: method, path, headers and parsed body', async () => {
    const { server, client } = await setup([{ message: { content: 'ok' } }]);
    const before = Date.now();
    await client.chat.completions.create({
      model: 'gpt-test',
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: 'hi' },
      ],
      tools: [{ type: 'function', function: { name: 'finish', parameters: { type: 'object', properties: {} } } }],
    });
    expect(server.requests).toHaveLength(1);
    const [request] = server.requests;
    expect(request).toMatchObject({ index: 0, method: 'POST', path: '/v1/chat/completions' });
    expect(request?.headers.authorization).toBe('Bearer test-key');
    expect(request?.headers['content-type']).toBe('application/json');
    expect(request?.at).toBeGreaterThanOrEqual(before);
    expect(request?.body).toEqual({
      model: 'gpt-test',
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: 'hi' },
      ],
      tools: [{ type: 'function', function: { name: 'finish', parameters: { type: 'object', properties: {} } } }],
    });
  });

  it('accepts a function script (sync or async) that sees each request', async () => {
    const { server, client } = await setup(async (request) => {
      const body = request.body as { messages: { content: string }[] };
      const last = body.messages.at(-1)?.content ?? '';
      await Promise.resolve();
      return last === 'fail' ? { status: 503 } : { message: { content: `echo: ${last} #${request.index}` } };
    });
    const first = await client.chat.completions.create({ ...params, messages: [{ role: 'user', content: 'ping' }] });
    expect(first.choices[0]?.message.content).toBe('echo: ping #0');
    const error = await failure(client.chat.completions.create({ ...params, messages: [{ role: 'user', content: 'fail' }] }));
    expect(error).toMatchObject({ status: 503 });
    expect(server.remaining()).toBe(0);
    expect(() => server.assertComplete()).not.toThrow();
  });

  it('answers 500 once an array script is exhausted, and records the request', async () => {
    const { server, client } = await setup([{ message: { content: 'only one' } }]);
    await client.chat.completions.create(params);
    const error = await failure(client.chat.completions.create(params));
    expect(error).toBeInstanceOf(OpenAI.InternalServerError);
    expect(error).toMatchObject({ status: 500 });
    expect((error as Error).message).toContain('fake OpenAI server: script exhausted (request 1)');
    expect(server.requests).toHaveLength(2);
  });

  it('assertComplete throws while scripted replies remain', async () => {
    const { server, client } = await setup([{ message: { content: 'a' } }, { message: { content: 'b' } }, { message: { content: 'c' } }]);
    expect(server.remaining()).toBe(3);
    await client.chat.completions.create(params);
    expect(server.remaining()).toBe(2);
    expect(() => server.assertComplete()).toThrow(/2 of 3 scripted replies were never served/);
    await client.chat.completions.create(params);
    await client.chat.completions.create(params);
    expect(server.remaining()).toBe(0);
    expect(() => server.assertComplete()).not.toThrow();
  });

  it('answers 404 (code unknown_url) for other paths and methods, 400 for a body that is not JSON', async () => {
    const { server, client } = await setup([{ message: { content: 'unused' } }]);
    const error = await failure(client.models.list());
    expect(error).toBeInstanceOf(OpenAI.NotFoundError);
    expect(error).toMatchObject({ status: 404, code: 'unknown_url', type: 'invalid_request_error' });

    const get = await fetch(`${server.url}/chat/completions`);
    expect(get.status).toBe(404);
    const bad = await fetch(`${server.url}/chat/completions`, { method: 'POST', body: '{not json' });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ error: { type: 'invalid_request_error', param: null, code: null } });

    expect(server.requests.map((r) => `${r.method} ${r.path}`)).toEqual(['GET /v1/models', 'GET /v1/chat/completions', 'POST /v1/chat/completions']);
    expect(server.requests[2]?.body).toBe('{not json');
    expect(server.remaining()).toBe(1);
  });

  it('also serves /chat/completions at the root', async () => {
    const { server } = await setup([{ message: { content: 'root' } }]);
    const root = new OpenAI({ apiKey: 'test-key', baseURL: `http://127.0.0.1:${server.port}`, maxRetries: 0 });
    const completion = await root.chat.completions.create(params);
    expect(completion.choices[0]?.message.content).toBe('root');
    expect(server.requests[0]?.path).toBe('/chat/completions');
  });

  it('closes on `await using`', async () => {
    let port = 0;
    {
      await using server = await createFakeOpenAIServer([{ message: { content: 'scoped' } }]);
      port = server.port;
      const client = new OpenAI({ apiKey: 'test-key', baseURL: server.url, maxRetries: 0 });
      expect((await client.chat.completions.create(params)).choices[0]?.message.content).toBe('scoped');
    }
    await expect(fetch(`http://127.0.0.1:${port}/v1/chat/completions`, { method: 'POST' })).rejects.toThrow();
  });
});
