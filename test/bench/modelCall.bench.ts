/**
 * Benchmark (`npm run bench`): the CPU one model call costs troupe's client with many calls in
 * flight — `openaiModel.complete` against the fake OpenAI-compatible server running in its own
 * process (serverProcess.ts, so its CPU is not counted), beside plain `fetch` and plain `node:http`
 * (a keep-alive pool as troupe's, the body parsed once) sending the same request body in the same run. The
 * server answers each call after 20 ms, so every call of a batch is in flight at once.
 *
 * Figure: process CPU (user + system) over a batch ÷ calls, median of the rounds; compare the
 * ratio to `node:http`, not the µs (this VM's speed varies between days). Beside it, the bytes each
 * client allocates per call (V8's sampling heap profiler, every 4 KB, the garbage included: what
 * the scavenges then pay for), from one batch after the rounds: steadier than the CPU figure,
 * which moved ±10 % between runs here while this one moved ~3 %.
 *
 * A batch answered at once flatters every client: one wake of the event loop reads many answers.
 * A team's answers come one at a time. So a second figure, "steady": 1,000 agents at once, each
 * making 10 calls in turn (its conversation growing by a tool call and its result per call) to a
 * second server answering each after 0.5–2 s (a hash of the agent and its turn: both clients wait
 * the same ones), ~600 calls a second; `openaiModel.complete` against `node:http` sending the same
 * bodies, alternating, 3 rounds.
 * @module
 */
import { Agent, request as httpRequest } from 'node:http';
import { Session } from 'node:inspector/promises';
import { afterAll, beforeAll, bench, describe } from 'vitest';
import type { ModelRequest, SessionItem } from '../../src/model/types.js';
import { compiled } from './compiled.js';
import { startServerProcess, type ServerProcess } from './serverProcess.js';
import { median } from './workloads.js';
import { runs } from './runs.js';

const { openaiModel } = await compiled<typeof import('../../src/model/openaiModel.js')>('src/model/openaiModel.js');

const IN_FLIGHT = [500, 1_000] as const;
/** The steady figure: agents at once, calls each, rounds (each client ~17 s a round here). */
const STEADY = { agents: 1_000, calls: 10, rounds: 3, minMs: 500, maxMs: 2_000 } as const;
const ROUNDS = 8;
const SERVER_DELAY_MS = 20;

/** A request of a realistic size: a system prompt, a few turns of tool use, eight tools. */
const REQUEST: ModelRequest = {
  agent: { id: 'a1', name: 'worker', parentId: 'root', depth: 1 },
  system: 'You are a worker agent of a team. '.repeat(30),
  messages: [
    { role: 'user', content: 'Do the step you were given and report.' },
    { role: 'assistant', content: null, toolCalls: [{ id: 'c1', name: 'work', arguments: '{}' }] },
    { role: 'tool', toolCallId: 'c1', name: 'work', content: 'r'.repeat(200) },
    { role: 'assistant', content: null, toolCalls: [{ id: 'c2', name: 'work', arguments: '{}' }] },
    { role: 'tool', toolCallId: 'c2', name: 'work', content: 'r'.repeat(200) },
  ],
  tools: Array.from({ length: 8 }, (_, i) => ({
    name: `tool_${i}`,
    description: 'A tool of the team, described in a sentence or two as tools are.',
    parameters: { type: 'object', properties: { name: { type: 'string' }, task: { type: 'string' } }, required: ['name'] },
  })),
  turn: 3,
};

/** A request as the Chat Completions body the `openai` client sends (written here, as plain code would). */
const wireBody = (system: string, messages: readonly SessionItem[]): string =>
  JSON.stringify({
    model: 'fake-model',
    messages: [
      { role: 'system', content: system },
      ...messages.map((m) =>
        m.role === 'tool'
          ? { role: 'tool', tool_call_id: m.toolCallId, content: m.content }
          : m.role === 'user'
            ? { role: 'user', content: m.content }
            : {
                role: 'assistant',
                content: m.content,
                tool_calls: m.toolCalls?.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } })),
              },
      ),
    ],
    tools: REQUEST.tools.map((t) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.parameters } })),
  });

/** REQUEST as the `openai` client sends it. */
const WIRE_BODY = wireBody(REQUEST.system, REQUEST.messages);

