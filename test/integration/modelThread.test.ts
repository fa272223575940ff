/**
 * `openaiModel({ thread: true })` (issue 36 item 2): the real client in a worker thread, against the
 * fake OpenAI-compatible server, compared with the same model in-thread. The worker is the compiled
 * `modelThread.js` (dist/, built by the project's global setup), so the package is loaded from dist/.
 */
import { spawn } from 'node:child_process';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Worker } from 'node:worker_threads';
import { describe, expect, it, vi } from 'vitest';
import { createFakeOpenAIServer, type FakeReply, type FakeRequest } from '../../src/testing/fakeOpenAIServer.js';
import { threadCpuMs } from '../../src/model/modelThreadWire.js';
import { until } from '../helpers/cli.js';

const dist = (path: string) => new URL(`../../dist/${path}`, import.meta.url);
const troupe = (await import(dist('src/index.js').href)) as typeof import('../../src/index.js');
const { modelThreadCalls, modelThreadStats, modelThreadWorker } = (await import(
  dist('src/model/threadedModel.js').href
)) as typeof import('../../src/model/threadedModel.js');
type Model = import('../../src/index.js').Model;
type ModelRequest = import('../../src/model/types.js').ModelRequest;
type SessionItem = import('../../src/model/types.js').SessionItem;
type ModelDelta = import('../../src/model/types.js').ModelDelta;
type CallMessage = import('../../src/model/modelThreadWire.js').CallMessage;

const toolA = { name: 'work', description: 'does a step', parameters: { type: 'object' } };
const toolB = { name: 'look', description: 'looks', parameters: { type: 'object', properties: { at: { type: 'string' } } } };
// Tool lists are shared arrays, as troupe's are: one not changed since the last call is not sent again.
const TOOLS_A = [toolA];
const TOOLS_AB = [toolA, toolB];
const NONE: ModelRequest['tools'] = [];

const req = (
  agent: string,
  system: string,
  messages: readonly SessionItem[],
  tools: ModelRequest['tools'],
  purpose?: ModelRequest['purpose'],
): ModelRequest => ({
  agent: { id: agent, name: agent, parentId: null, depth: 0 },
  system,
  messages,
  tools,
  turn: 1,
  ...(purpose ? { purpose } : {}),
});
const signal = () => new AbortController().signal;

/** What a test compares of a failure: everything the run loop reads. */
function fields(err: unknown) {
  const e = err as InstanceType<typeof troupe.ProviderError> & { partialText?: string };
  return {
    name: e.name,
    code: e.code,
    message: e.message,
    status: e.status,
    retryAfterMs: e.retryAfterMs,
    retryable: e.retryable,
    details: e.details,
    partialText: e.partialText,
    provider: e instanceof troupe.ProviderError,
  };
}
const failure = (p: Promise<unknown>) => p.then((turn) => ({ answered: turn }), fields);

/**
 * Two agents' conversations interleaved, with a compaction call, a change of system prompt and of
 * tools, and a rewrite of one session (a new array sharing only its tail) between turns. Sessions
 * grow in place as troupe's do, and are passed both as copies and through `source()` (troupe's
 * own requests: gateway.ts SnapshotRequest).
 */
