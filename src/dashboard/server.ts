/**
 * The dashboard's web server: `troupe ui` and `--ui` on run, resume, serve and demo.
 *
 * One node:http server on 127.0.0.1 serves the page and its script and style (files the package
 * ships, no CDN), a JSON API over the store port (team, timeline, agent), a Server-Sent Events
 * stream that tells the page when to read again (batched: at most one push per `batchMs`, however
 * busy the run), the run's live stream for any client (`/api/stream`, stream/sse.ts), its approvals (`/api/approvals`), and the actions (send, stop, pause and resume the budget, answer an approval), which go through the
 * database's inbox exactly as `troupe send` / `troupe stop` do, so the run's owner applies them
 * with the same rules and the page shows the same typed errors.
 *
 * The same guard as the inspector's (../inspect/guard.ts): loopback Host only, the random token of
 * the printed URL on every API call and on the stream, and actions only from this server's own
 * page (Origin) as JSON.
 * @module
 */
import { readFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { fileURLToPath } from 'node:url';
import { errorMessage, isTroupeError, TroupeError } from '../errors.js';
import { checkPort, hasToken, isAllowedOrigin, isLoopbackHost, listenOnLoopback, newToken } from '../inspect/guard.js';
import { act, isLive, type ActionSource } from './actions.js';
import { pickRun, readAgent, readApprovals, readTeam, readTimeline } from './readModel.js';
import { rootActive } from '../stream/follow.js';
import { serveStream, startAfter } from '../stream/sse.js';

/** Where the dashboard's data comes from (what actions use, actions.ts) and how it learns of changes. */
export interface DashboardSource extends ActionSource {
  /** Call `changed` whenever the run may have changed; returns a function that stops watching. */
  watch(changed: () => void): () => void;
}

export interface DashboardOptions {
  /** Default 7070; 0 picks a free port. */
  port?: number;
  /** Default: a fresh random one. */
  token?: string;
  /** At most one push to the page per this many ms (default 250). */
  batchMs?: number;
  /** How often `/api/stream` reads the store for new events while a client follows (default 100 ms). */
  streamPollMs?: number;
}

export interface DashboardHandle {
  readonly port: number;
  readonly token: string;
  /** http://127.0.0.1:<port>/?token=<token> */
  readonly url: string;
  /** Tell open pages to read again (batched); the source's watcher calls it too. */
  changed(): void;
  close(): Promise<void>;
}

const ASSETS: Record<string, string> = {
  '/': 'index.html',
  '/index.html': 'index.html',
  '/app.js': 'app.js',
  '/timeline.js': 'timeline.js',
  '/graph.js': 'graph.js',
  '/style.css': 'style.css',
};
const TYPES: Record<string, string> = { html: 'text/html; charset=utf-8', js: 'text/javascript; charset=utf-8', css: 'text/css; charset=utf-8' };
const HEADERS = {
  'Cache-Control': 'no-store',
  'Referrer-Policy': 'no-referrer',
  'X-Content-Type-Options': 'nosniff',
  // Only this server's own files run or load; no other page may frame this one.
  'Content-Security-Policy':
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
};
const MAX_BODY = 256 * 1024;
/**
 * A body over MAX_BODY is still read to its end (and dropped) before the 413 goes out: answering
 * and closing while the client is still sending resets the connection under the answer. Past this
 * much, the sender is cut off.
 */
const MAX_DRAIN = 64 * 1024 * 1024;
const TOO_LARGE = Symbol('too large');

/** The page's files (works from src/dashboard and from dist/src/dashboard). */
function assetDir(): string {
  for (const up of ['./public', '../../../src/dashboard/public']) {
    const dir = fileURLToPath(new URL(up, import.meta.url));
    if (existsSync(dir)) return dir;
  }
  throw new TroupeError('INTERNAL', 'The dashboard files (src/dashboard/public) are missing from this install');
}

/** HTTP status for a typed error the API answers with. */
function statusFor(code: string): number {
  if (code === 'RUN_NOT_FOUND' || code === 'AGENT_NOT_FOUND' || code === 'APPROVAL_NOT_FOUND') return 404;
  if (code === 'RUN_NOT_LIVE' || code === 'RUN_LOCKED') return 409;
  if (code === 'INTERNAL' || code.startsWith('STORE_')) return 500;
  return 400;
}

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', ...HEADERS }).end(JSON.stringify(body));
}

function fail(res: ServerResponse, err: unknown): void {
  if (isTroupeError(err)) json(res, statusFor(err.code), { error: { code: err.code, message: err.message } });
  else json(res, 500, { error: { code: 'INTERNAL', message: errorMessage(err) } });
}

/** The JSON body, or TOO_LARGE once a body over MAX_BODY has been read to its end (and dropped). */
function readBody(req: IncomingMessage): Promise<unknown> {
  return new Promise((resolve, reject) => {
    let size = 0;
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_BODY) chunks.push(chunk);
      else if (size > MAX_DRAIN) {
        reject(new TroupeError('CONFIG_INVALID', `The request body is over ${MAX_BODY} bytes`));
        req.destroy();
      } else chunks.length = 0;
    });
    req.on('end', () => {
      if (size > MAX_BODY) return resolve(TOO_LARGE);
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      } catch {
        reject(new TroupeError('CONFIG_INVALID', 'The request body is not JSON'));
      }
    });
    req.on('error', reject);
  });
}

