/**
 * One MCP server for one coordinator, through the official SDK client: connect (stdio or streamable
 * HTTP), list its tools (again on `notifications/tools/list_changed`), call them with the agent's
 * AbortSignal (an abort is sent as MCP cancellation), and restart a server that dies with backoff.
 *
 * A call while the server is down waits for the next restart attempt only: if that attempt fails
 * too, the call fails with MCP_SERVER_UNAVAILABLE instead of waiting out its whole timeout. Calls
 * in flight when the server dies fail with MCP_SERVER_UNAVAILABLE (their effect is unknown).
 *
 * Bounded (limits.ts): a message over the server's message limit is cut off as it is read and the
 * call it answers fails with MCP_RESULT_TOO_LARGE (the connection goes on); a listing over
 * `maxListPages` pages or `maxTools` tools fails the attempt with MCP_LIST_TOO_LONG /
 * MCP_TOO_MANY_TOOLS, like a server that cannot be reached (a relisting keeps the tools it had).
 * @module
 */
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { CallToolResult, Tool as McpTool } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import { TroupeError } from '../errors.js';
import { describeServer, type McpServerOptions } from './config.js';
import { BoundedLineBuffer, boundedHttpFetch, DEFAULT_MAX_LIST_PAGES, DEFAULT_MAX_TOOLS, isTooLarge, messageLimit } from './limits.js';

export type { CallToolResult, McpTool };

/** Restart backoff: min(BASE · 2^n, MAX) after the n-th failure in a row. */
const RESTART_BASE_MS = 250;
const RESTART_MAX_MS = 30_000;
const DEFAULT_CONNECT_TIMEOUT_MS = 30_000;
/** The SDK's own request timer is left out of the way: the tool timeout (on troupe's clock) rules. */
const NO_SDK_TIMEOUT = 2_147_483_647;

interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(err: unknown): void;
}

function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (err: unknown) => void;
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
  promise.catch(() => undefined); // a rejected attempt nobody waited on is not an unhandled rejection
  return { promise, resolve, reject };
}

/**
 * The MCP SDK (and zod under it), imported by the first connection attempt rather than with this
 * module: every CLI command reaches this file through the runtime, few of them talk to an MCP
 * server, and loading the SDK was about a third of a command's start-up.
 */
const importSdk = async () => {
  const [client, stdio, http, types] = await Promise.all([
    import('@modelcontextprotocol/sdk/client/index.js'),
    import('@modelcontextprotocol/sdk/client/stdio.js'),
    import('@modelcontextprotocol/sdk/client/streamableHttp.js'),
    import('@modelcontextprotocol/sdk/types.js'),
  ]);
  const { ErrorCode, JSONRPCMessageSchema, McpError, ToolListChangedNotificationSchema } = types;
  return { ...client, ...stdio, ...http, ErrorCode, JSONRPCMessageSchema, McpError, ToolListChangedNotificationSchema };
};
type Sdk = Awaited<ReturnType<typeof importSdk>>;
let sdk: Sdk | null = null;
let sdkLoading: Promise<Sdk> | null = null;
const loadSdk = (): Promise<Sdk> => (sdkLoading ??= importSdk().then((loaded) => (sdk = loaded)));

const unavailable = (server: string, why: string) =>
  new TroupeError(
    'MCP_SERVER_UNAVAILABLE',
    `The MCP server "${server}" is unavailable (${why}); it is restarted with backoff. Any effect of a call in flight is unknown.`,
  );

/** Whether an error of a call says the connection is gone (rather than the server answering an error). */
function isTransportFailure(err: unknown): boolean {
  // A call failed, so a client existed and the SDK is loaded.
  if (err instanceof sdk!.McpError) return err.code === sdk!.ErrorCode.ConnectionClosed;
  if (err instanceof TroupeError) return false;
  const name = (err as { name?: unknown })?.name;
  return name !== 'ZodError' && name !== 'SyntaxError';
}

