/**
 * Issue 33's must-show, across real worker processes: a timer one simulated day away costs 0 model
 * calls until its deadline, then exactly one wake — with the worker that hosted the run SIGKILLed
 * in the middle and a second worker process taking the run over once the first one's lease ran
 * out. Both workers run their runs on a simulated clock the test moves in lockstep
 * (test/helpers/drivenClock.ts); leases stay on real time. Model calls are counted at the fake
 * OpenAI server the workers call through the real `openai` client, so the killed worker's calls
 * count too; each worker also says on which simulated time it made each call.
 * The same on one process with two hosts in it: pgSleepUntil.test.ts.
 */
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFakeOpenAIServer, type FakeOpenAIServer, type FakeRequest } from '../../src/testing/fakeOpenAIServer.js';
import { openPostgresStore, type PostgresStore } from '../../src/store/postgres/store.js';
import { submitRun } from '../../src/worker/submit.js';
import { ClockedChild } from '../helpers/drivenClock.js';
import { until } from '../helpers/cli.js';
import { freshSchema, PG_URL, pgAvailable, pgTitle } from '../helpers/pg.js';

const available = await pgAvailable();
const CHILD = fileURLToPath(new URL('../../dist/test/integration/pg/clockedWorkerChild.js', import.meta.url));
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** The lead sleeps a day, then finishes once its timer fired (a pure function of the conversation: any worker continues it). */
function lead(request: FakeRequest) {
  const messages = (request.body as { messages: { role: string; content: unknown }[] }).messages;
  const woke = messages.some((m) => m.role === 'tool' && String(m.content).includes('timer_fired'));
  return {
    message: {
      toolCalls: [
        woke
          ? { name: 'finish', arguments: { summary: 'looked again' } }
          : { name: 'sleep_until', arguments: { seconds: 86_400, reason: 'look again tomorrow' } },
      ],
    },
  };
}

describe.skipIf(!available)(pgTitle(available, 'a durable timer across a worker process SIGKILLed mid-wait'), () => {
  const { schema, drop } = freshSchema();
  let store: PostgresStore;
  let server: FakeOpenAIServer;
  const children: ClockedChild[] = [];
  beforeAll(async () => {
    store = await openPostgresStore({ url: PG_URL, schema });
    server = await createFakeOpenAIServer(lead);
  });
  afterAll(async () => {
    await Promise.all(children.map((c) => c.kill()));
    await server?.close();
    await store?.close();
    await drop();
  });

  const workerAt = (runId: string, startMs: number) => {
    const child = new ClockedChild(CHILD, [PG_URL, schema, runId, server.url, String(startMs)]);
    children.push(child);
    return child;
  };
  /** Move a worker's clock to `at` an hour at a time, each step settled before the next. */
  const moveTo = async (w: ClockedChild, at: number) => {
    let now = await w.advance(0);
    while (now < at) now = await w.advance(Math.min(HOUR, at - now));
  };
  const root = async (runId: string) => (await store.reads.listAgents(runId)).find((a) => a.parentId === null);

  it('a timer one simulated day away: 0 model calls until the deadline, then exactly one wake, across a SIGKILL of its worker and a takeover', async () => {
    const { runId } = await submitRun(store, { root: { name: 'lead', task: 'Look again tomorrow.' } });
    const a = workerAt(runId, 0);
    await a.line((l) => l === `HOST ${runId} 2`);
    await until(
      'the lead asleep',
      () => root(runId),
      (r) => r?.status === 'waiting' && r.waitKind === 'timer',
    );
    await moveTo(a, 12 * HOUR);
    expect(server.requests).toHaveLength(1);
    expect(a.linesOf('CALL').map(Number)).toEqual([0]);

    // Mid-wait, the worker hosting the run dies; its lease is live for up to a real TTL yet.
    await a.kill('SIGKILL');
    const b = workerAt(runId, 12 * HOUR);
    await b.line((l) => l === `HOST ${runId} 3`);
    // Not a moment before the deadline.
    await moveTo(b, DAY - 1);
    expect(server.requests).toHaveLength(1);
    expect(b.linesOf('CALL')).toEqual([]);
    expect(await root(runId)).toMatchObject({ status: 'waiting', waitKind: 'timer' });

    await b.advance(1);
    await until(
      'the lead completed',
      () => root(runId),
      (r) => r?.status === 'completed',
      20_000,
    );
    expect(server.requests).toHaveLength(2);
    expect(b.linesOf('CALL').map(Number)).toEqual([DAY]);
    const results = (await store.reads.loadSession((await root(runId))!.id))
      .filter((i) => i.role === 'tool')
      .map((i) => JSON.parse(i.content as string) as unknown);
    expect(results).toEqual([
      { wait_outcome: 'timer_fired', note: expect.any(String) },
      { success: true, run_completed: true },
    ]);

    // Exactly one wake: days later, still two calls.
    await moveTo(b, 3 * DAY);
    expect(server.requests).toHaveLength(2);
  });
});
