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
import { ConfigError } from '../errors.js';
import { checkPort, hasToken, isAllowedOrigin, isLoopbackHost, newToken } from './guard.js';
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
  /** Stops everything so the process can exit; idempotent. */
  close(): Promise<void>;
}

export interface InspectorOptions {
  /** Default 8080; 0 picks a free port. */
  port?: number;
}

/** The hosted inspector UI the bridge page embeds. */
const STATELY_INSPECT_URL = 'https://stately.ai/inspect';
/** Messages replayed to a client that connects late (as createInspectorServer does). */
const REPLAY_LIMIT = 200;
/** How long close() waits for a client to answer the close handshake before cutting it. */
const CLOSE_GRACE_MS = 1_000;

// ---------------------------------------------------------------------------------------------
// The bridge page and the relay.

/**
 * The page at `/`: the Stately inspector in an iframe, fed from this server's WebSocket. Events
 * are posted to the iframe's origin only (never `'*'`: if the frame were navigated elsewhere, the
 * browser drops them), and only its own window at that origin is heard saying it is connected.
 */
function bridgePage(token: string, inspectorUrl = STATELY_INSPECT_URL): string {
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
  </style>
</head>
<body>
  <iframe id="inspector" src="${inspectorUrl}"></iframe>
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

function refuseUpgrade(socket: Duplex, status: string): void {
  socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
}

function hintFor(url: string, port: number): string {
  return (
    `XState inspector: open ${url} in a browser on this machine. The page embeds the hosted Stately ` +
    `inspector (${STATELY_INSPECT_URL}), so that browser needs internet access; the inspection events ` +
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
      .end(req.method === 'HEAD' ? undefined : bridgePage(token));
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

  await new Promise<void>((resolve, reject) => {
    const onError = (err: Error) => {
      wss.close();
      // A busy or forbidden port is the user's to fix: a one-line configuration error, not a crash.
      const code = (err as NodeJS.ErrnoException).code;
      const why = code === 'EADDRINUSE' ? 'the port is in use' : code === 'EACCES' ? 'permission denied' : err.message;
      reject(
        new ConfigError(`XState inspector: cannot listen on 127.0.0.1:${requested}: ${why} (--inspect=<port> picks another, --inspect=0 any free one)`, {
          cause: err,
        }),
      );
    };
    server.once('error', onError);
    server.listen({ port: requested, host: '127.0.0.1' }, () => {
      server.off('error', onError);
      resolve();
    });
  });
  // A failing socket must not take the process down; clients are told nothing else.
  server.on('error', () => {});
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : requested;
  const url = `http://127.0.0.1:${port}/?token=${token}`;

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

  return { inspect, port, url, token, hint: hintFor(url, port), close };
}
