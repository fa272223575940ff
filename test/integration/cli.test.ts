/**
 * The built `troupe` CLI as a subprocess, in a fresh working directory each time: the offline
 * demo end to end, a demo killed mid-run and resumed, `troupe run` against the fake server, and
 * the commands that read or change a run that is not live.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/sqliteStore.js';
import { createFakeOpenAIServer } from '../../src/testing/fakeOpenAIServer.js';
import { jsonLines, troupe, workdir } from '../helpers/cli.js';

interface Node {
  name: string;
  status: string;
  children: Node[];
}
const statuses = (tree: Node[]): Record<string, string> => {
  const out: Record<string, string> = {};
  const walk = (nodes: Node[]) => nodes.forEach((n) => ((out[n.name] = n.status), walk(n.children)));
  walk(tree);
  return out;
};

describe('troupe demo', () => {
  it('--json: the whole story over SQLite and the real openai client; the report and the final tree', async () => {
    const cwd = workdir();
    const r = await troupe(['demo', '--json'], cwd);
    expect(r.code, r.stderr).toBe(0);
    const events = jsonLines(r.stdout);
    const finished = events.at(-1) as {
      type: string;
      status: string;
      report: { summary: string };
      budget: { reserveStopped: boolean; spentUsd: number; limitUsd: number };
      tree: Node[];
    };
    expect(finished.type).toBe('run.finished');
    expect(finished.status).toBe('completed');
    expect(finished.report.summary).toContain('Review done');
    expect(statuses(finished.tree)).toEqual({ lead: 'completed', scout: 'completed', flaky: 'completed', talker: 'stopped', prober: 'failed' });
    expect(finished.budget.reserveStopped).toBe(true);
    expect(finished.budget.spentUsd).toBeLessThanOrEqual(finished.budget.limitUsd);
    // The story: talker stalled before the reserve stopped it; streamed text reached the events.
    const talkerStatuses = events.filter((e) => e.type === 'agent.status' && e.name === 'talker').map((e) => e.to);
    expect(talkerStatuses).toEqual(['running', 'stalled', 'stopped']);
    expect(events.some((e) => e.type === 'agent.delta')).toBe(true);
    // A real database file and a log file, without the key.
    expect(existsSync(join(cwd, '.troupe/demo.db'))).toBe(true);
    const log = readFileSync(join(cwd, '.troupe/troupe.log'), 'utf8');
    expect(log).toContain('transient model error; retrying');
    expect(log).not.toContain('demo-key');

    const status = await troupe(['status', '--json'], cwd);
    expect(status.code).toBe(0);
    expect(JSON.parse(status.stdout)).toMatchObject({ root: { name: 'lead', status: 'completed' }, agents: { completed: 3, stopped: 1, failed: 1 } });
    const tree = await troupe(['tree'], cwd);
    expect(tree.stdout).toMatch(/✓ lead \(\w+\) {2}completed/);
  });

  it('a demo killed mid-run: status shows it, resume finishes it', async () => {
    const cwd = workdir();
    const killed = await troupe(['demo', '--kill-after', '4'], cwd);
    expect(killed.signal).toBe('SIGKILL');
    expect(killed.stderr).toMatch(
      /troupe: --kill-after 4: killing this process \(SIGKILL\) after \d+ turns, as a crash would\. Carry on with: troupe resume\n$/,
    );
    const status = JSON.parse((await troupe(['status', '--json'], cwd)).stdout) as { root: { status: string }; report: unknown };
    expect(status.root.status).not.toBe('completed');
    expect(status.report).toBeNull();

    const resumed = await troupe(['resume', '--json'], cwd);
    expect(resumed.code, resumed.stderr).toBe(0);
    const finished = jsonLines(resumed.stdout).at(-1) as { status: string; tree: Node[]; report: { summary: string } };
    expect(finished.status).toBe('completed');
    expect(finished.report.summary).toContain('Review done');
    const after = statuses(finished.tree);
    expect(after.lead).toBe('completed');
    expect(after.prober).toBe('failed');
    expect(Object.values(after).every((s) => ['completed', 'stopped', 'failed'].includes(s))).toBe(true);
  });
});

describe('troupe run', () => {
  it('without a model: exits 2 and says how to configure one or to use the demo', async () => {
    const r = await troupe(['run', 'Review this repository'], workdir());
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--model');
    expect(r.stderr).toContain('troupe demo');
  });

  it('against an OpenAI-compatible server (--base-url): the root finishes, the run is in the database', async () => {
    await using server = await createFakeOpenAIServer([
      { message: { toolCalls: [{ name: 'view_agent_graph', arguments: {} }] } },
      { message: { toolCalls: [{ name: 'finish', arguments: { summary: 'all done' } }] } },
    ]);
    const cwd = workdir();
    const r = await troupe(['run', 'Say hello', '--model', 'any-model', '--base-url', server.url, '--json'], cwd, { OPENAI_API_KEY: 'sk-cli-test-secret' });
    expect(r.code, r.stderr).toBe(0);
    expect(jsonLines(r.stdout).at(-1)).toMatchObject({ type: 'run.finished', status: 'completed', report: { summary: 'all done' } });
    expect(server.requests[0]!.headers.authorization).toBe('Bearer sk-cli-test-secret');
    expect(existsSync(join(cwd, '.troupe/troupe.db'))).toBe(true);
    expect(readFileSync(join(cwd, '.troupe/troupe.log'), 'utf8')).not.toContain('sk-cli-test-secret');
  });

  it('config "review": a background reviewer forks after productive turns and its note is in the database', async () => {
    await using server = await createFakeOpenAIServer((request) => {
      const body = request.body as { messages: { role: string; content: string }[] };
      if (body.messages[0]!.content.includes('background reviewer')) {
        return {
          message: {
            toolCalls: [{ name: 'propose_note', arguments: { title: 'Check the graph first', content: 'Look at the agent graph before finishing.' } }],
          },
        };
      }
      const turns = body.messages.filter((m) => m.role === 'assistant').length;
      return turns === 0
        ? { message: { toolCalls: [{ name: 'view_agent_graph', arguments: {} }] } }
        : { message: { toolCalls: [{ name: 'finish', arguments: { summary: 'all done' } }] } };
    });
    const cwd = workdir();
    writeFileSync(join(cwd, 'troupe.config.json'), JSON.stringify({ model: 'm', baseURL: server.url, apiKey: 'k', review: { everyTurns: 2, maxSteps: 1 } }));
    const r = await troupe(['run', 'Say hello', '--json'], cwd);
    expect(r.code, r.stderr).toBe(0);
    const store = openStore({ path: join(cwd, '.troupe/troupe.db'), readonly: true });
    try {
      const run = store.listRuns().at(-1)!;
      expect(
        store
          .listEvents(run.id)
          .filter((e) => e.type === 'review.note')
          .map((e) => e.data.title),
      ).toEqual(['Check the graph first']);
      expect(store.listUsage(run.id).map((u) => u.purpose)).toEqual(['main', 'main', 'review']);
    } finally {
      store.close();
    }

    writeFileSync(join(cwd, 'troupe.config.json'), JSON.stringify({ model: 'm', baseURL: server.url, review: { everyTurns: 0 } }));
    const bad = await troupe(['run', 'x'], cwd);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('review.everyTurns');
  });

  it('a provider that refuses the key: the run ends failed, exit 6 (PROVIDER_*), the status said once', async () => {
    await using server = await createFakeOpenAIServer([
      { status: 401, body: { error: { message: 'Incorrect API key provided', type: 'invalid_request_error', code: 'invalid_api_key' } } },
    ]);
    const cwd = workdir();
    const r = await troupe(['run', 'x', '--model', 'm', '--base-url', server.url, '--api-key', 'bad', '--json'], cwd);
    expect(r.code).toBe(6);
    expect(jsonLines(r.stdout).at(-1)).toMatchObject({ status: 'failed', error: { code: 'PROVIDER_AUTH', message: 'HTTP 401: Incorrect API key provided' } });
    // The root has no parent to tell: the run says it, typed, to whoever asks.
    const json = JSON.parse((await troupe(['status', '--json'], cwd)).stdout) as { root: unknown };
    expect(json.root).toMatchObject({ name: 'lead', status: 'failed', error: { code: 'PROVIDER_AUTH', message: 'HTTP 401: Incorrect API key provided' } });
    expect((await troupe(['status'], cwd)).stdout).toMatch(/^outcome +failed: PROVIDER_AUTH: HTTP 401: Incorrect API key provided$/m);
  });
});

describe('commands on a live run', () => {
  it('send reaches the process that owns the run through its inbox, and the agent acts on it', async () => {
    let firstCall!: () => void;
    const called = new Promise<void>((resolve) => (firstCall = resolve));
    await using server = await createFakeOpenAIServer((request) => {
      if (request.index === 0) {
        firstCall();
        return { message: { toolCalls: [{ name: 'respond_to_user', arguments: { message: 'Ready when you are.' } }] } };
      }
      return { message: { toolCalls: [{ name: 'finish', arguments: { summary: 'answered the user' } }] } };
    });
    const cwd = workdir();
    const running = troupe(['run', 'Wait for the user', '--model', 'm', '--base-url', server.url, '--api-key', 'k', '--interactive', '--json'], cwd);
    await called;
    const sent = await troupe(['send', 'lead', 'hello from another terminal'], cwd);
    expect(sent.code, sent.stderr).toBe(0);
    expect(sent.stdout).toMatch(/^delivered to lead/);
    const r = await running;
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.stringify(server.requests[1]!.body)).toContain('hello from another terminal');
  });
});

describe('commands on a run that is not live', () => {
  it('send queues a message for the next resume; stop stops an agent through the coordinator', async () => {
    const cwd = workdir();
    await troupe(['demo', '--kill-after', '4'], cwd);
    const sent = await troupe(['send', 'lead', 'Please also check the licence.'], cwd);
    expect(sent.code, sent.stderr).toBe(0);
    expect(JSON.parse((await troupe(['status', '--json'], cwd)).stdout)).toMatchObject({ pendingMessages: 1 });
    const stopped = await troupe(['stop', 'talker'], cwd);
    expect(stopped.code, stopped.stderr).toBe(0);
    expect(stopped.stdout).toContain('talker');
    const tree = JSON.parse((await troupe(['tree', '--json'], cwd)).stdout) as { tree: Node[] };
    expect(statuses(tree.tree).talker).toBe('stopped');
    expect((await troupe(['send', 'nobody', 'hi'], cwd)).code).toBe(4);
  });

  it('usage errors exit 2; a missing database exits 4', async () => {
    const cwd = workdir();
    expect((await troupe(['fly'], cwd)).code).toBe(2);
    expect((await troupe(['status', '--bogus'], cwd)).code).toBe(2);
    expect((await troupe(['status'], cwd)).code).toBe(4);
  });
});
