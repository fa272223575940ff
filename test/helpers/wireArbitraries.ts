/**
 * fast-check arbitraries for what a broken or hostile Chat Completions server sends: a plausible
 * answer (text, tool calls, usage) as a JSON completion or an SSE stream, then mutated — values
 * replaced by wrong types, hostile numbers and megabyte strings, keys deleted, tool-call indices
 * duplicated or out of range, chunks dropped or repeated — and finally damaged as bytes (cut short,
 * garbage inserted) and split for the wire at arbitrary byte offsets, every byte for small bodies.
 */
import { fc } from '@fast-check/vitest';
import type { FakeReply } from '../../src/testing/fakeOpenAIServer.js';
import { chunk, usageChunk } from './wire.js';

/** A number literal written into the JSON text as is (`1e400` parses as Infinity, `-0` as -0). */
const LITERAL = '\u0000num:';
const literal = (text: string) => `${LITERAL}${text}`;

const MEGABYTE = 1 << 20;
/** Rare but real: strings of about a megabyte, plain, multi-byte, or full of escape sequences. */
const megabyteString = fc
  .constantFrom('x', 'é', '\u001b[2J\u001b]0;owned\u0007', '\\"', '\u{1F600}')
  .map((unit) => unit.repeat(Math.ceil(MEGABYTE / unit.length)));

const hostileNumber: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(-1, 0, 1, 127, 128, 2 ** 31, 2 ** 32, 2 ** 53, 1e7, 1e8, 1e9, 1e9 + 1, 1e300, -1e9, -1e300, 0.5, Number.MAX_VALUE, Number.MIN_VALUE),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.constantFrom('1e400', '-1e400', '-0', '1E9', '0.0000001').map(literal),
);

/** Any value of a wrong (or right) type where the server should have put something else. */
const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  { arbitrary: hostileNumber, weight: 4 },
  { arbitrary: fc.string({ maxLength: 12 }), weight: 3 },
  { arbitrary: fc.constantFrom(null, true, false, '', [], {}), weight: 3 },
  { arbitrary: fc.jsonValue({ maxDepth: 2 }), weight: 2 },
  { arbitrary: megabyteString, weight: 1 },
);

/** A tool-call index a server could send: in range, duplicated, negative, huge, or not a number. */
const hostileIndex: fc.Arbitrary<unknown> = fc.oneof(
  fc.integer({ min: 0, max: 3 }),
  fc.constantFrom(-1, 127, 128, 2 ** 32, 2 ** 53, 1e7, 1e8, 1e9, 0.5, '0', null),
  fc.integer(),
);

/** Wire usage: usually believable (sometimes up to the 10^9 bound), sometimes garbage or absent. */
const wireUsageArb: fc.Arbitrary<unknown> = fc.oneof(
  fc.record({ prompt_tokens: fc.nat(5_000), completion_tokens: fc.nat(500), prompt_tokens_details: fc.record({ cached_tokens: fc.constant(0) }) }),
  fc.record({ prompt_tokens: fc.constantFrom(0, 1e9), completion_tokens: fc.constantFrom(0, 1e6), prompt_tokens_details: fc.constant(null) }),
  fc.record({
    prompt_tokens: hostileValue,
    completion_tokens: hostileValue,
    prompt_tokens_details: fc.oneof(fc.record({ cached_tokens: hostileValue }), hostileValue),
  }),
  fc.constantFrom(null, undefined),
  hostileValue,
);

/** Tools an agent may call in the fuzz (waits only by the root, whose children always end). */
const toolCallArb = (root: boolean) =>
  fc.oneof(
    fc.constant({ name: 'view_agent_graph', arguments: '{}' }),
    fc.constant(root ? { name: 'finish', arguments: '{"summary":"done"}' } : { name: 'agent_finish', arguments: '{"summary":"done"}' }),
    ...(root ? [fc.constant({ name: 'wait_for_agents', arguments: '{"reason":"children"}' })] : []),
    fc.record({ name: fc.oneof(fc.string({ maxLength: 8 }), megabyteString), arguments: fc.oneof(fc.string({ maxLength: 20 }), megabyteString) }),
  );

/** What the answer means before it is damaged. */
const intentArb = (root: boolean) =>
  fc.record({
    content: fc.option(fc.oneof({ arbitrary: fc.string({ maxLength: 40 }), weight: 5 }, { arbitrary: megabyteString, weight: 1 }), { nil: null }),
    refusal: fc.oneof({ arbitrary: fc.constant(null), weight: 9 }, { arbitrary: fc.string({ minLength: 1, maxLength: 20 }), weight: 1 }),
    calls: fc.array(toolCallArb(root), { maxLength: 3 }),
    finish: fc.constantFrom('stop', 'tool_calls', 'length', 'content_filter'),
    usage: wireUsageArb,
  });
type Intent = ReturnType<typeof intentArb> extends fc.Arbitrary<infer T> ? T : never;

