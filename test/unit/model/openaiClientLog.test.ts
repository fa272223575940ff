/**
 * The `openai` client logs to the console on its own, and on an SSE event that is not JSON it
 * prints the server's raw bytes (escape sequences included). openaiModel turns that logging off
 * unless OPENAI_LOG is set. Its own file: the client caches its console functions the first time
 * it logs, so the spy must be in place before any client in this module context logs.
 */
import { afterAll, beforeAll, expect, it, vi, type MockInstance } from 'vitest';
import { openaiModel } from '../../../src/model/openaiModel.js';
import { createFakeOpenAIServer } from '../../../src/testing/fakeOpenAIServer.js';
import { chunk, rawSse, sse } from '../../helpers/wire.js';

let printed: MockInstance<typeof console.error>;
beforeAll(() => {
  printed = vi.spyOn(console, 'error').mockImplementation(() => undefined);
});
afterAll(() => printed.mockRestore());

it('an SSE event that is not JSON fails the call as PROVIDER_INVALID_RESPONSE and prints nothing', async () => {
  await using server = await createFakeOpenAIServer([rawSse(sse(['{"choices": [ \u001b]0;owned\u0007', chunk({ content: 'x' }, 'stop')]))]);
  const model = openaiModel({ model: 'm', baseURL: server.url, apiKey: 'k', stream: true });
  const request = { agent: { id: 'a', name: 'a', parentId: null, depth: 0 }, system: 's', messages: [], tools: [], turn: 1 };
  await expect(model.complete(request, { signal: new AbortController().signal })).rejects.toMatchObject({ code: 'PROVIDER_INVALID_RESPONSE' });
  expect(printed).not.toHaveBeenCalled();
});
