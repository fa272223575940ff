/**
 * openaiModel through the real `openai` client against the fake server: the run loop's reaction to
 * every class of provider failure (DESIGN §4), streaming, and bad input from the wire.
 */
import { describe, expect, it } from 'vitest';
import { defineTool } from '../../src/tools/defineTool.js';
import { SimulatedClock } from 'xstate';
import { createCoordinator } from '../../src/host/createCoordinator.js';
import { resumeCoordinator } from '../../src/host/resumeCoordinator.js';
import { openaiModel } from '../../src/model/openaiModel.js';
import { scriptedModel } from '../../src/model/scriptedModel.js';
import { memoryStore } from '../../src/store/memoryStore.js';
import { createFakeOpenAIServer } from '../../src/testing/fakeOpenAIServer.js';
import type { TroupeEvent } from '../../src/host/runtime.js';
import type { ModelDelta, SessionItem } from '../../src/model/types.js';
import { IMAGE_PLACEHOLDER, SUMMARY_HEADER } from '../../src/turn/compaction.js';
import type { FakeReply, FakeRequest } from '../../src/testing/fakeOpenAIServer.js';
import { agentOf, call, openaiTeam, status, text, type OpenAITeamOptions } from '../helpers/provider.js';
import { TERMINAL } from '../helpers/team.js';

const lookup = defineTool({
  name: 'lookup',
  description: 'Look a key up.',
  parameters: { type: 'object', properties: { key: { type: 'string' } }, required: ['key'], additionalProperties: false },
  execute: ({ key }: { key: string }) => ({ key, value: 42 }),
});

const finish = (summary = 'done') => call('finish', { summary });
const report = (summary: string) => call('agent_finish', { summary, findings: [], open_items: [] });
const OVERFLOW = {
  error: { message: "This model's maximum context length is 8192 tokens.", type: 'invalid_request_error', param: 'messages', code: 'context_length_exceeded' },
};

type Team = Awaited<ReturnType<typeof openaiTeam>>;

async function run(replies: Record<string, FakeReply[]>, options: OpenAITeamOptions = {}) {
  const t = await openaiTeam(replies, { ...options, coordinator: { tools: [lookup], ...options.coordinator } });
  const rootId = await t.c.start({ name: 'lead', task: 'Find the answer.' });
  return { t, rootId };
}

const requestsOf = (t: Team, name: string) => t.server.requests.filter((r) => agentOf(r) === name);
const bodyOf = (r: FakeRequest) =>
  r.body as {
    messages: { role: string; content: unknown; tool_call_id?: string }[];
    tools?: { function: { name: string } }[];
    stream?: boolean;
    stream_options?: unknown;
  };
const toolResults = (session: readonly SessionItem[]) =>
  session
    .filter((i): i is Extract<SessionItem, { role: 'tool' }> => i.role === 'tool')
    .map((i) => ({ name: i.name, ...(JSON.parse(i.content) as { error?: { code: string } }) }));
const noticesTo = (t: Team, id: string) => t.store.listMessages(t.c.runId).filter((m) => m.to === id && m.from !== 'user');

/** The next request the server receives from `name`. */
async function requestFrom(t: Team, name: string): Promise<FakeRequest> {
  for (const r of t.server.requests) if (agentOf(r) === name) return r;
  for (;;) {
    const r = await t.nextRequest();
    if (agentOf(r) === name) return r;
  }
}