/** Where an MCP server stands: told to `onStatus` listeners at each change, read with `status`. */
export interface McpServerStatus {
  readonly server: string;
  /** `starting` until the first attempt ends; `failed` while down after a failed start, `lost` after a connection that dropped. */
  readonly state: 'starting' | 'connected' | 'failed' | 'lost';
  /** Tools listed by the last connection (0 before any). */
  readonly tools: number;
  /** Why it is down, in words (null while starting or connected). */
  readonly error: string | null;
}

export class McpConnection {
  readonly name: string;
  readonly #options: McpServerOptions;
  readonly #clock: Clock;
  readonly #logger: Logger;
  #client: Client | null = null;
  /** The client of an attempt still connecting (closed at once by `close`, not after its timeout). */
  #connecting: Client | null = null;
  /** Settles with the next connection attempt. */
  #next: Deferred<Client> = deferred();
  #generation = 0;
  #failures = 0;
  #timer: unknown = null;
  #started: Promise<void> | null = null;
  #closed = false;
  #tools: readonly McpTool[] = [];
  readonly #listeners = new Set<() => void>();
  readonly #statusListeners = new Set<(status: McpServerStatus) => void>();
  #status: McpServerStatus;

  constructor(options: McpServerOptions, deps: { clock: Clock; logger: Logger }) {
    this.name = options.name;
    this.#options = options;
    this.#clock = deps.clock;
    this.#logger = deps.logger.child(describeServer(options));
    this.#status = { server: options.name, state: 'starting', tools: 0, error: null };
  }

  get status(): McpServerStatus {
    return this.#status;
  }

  /** Called at each change of `status` (a start that failed, a connection, a loss). */
  onStatus(listener: (status: McpServerStatus) => void): () => void {
    this.#statusListeners.add(listener);
    return () => this.#statusListeners.delete(listener);
  }

  #setStatus(state: McpServerStatus['state'], error: string | null): void {
    this.#status = { server: this.name, state, tools: this.#tools.length, error };
    for (const listener of this.#statusListeners) listener(this.#status);
  }

  /** The tools of the last listing (empty until the first connection). */
  get tools(): readonly McpTool[] {
    return this.#tools;
  }

  get connected(): boolean {
    return this.#client !== null;
  }