async function conversation(model: Model): Promise<unknown[]> {
  const answers: unknown[] = [];
  let a: SessionItem[] = [{ role: 'user', content: 'task a' }];
  const b: SessionItem[] = [{ role: 'user', content: 'task b' }];
  const snapshot = (agent: string, system: string, items: SessionItem[], tools: ModelRequest['tools']) => {
    const length = items.length;
    return { ...req(agent, system, items.slice(0, length), tools), source: () => ({ items, length }) };
  };
  const turn = async (request: ModelRequest, session: SessionItem[], n: number) => {
    const answer = await model.complete(request, { signal: signal() });
    answers.push(answer);
    session.push({ role: 'assistant', content: answer.text, toolCalls: answer.toolCalls });
    for (const call of answer.toolCalls) session.push({ role: 'tool', toolCallId: call.id, name: call.name, content: `result ${n}` });
  };
  await turn(snapshot('a', 'sys a', a, TOOLS_A), a, 1);
  // b's requests are its own array, changed in place between calls, as a caller of the model may do.
  await turn(req('b', 'sys b', b, TOOLS_A), b, 2);
  await turn(snapshot('a', 'sys a', a, TOOLS_A), a, 3);
  answers.push(await model.complete(req('a', 'summarise', [{ role: 'user', content: 'summarise a' }], NONE, 'compaction'), { signal: signal() }));
  await turn(req('b', 'sys b, changed', b, TOOLS_AB), b, 4);
  // The rewrite: a new array, the summary first, the newest two items shared.
  a = [{ role: 'user', content: 'summary of a' }, ...a.slice(-2)];
  await turn(snapshot('a', 'sys a', a, TOOLS_A), a, 5);
  a.push({ role: 'user', content: 'a message' });
  await turn(snapshot('a', 'sys a', a, TOOLS_A), a, 6);
  b[0] = { role: 'user', content: 'task b, restated' };
  await turn(req('b', 'sys b, changed', b, TOOLS_AB), b, 7);
  answers.push(await model.complete(req('a', 'summarise', [{ role: 'user', content: 'summarise a again' }], NONE, 'compaction'), { signal: signal() }));
  return answers;
}

const replies = (): FakeReply[] => [
  { message: { toolCalls: [{ name: 'work', arguments: { n: 1 } }] } },
  {
    message: {
      content: 'b thinks',
      toolCalls: [
        { name: 'work', arguments: { n: 2 } },
        { name: 'work', arguments: { n: 3 } },
      ],
    },
  },
  { message: { toolCalls: [{ name: 'work', arguments: { n: 4 } }] } },
  { message: { content: 'a summary' } },
  { message: { toolCalls: [{ name: 'look', arguments: { at: 'x' } }] }, usage: { promptTokens: 99, completionTokens: 7, cachedTokens: 3 } },
  { message: { content: 'a again' } },
  { message: { toolCalls: [{ name: 'work', arguments: { n: 5 } }] } },
  { message: { content: 'b done' } },
  { message: { content: 'another summary' } },
];

const bodies = (requests: FakeRequest[]) => requests.map((r) => r.body);