describe.each([false, true])('a tool-calling team over the wire (stream: %s)', (stream) => {
  it('runs several turns, a child and user tools; requests and usage are what the server saw', async () => {
    const deltas: ModelDelta[] = [];
    const { t, rootId } = await run(
      {
        lead: [
          call('lookup', { key: 'answer' }, 'Looking it up.'),
          call('spawn_agent', { name: 'worker', task: 'Check 42.' }),
          call('wait_for_agents', { reason: 'worker' }),
          finish('42, confirmed by worker'),
        ],
        worker: [report('42 is right')],
      },
      { model: { stream } },
    );
    await using _ = t;
    t.c.subscribe((e: TroupeEvent) => {
      if (e.type === 'agent.delta') deltas.push(e.delta);
    });
    const root = await t.c.waitFor(rootId, TERMINAL);
    expect(root).toMatchObject({ status: 'completed', report: { summary: '42, confirmed by worker' } });

    const lead = requestsOf(t, 'lead');
    expect(lead).toHaveLength(4);
    expect(lead.every((r) => r.path === '/v1/chat/completions' && r.headers.authorization === 'Bearer sk-test')).toBe(true);
    const second = bodyOf(lead[1]!);
    expect(second.tools?.map((x) => x.function.name)).toEqual(expect.arrayContaining(['lookup', 'spawn_agent', 'finish']));
    const toolMessage = second.messages.find((m) => m.role === 'tool')!;
    expect(JSON.parse(toolMessage.content as string)).toEqual({ key: 'answer', value: 42 });
    // The worker's report reached the lead's last request.
    expect(JSON.stringify(bodyOf(lead[3]!).messages)).toContain('42 is right');
    expect(bodyOf(lead[0]!).stream ?? false).toBe(stream);
    if (stream) {
      expect(bodyOf(lead[0]!).stream_options).toEqual({ include_usage: true });
      const textDeltas = deltas.filter((d) => d.kind === 'text');
      expect(textDeltas.length).toBeGreaterThan(1);
      expect(textDeltas.map((d) => d.text).join('')).toBe('Looking it up.');
      expect(deltas.some((d) => d.kind === 'toolCall' && d.name === 'lookup')).toBe(true);
    } else expect(deltas).toEqual([]);
    // One usage row per call, with the tokens the server reported.
    const usage = t.store.listUsage(t.c.runId);
    expect(usage).toHaveLength(5);
    expect(usage.every((u) => u.purpose === 'main' && u.inputTokens === 10 && u.outputTokens === 5 && u.model === 'fake-model')).toBe(true);
  });
});

describe('transient errors are retried with backoff on the injected clock', () => {
  it('429 with retry-after-ms: waits what the server asked, then succeeds', async () => {
    const { t, rootId } = await run({ lead: [status(429, { 'retry-after-ms': '1500' }), finish()] });
    await using _ = t;
    expect(await t.passBackoff()).toBe(1500);
    expect((await t.c.waitFor(rootId, TERMINAL)).status).toBe('completed');
    expect(t.server.requests).toHaveLength(2);
  });

  it('500 three times, then success: backoff 2 s, 4 s, 8 s', async () => {
    const { t, rootId } = await run({ lead: [status(500), status(502), status(503), finish()] });
    await using _ = t;
    const waits = [await t.passBackoff(), await t.passBackoff(), await t.passBackoff()];
    expect(waits).toEqual([2_000, 4_000, 8_000]);
    expect((await t.c.waitFor(rootId, TERMINAL)).status).toBe('completed');
  });

  it('500 forever, without a breaker: the child fails after 5 retries (2, 4, 8, 16, 32 s) and its parent hears once', async () => {
    // (With the endpoint's breaker, the 5th failure in a row opens it instead: breaker.test.ts.)
    const { t, rootId } = await run(
      {
        lead: [call('spawn_agent', { name: 'worker', task: 'Work.' }), call('wait_for_agents', { reason: 'worker' }), finish('worker failed')],
        worker: Array.from({ length: 6 }, () => status(500)),
      },
      { coordinator: { breaker: false } },
    );
    await using _ = t;
    const waits: number[] = [];
    for (let i = 0; i < 5; i++) waits.push(await t.passBackoff());
    expect(waits).toEqual([2_000, 4_000, 8_000, 16_000, 32_000]);
    expect((await t.c.waitFor(rootId, TERMINAL)).status).toBe('completed');
    const worker = t.c.list().find((a) => a.name === 'worker')!;
    expect(worker).toMatchObject({ status: 'failed', error: { code: 'PROVIDER_UNAVAILABLE' } });
    expect(worker.error?.message).toContain('after 5 retries');
    expect(requestsOf(t, 'worker')).toHaveLength(6);
    expect(
      noticesTo(t, rootId)
        .filter((m) => m.from === worker.id)
        .map((m) => m.type),
    ).toEqual(['failed']);
  });

  it('a request that times out (on the clock) is aborted and retried', async () => {
    const { t, rootId } = await run({ lead: [{ hang: true }, finish()] }, { model: { timeoutMs: 30_000 } });
    await using _ = t;
    await requestFrom(t, 'lead'); // the request reached the server before time moves
    t.clock.increment(await t.clock.nextTimer((ms) => ms === 30_000));
    await t.server.clientAborted(0);
    expect(await t.passBackoff()).toBe(2_000);
    expect((await t.c.waitFor(rootId, TERMINAL)).status).toBe('completed');
    expect(t.server.requests).toHaveLength(2);
  });

  it('a dropped connection and a stream cut mid-way are retried', async () => {
    const { t, rootId } = await run(
      {
        lead: [
          { drop: true },
          { message: { content: 'a long answer that is cut', toolCalls: [{ name: 'finish', arguments: { summary: 'x' } }] }, cutAfterChunks: 3 },
          finish('whole'),
        ],
      },
      { model: { stream: true } },
    );
    await using _ = t;
    expect([await t.passBackoff(), await t.passBackoff()]).toEqual([2_000, 4_000]);
    expect(await t.c.waitFor(rootId, TERMINAL)).toMatchObject({ status: 'completed', report: { summary: 'whole' } });
  });

  it('x-should-retry: false is believed even for a 503', async () => {
    const { t, rootId } = await run({ lead: [status(503, { 'x-should-retry': 'false' })] });
    await using _ = t;
    expect(await t.c.waitFor(rootId, TERMINAL)).toMatchObject({ status: 'failed', error: { code: 'PROVIDER_UNAVAILABLE' } });
    expect(t.server.requests).toHaveLength(1);
  });
});

