/**
 * A run's live stream as Server-Sent Events (issue 38): `GET /api/stream?run=<id>` on `troupe ui`
 * (and `--ui`). Each event carries its `seq` as the SSE `id`, so a client that reconnects — a
 * browser's EventSource does so by itself — sends `Last-Event-ID` and gets exactly the events after
 * it: none missed, none twice. `?after=<seq>` does the same for a first connection. When the run is
 * over and every event is sent, one `end` event says so and the response ends.
 * @module
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { TroupeError } from '../errors.js';
import { followRun, type FollowOptions } from './follow.js';
import type { StorePort } from '../store/port.js';

/** A comment line this often keeps proxies and idle timeouts from closing a quiet stream (ms). */
const KEEPALIVE_MS = 15_000;

/**
 * Where to start: `Last-Event-ID` (a reconnection) wins over `?after=`, which is a seq or `now`
 * (the run's last seq: only what comes next, as the dashboard's live text wants); CONFIG_INVALID
 * when neither.
 */
export function startAfter(req: IncomingMessage, url: URL): number | 'now' {
  const header = req.headers['last-event-id'];
  const given = Array.isArray(header) ? header[0] : header;
  if (given === undefined && url.searchParams.get('after') === 'now') return 'now';
  const raw = given ?? url.searchParams.get('after') ?? '0';
  if (!/^\d{1,15}$/.test(raw.trim()))
    throw new TroupeError('CONFIG_INVALID', `Expected Last-Event-ID or after to be a stream seq (0, 1, 2, …) or after=now, got ${JSON.stringify(raw)}`);
  return Number(raw.trim());
}

/** Write `text`, waiting for the socket to drain when its buffer is full. */
function write(res: ServerResponse, text: string): Promise<void> {
  if (res.write(text)) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}

/**
 * Stream run `runId`'s events after `after` to `res` until the run is over or the client goes.
 * `headers` are the server's own (security headers).
 */
export async function serveStream(
  req: IncomingMessage,
  res: ServerResponse,
  reads: Pick<StorePort, 'readStream' | 'getRun' | 'listAgents'>,
  runId: string,
  after: number,
  options: Pick<FollowOptions, 'pollMs'> & { live: NonNullable<FollowOptions['live']>; headers?: Record<string, string> },
): Promise<void> {
  const { live } = options;
  // Over, with nothing after `after`: 204 tells an EventSource to stop reconnecting.
  if (!(await live(runId)) && (await reads.readStream(runId, after, 1)).length === 0) {
    res.writeHead(204, options.headers).end();
    return;
  }
  const abort = new AbortController();
  req.on('close', () => abort.abort());
  res.writeHead(200, { ...options.headers, 'Content-Type': 'text/event-stream; charset=utf-8', Connection: 'keep-alive' });
  res.write('retry: 1000\n\n');
  const keepalive = setInterval(() => res.write(': keep-alive\n\n'), KEEPALIVE_MS);
  keepalive.unref();
  let last = after;
  try {
    for await (const event of followRun(reads, runId, { after, signal: abort.signal, ...options })) {
      await write(res, `id: ${event.seq}\nevent: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`);
      last = event.seq;
    }
    if (!abort.signal.aborted) await write(res, `event: end\ndata: ${JSON.stringify({ runId, lastSeq: last })}\n\n`);
  } catch (err) {
    const error = err instanceof TroupeError ? { code: err.code, message: err.message } : { code: 'INTERNAL', message: String(err) };
    if (!abort.signal.aborted) res.write(`event: error\ndata: ${JSON.stringify({ error })}\n\n`);
  } finally {
    clearInterval(keepalive);
    res.end();
  }
}