/**
 * node:http's keep-alive pool: as troupe's (boundedFetch.ts), every connection kept. Node's default
 * keeps 256 idle, and each round past 256 calls reconnected the rest: CPU the baseline paid and
 * troupe did not (the ratios read low).
 */
const POOL = { keepAlive: true, maxFreeSockets: Number.POSITIVE_INFINITY, scheduling: 'lifo' } as const;

let server: ServerProcess;
/** The steady figure's server (STEADY's latencies). */
let slow: ServerProcess;
/** µs of CPU per call, by client and calls in flight, one figure per round. */
const samples = new Map<string, number[]>();

/** CPU µs per call of `n` calls of `call` started at once. */
async function cpuPerCall(n: number, call: () => Promise<unknown>): Promise<number> {
  const start = process.cpuUsage();
  await Promise.all(Array.from({ length: n }, call));
  const used = process.cpuUsage(start);
  return (used.user + used.system) / n;
}

function record(label: string, n: number, us: number, pattern = 'at once'): void {
  const key = `${label} @${n}${pattern === 'at once' ? '' : ` ${pattern}`}`;
  if (!samples.has(key)) samples.set(key, []);
  samples.get(key)!.push(us);
}

function nodeHttpCall(agent: Agent, url: URL, body = WIRE_BODY): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      url,
      { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve(JSON.parse(Buffer.concat(chunks).toString('utf8'))));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const CLIENTS = ['openaiModel.complete', 'fetch', 'node:http'] as const;

/** The calls of each client, as the rounds make them. */
function callsOf(n: number, agent: Agent): Record<(typeof CLIENTS)[number], () => Promise<unknown>> {
  const model = openaiModel({ model: 'fake-model', baseURL: server.url, apiKey: '' });
  const url = `${server.url}/chat/completions`;
  return {
    'openaiModel.complete': () => model.complete(REQUEST, { signal: new AbortController().signal }),
    fetch: async () => {
      const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: WIRE_BODY });
      return res.json();
    },
    'node:http': () => nodeHttpCall(agent, new URL(url)),
  };
}

