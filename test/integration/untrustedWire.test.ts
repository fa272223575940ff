/**
 * The model's server is not trusted (issue 13, items 2–3): every field troupe reads from a Chat
 * Completions answer is checked, through the real `openai` client against the fake server. A wrong
 * type, a streamed tool-call index out of range or too many tool calls fails the agent with
 * PROVIDER_INVALID_RESPONSE (the README's table) — never crashes it as INTERNAL, never drops a call
 * silently, and no index value costs more than one map entry.
 */
import { describe, expect, it } from 'vitest';
import { MAX_RESPONSE_BYTES, MAX_SSE_EVENT_BYTES } from '../../src/model/boundedFetch.js';
import { MAX_TOOL_CALLS } from '../../src/model/chatWire.js';
import type { FakeReply } from '../../src/testing/fakeOpenAIServer.js';
import { openaiTeam } from '../helpers/provider.js';
import { TERMINAL } from '../helpers/team.js';
import { chunk, completion, rawJson, rawSse, sse, streamedCall, usageChunk, wireCall } from '../helpers/wire.js';

const FINISH = { summary: 'done' };
const every = (n: number, step: number) => Array.from({ length: Math.ceil(n / step) }, (_, i) => i * step);

async function rootOutcome(reply: FakeReply, stream: boolean) {
  const t = await openaiTeam({ lead: [reply] }, { model: { stream }, coordinator: { retry: { maxRetries: 0 } } });
  await using _ = t;
  const rootId = await t.c.start({ name: 'lead', task: 'Finish.' });
  const root = await t.c.waitFor(rootId, TERMINAL);
  return { root, session: t.session(rootId) };
}

const invalidResponse = { status: 'failed', error: { code: 'PROVIDER_INVALID_RESPONSE' } };

describe('a streamed tool-call index is bounded', () => {
  it.each<[string, unknown]>([
    ['1e9 (froze the process for minutes when calls lived in an array)', 1e9],
    ['-1 (was silently dropped)', -1],
    ['2^32 (was silently dropped)', 2 ** 32],
    [`${MAX_TOOL_CALLS} (one past the cap)`, MAX_TOOL_CALLS],
    ['1.5', 1.5],
    ['a string', '0'],
    ['null', null],
  ])('index %s fails the agent with PROVIDER_INVALID_RESPONSE', async (_name, index) => {
    const { root, session } = await rootOutcome(rawSse(streamedCall(index, 'finish', FINISH)), true);
    expect(root).toMatchObject(invalidResponse);
    expect(root.error?.message).toMatch(/index/);
    // Nothing of the answer reached the session.
    expect(session.filter((i) => i.role === 'assistant')).toEqual([]);
  });

  it(`index ${MAX_TOOL_CALLS - 1} is the highest accepted; pieces with the same index continue one call`, async () => {
    const body = sse([
      chunk({ tool_calls: [{ index: MAX_TOOL_CALLS - 1, id: 'call_late', type: 'function', function: { name: 'view_agent_graph', arguments: '' } }] }),
      chunk({ tool_calls: [{ index: 0, id: 'call_first', type: 'function', function: { name: 'view_', arguments: '{' } }] }),
      chunk({ tool_calls: [{ index: 0, function: { name: 'agent_graph', arguments: '}' } }] }),
      chunk({ tool_calls: [{ index: MAX_TOOL_CALLS - 1, function: { arguments: '{}' } }] }),
      chunk({}, 'tool_calls'),
    ]);
    const t = await openaiTeam({ lead: [rawSse(body), rawSse(streamedCall(0, 'finish', FINISH))] }, { model: { stream: true } });
    await using _ = t;
    const rootId = await t.c.start({ name: 'lead', task: 'Finish.' });
    expect((await t.c.waitFor(rootId, TERMINAL)).status).toBe('completed');
    // Ordered by index, whatever order they arrived in.
    expect(t.session(rootId).find((i) => i.role === 'assistant')).toMatchObject({
      toolCalls: [
        { id: 'call_first', name: 'view_agent_graph', arguments: '{}' },
        { id: 'call_late', name: 'view_agent_graph', arguments: '{}' },
      ],
    });
  });

  it(`a chunk carrying more than ${MAX_TOOL_CALLS} tool-call pieces is invalid`, async () => {
    const parts = Array.from({ length: MAX_TOOL_CALLS + 1 }, () => ({ index: 0, function: { arguments: '' } }));
    const body = sse([
      chunk({ tool_calls: [{ index: 0, id: 'c', type: 'function', function: { name: 'finish', arguments: '{}' } }] }),
      chunk({ tool_calls: parts }),
      chunk({}, 'tool_calls'),
    ]);
    expect((await rootOutcome(rawSse(body), true)).root).toMatchObject(invalidResponse);
  });
});