export async function startDashboard(source: DashboardSource, options: DashboardOptions = {}): Promise<DashboardHandle> {
  const requested = checkPort(options.port ?? 7070, 'dashboard');
  const token = options.token ?? newToken();
  const batchMs = options.batchMs ?? 250;
  const dir = assetDir();
  const streams = new Set<ServerResponse>();
  let version = 0;
  let pushTimer: ReturnType<typeof setTimeout> | null = null;
  let closed = false;

  let coalesced = 0;
  const push = () => {
    pushTimer = null;
    version++;
    // `changes`: how many changes this one push stands for.
    const frame = `event: changed\ndata: ${JSON.stringify({ version, changes: coalesced })}\n\n`;
    coalesced = 0;
    for (const res of streams) res.write(frame);
  };
  const changed = () => {
    if (closed) return;
    coalesced++;
    if (pushTimer === null) pushTimer = setTimeout(push, batchMs);
  };

  const api = async (req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> => {
    const run = url.searchParams.get('run') ?? undefined;
    switch (url.pathname) {
      case '/api/team': {
        const team = await readTeam(source.port, run);
        return json(res, 200, {
          ...team,
          db: source.db,
          live: await isLive(source, team.run.id),
          answersApprovals: source.answerHere !== undefined,
          canFork: source.fork !== undefined,
        });
      }
      case '/api/timeline':
        return json(res, 200, await readTimeline(source.port, run));
      case '/api/approvals':
        return json(res, 200, await readApprovals(source.port, run));
      case '/api/agent':
        return json(res, 200, await readAgent(source.port, run, url.searchParams.get('agent') ?? ''));
      case '/api/action': {
        if (req.method !== 'POST') return json(res, 405, { error: { code: 'CONFIG_INVALID', message: 'POST an action' } });
        if (!/^application\/json\b/.test(req.headers['content-type'] ?? '')) {
          return json(res, 415, { error: { code: 'CONFIG_INVALID', message: 'Actions are JSON' } });
        }
        const body = await readBody(req);
        if (body === TOO_LARGE) return json(res, 413, { error: { code: 'CONFIG_INVALID', message: `The request body is over ${MAX_BODY} bytes` } });
        const result = await act(source, body);
        changed();
        return json(res, 200, result);
      }
      case '/api/stream': {
        // The run's live stream (stream/sse.ts): followed until the run is over, resumable by seq.
        const start = startAfter(req, url);
        const { id } = await pickRun(source.port, run);
        const after = start === 'now' ? await source.port.lastStreamSeq(id) : start;
        const live = async (runId: string) => (await source.live(runId)) || (await rootActive(source.port, runId));
        return serveStream(req, res, source.port, id, after, { live, headers: HEADERS, ...(options.streamPollMs ? { pollMs: options.streamPollMs } : {}) });
      }
      case '/api/events': {
        res.writeHead(200, { 'Content-Type': 'text/event-stream; charset=utf-8', Connection: 'keep-alive', ...HEADERS });
        // The page reads everything again on each (re)connection: it catches up from the database.
        res.write(`retry: 1000\nevent: changed\ndata: ${JSON.stringify({ version, changes: 0 })}\n\n`);
        streams.add(res);
        req.on('close', () => streams.delete(res));
        return;
      }
      default:
        return json(res, 404, { error: { code: 'CONFIG_INVALID', message: `No such API: ${url.pathname}` } });
    }
  };

  const server = createServer((req, res) => {
    const text = (status: number, body: string) => res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8', ...HEADERS }).end(body);
    if (!isLoopbackHost(req.headers.host)) return text(403, 'Forbidden: use http://127.0.0.1:<port>\n');
    if (!isAllowedOrigin(req)) return text(403, 'Forbidden: another origin\n');
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const asset = ASSETS[url.pathname];
    if (asset !== undefined) {
      if (req.method !== 'GET' && req.method !== 'HEAD') return text(405, 'Method not allowed\n');
      // The page itself needs the token too: a wrong one is told so at once.
      if (asset === 'index.html' && !hasToken(req, token)) return text(403, 'Forbidden: open the URL troupe printed (it carries the token)\n');
      readFile(`${dir}/${asset}`).then(
        (body) => res.writeHead(200, { 'Content-Type': TYPES[asset.split('.').pop()!]!, ...HEADERS }).end(req.method === 'HEAD' ? undefined : body),
        (err: unknown) => text(500, `Cannot read ${asset}: ${errorMessage(err)}\n`),
      );
      return;
    }
    if (!url.pathname.startsWith('/api/')) return text(404, 'Not found\n');
    if (!hasToken(req, token)) return json(res, 403, { error: { code: 'CONFIG_INVALID', message: 'Forbidden: a wrong or missing token' } });
    api(req, res, url).catch((err: unknown) => fail(res, err));
  });

  const port = await listenOnLoopback(server, requested, 'Dashboard');
  const unwatch = source.watch(changed);

  let closing: Promise<void> | null = null;
  return {
    port,
    token,
    url: `http://127.0.0.1:${port}/?token=${token}`,
    changed,
    close: () =>
      (closing ??= (async () => {
        closed = true;
        unwatch();
        if (pushTimer !== null) clearTimeout(pushTimer);
        for (const res of streams) res.end();
        streams.clear();
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        });
      })()),
  };
}