describe('openaiModel thread: true', () => {
  it('sends the same requests and returns the same answers as in-thread, across turns, purposes and a rewritten session', async () => {
    await using plain = await createFakeOpenAIServer(replies());
    await using threaded = await createFakeOpenAIServer(replies());
    const expected = await conversation(troupe.openaiModel({ model: 'm', baseURL: plain.url, apiKey: 'k', maxOutputTokens: 50 }));
    const posted = vi.spyOn(Worker.prototype, 'postMessage');
    const got = await conversation(troupe.openaiModel({ model: 'm', baseURL: threaded.url, apiKey: 'k', maxOutputTokens: 50, thread: true }));
    const calls = posted.mock.calls.map(([m]) => m as CallMessage).filter((m) => m.t === 'call');
    posted.mockRestore();
    expect(got).toEqual(expected);
    // Only what changed crossed: [agent, purpose, keep, added, system sent, tool set named, tool list sent].
    const sent = (m: CallMessage) => [m.agent, m.purpose, m.keep, m.add.length, m.system !== undefined, m.toolSet !== undefined, m.tools !== undefined];
    expect(calls.map(sent)).toEqual([
      ['a', 'main', 0, 1, true, true, true],
      ['b', 'main', 0, 1, true, true, false], // a's tool list, met already
      ['a', 'main', 1, 2, false, false, false],
      ['a', 'compaction', 0, 1, true, true, true],
      ['b', 'main', 1, 3, true, true, true], // its system prompt and tools changed
      ['a', 'main', 0, 3, false, false, false], // the rewrite: a new array whose first item is new
      ['a', 'main', 3, 2, false, false, false],
      ['b', 'main', 0, 6, false, false, false], // its first item replaced in place
      ['a', 'compaction', 0, 1, false, false, false],
    ]);
    expect(bodies(threaded.requests)).toEqual(bodies(plain.requests));
    expect(threaded.requests.map((r) => r.headers.authorization)).toEqual(plain.requests.map((r) => r.headers.authorization));
    plain.assertComplete();
    threaded.assertComplete();
  });

  it("a coordinator's agent sends the same requests through it (its requests read through source())", async () => {
    const script = (): FakeReply[] => [
      ...[1, 2, 3].map((n): FakeReply => ({ message: { toolCalls: [{ name: 'work', arguments: { n } }] } })),
      { message: { toolCalls: [{ name: 'finish', arguments: { summary: 'done' } }] } },
    ];
    const run = async (thread: boolean) => {
      const server = await createFakeOpenAIServer(script());
      const work = troupe.defineTool({ name: 'work', description: 'does a step', parameters: { type: 'object' }, execute: () => 'r'.repeat(50) });
      const c = troupe.createCoordinator({ model: troupe.openaiModel({ model: 'm', baseURL: server.url, apiKey: '', thread }), tools: [work] });
      const root = await c.start({ name: 'lead', task: 'work three times' });
      expect(await c.waitFor(root, ['completed', 'failed', 'crashed', 'stopped'])).toMatchObject({ status: 'completed' });
      await c.shutdown();
      await server.close();
      // Agent ids are random: compared as ROOT.
      return JSON.parse(JSON.stringify(bodies(server.requests)).replaceAll(root, 'ROOT')) as unknown[];
    };
    const plain = await run(false);
    expect(plain).toHaveLength(4);
    expect(await run(true)).toEqual(plain);
  });

  it('fails with the same classified ProviderError: a 429 with retry-after, a 400 context overflow, a stream cut after some text', async () => {
    const script = (): FakeReply[] => [
      { status: 429, headers: { 'retry-after': '7' }, body: { error: { message: 'Rate limit reached', type: 'requests', code: 'rate_limit_exceeded' } } },
      {
        status: 400,
        body: { error: { message: "This model's maximum context length is 8192 tokens", type: 'invalid_request_error', code: 'context_length_exceeded' } },
      },
      { message: { content: 'one two three four' }, cutAfterChunks: 3 },
      { raw: '{"choices": 7}' },
    ];
    const calls = async (thread: boolean) => {
      await using server = await createFakeOpenAIServer(script());
      const plain = troupe.openaiModel({ model: 'm', baseURL: server.url, apiKey: '', thread });
      const streamed = troupe.openaiModel({ model: 'm', baseURL: server.url, apiKey: '', thread, stream: true });
      const ask = (m: Model) => failure(m.complete(req('a', 's', [{ role: 'user', content: 'hi' }], []), { signal: signal() }));
      return [await ask(plain), await ask(plain), await ask(streamed), await ask(plain)];
    };
    const expected = await calls(false);
    expect(expected.map((e) => ('code' in e ? e.code : e))).toEqual([
      'PROVIDER_RATE_LIMITED',
      'PROVIDER_CONTEXT_OVERFLOW',
      'PROVIDER_CONNECTION',
      'PROVIDER_INVALID_RESPONSE',
    ]);
    expect(expected[0]).toMatchObject({ status: 429, retryAfterMs: 7000, retryable: true, provider: true });
    expect(expected[2]).toMatchObject({ retryable: true, details: { partialText: 'one two ' } });
    expect(await calls(true)).toEqual(expected);
  });

  it('streams the same deltas and answer', async () => {
    const script = (): FakeReply[] => [
      { message: { content: 'alpha beta gamma', toolCalls: [{ name: 'work', arguments: { n: 1 } }] } },
      { message: { content: 'delta epsilon' } },
    ];
    const run = async (thread: boolean) => {
      await using server = await createFakeOpenAIServer(script());
      const model = troupe.openaiModel({ model: 'm', baseURL: server.url, apiKey: '', thread, stream: true });
      const deltas: ModelDelta[] = [];
      const session: SessionItem[] = [{ role: 'user', content: 'go' }];
      const first = await model.complete(req('a', 's', session.slice(), [toolA]), { signal: signal(), onDelta: (d) => deltas.push(d) });
      session.push(
        { role: 'assistant', content: first.text, toolCalls: first.toolCalls },
        { role: 'tool', toolCallId: first.toolCalls[0]!.id, name: 'work', content: 'r' },
      );
      const second = await model.complete(req('a', 's', session.slice(), [toolA]), { signal: signal(), onDelta: (d) => deltas.push(d) });
      return { first, second, deltas, bodies: bodies(server.requests) };
    };
    const expected = await run(false);
    expect(expected.deltas.filter((d) => d.kind === 'text').length).toBeGreaterThan(2);
    expect(await run(true)).toEqual(expected);
  });

  it('an abort posts to the worker: the call rejects with the reason and the server sees the client leave', async () => {
    await using server = await createFakeOpenAIServer([{ hang: true }]);
    const model = troupe.openaiModel({ model: 'm', baseURL: server.url, apiKey: '', thread: true });
    const controller = new AbortController();
    const call = model.complete(req('a', 's', [{ role: 'user', content: 'hi' }], []), { signal: controller.signal });
    await until(
      'the request',
      () => Promise.resolve(server.requests.length),
      (n) => n === 1,
      10_000,
    );
    const reason = new Error('stopped');
    controller.abort(reason);
    await expect(call).rejects.toBe(reason);
    let bound: ReturnType<typeof setTimeout> | undefined;
    const left = await Promise.race([
      server.clientAborted(0).then(() => true),
      new Promise<false>((resolve) => (bound = setTimeout(() => resolve(false), 10_000))),
    ]);
    clearTimeout(bound);
    expect(left, 'the worker aborted its request').toBe(true);
  });

  it('a worker that dies fails the calls in flight as PROVIDER_CONNECTION; the next call starts another and sends its whole request', async () => {
    await using server = await createFakeOpenAIServer([{ message: { content: 'first' } }, { hang: true }, { message: { content: 'after' } }]);
    const model = troupe.openaiModel({ model: 'm', baseURL: server.url, apiKey: '', thread: true });
    const session: SessionItem[] = [{ role: 'user', content: 'hi' }];
    const first = await model.complete(req('a', 's', session.slice(), TOOLS_A), { signal: signal() });
    session.push({ role: 'assistant', content: first.text }, { role: 'user', content: 'more' });
    const hung = failure(model.complete(req('a', 's', session.slice(), TOOLS_A), { signal: signal() }));
    await until(
      'the request',
      () => Promise.resolve(server.requests.length),
      (n) => n === 2,
      10_000,
    );
    const dead = modelThreadWorker();
    expect(dead).not.toBeNull();
    await dead!.terminate();
    expect(await hung).toMatchObject({ code: 'PROVIDER_CONNECTION', retryable: true, provider: true });
    session.push({ role: 'user', content: 'again' });
    expect(await model.complete(req('a', 's', session.slice(), TOOLS_A), { signal: signal() })).toMatchObject({ text: 'after' });
    expect(modelThreadWorker()).not.toBe(dead);
    expect((server.requests[2]!.body as { messages: unknown[] }).messages).toEqual([
      { role: 'system', content: 's' },
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'first' },
      { role: 'user', content: 'more' },
      { role: 'user', content: 'again' },
    ]);
    expect((server.requests[2]!.body as { tools: unknown }).tools).toEqual((server.requests[0]!.body as { tools: unknown }).tools);
  });

  /** How many last requests the worker keeps (0 when none runs). */
  const kept = async () => (await modelThreadStats())?.requests ?? 0;

  it("the worker forgets an agent's request once the main thread lets its session go, and all of a model's once the model goes", async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    await using server = await createFakeOpenAIServer(() => ({ message: { content: 'ok' } }));
    // A worker of its own: no earlier test's requests in it.
    await modelThreadWorker()?.terminate();
    let model: Model | null = troupe.openaiModel({ model: 'm', baseURL: server.url, apiKey: '', thread: true });
    let dropped: SessionItem[] | null = [{ role: 'user', content: 'let go' }];
    const held: SessionItem[] = [{ role: 'user', content: 'held' }];
    await model.complete(req('a', 's', dropped, TOOLS_A), { signal: signal() });
    await model.complete(req('b', 's', held, TOOLS_A), { signal: signal() });
    expect(await kept()).toBe(2);
    dropped = null;
    const collect = async () => {
      gc();
      // Finalizers run in a later task; the worker answers after it handled the forget.
      await new Promise((resolve) => setImmediate(resolve));
      return kept();
    };
    expect(await until('a forgotten', collect, (n) => n === 1, 10_000)).toBe(1);
    // b's session is still held, and so is its request in the worker: its next call builds on it.
    held.push({ role: 'assistant', content: 'ok' }, { role: 'user', content: 'more' });
    await model.complete(req('b', 's', held, TOOLS_A), { signal: signal() });
    expect((server.requests.at(-1)!.body as { messages: unknown[] }).messages).toHaveLength(4);
    model = null;
    expect(await until('the model dropped', collect, (n) => n === 0, 10_000)).toBe(0);
  });

  it("the worker's figures are its own: its heap, not the main thread's", async () => {
    await using server = await createFakeOpenAIServer(() => ({ message: { content: 'ok' } }));
    const model = troupe.openaiModel({ model: 'm', baseURL: server.url, apiKey: '', thread: true });
    await model.complete(req('a', 's', [{ role: 'user', content: 'hi' }], TOOLS_A), { signal: signal() });
    // ~100 MB held on the main thread only.
    const ballast = Array.from({ length: 1_000_000 }, (_, i) => ({ i, s: `item ${i}` }));
    const stats = await modelThreadStats();
    expect(stats).not.toBeNull();
    expect(stats!.heapUsed).toBeGreaterThan(0);
    expect(stats!.heapUsed).toBeLessThan(process.memoryUsage().heapUsed - 50 * 2 ** 20);
    expect(ballast).toHaveLength(1_000_000);
    expect(stats!.majorGcs).toBeGreaterThanOrEqual(0);
    if (stats!.majorGcs === 0) expect(stats!.heapAfterMajorGc).toBeNull();
  });

  it("the worker's CPU figure is its own thread's, not the process's", async () => {
    await using server = await createFakeOpenAIServer(() => ({ message: { content: 'ok' } }));
    const model = troupe.openaiModel({ model: 'm', baseURL: server.url, apiKey: '', thread: true });
    await model.complete(req('a', 's', [{ role: 'user', content: 'hi' }], TOOLS_A), { signal: signal() });
    const before = await modelThreadStats();
    const main0 = threadCpuMs();
    if (process.platform !== 'linux') {
      expect(before!.cpuMs).toBeNull();
      return;
    }
    expect(before!.cpuMs).toBeGreaterThan(0);
    // 300 ms of the main thread's own CPU, while the worker idles.
    while (threadCpuMs()! - main0! < 300);
    const after = await modelThreadStats();
    expect(after!.cpuMs! - before!.cpuMs!).toBeLessThan(100);
  });

  it('an idle worker does not keep the process alive', async () => {
    await using server = await createFakeOpenAIServer([{ message: { content: 'hello' } }]);
    const script = `
      const { openaiModel } = await import(process.argv[1]);
      const model = openaiModel({ model: 'm', baseURL: process.argv[2], apiKey: '', thread: true });
      const turn = await model.complete(
        { agent: { id: 'a', name: 'a', parentId: null, depth: 0 }, system: 's', messages: [{ role: 'user', content: 'hi' }], tools: [], turn: 1 },
        { signal: new AbortController().signal },
      );
      process.stdout.write(turn.text);`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script, dist('src/index.js').href, server.url], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    let bound: ReturnType<typeof setTimeout> | undefined;
    const exited = await Promise.race([
      new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code))),
      new Promise<'alive'>((resolve) => (bound = setTimeout(() => resolve('alive'), 15_000))),
    ]);
    clearTimeout(bound);
    if (exited === 'alive') child.kill('SIGKILL');
    expect(exited, 'the child exits on its own once its call is answered').toBe(0);
    expect(out).toBe('hello');
  });

  it('refuses a clock with thread, and a thread that is not a boolean, auto or a rule', () => {
    expect(() => troupe.openaiModel({ model: 'm', baseURL: 'http://127.0.0.1:1/v1', apiKey: '', thread: true, clock: troupe.systemClock })).toThrow(
      expect.objectContaining({ code: 'CONFIG_INVALID' }),
    );
    expect(() => troupe.openaiModel({ model: 'm', baseURL: 'http://127.0.0.1:1/v1', apiKey: '', thread: 'yes' as unknown as boolean })).toThrow(
      expect.objectContaining({ code: 'CONFIG_INVALID' }),
    );
  });
});