const call = wireCall('finish', FINISH);
/** A streamed answer whose only tool-call piece is `part`. */
const streamedPart = (part: unknown) => rawSse(sse([chunk({ tool_calls: [part] }), chunk({}, 'tool_calls'), usageChunk(null)]));

const JSON_CASES: [string, unknown][] = [
  ['tool_calls is an object, not an array', completion({ tool_calls: { 0: call } })],
  ['tool_calls is a string', completion({ tool_calls: 'finish' })],
  ['tool_calls is a number', completion({ tool_calls: 5 })],
  [
    `more than ${MAX_TOOL_CALLS} tool calls`,
    completion({ tool_calls: Array.from({ length: MAX_TOOL_CALLS + 1 }, (_, i) => wireCall('view_agent_graph', {}, `c${i}`)) }),
  ],
  ['a tool call that is a string', completion({ tool_calls: ['finish'] })],
  ['a tool call whose name is a number', completion({ tool_calls: [{ ...call, function: { name: 5, arguments: '{}' } }] })],
  ['a tool call with no name', completion({ tool_calls: [{ ...call, function: { arguments: '{}' } }] })],
  ['a tool call whose arguments are an object', completion({ tool_calls: [{ ...call, function: { name: 'finish', arguments: FINISH } }] })],
  ['a tool call whose function is a string', completion({ tool_calls: [{ ...call, function: 'finish' }] })],
  ['a tool call whose id is a number', completion({ tool_calls: [{ ...call, id: 7 }] })],
  ['a tool call of a type troupe never offered', completion({ tool_calls: [{ ...call, type: 'custom' }] })],
  ['two tool calls with one id', completion({ tool_calls: [wireCall('view_agent_graph', {}, 'same'), wireCall('finish', FINISH, 'same')] })],
  ['content that is a number', completion({ content: 42 })],
  ['content that is an array of parts', completion({ content: [{ type: 'text', text: 'hi' }] })],
  ['a refusal that is an object', completion({ content: 'x', refusal: { reason: 'no' } })],
  ['finish_reason that is a number', completion({ content: 'x' }, { finishReason: 3 })],
  ['a message that is a string', { ...completion({}), choices: [{ index: 0, message: 'hello', finish_reason: 'stop' }] }],
  ['a choice that is null', { ...completion({}), choices: [null] }],
  ['choices that is an object', { ...completion({}), choices: { 0: completion({ content: 'x' }).choices[0] } }],
  ['a body that is an array', [completion({ content: 'x' })]],
  ['a body that is null', null],
  ['a body that is a number', 42],
  ['a body that is not JSON', '{"choices": [{"message": {"content": "x"'],
];

describe('wrong types in a JSON answer fail the agent with PROVIDER_INVALID_RESPONSE, never INTERNAL', () => {
  it.each(JSON_CASES)('%s', async (_name, body) => {
    expect((await rootOutcome(rawJson(body === null ? 'null' : body), false)).root).toMatchObject(invalidResponse);
  });

  it(`a body over ${MAX_RESPONSE_BYTES} bytes`, async () => {
    const body = completion({ content: 'x'.repeat(MAX_RESPONSE_BYTES) });
    expect((await rootOutcome(rawJson(body), false)).root).toMatchObject(invalidResponse);
  });

  it('a 200 answer that is not JSON at all (text/plain)', async () => {
    expect((await rootOutcome({ raw: 'Hello from a proxy', headers: { 'content-type': 'text/plain' } }, false)).root).toMatchObject(invalidResponse);
  });
});

