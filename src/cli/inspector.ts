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
 * The server is unauthenticated, so it also refuses requests whose Host is not a loopback name
 * (DNS rebinding) and WebSocket upgrades from a page of another origin (a site open in the same
 * browser reading the stream).
 * @module
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { createInspector, type StatelyInspectionEvent } from '@statelyai/inspect';
import { WebSocket, WebSocketServer } from 'ws';
import type { AnyEventObject, InspectionEvent, MachineContext, Observer } from 'xstate';
import { shardedValues, type Sharded } from '../../machines/sharded.js';
import { ConfigError } from '../errors.js';

export interface InspectorHandle {
  /** Pass as createCoordinator({ inspect }) */
  readonly inspect: Observer<InspectionEvent>;
  readonly port: number;
  /** http://127.0.0.1:<port> — the page to open */
  readonly url: string;
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
/** Strings longer than this are dropped from events and contexts. */
const MAX_STRING = 200;
/** Nesting kept in events other than the known ones. */
const MAX_DEPTH = 6;
/** How long close() waits for a client to answer the close handshake before cutting it. */
const CLOSE_GRACE_MS = 1_000;
/** Keys dropped from any event (at any depth): credentials and conversation text. */
const SENSITIVE_KEY = /key|token|secret|authorization|password|content|task|summary|message/i;

// ---------------------------------------------------------------------------------------------
// Sanitising: allow-lists. Whatever is not named here never leaves the process.

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (!isRecord(value)) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** A JSON scalar, or undefined (dropped) for anything else and for long strings. */
function scalar(value: unknown): Json | undefined {
  if (value === null || typeof value === 'boolean') return value;
  if (typeof value === 'number') return Number.isFinite(value) ? value : null;
  if (typeof value === 'string') return value.length > MAX_STRING ? undefined : value;
  return undefined;
}

/** The named scalar fields of `source` (missing or non-scalar ones are left out). */
function pickScalars(source: unknown, keys: readonly string[]): { [key: string]: Json } {
  const out: { [key: string]: Json } = {};
  if (!isRecord(source)) return out;
  for (const key of keys) {
    const value = scalar(source[key]);
    if (value !== undefined) out[key] = value;
  }
  return out;
}

const AGENT_SCALARS = [
  'id',
  'name',
  'parentId',
  'turns',
  'stintTurns',
  'recoveries',
  'idleResumes',
  'waitKind',
  'waitingSince',
  'stopReason',
  'lastTool',
  'budgetEpoch',
] as const;
const BUDGET_FLAGS = ['limitUsd', 'budgetStopped', 'reserveStopped', 'paused', 'resumeEpoch', 'reserveNoticeClaimed'] as const;
const SPAWN_LIMITS = ['maxDepth', 'maxChildren', 'maxAgents'] as const;
const RECORD_FIELDS = ['id', 'name', 'parentId', 'depth', 'status'] as const;

/** An error as its code only: messages can quote a provider's answer or a tool's input. */
function errorCode(error: unknown): Json {
  return isRecord(error) && typeof error.code === 'string' ? { code: error.code.slice(0, MAX_STRING) } : null;
}

/** A completion report as success and a count: its text is the conversation's. */
function reportShape(report: unknown): Json {
  if (!isRecord(report)) return null;
  return {
    success: typeof report.success === 'boolean' ? report.success : null,
    findings: Array.isArray(report.findings) ? report.findings.length : 0,
  };
}

/** An agent's lifecycle fields (its context, or the `state` of its input). */
function sanitizeAgent(source: Record<string, unknown>): { [key: string]: Json } {
  const out = pickScalars(source, AGENT_SCALARS);
  if ('error' in source) out.error = errorCode(source.error);
  if ('report' in source) out.report = reportShape(source.report);
  return out;
}

/** The coordinator's agent records, as a list sorted by depth then name. */
function agentList(agents: unknown): Json[] {
  let records: unknown[] = [];
  if (Array.isArray(agents)) records = agents;
  else if (isRecord(agents) && Object.values(agents).every(isRecord)) records = [...shardedValues(agents as Sharded<unknown>)];
  return records
    .filter(isRecord)
    .map((record) => pickScalars(record, RECORD_FIELDS))
    .sort((a, b) => Number(a.depth ?? 0) - Number(b.depth ?? 0) || String(a.name).localeCompare(String(b.name)) || String(a.id).localeCompare(String(b.id)));
}

function sanitizeCoordinator(source: Record<string, unknown>): { [key: string]: Json } {
  return {
    ...pickScalars(source, ['runId', 'rootId', 'agentCount', 'activeNonRoot']),
    budget: pickScalars(source.budget, BUDGET_FLAGS),
    limits: pickScalars(source.limits, SPAWN_LIMITS),
    agents: agentList(source.agents),
  };
}

const isCoordinatorShape = (value: Record<string, unknown>) => typeof value.runId === 'string' && isRecord(value.limits);
const isAgentContextShape = (value: Record<string, unknown>) => isRecord(value.spec) && typeof value.spec.id === 'string' && typeof value.turns === 'number';

/**
 * The part of an actor's context the inspector may show: for an agent its ids, name, counters,
 * wait, stop reason, last tool, error code and report shape; for the coordinator its run ids,
 * counts, budget flags, limits and the agent list `{ id, name, parentId, depth, status }`.
 * Any other context (or none) becomes undefined.
 */
export function sanitizeContext(context: unknown): unknown {
  if (!isRecord(context)) return undefined;
  if (isCoordinatorShape(context)) return sanitizeCoordinator(context);
  // An agent's identity lives in its fixed `spec`; shown flat, with the counters.
  if (isAgentContextShape(context)) return { ...pickScalars(context.spec, ['id', 'name', 'parentId']), ...sanitizeAgent(context) };
  return undefined;
}

/** An actor's input in `xstate.init`: an agent's or the coordinator's, through the same allow-lists. */
function sanitizeInput(input: unknown): Json | undefined {
  if (!isRecord(input)) return undefined;
  if (isCoordinatorShape(input)) return sanitizeCoordinator(input);
  if (typeof input.id === 'string' && typeof input.name === 'string') {
    const state = isRecord(input.state) ? sanitizeAgent(input.state) : {};
    return { ...state, ...pickScalars(input, ['id', 'name', 'parentId', 'status']) };
  }
  return undefined;
}

/**
 * Plain data only (no class instances, functions, actor refs), without long strings, to a bounded
 * depth; with `dropSensitive`, also without keys that look like credentials or conversation text.
 */
function scrub(value: unknown, depth: number, dropSensitive = true): Json | undefined {
  const s = scalar(value);
  if (s !== undefined || value === null) return s;
  if (depth >= MAX_DEPTH) return undefined;
  if (Array.isArray(value)) {
    return value.map((item) => scrub(item, depth + 1, dropSensitive)).filter((item): item is Json => item !== undefined);
  }
  if (value instanceof Error) {
    const code = (value as { code?: unknown }).code;
    return typeof code === 'string' ? { name: value.name, code } : { name: value.name };
  }
  if (!isPlainObject(value)) return undefined; // actor refs, class instances, functions
  const out: { [key: string]: Json } = {};
  for (const [key, item] of Object.entries(value)) {
    if (dropSensitive && SENSITIVE_KEY.test(key)) continue;
    const kept = scrub(item, depth + 1, dropSensitive);
    if (kept !== undefined) out[key] = kept;
  }
  return out;
}

/**
 * The part of an event the inspector may show. `turn.done` keeps only the outcome's kind,
 * `agent.changed` only the id and status, `xstate.init` its input through the context
 * allow-lists; any other event loses strings over 200 characters and every key that looks like
 * a credential or conversation text (key, token, secret, authorization, password, content, task,
 * summary, message), at any depth.
 */
export function sanitizeEvent(event: unknown): unknown {
  if (!isRecord(event) || typeof event.type !== 'string') return { type: 'unknown' };
  const type = event.type.slice(0, MAX_STRING);
  switch (type) {
    case 'turn.done': {
      const kind = isRecord(event.outcome) ? scalar(event.outcome.kind) : undefined;
      return { type, outcome: { kind: typeof kind === 'string' ? kind : null } };
    }
    case 'agent.changed':
      return { type, ...pickScalars(event, ['id', 'status']) };
    case 'xstate.init': {
      const input = sanitizeInput(event.input);
      return input === undefined ? { type } : { type, input };
    }
    default: {
      const out = scrub(event, 0);
      return { ...(isRecord(out) ? out : {}), type };
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Wire format: what each message carries, built field by field (the adapter gets raw snapshots).

/** A snapshot's viewable fields; `machine`, `_nodes`, `input`, `output`, `historyValue` stay home. */
function wireSnapshot(snapshot: unknown): Json {
  if (!isRecord(snapshot)) return { status: 'active' };
  const out: { [key: string]: Json } = {};
  const status = scalar(snapshot.status);
  if (status !== undefined) out.status = status;
  // State values are state names (strings, or nested objects of them).
  const value = scrub(snapshot.value, 0, false);
  if (value !== undefined) out.value = value;
  // Already sanitised by createInspector: plain JSON from the allow-lists above.
  const context = scrub(snapshot.context, 0, false);
  if (context !== undefined) out.context = context;
  if (snapshot.error !== undefined) out.error = errorCode(snapshot.error);
  const tags: unknown = snapshot.tags;
  if (tags instanceof Set || Array.isArray(tags)) out.tags = [...(tags as Iterable<unknown>)].filter((t): t is string => typeof t === 'string');
  if (isRecord(snapshot.children)) {
    const children: { [key: string]: Json } = {};
    for (const [key, child] of Object.entries(snapshot.children)) {
      const id = isRecord(child) && typeof child.id === 'string' ? child.id : key;
      children[key] = { xstate$$type: 1, id };
    }
    out.children = children;
  }
  return out;
}

/** One inspection event as the JSON text the bridge page posts into the Stately iframe. */
function toWire(event: StatelyInspectionEvent): string {
  const base = {
    type: event.type,
    sessionId: event.sessionId,
    rootId: event.rootId,
    id: event.id,
    createdAt: event.createdAt,
    _version: event._version,
  };
  switch (event.type) {
    case '@xstate.actor':
      return JSON.stringify({
        ...base,
        name: event.name,
        parentId: event.parentId,
        definition: event.definition,
        snapshot: wireSnapshot(event.snapshot),
      });
    case '@xstate.event':
      return JSON.stringify({ ...base, sourceId: event.sourceId, event: event.event });
    case '@xstate.snapshot':
      return JSON.stringify({ ...base, event: event.event, snapshot: wireSnapshot(event.snapshot) });
  }
}

// ---------------------------------------------------------------------------------------------
// The bridge page and the relay.

/** The page at `/`: the Stately inspector in an iframe, fed from this server's WebSocket. */
function bridgePage(inspectorUrl = STATELY_INSPECT_URL): string {
  return `<!DOCTYPE html>
<html>
<head>
  <meta charset="utf-8">
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
    const buffer = [];
    let connected = false;

    window.addEventListener('message', (e) => {
      if (e.source === iframe.contentWindow && e.data && e.data.type === '@statelyai.connected') {
        connected = true;
        buffer.forEach((event) => iframe.contentWindow.postMessage(event, '*'));
        buffer.length = 0;
      }
    });

    // The server that served this page (also through ssh -L on another port).
    const ws = new WebSocket('ws://' + location.host);
    ws.onmessage = (event) => {
      const data = JSON.parse(event.data);
      if (connected) iframe.contentWindow.postMessage(data, '*');
      else buffer.push(data);
    };
  </script>
</body>
</html>`;
}

const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);

/** Whether a Host header names this machine's loopback interface (any port). */
function isLoopbackHost(host: string | undefined): boolean {
  if (host === undefined) return false;
  const name = host.startsWith('[') ? host.slice(0, host.indexOf(']') + 1) : host.split(':')[0]!;
  return LOOPBACK_HOSTS.has(name.toLowerCase());
}

/** No Origin (not a browser), or the page this server served (through whatever forwarded port). */
function isAllowedOrigin(req: IncomingMessage): boolean {
  const origin = req.headers.origin;
  if (origin === undefined) return true;
  try {
    return new URL(origin).host === req.headers.host;
  } catch {
    return false;
  }
}

function refuseUpgrade(socket: Duplex, status: string): void {
  socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
}

function checkPort(port: unknown): number {
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 0 || port > 65_535) {
    throw new ConfigError(`Expected the inspector port to be an integer from 0 to 65535, got ${String(port)}`);
  }
  return port;
}

function hintFor(url: string, port: number): string {
  return (
    `XState inspector: open ${url} in a browser on this machine. The page embeds the hosted Stately ` +
    `inspector (${STATELY_INSPECT_URL}), so that browser needs internet access; the inspection events ` +
    `themselves go only to this page, over a server bound to 127.0.0.1, and carry ids, statuses and ` +
    `counters, never conversation text. From another machine, forward the port first with ` +
    `\`ssh -L ${port}:127.0.0.1:${port} <user>@<this-host>\` and open ${url} there.`
  );
}

/**
 * Start the inspector server on 127.0.0.1 and return the observer to pass to createCoordinator.
 * Rejects if the port cannot be bound (in use, or not allowed).
 */
export async function startInspector(options: InspectorOptions = {}): Promise<InspectorHandle> {
  const requested = checkPort(options.port ?? 8080);
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
    res
      .writeHead(200, {
        'Content-Type': 'text/html; charset=utf-8',
        'Cache-Control': 'no-store',
        'X-Content-Type-Options': 'nosniff',
      })
      .end(req.method === 'HEAD' ? undefined : bridgePage());
  });
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => socket.destroy());
    if (!relaying) return refuseUpgrade(socket, '503 Service Unavailable');
    if (!isLoopbackHost(req.headers.host) || !isAllowedOrigin(req)) return refuseUpgrade(socket, '403 Forbidden');
    wss.handleUpgrade(req, socket, head, (client) => {
      client.on('error', () => client.terminate());
      for (const message of replay) client.send(message);
    });
  });

  await new Promise<void>((resolve, reject) => {
    const onError = (err: Error) => {
      wss.close();
      reject(new Error(`XState inspector: cannot listen on 127.0.0.1:${requested}: ${err.message}`, { cause: err }));
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
  const url = `http://127.0.0.1:${port}`;

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

  return { inspect, port, url, hint: hintFor(url, port), close };
}