/** Bytes allocated per call of `n` calls of `call` started at once (collected ones included). */
async function bytesPerCall(session: Session, n: number, call: () => Promise<unknown>): Promise<number> {
  await session.post('HeapProfiler.startSampling', { samplingInterval: 4096, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
  await Promise.all(Array.from({ length: n }, call));
  const { profile } = await session.post('HeapProfiler.stopSampling');
  type Node = { selfSize: number; children: Node[] };
  const sum = (node: Node): number => node.children.reduce((total, child) => total + sum(child), node.selfSize);
  return sum(profile.head as Node) / n;
}

beforeAll(async () => {
  server = await startServerProcess(SERVER_DELAY_MS);
  slow = await startServerProcess(STEADY.minMs, STEADY.maxMs);
});

type Turn = (agent: number, turn: number, messages: SessionItem[]) => Promise<readonly { id: string; name: string }[]>;

/** The steady clients: one call of an agent's turn, returning the tool calls answered. */
function steadyClients(agent: Agent): Record<'openaiModel.complete' | 'node:http', Turn> {
  const model = openaiModel({ model: 'fake-model', baseURL: slow.url, apiKey: '' });
  const url = new URL(`${slow.url}/chat/completions`);
  // The server names the caller by its system prompt (fakeServerChild.ts keyOf).
  const system = (i: number) => `You are agent w${i} (a worker of the steady figure).`;
  return {
    'openaiModel.complete': async (i, turn, messages) => {
      const answer = await model.complete(
        { agent: { id: `a${i}`, name: `w${i}`, parentId: 'root', depth: 1 }, system: system(i), messages, tools: REQUEST.tools, turn },
        { signal: new AbortController().signal },
      );
      return answer.toolCalls;
    },
    'node:http': async (i, _turn, messages) => {
      const res = (await nodeHttpCall(agent, url, wireBody(system(i), messages))) as {
        choices: { message: { tool_calls?: { id: string; function: { name: string } }[] } }[];
      };
      return (res.choices[0]?.message.tool_calls ?? []).map((c) => ({ id: c.id, name: c.function.name }));
    },
  };
}

/** CPU µs per call of STEADY's agents making their calls in turn through `turn`. */
async function steadyCpuPerCall(turn: Turn): Promise<number> {
  const start = process.cpuUsage();
  let calls = 0;
  await Promise.all(
    Array.from({ length: STEADY.agents }, async (_, i) => {
      const messages: SessionItem[] = [{ role: 'user', content: `work:${STEADY.calls}` }];
      for (let t = 0; t < STEADY.calls; t++) {
        const toolCalls = await turn(i, t, messages);
        calls++;
        messages.push({ role: 'assistant', content: null, toolCalls: toolCalls.map((c) => ({ id: c.id, name: c.name, arguments: '{}' })) });
        for (const c of toolCalls) messages.push({ role: 'tool', toolCallId: c.id, name: c.name, content: 'r'.repeat(200) });
      }
    }),
  );
  const used = process.cpuUsage(start);
  return (used.user + used.system) / calls;
}

// This machine is shared and noisy: each round runs the three clients one after the other, and the
// finding is the median of each round's ratio to node:http.
describe('one model call, CPU per call with many in flight', () => {
  for (const n of IN_FLIGHT) {
    const agent = new Agent(POOL);
    bench(
      `${n} in flight: openaiModel.complete, plain fetch, node:http in turn`,
      async () => {
        const calls = callsOf(n, agent);
        for (const label of CLIENTS) record(label, n, await cpuPerCall(n, calls[label]));
      },
      runs(ROUNDS, 1),
    );
  }
});

describe('one model call, CPU per call, steady: answers one at a time', () => {
  const agent = new Agent(POOL);
  bench(
    `${STEADY.agents} agents × ${STEADY.calls} calls in turn: openaiModel.complete, node:http in turn`,
    async () => {
      const clients = steadyClients(agent);
      for (const label of ['openaiModel.complete', 'node:http'] as const) record(label, STEADY.agents, await steadyCpuPerCall(clients[label]), 'steady');
    },
    runs(STEADY.rounds, 1),
  );
});

afterAll(async () => {
  const session = new Session();
  session.connect();
  await session.post('HeapProfiler.enable');
  const allocated = new Map<string, number>();
  for (const n of IN_FLIGHT) {
    const calls = callsOf(n, new Agent(POOL));
    // Warmed first: the pool's connections and the clients' first-call work are not a call's cost.
    for (const label of CLIENTS) await Promise.all(Array.from({ length: n }, calls[label]));
    for (const label of CLIENTS) allocated.set(`${label} @${n}`, await bytesPerCall(session, n, calls[label]));
  }
  session.disconnect();
  await server?.close();
  await slow?.close();
  const lines = [''];
  for (const n of IN_FLIGHT) {
    const base = samples.get(`node:http @${n}`) ?? [];
    const baseBytes = allocated.get(`node:http @${n}`)!;
    for (const label of CLIENTS) {
      const us = samples.get(`${label} @${n}`) ?? [];
      const ratios = us.map((x, i) => x / base[i]!);
      const bytes = allocated.get(`${label} @${n}`)!;
      lines.push(
        `${n} in flight: ${label.padEnd(21)} median ${median(us).toFixed(0).padStart(5)} µs CPU/call, ${median(ratios).toFixed(2)}× node:http (median of rounds' ratios); ${(bytes / 1024).toFixed(1).padStart(5)} KB allocated/call, ${(bytes / baseBytes).toFixed(2)}× node:http`,
      );
    }
  }
  const steadyBase = samples.get(`node:http @${STEADY.agents} steady`) ?? [];
  for (const label of ['openaiModel.complete', 'node:http'] as const) {
    const us = samples.get(`${label} @${STEADY.agents} steady`) ?? [];
    if (us.length === 0) continue;
    lines.push(
      `steady, ${STEADY.agents} agents × ${STEADY.calls} calls in turn: ${label.padEnd(21)} median ${median(us).toFixed(0).padStart(5)} µs CPU/call, ${median(us.map((x, i) => x / steadyBase[i]!)).toFixed(2)}× node:http (median of rounds' ratios)`,
    );
  }
  process.stderr.write(`${lines.join('\n')}\n`);
});