const STREAM_CASES: [string, FakeReply][] = [
  ['tool_calls is an object, not an array', rawSse(sse([chunk({ tool_calls: { index: 0, ...call } }), chunk({}, 'tool_calls')]))],
  ['tool_calls is a string', rawSse(sse([chunk({ tool_calls: 'finish' }), chunk({}, 'tool_calls')]))],
  ['a tool-call piece that is a number', streamedPart(5)],
  ['a tool-call name that is a number', streamedPart({ index: 0, id: 'c', type: 'function', function: { name: 5, arguments: '{}' } })],
  ['tool-call arguments that are an object', streamedPart({ index: 0, id: 'c', type: 'function', function: { name: 'finish', arguments: FINISH } })],
  ['a tool-call id that is an object', streamedPart({ index: 0, id: {}, type: 'function', function: { name: 'finish', arguments: '{}' } })],
  ['a tool-call function that is a string', streamedPart({ index: 0, id: 'c', type: 'function', function: 'finish' })],
  ['a tool call of a type troupe never offered', streamedPart({ index: 0, id: 'c', type: 'custom', function: { name: 'finish', arguments: '{}' } })],
  [
    'two streamed calls with one id',
    rawSse(
      sse([
        chunk({
          tool_calls: [
            { index: 0, ...call, id: 'x' },
            { index: 1, ...call, id: 'x' },
          ],
        }),
        chunk({}, 'tool_calls'),
      ]),
    ),
  ],
  ['content that is a number', rawSse(sse([chunk({ content: 42 }), chunk({}, 'stop')]))],
  ['a refusal that is an array', rawSse(sse([chunk({ refusal: ['no'] }), chunk({}, 'stop')]))],
  ['a delta that is a string', rawSse(sse([chunk('hello'), chunk({}, 'stop')]))],
  ['finish_reason that is an object', rawSse(sse([chunk({ content: 'x' }, { why: 'stop' })]))],
  ['choices that is an object', rawSse(sse([{ ...chunk({ content: 'x' }, 'stop'), choices: { 0: {} } }]))],
  ['a choice that is a number', rawSse(sse([{ ...chunk({ content: 'x' }, 'stop'), choices: [1] }]))],
  ['a chunk that is null', rawSse(sse(['null', chunk({ content: 'x' }, 'stop')]))],
  ['a chunk that is a string', rawSse(sse(['"chunk"', chunk({ content: 'x' }, 'stop')]))],
  ['a chunk that is not JSON', rawSse(sse(['{"choices": [', chunk({ content: 'x' }, 'stop')]))],
  ['no chunk with a choice', rawSse(sse([usageChunk(null)]))],
  [`one event over ${MAX_SSE_EVENT_BYTES} bytes`, rawSse(sse([chunk({ content: 'x'.repeat(MAX_SSE_EVENT_BYTES) }), chunk({}, 'stop')]))],
  ['a JSON completion where a stream was asked for', rawJson(completion({ content: 'x' }))],
];

describe('wrong types in a streamed answer fail the agent with PROVIDER_INVALID_RESPONSE, never INTERNAL', () => {
  it.each(STREAM_CASES)('%s', async (_name, reply) => {
    expect((await rootOutcome(reply, true)).root).toMatchObject(invalidResponse);
  });
});

/** One SSE event of exactly `bytes` bytes carrying text. */
function textEvent(bytes: number): { event: string; text: string } {
  const overhead = `data: ${JSON.stringify(chunk({ content: '' }))}\n\n`.length;
  const text = 'x'.repeat(bytes - overhead);
  return { event: `data: ${JSON.stringify(chunk({ content: text }))}\n\n`, text };
}