describe('input the provider rejects is repaired, then retried', () => {
  it('400 context overflow: older items are summarised by the same model (metered as compaction), then the turn succeeds', async () => {
    const { t, rootId } = await run({
      lead: [call('lookup', { key: 'a' }), call('lookup', { key: 'b' }), status(400, {}, OVERFLOW), finish('after compaction')],
      '(troupe)': [text('Looked up a and b: both 42.')],
    });
    await using _ = t;
    expect(await t.c.waitFor(rootId, TERMINAL)).toMatchObject({ status: 'completed', report: { summary: 'after compaction' } });
    const summaryRequest = bodyOf(requestsOf(t, '(troupe)')[0]!);
    expect(summaryRequest.tools).toBeUndefined();
    expect(JSON.stringify(summaryRequest.messages)).toContain('[tool lookup result]');
    // The retried request carries the summary instead of the older items.
    const retried = bodyOf(requestsOf(t, 'lead')[3]!).messages;
    expect(retried.filter((m) => m.role === 'tool')).toHaveLength(0);
    expect(retried[1]!.content).toContain(SUMMARY_HEADER);
    expect(retried[1]!.content).toContain('Looked up a and b: both 42.');
    expect(t.session(rootId)[0]!.content).toContain('Task:\nFind the answer.');
    expect(t.store.listUsage(t.c.runId).map((u) => u.purpose)).toEqual(['main', 'main', 'compaction', 'main']);
  });

  it('a context that still overflows after 2 compactions fails the agent', async () => {
    // A long session, so that a third compaction would still find older items to summarise.
    const { t, rootId } = await run({
      lead: [
        ...Array.from({ length: 20 }, (_, i) => call('lookup', { key: `k${i}` })),
        status(400, {}, OVERFLOW),
        status(400, {}, OVERFLOW),
        status(400, {}, OVERFLOW),
      ],
      '(troupe)': [text('summary one'), text('summary two'), text('summary three')],
    });
    await using _ = t;
    expect(await t.c.waitFor(rootId, TERMINAL)).toMatchObject({ status: 'failed', error: { code: 'PROVIDER_CONTEXT_OVERFLOW' } });
    expect(requestsOf(t, '(troupe)')).toHaveLength(2);
    expect(t.session(rootId).length).toBeGreaterThan(2);
    expect(t.unused()).toEqual({ '(troupe)': 1 });
  });

  it('a 400 while the session holds images: every image becomes a placeholder, then the turn is retried', async () => {
    // A run whose root has a screenshot in its session (as a tool or a host may put there), resumed.
    const store = memoryStore();
    const clock = new SimulatedClock();
    const first = createCoordinator({
      model: scriptedModel({ agents: { lead: [{ delayMs: 60_000, ...{ tool: 'finish', args: { summary: 'never' } } }] } }, { clock }),
      store,
      clock,
    });
    const rootId = await first.start({ name: 'lead', task: 'Describe the page.' });
    await first.shutdown();
    store.appendSession(rootId, [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'The page:' },
          { type: 'image', url: 'data:image/png;base64,AAAA' },
        ],
      },
    ]);
    await using server = await createFakeOpenAIServer([status(400, {}, { error: { message: 'Invalid image.', type: 'invalid_request_error' } }), finish()]);
    const c = await resumeCoordinator({ store, clock, model: openaiModel({ model: 'fake-model', baseURL: server.url, apiKey: 'sk-test', clock }) });
    expect((await c.waitFor(rootId, TERMINAL)).status).toBe('completed');
    const [one, two] = server.requests.map((r) => JSON.stringify(bodyOf(r).messages));
    expect(one).toContain('image_url');
    expect(two).not.toContain('image_url');
    expect(two).toContain(IMAGE_PLACEHOLDER);
    expect(JSON.stringify(store.loadSession(rootId))).not.toContain('data:image');
    await c.shutdown();
  });
});

