/**
 * `--inspect[=port]`: a live view of the run's actors in the Stately inspector.
 *
 * One node:http server on 127.0.0.1 (never on other interfaces) serves a bridge page at `/`: an
 * iframe of https://stately.ai/inspect plus a script that opens a WebSocket back to this server and
 * posts every message into the iframe. The same port accepts WebSocket connections and relays every
 * inspection message to each connected client; a client that connects later gets the last
 * {@link REPLAY_LIMIT} messages first.
 *
 * The messages are built by `@statelyai/inspect`'s `createInspector` (the Stately wire format:
 * `@xstate.actor`, `@xstate.event`, `@xstate.snapshot`) with an adapter that hands each one straight
 * to the relay, so there is no WebSocket client inside the process (the library's own
 * `createWebSocketInspector` retries its connection every 5 s forever, even after `stop()`, and
 * keeps the process alive). Contexts and events are reduced to an allow-list first: ids, names,
 * statuses and counters, never conversation text, report text, task text or anything secret.
 *
 * The hosted inspector needs the internet; offline the frame stays blank. So both ends check:
 * the server, once in the background as it starts (never delaying the run, never keeping the
 * process alive), whether this machine reaches the inspector's URL ({@link InspectorHandle.unreachable});
 * and the page, whether its browser does (a `no-cors` fetch of the URL) and whether the app in the
 * frame says it started (`@statelyai.connected`) in time. If not, the page shows why in place of
 * the frame and points to the dashboard (`troupe ui`), which works offline; the frame comes back
 * the moment the inspector says it is connected.
 *
 * Binding to 127.0.0.1 keeps other machines out, not other users of this one: the page and the
 * socket both require a random token (`/?token=…`, 192 bits, compared in constant time) that only
 * the printed URL carries; the page tells the browser to send no Referer, so the token does not
 * leak to the embedded inspector. It also refuses requests whose Host is not a loopback name (DNS
 * rebinding) and WebSocket upgrades from a page of another origin (a site open in the same browser
 * reading the stream).
 * @module
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { createInspector, type StatelyInspectionEvent } from '@statelyai/inspect';
import { WebSocket, WebSocketServer } from 'ws';
import type { AnyEventObject, InspectionEvent, MachineContext, Observer } from 'xstate';
import { ConfigError, errorMessage } from '../errors.js';
import { checkPort, hasToken, isAllowedOrigin, isLoopbackHost, listenOnLoopback, newToken } from './guard.js';
import { sanitizeContext, sanitizeEvent, toWire } from './wire.js';

export { sanitizeContext, sanitizeEvent };

export interface InspectorHandle {
  /** Pass as createCoordinator({ inspect }) */
  readonly inspect: Observer<InspectionEvent>;
  readonly port: number;
  /** http://127.0.0.1:<port>/?token=<token> — the page to open (the socket is at the same URL, ws://) */
  readonly url: string;
  /** The secret the page and the socket require in their URL's `token` parameter. */
  readonly token: string;
  /** A one-paragraph "how to attach" text for the CLI to print. */
  readonly hint: string;
  /** The inspector UI the page embeds (https://stately.ai/inspect unless the options said otherwise). */
  readonly inspectorUrl: string;
  /**
   * The background check of whether this machine reaches {@link inspectorUrl}: resolves with why
   * not (one line), or null once it answered or close() came first. Never rejects; nothing waits
   * for it.
   */
  readonly unreachable: Promise<string | null>;
  /** Stops everything so the process can exit; idempotent. */
  close(): Promise<void>;
}

export interface InspectorOptions {
  /** Default 8080; 0 picks a free port. */
  port?: number;
  /** The inspector UI the page embeds, http(s); default https://stately.ai/inspect. */
  inspectorUrl?: string;
  /**
   * How the page tells its reader to open the dashboard when the inspector cannot load (plain
   * text, completing "Offline, troupe's dashboard shows the same run: …"); default: run `troupe ui`.
   */
  dashboard?: string;
  /**
   * Whether this machine reaches `url`: resolves if it does, rejects with why not; should stop when
   * `signal` aborts (the timeout, or close()). Default: an HTTP HEAD request, any answer below 500.
   */
  probe?: (url: string, signal: AbortSignal) => Promise<void>;
  /** How long the probe may take before the URL counts as unreachable; default 3 s. */
  probeTimeoutMs?: number;
  /**
   * How long the page waits for the embedded inspector to say it is connected (and for its own
   * fetch of the inspector's URL) before saying it did not load; default 15 s.
   */
  pageTimeoutMs?: number;
}

