/**
 * The provider contract: what the run loop relies on from any `Model`, checked against the
 * scripted model and against openaiModel + the fake server (through the real `openai` client).
 * Behaviours are written once, neutrally, and translated to each provider's script.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ProviderError } from '../../src/errors.js';
import { openaiModel } from '../../src/model/openaiModel.js';
import { scriptedModel, type ScriptStep } from '../../src/model/scriptedModel.js';
import type { Model, ModelRequest } from '../../src/model/types.js';
import { createFakeOpenAIServer, type FakeReply } from '../../src/testing/fakeOpenAIServer.js';

type Behaviour =
  | { text: string; usage?: { input: number; output: number; cached: number } }
  | { calls: { name: string; args: Record<string, unknown> | string }[] }
  | { refusal: string }
  | { error: 'rate_limited'; retryAfterMs: number }
  | { error: 'unavailable' | 'auth' | 'bad_request' | 'overflow' }
  | { hang: true };

const ERRORS = {
  rate_limited: { code: 'PROVIDER_RATE_LIMITED', status: 429, retryable: true },
  unavailable: { code: 'PROVIDER_UNAVAILABLE', status: 503, retryable: true },
  auth: { code: 'PROVIDER_AUTH', status: 401, retryable: false },
  bad_request: { code: 'PROVIDER_BAD_REQUEST', status: 422, retryable: false },
  overflow: { code: 'PROVIDER_CONTEXT_OVERFLOW', status: 400, retryable: false },
} as const;

interface Provider {
  model: Model;
  close(): Promise<void>;
}

const scripted = (behaviours: Behaviour[]): Promise<Provider> => {
  const steps = behaviours.map((b): ScriptStep => {
    if ('text' in b)
      return { text: b.text, ...(b.usage ? { usage: { inputTokens: b.usage.input, outputTokens: b.usage.output, cachedInputTokens: b.usage.cached } } : {}) };
    if ('calls' in b) return { tools: b.calls };
    if ('refusal' in b) return { refusal: b.refusal };
    if ('hang' in b) return { text: 'never', delayMs: 1e9 };
    const e = ERRORS[b.error];
    return { error: { code: e.code, status: e.status, ...('retryAfterMs' in b ? { retryAfterMs: b.retryAfterMs } : {}) } };
  });
  return Promise.resolve({ model: scriptedModel({ agents: { solo: steps } }), close: () => Promise.resolve() });
};

const overHttp = async (behaviours: Behaviour[]): Promise<Provider> => {
  const replies = behaviours.map((b): FakeReply => {
    if ('text' in b)
      return {
        message: { content: b.text },
        ...(b.usage ? { usage: { promptTokens: b.usage.input, completionTokens: b.usage.output, cachedTokens: b.usage.cached } } : {}),
      };
    if ('calls' in b) return { message: { toolCalls: b.calls.map((c) => ({ name: c.name, arguments: c.args })) } };
    if ('refusal' in b) return { message: { refusal: b.refusal } };
    if ('hang' in b) return { hang: true };
    const e = ERRORS[b.error];
    if (b.error === 'overflow')
      return { status: 400, body: { error: { message: 'maximum context length exceeded', type: 'invalid_request_error', code: 'context_length_exceeded' } } };
    return { status: e.status, headers: 'retryAfterMs' in b ? { 'retry-after-ms': String(b.retryAfterMs) } : {} };
  });
  const server = await createFakeOpenAIServer(replies);
  return { model: openaiModel({ model: 'fake-model', baseURL: server.url, apiKey: 'k' }), close: () => server.close() };
};

const request: ModelRequest = {
  agent: { id: 'a1', name: 'solo', parentId: null, depth: 0 },
  system: 'You are solo (id a1).',
  messages: [{ role: 'user', content: 'Go.' }],
  tools: [{ name: 'lookup', description: 'Look up.', parameters: { type: 'object', properties: { key: { type: 'string' } } } }],
  turn: 1,
};

describe.each([
  ['scriptedModel', scripted],
  ['openaiModel + fake server', overHttp],
] as const)('provider contract: %s', (_name, make) => {
  let open: Provider | undefined;
  const provider = async (...behaviours: Behaviour[]) => (open = await make(behaviours));
  const complete = (p: Provider, signal = new AbortController().signal) => p.model.complete(request, { signal });
  afterEach(async () => {
    await open?.close();
    open = undefined;
  });

  it('a plain answer: text, no tool calls, no refusal, usage as reported', async () => {
    const p = await provider({ text: 'Hello there.', usage: { input: 7, output: 3, cached: 2 } });
    const turn = await complete(p);
    expect(turn.text).toBe('Hello there.');
    expect(turn.toolCalls).toEqual([]);
    expect(turn.refusal ?? null).toBeNull();
    expect(turn.usage).toMatchObject({ inputTokens: 7, outputTokens: 3, cachedInputTokens: 2 });
  });

  it('tool calls: distinct non-empty ids, names, and arguments as raw text (malformed kept verbatim)', async () => {
    const p = await provider({
      calls: [
        { name: 'lookup', args: { key: 'a' } },
        { name: 'lookup', args: '{"key": ' },
      ],
    });
    const turn = await complete(p);
    expect(turn.toolCalls.map((c) => c.name)).toEqual(['lookup', 'lookup']);
    expect(JSON.parse(turn.toolCalls[0]!.arguments)).toEqual({ key: 'a' });
    expect(turn.toolCalls[1]!.arguments).toBe('{"key": ');
    const ids = turn.toolCalls.map((c) => c.id);
    expect(ids.every((id) => id.length > 0) && new Set(ids).size === 2).toBe(true);
  });

  it('a structured refusal', async () => {
    const p = await provider({ refusal: 'I will not.' });
    expect((await complete(p)).refusal).toBe('I will not.');
  });

  it.each(Object.keys(ERRORS) as (keyof typeof ERRORS)[])('%s becomes a ProviderError with its stable code and retryable flag', async (kind) => {
    const p = await provider(kind === 'rate_limited' ? { error: kind, retryAfterMs: 1500 } : { error: kind });
    const err: unknown = await complete(p).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ProviderError);
    expect(err).toMatchObject({ code: ERRORS[kind].code, retryable: ERRORS[kind].retryable, status: ERRORS[kind].status });
    if (kind === 'rate_limited') expect((err as ProviderError).retryAfterMs).toBe(1500);
  });

  it('an abort rejects with the signal’s reason', async () => {
    const p = await provider({ hang: true });
    const controller = new AbortController();
    const call = complete(p, controller.signal);
    const reason = new Error('stop now');
    controller.abort(reason);
    await expect(call).rejects.toBe(reason);
  });
});
