/**
 * The live stream across processes (issue 38): a run hosted by a worker on PostgreSQL is followed
 * by a remote client of another process's `troupe ui` (`/api/stream`, Server-Sent Events) from the
 * first event to the end; the client drops its connection midway and reconnects with
 * `Last-Event-ID`: it misses nothing and sees nothing twice, and what it saw is exactly the
 * stream the worker committed, streamed pieces of answers included.
 */
import { request, type IncomingMessage } from 'node:http';
import { afterAll, describe, expect, it } from 'vitest';
import type { Model } from '../../src/model/types.js';
import { openPostgresStore, type PostgresStore } from '../../src/store/postgres/store.js';
import { submitRun } from '../../src/worker/submit.js';
import { startWorker, type Worker } from '../../src/worker/worker.js';
import { spawnTroupe, workdir, type Spawned } from '../helpers/cli.js';
import { freshSchema, PG_URL, pgAvailable, pgTitle } from '../helpers/pg.js';
import { teamModel, workTool } from '../helpers/pgTeam.js';

const available = await pgAvailable();

interface SseEvent {
  id: string | null;
  event: string;
  data: Record<string, unknown>;
}

/**
 * Follow `path` on the dashboard: every event to `onEvent`, which returns false to drop the
 * connection. Resolves with the status and whether the stream ended by itself.
 */
function follow(port: number, path: string, headers: Record<string, string>, onEvent: (e: SseEvent) => boolean): Promise<{ status: number; ended: boolean }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, path, headers: { Host: `127.0.0.1:${port}`, Accept: 'text/event-stream', ...headers } },
      (res: IncomingMessage) => {
        let buffer = '';
        let dropped = false;
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          if (dropped) return;
          buffer += chunk;
          let cut: number;
          while (!dropped && (cut = buffer.indexOf('\n\n')) >= 0) {
            const block = buffer.slice(0, cut);
            buffer = buffer.slice(cut + 2);
            const fields = new Map<string, string>();
            for (const line of block.split('\n')) {
              const m = /^(\w+): ?(.*)$/.exec(line);
              if (m) fields.set(m[1]!, m[2]!);
            }
            if (!fields.has('data')) continue;
            const keep = onEvent({
              id: fields.get('id') ?? null,
              event: fields.get('event') ?? 'message',
              data: JSON.parse(fields.get('data')!) as Record<string, unknown>,
            });
            if (!keep) {
              dropped = true;
              req.destroy();
              resolve({ status: res.statusCode ?? 0, ended: false });
            }
          }
        });
        res.on('end', () => {
          if (!dropped) resolve({ status: res.statusCode ?? 0, ended: true });
        });
      },
    );
    req.on('error', (err) => {
      if (!req.destroyed) reject(err);
    });
    req.end();
  });
}

/** The pg team's model, streaming a two-piece thought before each answer. */
function streamingTeam(): Model {
  const base = teamModel({ workers: 2, turns: 3, latencyMs: 15 });
  return {
    name: 'pg-team',
    complete: (req, options) => {
      options.onDelta?.({ kind: 'text', text: `${req.agent.name} ` });
      options.onDelta?.({ kind: 'text', text: `step ${req.messages.length}` });
      return base.complete(req, options);
    },
  };
}

describe.skipIf(!available)(pgTitle(available, 'the live stream of a worker-hosted run, followed over SSE from another process'), { timeout: 120_000 }, () => {
  const { schema, drop } = freshSchema();
  let store: PostgresStore | undefined;
  let worker: Worker | undefined;
  let ui: Spawned | undefined;
  afterAll(async () => {
    ui?.child.kill('SIGKILL');
    await worker?.stop();
    await store?.close();
    await drop();
  });

  it('a client follows from the first event to the end and, reconnecting with Last-Event-ID, misses nothing and sees nothing twice', async () => {
    store = await openPostgresStore({ url: PG_URL, schema });
    // Submitted, not hosted yet: the client is there before the first event.
    const { runId, rootId } = await submitRun(store, { root: { name: 'lead', task: 'split the job' } });
    ui = spawnTroupe(['ui', '--db', `${PG_URL}?schema=${schema}`, '--port', '0', '--run', runId], workdir());
    await expect.poll(() => ui!.stderr(), { timeout: 15_000 }).toMatch(/token=/);
    const [, portText, token] = /127\.0\.0\.1:(\d+)\/\?token=([\w-]+)/.exec(ui.stderr())!;
    const port = Number(portText);
    const path = `/api/stream?run=${runId}&token=${token}`;

    const seen: SseEvent[] = [];
    let workerStarted: Promise<Worker> | null = null;
    const first = follow(port, path, {}, (e) => {
      seen.push(e);
      return seen.length < 12;
    });
    // The connection is open (its first bytes arrived) before the worker starts hosting.
    workerStarted = startWorker({
      store: await openPostgresStore({ url: PG_URL, schema }),
      concurrency: 2,
      pollMs: 200,
      ttlMs: 3_000,
      hostOptions: () => ({ model: streamingTeam(), tools: [workTool] }),
    });
    worker = await workerStarted;
    expect(await first).toEqual({ status: 200, ended: false });
    expect(seen).toHaveLength(12);

    const lastId = seen.at(-1)!.id!;
    const second = await follow(port, path, { 'Last-Event-ID': lastId }, (e) => {
      seen.push(e);
      return true;
    });
    expect(second).toEqual({ status: 200, ended: true });

    const end = seen.at(-1)!;
    expect(end.event).toBe('end');
    const events = seen.slice(0, -1);
    const ids = events.map((e) => Number(e.id));
    // From the first event, none missed, none twice.
    expect(ids).toEqual(ids.map((_, i) => i + 1));
    expect(end.data).toMatchObject({ runId, lastSeq: ids.length });
    // Exactly what the worker committed.
    const rows = await store.reads.readStream(runId, 0, 100_000);
    expect(events.map((e) => [Number(e.id), e.event, e.data.agentId ?? null])).toEqual(rows.map((r) => [r.seq, r.type, r.agentId]));
    // Streamed pieces arrived merged per answer, and the run's end is in the stream.
    const pieces = events.filter((e) => e.event === 'agent.delta').map((e) => (e.data.delta as { text: string }).text);
    expect(pieces.length).toBeGreaterThanOrEqual(3 + 2 * 4);
    for (const p of pieces) expect(p).toMatch(/^(lead|w0|w1) step \d+$/);
    expect(events.some((e) => e.event === 'agent.status' && e.data.agentId === rootId && e.data.to === 'completed')).toBe(true);
    expect(new Set(events.filter((e) => e.event === 'agent.status' && e.data.to === 'completed').map((e) => e.data.name))).toEqual(
      new Set(['lead', 'w0', 'w1']),
    );

    // A client that comes back after the end is told there is nothing more (204: EventSource stops).
    const after = await follow(port, path, { 'Last-Event-ID': String(ids.length) }, () => true);
    expect(after).toEqual({ status: 204, ended: true });
    // A Last-Event-ID that is not a seq is a typed 400.
    const bad = await follow(port, path, { 'Last-Event-ID': 'abc' }, () => true);
    expect(bad.status).toBe(400);
  });
});
