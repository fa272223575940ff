/**
 * `--otel`: the built CLI exports its GenAI spans over OTLP/HTTP to a receiver started here on
 * 127.0.0.1 (OTEL_EXPORTER_OTLP_ENDPOINT), with no message content and no key; a demo killed with
 * SIGKILL and resumed produces resumed stints whose links point at the spans the killed process
 * persisted; `troupe serve --otel` exports the runs it hosts when it is stopped.
 */
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/sqliteStore.js';
import { createFakeOpenAIServer, type FakeRequest } from '../../src/testing/fakeOpenAIServer.js';
import { spawnTroupe, troupe, workdir } from '../helpers/cli.js';

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
}
interface OtlpSpan {
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  startTimeUnixNano: string;
  attributes: { key: string; value: OtlpValue }[];
  links?: { traceId: string; spanId: string }[];
  events?: { name: string }[];
}
interface OtlpTraces {
  resourceSpans: { resource: { attributes: { key: string; value: OtlpValue }[] }; scopeSpans: { spans: OtlpSpan[] }[] }[];
}

/** A minimal OTLP/HTTP (JSON) receiver: what arrived at /v1/traces and /v1/metrics, raw and parsed. */
async function otlpReceiver() {
  const bodies: { path: string; raw: string }[] = [];
  const read = (req: IncomingMessage) =>
    new Promise<string>((resolve) => {
      let raw = '';
      req.setEncoding('utf8').on('data', (c: string) => (raw += c));
      req.on('end', () => resolve(raw));
    });
  const server = createServer((req, res) => {
    void read(req).then((raw) => {
      bodies.push({ path: req.url ?? '', raw });
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const spans = (from = 0): OtlpSpan[] =>
    bodies
      .slice(from)
      .filter((b) => b.path === '/v1/traces')
      .flatMap((b) => (JSON.parse(b.raw) as OtlpTraces).resourceSpans.flatMap((r) => r.scopeSpans.flatMap((s) => s.spans)));
  return {
    url,
    bodies,
    spans,
    [Symbol.asyncDispose]: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const attr = (span: OtlpSpan, key: string) => {
  const v = span.attributes.find((a) => a.key === key)?.value;
  return v?.stringValue ?? (v?.intValue !== undefined ? Number(v.intValue) : v?.doubleValue);
};

describe('troupe --otel', () => {
  it('run --otel with no collector listening: one warning line naming the endpoint, and the run ends as without --otel', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const endpoint = `http://127.0.0.1:${(closed.address() as AddressInfo).port}`;
    await new Promise((resolve) => closed.close(resolve));
    await using server = await createFakeOpenAIServer([{ message: { toolCalls: [{ name: 'finish', arguments: { summary: 'done' } }] } }]);
    const r = await troupe(['run', 'a task', '--model', 'any-model', '--base-url', server.url, '--otel', '--json'], workdir(), {
      OPENAI_API_KEY: 'sk-otel-test-secret',
      OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
    });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr.split('\n').filter((line) => line.includes('--otel'))).toEqual([
      `troupe: --otel: no OpenTelemetry collector answers at ${endpoint}/v1/traces (ECONNREFUSED); this run's spans and metrics are dropped`,
    ]);
  });

  it('run --otel: the spans arrive at the OTLP/HTTP endpoint, with no message content and no key', async () => {
    await using receiver = await otlpReceiver();
    await using server = await createFakeOpenAIServer([
      { message: { toolCalls: [{ name: 'view_agent_graph', arguments: {} }] }, usage: { promptTokens: 120, completionTokens: 7 } },
      { message: { toolCalls: [{ name: 'finish', arguments: { summary: 'SECRET-REPORT-TEXT' } }] } },
    ]);
    const r = await troupe(['run', 'SECRET-TASK-TEXT', '--model', 'any-model', '--base-url', server.url, '--otel', '--json'], workdir(), {
      OPENAI_API_KEY: 'sk-otel-test-secret',
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).not.toContain('--otel:');
    const spans = receiver.spans();
    expect(spans.map((s) => s.name).sort()).toEqual([
      'chat any-model',
      'chat any-model',
      'execute_tool finish',
      'execute_tool view_agent_graph',
      'invoke_agent lead',
    ]);
    const lead = spans.find((s) => s.name === 'invoke_agent lead')!;
    expect(attr(lead, 'troupe.status')).toBe('completed');
    for (const s of spans.filter((x) => x.name !== 'invoke_agent lead')) expect(s.parentSpanId).toBe(lead.spanId);
    const chat = spans.find((s) => s.name === 'chat any-model' && attr(s, 'gen_ai.usage.input_tokens') === 120)!;
    expect(attr(chat, 'gen_ai.usage.output_tokens')).toBe(7);
    expect(attr(chat, 'gen_ai.request.model')).toBe('any-model');
    // The resource names the service; metrics went to /v1/metrics.
    expect(receiver.bodies.some((b) => b.path === '/v1/metrics' && b.raw.includes('gen_ai.client.token.usage'))).toBe(true);
    const all = receiver.bodies.map((b) => b.raw).join('\n');
    expect(all).toContain('"troupe"');
    for (const secret of ['SECRET-TASK-TEXT', 'SECRET-REPORT-TEXT', 'sk-otel-test-secret', 'gen_ai.input.messages', 'gen_ai.output.messages'])
      expect(all).not.toContain(secret);
  });

  it('demo killed with SIGKILL, resumed with --otel: each resumed stint links to the span the killed process persisted', async () => {
    await using receiver = await otlpReceiver();
    const cwd = workdir();
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url };
    const killed = await troupe(['demo', '--otel', '--kill-after', '4'], cwd, env);
    expect(killed.signal).toBe('SIGKILL');
    const store = openStore({ path: join(cwd, '.troupe/demo.db'), readonly: true });
    let before: Map<string, string>;
    try {
      const run = store.listRuns().at(-1)!;
      // agent id → the span id of its last stint, as the killed process persisted it.
      before = new Map(store.eventsOf(run.id, 'trace.stint').map((e) => [e.agentId!, (e.data as { spanId: string }).spanId]));
    } finally {
      store.close();
    }
    expect(before.size).toBeGreaterThan(1);

    const arrivedBefore = receiver.bodies.length;
    const resumed = await troupe(['resume', '--json'], cwd, env); // --otel was saved with the run
    expect(resumed.code, resumed.stderr).toBe(0);
    const after = receiver.spans(arrivedBefore).filter((s) => s.name.startsWith('invoke_agent '));
    // The first stint of each agent after the restart links to that agent's last stint before it.
    const firstAfter = new Map<string, OtlpSpan>();
    for (const s of [...after].sort((a, b) => Number(BigInt(a.startTimeUnixNano) - BigInt(b.startTimeUnixNano)))) {
      const agentId = attr(s, 'gen_ai.agent.id') as string;
      if (!firstAfter.has(agentId)) firstAfter.set(agentId, s);
    }
    const leadId = [...firstAfter.entries()].find(([, s]) => s.name === 'invoke_agent lead')?.[0];
    expect(leadId).toBeDefined();
    let linked = 0;
    for (const [agentId, s] of firstAfter) {
      if (!before.has(agentId)) continue;
      expect(
        s.links?.map((l) => l.spanId),
        s.name,
      ).toEqual([before.get(agentId)]);
      linked++;
    }
    expect(linked).toBeGreaterThan(0);
    expect(before.has(leadId!)).toBe(true);
  });

  it('serve --otel: a served run gets a message; its spans are exported when serve stops (SIGTERM), not before', async () => {
    await using receiver = await otlpReceiver();
    // Every call answers the user with the gist of the last user message it read.
    const noted = (request: FakeRequest) => {
      const text = JSON.stringify((request.body as { messages?: unknown[] }).messages?.at(-1) ?? '');
      const gist = /SECRET-HELLO|SECRET-STANDBY/.test(text) ? (text.includes('SECRET-HELLO') ? 'hello' : 'standby') : 'something';
      return { message: { toolCalls: [{ name: 'respond_to_user', arguments: { message: `Noted: ${gist}.` } }] } };
    };
    await using server = await createFakeOpenAIServer(noted);
    const cwd = workdir();
    const s = spawnTroupe(['serve', 'SECRET-STANDBY', '--model', 'any-model', '--base-url', server.url, '--otel'], cwd, {
      OPENAI_API_KEY: 'sk-serve-otel-secret',
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      // The batch processor's timer never fires during the test: what arrives, the stop flushed.
      OTEL_BSP_SCHEDULE_DELAY: '600000',
    });
    try {
      await s.line(/^ready +serving .*main run run_/);
      await s.line(/^\[main\] lead +says: Noted: standby\./);
      const sent = await troupe(['send', 'lead', 'SECRET-HELLO from another shell'], cwd);
      expect(sent.code, sent.stderr).toBe(0);
      await s.line(/^\[main\] lead +says: Noted: hello\./);
      expect(receiver.spans()).toEqual([]);
      s.child.kill('SIGTERM');
      expect(await s.exited).toEqual({ code: 0, signal: null });
    } finally {
      if (s.child.exitCode === null && s.child.signalCode === null) s.child.kill('SIGKILL');
    }
    const spans = receiver.spans();
    const stints = spans.filter((x) => x.name === 'invoke_agent lead').sort((a, b) => Number(BigInt(a.startTimeUnixNano) - BigInt(b.startTimeUnixNano)));
    // Two stints: the task, then the message; each ends waiting on the user. The second links to the first.
    expect(stints.map((x) => attr(x, 'troupe.status'))).toEqual(['waiting', 'waiting']);
    expect(stints[1]!.links?.map((l) => l.spanId)).toEqual([stints[0]!.spanId]);
    expect(spans.filter((x) => x.name === 'chat any-model')).toHaveLength(2);
    expect(
      spans
        .filter((x) => x.name === 'execute_tool respond_to_user')
        .map((x) => x.parentSpanId)
        .sort(),
    ).toEqual(stints.map((x) => x.spanId).sort());
    expect(receiver.bodies.some((b) => b.path === '/v1/metrics' && b.raw.includes('gen_ai.client.token.usage'))).toBe(true);
    const all = receiver.bodies.map((b) => b.raw).join('\n');
    for (const secret of ['SECRET-STANDBY', 'SECRET-HELLO', 'Noted:', 'sk-serve-otel-secret']) expect(all).not.toContain(secret);
  });
});