  /** Called whenever the tool list changes (a connection, a restart, `list_changed`). */
  onToolsChanged(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Start it once; resolves when the first attempt has connected or failed (then it keeps retrying). */
  start(): Promise<void> {
    this.#started ??= this.#attempt().then(() => undefined);
    return this.#started;
  }

  /** Call a tool; the signal's abort is sent to the server as `notifications/cancelled`. */
  async call(tool: string, args: Record<string, unknown>, signal: AbortSignal, meta: Record<string, unknown>): Promise<CallToolResult> {
    if (this.#closed) throw unavailable(this.name, 'the coordinator shut down');
    void this.start();
    const client = this.#client ?? (await this.#whenUp(signal));
    const generation = this.#generation;
    try {
      return (await client.callTool({ name: tool, arguments: args, _meta: meta }, undefined, { signal, timeout: NO_SDK_TIMEOUT })) as CallToolResult;
    } catch (err) {
      if (signal.aborted) throw signal.reason;
      const limit = isTooLarge(err);
      if (limit !== null) {
        throw new TroupeError(
          'MCP_RESULT_TOO_LARGE',
          `${tool} (MCP server "${this.name}") answered with more than ${limit} bytes; it was cut off unread. Ask for less.`,
        );
      }
      if (!isTransportFailure(err)) throw err;
      this.#lost(generation, (err as Error)?.message ?? String(err));
      throw unavailable(this.name, `the connection failed during the call: ${(err as Error)?.message ?? String(err)}`);
    }
  }

  /** Stop the server (stdio: its process ends) and any restart; calls after this fail. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#timer !== null) this.#clock.clearTimeout(this.#timer);
    this.#generation += 1;
    const clients = [this.#client, this.#connecting];
    this.#client = this.#connecting = null;
    this.#next.reject(unavailable(this.name, 'the coordinator shut down'));
    await Promise.all(clients.map((c) => c?.close().catch((err: unknown) => this.#logger.debug({ err }, 'closing the MCP client failed'))));
  }

  #whenUp(signal: AbortSignal): Promise<Client> {
    if (signal.aborted) return Promise.reject(signal.reason);
    return new Promise<Client>((resolve, reject) => {
      const onAbort = () => reject(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      this.#next.promise.then(
        (client) => {
          signal.removeEventListener('abort', onAbort);
          resolve(client);
        },
        (err: unknown) => {
          signal.removeEventListener('abort', onAbort);
          reject(err);
        },
      );
    });
  }

  #transport({ JSONRPCMessageSchema, StdioClientTransport, StreamableHTTPClientTransport }: Sdk): Transport {
    const o = this.#options;
    const limit = messageLimit(o);
    if ('url' in o) {
      // A response over the limit is cut off as it arrives; its request is answered with an error at once.
      const deliver = (message: Parameters<NonNullable<Transport['onmessage']>>[0]) => http.onmessage?.(message);
      const http: Transport = new StreamableHTTPClientTransport(new URL(o.url), {
        requestInit: { headers: { ...o.headers } },
        fetch: boundedHttpFetch(limit, deliver),
      });
      return http;
    }
    // Only the environment the config names (the SDK adds HOME, LOGNAME, PATH, SHELL, TERM, USER).
    const transport = new StdioClientTransport({
      command: o.command,
      args: [...(o.args ?? [])],
      env: { ...o.env },
      stderr: 'pipe',
      maxBufferSize: limit,
      ...(o.cwd ? { cwd: o.cwd } : {}),
    });
    // The SDK's reader keeps a line whole until its end (and closes the connection past its buffer):
    // ours skips the rest of a line over the limit and answers its request with an error.
    const reader = transport as unknown as { _readBuffer?: { append?: unknown; readMessage?: unknown; clear?: unknown } };
    if (typeof reader._readBuffer?.append === 'function' && typeof reader._readBuffer.readMessage === 'function') {
      reader._readBuffer = new BoundedLineBuffer(
        limit,
        (line) => JSONRPCMessageSchema.parse(JSON.parse(line)),
        (line, kind) => this.#logger.warn({ bytes: line.bytes, limit, kind: kind.kind }, 'an MCP message over the limit was skipped unread'),
      );
    } else {
      this.#logger.warn({ limit }, "the MCP SDK's stdio reader could not be replaced: a message over the limit closes the connection");
    }
    // The server's stderr goes to the log, never the terminal.
    const stderr = transport.stderr as Readable | null;
    if (stderr) createInterface({ input: stderr }).on('line', (line) => this.#logger.info({ stderr: line }, 'MCP server stderr'));
    return transport;
  }

  async #attempt(): Promise<boolean> {
    this.#timer = null;
    if (this.#closed) return false;
    const generation = ++this.#generation;
    const next = this.#next;
    // Synchronous once loaded; the first attempt waits for the import (close may come meanwhile).
    const mcp = sdk ?? (await loadSdk());
    if (generation !== this.#generation || this.#closed) return false;
    const client = new mcp.Client({ name: 'troupe', version: '0.1.0' }, { capabilities: {} });
    this.#connecting = client;
    client.onclose = () => this.#lost(generation, 'the connection closed');
    client.onerror = (err) => this.#logger.debug({ err }, 'MCP transport error');
    client.setNotificationHandler(mcp.ToolListChangedNotificationSchema, () => void this.#relist(client, generation));
    const timeout = this.#options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    try {
      await client.connect(this.#transport(mcp), { timeout });
      const tools = await this.#listAll(client, timeout);
      if (generation !== this.#generation) {
        await client.close();
        return false;
      }
      this.#client = client;
      this.#connecting = null;
      this.#failures = 0;
      this.#logger.info({ tools: tools.length }, 'MCP server connected');
      this.#setTools(tools);
      this.#setStatus('connected', null);
      next.resolve(client);
      return true;
    } catch (err) {
      if (generation !== this.#generation) return false;
      this.#connecting = null;
      this.#logger.warn({ err: errFields(err) }, 'MCP server failed to start');
      // Told once per outage, not at every retry of it.
      if (this.#status.state !== 'failed' && this.#status.state !== 'lost') this.#setStatus('failed', (err as Error)?.message ?? String(err));
      client.onclose = () => undefined;
      await client.close().catch(() => undefined);
      this.#next = deferred();
      next.reject(unavailable(this.name, `it failed to start: ${(err as Error)?.message ?? String(err)}`));
      this.#scheduleRestart();
      return false;
    }
  }

  /** The connection of `generation` is gone: in-flight calls fail (the SDK rejects them), restart. */
  #lost(generation: number, why: string): void {
    if (generation !== this.#generation || this.#closed || this.#client === null) return;
    this.#logger.warn({ why }, 'MCP server lost; restarting');
    this.#setStatus('lost', why);
    const client = this.#client;
    this.#client = null;
    this.#generation += 1;
    this.#next = deferred();
    client.onclose = () => undefined;
    void client.close().catch(() => undefined);
    this.#scheduleRestart();
  }

  #scheduleRestart(): void {
    if (this.#closed || this.#timer !== null) return;
    const delay = Math.min(RESTART_BASE_MS * 2 ** this.#failures, RESTART_MAX_MS);
    this.#failures += 1;
    this.#timer = this.#clock.setTimeout(() => void this.#attempt(), delay);
  }

  async #relist(client: Client, generation: number): Promise<void> {
    try {
      const tools = await this.#listAll(client, this.#options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS);
      if (generation !== this.#generation) return;
      this.#logger.info({ tools: tools.map((t) => t.name) }, 'MCP tool list changed');
      this.#setTools(tools);
    } catch (err) {
      this.#logger.warn({ err: errFields(err) }, 'listing the tools of an MCP server failed; its tools stay as they were');
    }
  }

  #setTools(tools: readonly McpTool[]): void {
    this.#tools = tools;
    for (const listener of this.#listeners) listener();
  }

  /**
   * Every page of `tools/list`, at most `maxListPages` of them and `maxTools` tools in all: past
   * either the listing stops at once (an endless pagination grew memory without bound and held up
   * every model call; 10 000 tools went into every request).
   */
  async #listAll(client: Client, timeout: number): Promise<McpTool[]> {
    const maxPages = this.#options.maxListPages ?? DEFAULT_MAX_LIST_PAGES;
    const maxTools = this.#options.maxTools ?? DEFAULT_MAX_TOOLS;
    const tools: McpTool[] = [];
    let cursor: string | undefined;
    for (let pages = 0; ;) {
      let page: Awaited<ReturnType<Client['listTools']>>;
      try {
        page = await client.listTools(cursor === undefined ? {} : { cursor }, { timeout });
      } catch (err) {
        const limit = isTooLarge(err);
        if (limit === null) throw err;
        throw new TroupeError('MCP_RESULT_TOO_LARGE', `The MCP server "${this.name}" answered tools/list with more than ${limit} bytes; it was cut off unread`);
      }
      pages += 1;
      tools.push(...page.tools);
      if (tools.length > maxTools) {
        throw new TroupeError('MCP_TOO_MANY_TOOLS', `The MCP server "${this.name}" lists more than ${maxTools} tools (its maxTools); none of them is offered`);
      }
      cursor = page.nextCursor;
      if (cursor === undefined) return tools;
      if (pages >= maxPages) {
        throw new TroupeError(
          'MCP_LIST_TOO_LONG',
          `The MCP server "${this.name}" still had more tools/list pages after ${maxPages} (its maxListPages); none of its tools is offered`,
        );
      }
    }
  }
}

/** An error for the log: its code when it has one, and its message. */
function errFields(err: unknown): { code?: string; message: string } {
  const message = (err as Error)?.message ?? String(err);
  return err instanceof TroupeError ? { code: err.code, message } : { message };
}
