/**
 * What openaiModel puts on the wire for a request's tools. Their wire form is built once per tool
 * list (an agent's list is one array until it changes), so these check that every call still
 * sends its own request's list: another list is sent as it is, the same list again unchanged.
 */
import { expect, it } from 'vitest';
import { openaiModel } from '../../../src/model/openaiModel.js';
import type { ToolSpec } from '../../../src/model/types.js';
import { createFakeOpenAIServer } from '../../../src/testing/fakeOpenAIServer.js';

const spec = (name: string): ToolSpec => ({ name, description: `does ${name}`, parameters: { type: 'object', properties: { x: { type: 'string' } } } });
const wire = (t: ToolSpec) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.parameters } });

it("sends each call's own tool list: a list built once is reused only for that same list", async () => {
  await using server = await createFakeOpenAIServer(Array.from({ length: 5 }, () => ({ message: { content: 'ok' } })));
  const model = openaiModel({ model: 'm', baseURL: server.url, apiKey: 'k' });
  const lead = [spec('a'), spec('b')];
  const worker = [spec('c')];
  const agent = { id: 'x', name: 'x', parentId: null, depth: 0 };
  const signal = new AbortController().signal;
  for (const tools of [lead, worker, lead, [], [spec('a'), spec('d')]]) {
    await model.complete({ agent, system: 's', messages: [{ role: 'user', content: 'go' }], tools, turn: 1 }, { signal });
  }
  const sent = server.requests.map((r) => (r.body as { tools?: unknown }).tools);
  expect(sent).toEqual([lead.map(wire), worker.map(wire), lead.map(wire), undefined, [spec('a'), spec('d')].map(wire)]);
});