describe(`a streamed answer is capped at ${MAX_RESPONSE_BYTES} bytes in all, like a JSON one (issue 31, item 9)`, () => {
  it('many small events past the cap fail the agent with PROVIDER_INVALID_RESPONSE as they arrive: the rest is never read, nothing of it is kept', async () => {
    const { event } = textEvent(1 << 16);
    const t = await openaiTeam({ lead: [{ ...rawSse(event), repeat: 1024 }] }, { model: { stream: true }, coordinator: { retry: { maxRetries: 0 } } });
    await using _ = t;
    const rootId = await t.c.start({ name: 'lead', task: 'Finish.' });
    const root = await t.c.waitFor(rootId, TERMINAL);
    expect(root).toMatchObject(invalidResponse);
    expect(root.error?.message).toMatch(/response larger than 8388608 bytes/);
    // 64 MiB offered: the client hung up before the server had written it all.
    await t.server.clientAborted(0);
    // Refused whole: none of the text streamed before the cap went into the session.
    expect(t.session(rootId).filter((i) => i.role === 'assistant')).toEqual([]);
  });

  it('an answer just under the cap, streamed in 64 KiB events, is read whole', async () => {
    const { event, text } = textEvent(1 << 16);
    const body = event.repeat(127) + streamedCall(0, 'finish', FINISH);
    expect(Buffer.byteLength(body)).toBeLessThanOrEqual(MAX_RESPONSE_BYTES);
    expect(Buffer.byteLength(body)).toBeGreaterThan(MAX_RESPONSE_BYTES - (1 << 16));
    const t = await openaiTeam({ lead: [rawSse(body)] }, { model: { stream: true } });
    await using _ = t;
    const rootId = await t.c.start({ name: 'lead', task: 'Finish.' });
    expect((await t.c.waitFor(rootId, TERMINAL)).status).toBe('completed');
    const answer = t.session(rootId).find((i) => i.role === 'assistant');
    expect(answer).toMatchObject({ toolCalls: [{ name: 'finish' }] });
    expect((answer as { content: string }).content.length).toBe(127 * text.length);
  });
});

describe('well-formed answers a lenient reading must keep accepting', () => {
  it.each<[string, FakeReply, boolean]>([
    ['null content, refusal and tool_calls (JSON)', rawJson(completion({ content: null, refusal: null, tool_calls: [call] }, { usage: null })), false],
    [
      'a tool call without type or id (JSON)',
      rawJson(completion({ tool_calls: [{ function: { name: 'finish', arguments: JSON.stringify(FINISH) } }] })),
      false,
    ],
    [
      'a tool call with null arguments (JSON): arguments are {}',
      rawJson(completion({ tool_calls: [{ id: 'c', type: 'function', function: { name: 'view_agent_graph', arguments: null } }] })),
      false,
    ],
    ['null delta fields and a usage chunk (stream)', rawSse(streamedCall(0, 'finish', FINISH)), true],
    [
      'a megabyte of text in 64 KiB events, split at many offsets (stream)',
      rawSse(sse([...Array.from({ length: 16 }, () => chunk({ content: 'é'.repeat(1 << 15) })), chunk({}, 'stop')]), every(1 << 21, 4_099)),
      true,
    ],
    ['a megabyte of text (JSON)', rawJson(completion({ content: 'é'.repeat(1 << 19) })), false],
  ])('%s', async (_name, reply, stream) => {
    const finish = stream ? rawSse(streamedCall(0, 'finish', FINISH)) : rawJson(completion({ tool_calls: [call] }));
    const t = await openaiTeam({ lead: [reply, finish] }, { model: { stream } });
    await using _ = t;
    const rootId = await t.c.start({ name: 'lead', task: 'Finish.' });
    expect((await t.c.waitFor(rootId, TERMINAL)).status).toBe('completed');
  });
});