describe("openaiModel thread: 'auto' (the default)", () => {
  const ask = (model: Model, agent: string) => model.complete(req(agent, 's', [{ role: 'user', content: `hi ${agent}` }], NONE), { signal: signal() });

  it('moves calls to the thread once the rule says so, and back once few are in flight; the answers are the same either way', async () => {
    // Answers wait until released: the test decides how many calls are in flight.
    const held: (() => void)[] = [];
    await using server = await createFakeOpenAIServer(async (request) => {
      await new Promise<void>((resolve) => held.push(resolve));
      return { message: { content: `answer to ${JSON.stringify(request.body).includes('hi a') ? 'a' : 'other'}` } };
    });
    // Every call ends a window (windowMs 0); any busy share counts; 4 calls out are many.
    const model = troupe.openaiModel({ model: 'm', baseURL: server.url, apiKey: 'k', thread: { windowMs: 0, share: 0, calls: 4 } });
    const before = modelThreadCalls();
    const first = ['a', 'b', 'c', 'd'].map((agent) => ask(model, agent));
    await until(
      'four requests held',
      () => Promise.resolve(held.length),
      (n) => n === 4,
    );
    expect(modelThreadCalls() - before, 'fewer than 4 out when each started: all here').toBe(0);
    const fifth = ask(model, 'e');
    await until(
      'five requests held',
      () => Promise.resolve(held.length),
      (n) => n === 5,
    );
    expect(modelThreadCalls() - before, 'the fifth started with 4 out: in the thread').toBe(1);
    for (const release of held.splice(0)) release();
    const answers = await Promise.all([...first, fifth]);
    expect(answers.map((a) => a.text)).toEqual(['answer to a', 'answer to other', 'answer to other', 'answer to other', 'answer to other']);
    // None out now (fewer than a quarter of 4): the next call is made here again.
    const sixth = ask(model, 'a');
    await until(
      'the sixth held',
      () => Promise.resolve(held.length),
      (n) => n === 1,
    );
    held.splice(0)[0]!();
    expect((await sixth).text).toBe('answer to a');
    expect(modelThreadCalls() - before).toBe(1);
  });

  it('with nothing set, a few calls stay on the main thread; a custom clock keeps them there without being refused', async () => {
    await using server = await createFakeOpenAIServer(() => ({ message: { content: 'ok' } }));
    const before = modelThreadCalls();
    const plain = troupe.openaiModel({ model: 'm', baseURL: server.url, apiKey: 'k' });
    const clocked = troupe.openaiModel({ model: 'm', baseURL: server.url, apiKey: 'k', clock: troupe.systemClock, thread: 'auto' });
    const answers = await Promise.all(['a', 'b', 'c'].flatMap((agent) => [ask(plain, agent), ask(clocked, agent)]));
    expect(answers.map((a) => a.text)).toEqual(Array(6).fill('ok'));
    expect(modelThreadCalls() - before).toBe(0);
  });

  it('refuses a rule with a clock, and a rule out of range', () => {
    const base = { model: 'm', baseURL: 'http://127.0.0.1:1/v1', apiKey: '' };
    expect(() => troupe.openaiModel({ ...base, thread: { windowMs: 1_000, share: 0.5, calls: 10 }, clock: troupe.systemClock })).toThrow(
      expect.objectContaining({ code: 'CONFIG_INVALID' }),
    );
    for (const thread of [{ windowMs: 1_000, share: 2, calls: 10 }, { windowMs: -1, share: 0.5, calls: 10 }, { share: 0.5, calls: 10 }, 'sometimes']) {
      expect(() => troupe.openaiModel({ ...base, thread: thread as never }), JSON.stringify(thread)).toThrow(
        expect.objectContaining({ code: 'CONFIG_INVALID' }),
      );
    }
  });
});