/** One change to the answer's JSON tree, at the `pick`-th node (modulo the number of nodes). */
const mutationArb = fc.record({
  pick: fc.nat(),
  op: fc.constantFrom('replace', 'replace', 'delete', 'duplicate', 'index'),
  value: hostileValue,
  index: hostileIndex,
});
type Mutation = typeof mutationArb extends fc.Arbitrary<infer T> ? T : never;

/** Every container slot of a JSON tree, as [parent, key]. */
function slots(tree: unknown): [Record<string, unknown> | unknown[], string | number][] {
  const out: [Record<string, unknown> | unknown[], string | number][] = [];
  const visit = (node: unknown) => {
    if (Array.isArray(node)) {
      node.forEach((v, i) => {
        out.push([node, i]);
        visit(v);
      });
    } else if (typeof node === 'object' && node !== null) {
      for (const [k, v] of Object.entries(node)) {
        out.push([node as Record<string, unknown>, k]);
        visit(v);
      }
    }
  };
  visit(tree);
  return out;
}

function mutate(tree: unknown, m: Mutation): void {
  if (m.op === 'index') {
    const parts = slots(tree).filter(([parent, key]) => key === 'index' && !Array.isArray(parent) && 'function' in parent);
    const target = parts[m.pick % Math.max(1, parts.length)];
    if (target) (target[0] as Record<string, unknown>).index = m.index;
    return;
  }
  const all = slots(tree);
  if (all.length === 0) return;
  const [parent, key] = all[m.pick % all.length]!;
  if (Array.isArray(parent)) {
    const i = key as number;
    if (m.op === 'delete') parent.splice(i, 1);
    else if (m.op === 'duplicate') parent.splice(i, 0, structuredClone(parent[i]));
    else parent[i] = m.value;
  } else if (m.op === 'delete') delete parent[key as string];
  else parent[key as string] = m.value;
}

/** JSON text with the number literals put in place. */
const serialize = (value: unknown): string => JSON.stringify(value).replace(/"\\u0000num:([^"]*)"/g, (_m, text: string) => text);

const wireCalls = (calls: Intent['calls']) => calls.map((c, i) => ({ id: `call_${i}`, type: 'function', function: c }));

function completionTree(intent: Intent): Record<string, unknown> {
  return {
    id: 'chatcmpl-fuzz',
    object: 'chat.completion',
    created: 1,
    model: 'fake-model',
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: intent.content,
          refusal: intent.refusal,
          ...(intent.calls.length > 0 ? { tool_calls: wireCalls(intent.calls) } : {}),
        },
        finish_reason: intent.finish,
      },
    ],
    ...(intent.usage === undefined ? {} : { usage: intent.usage }),
  };
}

function chunkTrees(intent: Intent): unknown[] {
  const out: unknown[] = [chunk({ role: 'assistant', content: '' })];
  if (intent.content !== null) for (const piece of intent.content.match(/[\s\S]{1,65536}/g) ?? []) out.push(chunk({ content: piece }));
  if (intent.refusal !== null) out.push(chunk({ refusal: intent.refusal }));
  intent.calls.forEach((c, index) => {
    out.push(chunk({ tool_calls: [{ index, id: `call_${index}`, type: 'function', function: { name: c.name, arguments: '' } }] }));
    const half = Math.ceil(c.arguments.length / 2);
    out.push(chunk({ tool_calls: [{ index, function: { arguments: c.arguments.slice(0, half) } }] }));
    out.push(chunk({ tool_calls: [{ index, function: { arguments: c.arguments.slice(half) } }] }));
  });
  out.push(chunk({}, intent.finish));
  if (intent.usage !== undefined) out.push(usageChunk(intent.usage));
  return out;
}

/** Damage done to the bytes after serialisation. */
const byteDamageArb = fc.oneof(
  { arbitrary: fc.constant({ kind: 'none' as const }), weight: 12 },
  { arbitrary: fc.record({ kind: fc.constant('truncate' as const), at: fc.nat() }), weight: 1 },
  {
    arbitrary: fc.record({
      kind: fc.constant('insert' as const),
      at: fc.nat(),
      text: fc.constantFrom('\u0000', '\n', '\r\n', '"', '}', 'data: ', '\n\ndata: {', '\uFFFF', '\\u0'),
    }),
    weight: 1,
  },
  { arbitrary: fc.record({ kind: fc.constant('crlf' as const) }), weight: 1 },
  { arbitrary: fc.record({ kind: fc.constant('noDone' as const) }), weight: 1 },
);

function damage(text: string, d: typeof byteDamageArb extends fc.Arbitrary<infer T> ? T : never): string {
  switch (d.kind) {
    case 'truncate':
      return text.slice(0, d.at % (text.length + 1));
    case 'insert': {
      const at = d.at % (text.length + 1);
      return text.slice(0, at) + d.text + text.slice(at);
    }
    case 'crlf':
      return text.replace(/\n/g, '\r\n');
    case 'noDone':
      return text.replace('data: [DONE]\n\n', '');
    default:
      return text;
  }
}

