/**
 * The silent-stream guard of `openaiModel` (streaming): no byte from the server for
 * `idleTimeoutMs` — before the first chunk or between two — ends the attempt as PROVIDER_TIMEOUT,
 * long before the total `timeoutMs`; a slow stream that keeps sending is never cut. Real time
 * against the fake OpenAI-compatible server, in hundreds of milliseconds.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { modelFor } from '../../../src/cli/setup.js';
import { openaiModel } from '../../../src/model/openaiModel.js';
import type { ModelRequest } from '../../../src/model/types.js';
import { createFakeOpenAIServer, type FakeOpenAIServer, type FakeReply } from '../../../src/testing/fakeOpenAIServer.js';

const open: FakeOpenAIServer[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
});

const request: ModelRequest = {
  agent: { id: 'a1', name: 'lead', parentId: null, depth: 0 },
  system: 'You are lead.',
  messages: [{ role: 'user', content: 'Go.' }],
  tools: [],
  turn: 1,
};

async function call(reply: FakeReply, idleTimeoutMs: number) {
  const server = await createFakeOpenAIServer([reply]);
  open.push(server);
  const model = openaiModel({ model: 'm', baseURL: server.url, apiKey: 'k', stream: true, idleTimeoutMs, timeoutMs: 60_000 });
  const started = performance.now();
  const result = await model.complete(request, { signal: new AbortController().signal }).then(
    (turn) => ({ turn, error: undefined }),
    (error: unknown) => ({ turn: undefined, error }),
  );
  return { ...result, ms: performance.now() - started };
}

describe('the silent-stream guard', () => {
  it('a stream that goes silent mid-way ends as PROVIDER_TIMEOUT after idleTimeoutMs, keeping the text it had', async () => {
    const { error } = await call({ message: { content: 'a long answer that stops half-way' }, stallAfterChunks: 2 }, 300);
    expect(error).toMatchObject({ code: 'PROVIDER_TIMEOUT', retryable: true, message: expect.stringContaining('sent nothing for 300 ms') });
    const partial = (error as { details?: { partialText?: string } }).details?.partialText ?? '';
    expect(partial.length).toBeGreaterThan(0);
    expect('a long answer that stops half-way'.startsWith(partial)).toBe(true);
  });

  it('a server that never sends a byte ends the same way, before the total timeout', async () => {
    const { error, ms } = await call({ hang: true }, 300);
    expect(error).toMatchObject({ code: 'PROVIDER_TIMEOUT', message: expect.stringContaining('idleTimeoutMs') });
    expect(ms).toBeLessThan(30_000);
  });

  it('a slow stream whose every gap is shorter than idleTimeoutMs is read to the end, however long it takes in all', async () => {
    // Gaps of 150 ms under a 400 ms guard; the whole answer takes longer than the guard.
    const { turn, error, ms } = await call({ message: { content: 'slow but steady' }, eventGapMs: 150 }, 400);
    expect(error).toBeUndefined();
    expect(turn?.text).toBe('slow but steady');
    expect(ms).toBeGreaterThan(400);
  });

  it('refuses an idleTimeoutMs that is not a positive integer; the CLI config passes its own on', () => {
    expect(() => openaiModel({ model: 'm', apiKey: 'k', idleTimeoutMs: 0 })).toThrow(/idleTimeoutMs to be an integer > 0/);
    expect(() => modelFor({ model: 'm', apiKey: 'k', idleTimeoutMs: 1.5 })).toThrow(/idleTimeoutMs to be an integer > 0/);
  });
});