/** The hosted inspector UI the bridge page embeds. */
const STATELY_INSPECT_URL = 'https://stately.ai/inspect';
/** Messages replayed to a client that connects late (as createInspectorServer does). */
const REPLAY_LIMIT = 200;
/** How long close() waits for a client to answer the close handshake before cutting it. */
const CLOSE_GRACE_MS = 1_000;
/** How long the background check of the inspector's URL may take. */
const PROBE_TIMEOUT_MS = 3_000;
/** How long the page waits for the inspector in its frame to start. */
const PAGE_TIMEOUT_MS = 15_000;
const DEFAULT_DASHBOARD = 'run `troupe ui` (with the run’s --db) on the machine that runs troupe, or add --ui to the command that runs the team';

// ---------------------------------------------------------------------------------------------
// The bridge page and the relay.

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
const html = (text: string): string => text.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]!);
/** `text` as HTML, its \`quoted\` parts (commands) as code. */
const withCode = (text: string): string => html(text).replace(/`([^`]+)`/g, '<code>$1</code>');
/** A value for an inline script: JSON that cannot close the script element. */
const scriptValue = (value: unknown): string => JSON.stringify(value).replace(/</g, '\\u003c');
const seconds = (ms: number): string => (ms < 1_000 ? `${ms} ms` : `${Math.round(ms / 100) / 10} s`);

interface PageOptions {
  inspectorUrl: string;
  dashboard: string;
  pageTimeoutMs: number;
}

/**
 * The page at `/`: the Stately inspector in an iframe, fed from this server's WebSocket. Events
 * are posted to the iframe's origin only (never to any origin: if the frame were navigated
 * elsewhere, the browser drops them), and only its own window at that origin is heard saying it is
 * connected.
 *
 * A first script watches whether the inspector loads: a `no-cors` fetch of its URL that fails (no
 * network, DNS, refused, blocked) or takes longer than `pageTimeoutMs`, or no `@statelyai.connected`
 * from the frame within `pageTimeoutMs`, shows `#offline` (what happened, that the events keep
 * coming, and how to open the dashboard) in place of the frame, which stays loaded, hidden; once the
 * inspector says it is connected, the frame is shown again.
 */
function bridgePage(token: string, options: PageOptions): string {
  const { inspectorUrl, dashboard, pageTimeoutMs } = options;
  const origin = new URL(inspectorUrl).origin;
  return `<!DOCTYPE html>
<html>
<head>
  <meta charset="utf-8">
  <meta name="referrer" content="no-referrer">
  <title>troupe — Stately Inspector</title>
  <style>
    * { margin: 0; padding: 0; }
    html, body { height: 100%; }
    iframe { width: 100%; height: 100%; border: none; }
    #offline { max-width: 46em; padding: 2em; font: 16px/1.5 system-ui, sans-serif; color: #222; }
    #offline h1 { font-size: 1.4em; margin-bottom: 0.6em; }
    #offline p { margin-bottom: 0.8em; }
    #offline code { background: #f0f0f0; padding: 0 0.25em; }
  </style>
</head>
<body>
  <div id="offline" role="alert" hidden>
    <h1>The Stately inspector did not load</h1>
    <p id="offline-why"></p>
    <p>This page shows the run in the hosted Stately inspector, <code>${html(inspectorUrl)}</code>, so the browser needs the internet to load it. The run’s events keep arriving here: once the inspector loads (reload this page when the browser is online), it shows them.</p>
    <p id="offline-dashboard">Offline, troupe’s dashboard shows the same run: ${withCode(dashboard)}, then open its <b>Timeline</b> tab: every agent’s lifecycle states over time. A click on an agent shows its transcript and its state on the lifecycle diagram.</p>
  </div>
  <iframe id="inspector" src="${html(inspectorUrl)}"></iframe>
  <script id="offline-check">
    (() => {
      const URL_TO_LOAD = ${scriptValue(inspectorUrl)};
      const ORIGIN = ${scriptValue(origin)};
      const WAIT_MS = ${scriptValue(pageTimeoutMs)};
      const WAIT_TEXT = ${scriptValue(seconds(pageTimeoutMs))};
      const frame = document.getElementById('inspector');
      const notice = document.getElementById('offline');
      let started = false;
      const show = (why) => {
        if (started || !notice.hidden) return;
        document.getElementById('offline-why').textContent = why;
        notice.hidden = false;
        frame.hidden = true;
        document.title = 'troupe — Stately Inspector (not loaded)';
      };
      const timer = setTimeout(
        () => show('The inspector in this page did not start within ' + WAIT_TEXT + ': ' + URL_TO_LOAD + ' may be unreachable from this browser, or blocked.'),
        WAIT_MS,
      );
      window.addEventListener('message', (e) => {
        if (e.source === frame.contentWindow && e.origin === ORIGIN && e.data && e.data.type === '@statelyai.connected') {
          started = true;
          clearTimeout(timer);
          notice.hidden = true;
          frame.hidden = false;
          document.title = 'troupe — Stately Inspector';
        }
      });
      const controller = new AbortController();
      const cut = setTimeout(() => controller.abort(), WAIT_MS);
      fetch(URL_TO_LOAD, { mode: 'no-cors', cache: 'no-store', credentials: 'omit', referrerPolicy: 'no-referrer', signal: controller.signal }).then(
        () => clearTimeout(cut),
        () =>
          show(
            controller.signal.aborted
              ? URL_TO_LOAD + ' did not answer this browser within ' + WAIT_TEXT + '.'
              : 'This browser could not reach ' + URL_TO_LOAD + (navigator.onLine === false ? ': it is offline.' : ': no internet connection, or a proxy or firewall in the way.'),
          ),
      );
    })();
  </script>
  <script>
    const iframe = document.getElementById('inspector');
    const INSPECTOR_ORIGIN = ${JSON.stringify(origin)};
    const buffer = [];
    let connected = false;

    window.addEventListener('message', (e) => {
      if (e.source === iframe.contentWindow && e.origin === INSPECTOR_ORIGIN && e.data && e.data.type === '@statelyai.connected') {
        connected = true;
        buffer.forEach((event) => iframe.contentWindow.postMessage(event, INSPECTOR_ORIGIN));
        buffer.length = 0;
      }
    });

    // The server that served this page (also through ssh -L on another port), with its token.
    const ws = new WebSocket('ws://' + location.host + '/?token=' + encodeURIComponent(${JSON.stringify(token)}));
    ws.onmessage = (event) => {
      const data = JSON.parse(event.data);
      if (connected) iframe.contentWindow.postMessage(data, INSPECTOR_ORIGIN);
      else buffer.push(data);
    };
  </script>
</body>
</html>`;
}