/** A generated reply: what the fake server sends, and its body as text (for the test's oracle). */
export interface FuzzReply {
  /** How fast-check prints it in a counterexample: megabyte bodies abbreviated. */
  [fc.toStringMethod]?: () => string;
  reply: FakeReply;
  /** The body as sent (JSON or SSE text); empty for status-only replies and drops. */
  body: string;
  /** Whether it is a stream (SSE) body. */
  sse: boolean;
}

const splitArb = fc.record({ everyByte: fc.boolean(), offsets: fc.array(fc.nat(), { maxLength: 24 }) });

/** Small bodies are split at every byte (when asked); large ones at a few offsets only. */
function splits(bytes: number, s: { everyByte: boolean; offsets: number[] }): number[] {
  if (s.everyByte && bytes <= 4_096) return Array.from({ length: bytes }, (_, i) => i);
  return s.offsets.map((o) => o % Math.max(1, bytes));
}

/** An answer over the wire as the server of a `stream` (or not) request might send it. */
const answerArb = (root: boolean, stream: boolean): fc.Arbitrary<FuzzReply> =>
  fc
    .record({
      intent: intentArb(root),
      // Half the answers are left intact, so that teams get past their first answer.
      mutations: fc.oneof(fc.constant([]), fc.array(mutationArb, { minLength: 1, maxLength: 3 })),
      chunkOps: fc.array(
        fc.record({
          op: fc.constantFrom('drop', 'repeat', 'raw'),
          pick: fc.nat(),
          raw: fc.constantFrom('null', '"x"', '[]', '{', '42', '{"error":{"message":"boom"}}', '{"choices":null}'),
        }),
        { maxLength: 2, size: 'xsmall' },
      ),
      damage: byteDamageArb,
      split: splitArb,
      // One answer in 20 is of the wrong kind: JSON where a stream was asked for, or the reverse.
      wrongKind: fc.integer({ min: 0, max: 19 }).map((n) => n === 0),
    })
    .map((g) => {
      const sse = stream !== g.wrongKind;
      let text: string;
      if (!sse) {
        // A fresh copy: the intent's values may be shared with other generated values.
        const tree = structuredClone(completionTree(g.intent));
        for (const m of g.mutations) mutate(tree, m);
        text = serialize(tree);
      } else {
        const trees = structuredClone(chunkTrees(g.intent));
        for (const m of g.mutations) mutate(trees, m);
        const events = trees.map((t) => serialize(t));
        for (const c of g.chunkOps) {
          const i = c.pick % events.length;
          if (c.op === 'drop') events.splice(i, 1);
          else if (c.op === 'repeat') events.splice(i, 0, events[i]!);
          else events.splice(i, 0, c.raw);
        }
        text = `${events.map((e) => `data: ${e}\n\n`).join('')}data: [DONE]\n\n`;
      }
      text = damage(text, g.damage);
      const bytes = Buffer.byteLength(text);
      const reply: FakeReply = {
        raw: text,
        headers: { 'content-type': sse ? 'text/event-stream' : 'application/json' },
        splitAt: splits(bytes, g.split),
      };
      return withSummary({ reply, body: text, sse });
    });

const abbreviate = (text: string) => (text.length <= 600 ? text : `${text.slice(0, 300)}…(${text.length} chars)…${text.slice(-200)}`);

function withSummary(r: FuzzReply): FuzzReply {
  const { reply } = r;
  const summary = 'raw' in reply ? { ...reply, raw: abbreviate(r.body), splitAt: reply.splitAt?.length ?? 0 } : reply;
  return Object.assign(r, { [fc.toStringMethod]: () => abbreviate(JSON.stringify(summary)) });
}

/** An HTTP-level failure: any status with a hostile body and retry headers, or a dropped socket. */
const failureArb: fc.Arbitrary<FuzzReply> = fc.oneof(
  fc
    .record({
      status: fc.oneof(fc.constantFrom(400, 401, 404, 408, 409, 422, 429, 500, 503), fc.integer({ min: 400, max: 599 })),
      body: fc.oneof(
        fc.jsonValue({ maxDepth: 3 }),
        fc.record({ error: fc.record({ message: fc.oneof(fc.string(), megabyteString, hostileValue), code: hostileValue }) }),
      ),
      retryAfter: fc.option(fc.constantFrom('-1', '1e400', 'NaN', '99999999999', 'Wed, 21 Oct 2015 07:28:00 GMT', ''), { nil: undefined }),
    })
    .map(({ status, body, retryAfter }): FuzzReply =>
      withSummary({
        reply: {
          status,
          body: body ?? null,
          headers: retryAfter === undefined ? {} : ({ 'retry-after': retryAfter, 'retry-after-ms': retryAfter } as Record<string, string>),
        },
        body: '',
        sse: false,
      }),
    ),
  fc.constant(withSummary({ reply: { drop: true as const }, body: '', sse: false })),
);

/** One reply of the fuzz: mostly answers, sometimes HTTP failures. */
export const replyArb = (root: boolean, stream: boolean): fc.Arbitrary<FuzzReply> =>
  fc.oneof({ arbitrary: answerArb(root, stream), weight: 9 }, { arbitrary: failureArb, weight: 1 });