describe('failures that end the agent, each told to the parent once', () => {
  it('a structured refusal fails the child; the parent gets one notice', async () => {
    const { t, rootId } = await run({
      lead: [call('spawn_agent', { name: 'worker', task: 'Do it.' }), call('wait_for_agents', { reason: 'worker' }), finish('refused')],
      worker: [{ message: { refusal: 'I cannot help with that.' } }],
    });
    await using _ = t;
    expect((await t.c.waitFor(rootId, TERMINAL)).status).toBe('completed');
    const worker = t.c.list().find((a) => a.name === 'worker')!;
    expect(worker).toMatchObject({ status: 'failed', error: { code: 'PROVIDER_REFUSAL' } });
    expect(worker.error?.message).toContain('I cannot help with that.');
    expect(
      noticesTo(t, rootId)
        .filter((m) => m.from === worker.id)
        .map((m) => m.type),
    ).toEqual(['failed']);
  });

  it('an empty API key against a server that answers 401 fails with PROVIDER_AUTH, not retried', async () => {
    const { t, rootId } = await run(
      { lead: [status(401, {}, { error: { message: 'Incorrect API key provided.', type: 'invalid_request_error', code: 'invalid_api_key' } })] },
      { model: { apiKey: '' } },
    );
    await using _ = t;
    expect(await t.c.waitFor(rootId, TERMINAL)).toMatchObject({ status: 'failed', error: { code: 'PROVIDER_AUTH' } });
    expect(t.server.requests).toHaveLength(1);
  });

  it('a response with no choices fails with PROVIDER_INVALID_RESPONSE', async () => {
    const { t, rootId } = await run({ lead: [{ raw: JSON.stringify({ id: 'x', object: 'chat.completion', created: 0, model: 'm', choices: [] }) }] });
    await using _ = t;
    expect(await t.c.waitFor(rootId, TERMINAL)).toMatchObject({ status: 'failed', error: { code: 'PROVIDER_INVALID_RESPONSE' } });
  });

  it('a stream cut with no retries left fails, and what was streamed is kept in the session', async () => {
    const { t, rootId } = await run(
      { lead: [{ message: { content: 'I was halfway through explaining when' }, cutAfterChunks: 4 }] },
      { model: { stream: true }, coordinator: { retry: { maxRetries: 0 } } },
    );
    await using _ = t;
    expect(await t.c.waitFor(rootId, TERMINAL)).toMatchObject({ status: 'failed', error: { code: 'PROVIDER_CONNECTION' } });
    const last = t.session(rootId).at(-1)!;
    expect(last.role).toBe('assistant');
    expect(last.content).toMatch(/^I was halfway .*\[cut off: /);
  });
});

describe('bad tool calls go back to the model, which recovers', () => {
  it('malformed JSON arguments and an unknown tool name become tool errors', async () => {
    const { t, rootId } = await run({ lead: [call('lookup', '{"key": '), call('no_such_tool', {}), call('lookup', { key: 'a' }), finish()] });
    await using _ = t;
    expect((await t.c.waitFor(rootId, TERMINAL)).status).toBe('completed');
    const results = toolResults(t.session(rootId));
    expect(results.map((r) => r.error?.code ?? 'ok')).toEqual(['TOOL_INPUT_INVALID', 'TOOL_NOT_FOUND', 'ok', 'ok']);
    // The model saw its mistake in the next request.
    expect(JSON.stringify(bodyOf(requestsOf(t, 'lead')[1]!).messages)).toContain('not valid JSON');
  });
});

describe('stopping an agent aborts its request on the wire', () => {
  it('the HTTP request is closed, the child is stopped and the parent finishes', async () => {
    const { t, rootId } = await run({
      lead: [call('spawn_agent', { name: 'worker', task: 'Think hard.' }), call('wait_for_agents', { reason: 'worker' }), finish('stopped worker')],
      worker: [{ hang: true }],
    });
    await using _ = t;
    const request = await requestFrom(t, 'worker');
    const worker = t.c.list().find((a) => a.name === 'worker')!;
    await t.c.stop(worker.id);
    await t.server.clientAborted(request.index);
    expect(t.c.get(worker.id).status).toBe('stopped');
    expect((await t.c.waitFor(rootId, TERMINAL)).status).toBe('completed');
    expect(requestsOf(t, 'worker')).toHaveLength(1);
  });
});