/** An http(s) URL for the page to embed, or a ConfigError. */
function checkInspectorUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ConfigError(`XState inspector: expected the inspector URL to be an http(s) URL, got ${JSON.stringify(url)}`);
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') {
    throw new ConfigError(`XState inspector: expected the inspector URL to be an http(s) URL, got ${JSON.stringify(url)}`);
  }
  return url;
}

/** The default probe: an HTTP HEAD request; any answer below 500 means the inspector can load. */
async function headProbe(url: string, signal: AbortSignal): Promise<void> {
  const res = await fetch(url, { method: 'HEAD', signal, redirect: 'follow' });
  if (res.status >= 500) throw new Error(`it answered HTTP ${res.status}`);
}

/** Why a probe failed, in a few words: the network error under fetch's "fetch failed" when there is one. */
function probeFailure(err: unknown): string {
  const cause = err instanceof Error && err.cause !== undefined ? err.cause : err;
  const message = errorMessage(cause);
  const code = (cause as { code?: unknown } | null)?.code;
  return message === '' || message === 'Error' || message === 'AggregateError' ? (typeof code === 'string' ? code : errorMessage(err)) : message;
}

/**
 * Runs `probe` once, bounded by `timeoutMs` and by `closed` (whichever first; a probe that ignores
 * its signal is not waited for): null if it resolved or `closed` aborted, else why not.
 */
async function reach(probe: NonNullable<InspectorOptions['probe']>, url: string, timeoutMs: number, closed: AbortSignal): Promise<string | null> {
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort();
  }, timeoutMs).unref();
  const onClose = () => controller.abort();
  closed.addEventListener('abort', onClose, { once: true });
  const aborted = new Promise<never>((_resolve, reject) => controller.signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true }));
  try {
    await Promise.race([Promise.resolve().then(() => probe(url, controller.signal)), aborted]);
    return null;
  } catch (err) {
    if (closed.aborted) return null;
    return timedOut ? `no answer within ${seconds(timeoutMs)}` : probeFailure(err);
  } finally {
    clearTimeout(timer);
    closed.removeEventListener('abort', onClose);
    controller.abort();
  }
}

function refuseUpgrade(socket: Duplex, status: string): void {
  socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
}

function hintFor(url: string, port: number, inspectorUrl: string): string {
  return (
    `XState inspector: open ${url} in a browser on this machine. The page embeds the hosted Stately ` +
    `inspector (${inspectorUrl}), so that browser needs internet access; the inspection events ` +
    `themselves go only to this page, over a server bound to 127.0.0.1 that requires the token in ` +
    `this URL, and carry ids, statuses and counters, never conversation text. From another machine, forward the port first with ` +
    `\`ssh -L ${port}:127.0.0.1:${port} <user>@<this-host>\` and open ${url} there.`
  );
}

/**
 * Start the inspector server on 127.0.0.1 and return the observer to pass to createCoordinator.
 * Rejects if the port cannot be bound (in use, or not allowed).
 */
export async function startInspector(options: InspectorOptions = {}): Promise<InspectorHandle> {
  const requested = checkPort(options.port ?? 8080, 'inspector');
  const inspectorUrl = checkInspectorUrl(options.inspectorUrl ?? STATELY_INSPECT_URL);
  const page = { inspectorUrl, dashboard: options.dashboard ?? DEFAULT_DASHBOARD, pageTimeoutMs: options.pageTimeoutMs ?? PAGE_TIMEOUT_MS };
  const token = newToken();
  const wss = new WebSocketServer({ noServer: true });
  const replay: string[] = [];
  let accepting = true; // false once close() starts: later events are ignored
  let relaying = true; // false once the events queued before close() are sent

  const publish = (message: string) => {
    if (!relaying) return;
    replay.push(message);
    if (replay.length > REPLAY_LIMIT) replay.shift();
    for (const client of wss.clients) if (client.readyState === WebSocket.OPEN) client.send(message);
  };

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    if (!isLoopbackHost(req.headers.host)) {
      res.writeHead(403, { 'Content-Type': 'text/plain; charset=utf-8' }).end('Forbidden: use http://127.0.0.1:<port>\n');
      return;
    }
    const path = (req.url ?? '/').split('?')[0];
    if ((req.method !== 'GET' && req.method !== 'HEAD') || (path !== '/' && path !== '/index.html')) {
      res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8' }).end('Not found\n');
      return;
    }
    if (!hasToken(req, token)) {
      res.writeHead(403, { 'Content-Type': 'text/plain; charset=utf-8' }).end('Forbidden: open the URL troupe printed (it carries the token)\n');
      return;
    }
    res
      .writeHead(200, {
        'Content-Type': 'text/html; charset=utf-8',
        'Cache-Control': 'no-store',
        'Referrer-Policy': 'no-referrer',
        'X-Content-Type-Options': 'nosniff',
      })
      .end(req.method === 'HEAD' ? undefined : bridgePage(token, page));
  });
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => socket.destroy());
    if (!relaying) return refuseUpgrade(socket, '503 Service Unavailable');
    if (!isLoopbackHost(req.headers.host) || !isAllowedOrigin(req) || !hasToken(req, token)) return refuseUpgrade(socket, '403 Forbidden');
    wss.handleUpgrade(req, socket, head, (client) => {
      client.on('error', () => client.terminate());
      for (const message of replay) client.send(message);
    });
  });

  const port = await listenOnLoopback(server, requested, 'XState inspector', ' (--inspect=<port> picks another, --inspect=0 any free one)').catch(
    (err: unknown) => {
      wss.close();
      throw err;
    },
  );
  const url = `http://127.0.0.1:${port}/?token=${token}`;
  // In the background: the caller has its handle (and the run starts) without waiting for it.
  const probing = new AbortController();
  const unreachable = reach(options.probe ?? headProbe, inspectorUrl, options.probeTimeoutMs ?? PROBE_TIMEOUT_MS, probing.signal);

  const inspector = createInspector(
    {
      send(event: StatelyInspectionEvent) {
        // Runs in a timer of the inspector's: never throw from here.
        try {
          publish(toWire(event));
        } catch {
          // An event that cannot be serialised is left out of the view.
        }
      },
    },
    {
      sanitizeContext: (context) => sanitizeContext(context) as MachineContext,
      sanitizeEvent: (event) => sanitizeEvent(event) as AnyEventObject,
    },
  );

  const inspect: Observer<InspectionEvent> = {
    next: (event) => {
      if (accepting) inspector.inspect.next?.(event);
    },
  };

  let closing: Promise<void> | null = null;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      accepting = false;
      probing.abort();
      // createInspector converts each event in a setTimeout(0) of its own; a timer set now fires
      // after all of them, so every event seen before close() is relayed first.
      await new Promise<void>((resolve) => setTimeout(resolve, 0));
      relaying = false;
      inspector.stop();
      const clientsClosed = [...wss.clients].map(
        (client) =>
          new Promise<void>((resolve) => {
            if (client.readyState === WebSocket.CLOSED) return resolve();
            // Close frames follow the messages already queued; a client that does not answer is cut.
            const cut = setTimeout(() => client.terminate(), CLOSE_GRACE_MS).unref();
            client.once('close', () => {
              clearTimeout(cut);
              resolve();
            });
            client.close(1001, 'inspector closed');
          }),
      );
      await Promise.all(clientsClosed);
      await new Promise<void>((resolve) => wss.close(() => resolve()));
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    })();
    return closing;
  };

  return { inspect, port, url, token, hint: hintFor(url, port, inspectorUrl), inspectorUrl, unreachable, close };
}
