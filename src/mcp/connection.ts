/**
 * One MCP server for one coordinator, through the official SDK client: connect (stdio or streamable
 * HTTP), list its tools (again on `notifications/tools/list_changed`), call them with the agent's
 * AbortSignal (an abort is sent as MCP cancellation), and restart a server that dies with backoff.
 *
 * A call while the server is down waits for the next restart attempt only: if that attempt fails
 * too, the call fails with MCP_SERVER_UNAVAILABLE instead of waiting out its whole timeout. Calls
 * in flight when the server dies fail with MCP_SERVER_UNAVAILABLE (their effect is unknown).
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

export type { CallToolResult, McpTool };

/** Restart backoff: min(BASE · 2^n, MAX) after the n-th failure in a row. */
export const RESTART_BASE_MS = 250;
export const RESTART_MAX_MS = 30_000;
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
  const { ErrorCode, McpError, ToolListChangedNotificationSchema } = types;
  return { ...client, ...stdio, ...http, ErrorCode, McpError, ToolListChangedNotificationSchema };
};
type Sdk = Awaited<ReturnType<typeof importSdk>>;
let sdk: Sdk | null = null;
let sdkLoading: Promise<Sdk> | null = null;
const loadSdk = (): Promise<Sdk> => (sdkLoading ??= importSdk().then((loaded) => (sdk = loaded)));

export const unavailable = (server: string, why: string) =>
  new TroupeError('MCP_SERVER_UNAVAILABLE', `The MCP server "${server}" is unavailable (${why}); it is restarted with backoff. Any effect of a call in flight is unknown.`);

/** Whether an error of a call says the connection is gone (rather than the server answering an error). */
function isTransportFailure(err: unknown): boolean {
  // A call failed, so a client existed and the SDK is loaded.
  if (err instanceof sdk!.McpError) return err.code === sdk!.ErrorCode.ConnectionClosed;
  if (err instanceof TroupeError) return false;
  const name = (err as { name?: unknown })?.name;
  return name !== 'ZodError' && name !== 'SyntaxError';
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

  constructor(options: McpServerOptions, deps: { clock: Clock; logger: Logger }) {
    this.name = options.name;
    this.#options = options;
    this.#clock = deps.clock;
    this.#logger = deps.logger.child(describeServer(options));
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

  #transport({ StdioClientTransport, StreamableHTTPClientTransport }: Sdk): Transport {
    const o = this.#options;
    if ('url' in o) return new StreamableHTTPClientTransport(new URL(o.url), { requestInit: { headers: { ...o.headers } } });
    // Only the environment the config names (the SDK adds HOME, LOGNAME, PATH, SHELL, TERM, USER).
    const transport = new StdioClientTransport({ command: o.command, args: [...(o.args ?? [])], env: { ...o.env }, stderr: 'pipe', ...(o.cwd ? { cwd: o.cwd } : {}) });
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
      const tools = await listAll(client, timeout);
      if (generation !== this.#generation) {
        await client.close();
        return false;
      }
      this.#client = client;
      this.#connecting = null;
      this.#failures = 0;
      this.#logger.info({ tools: tools.length }, 'MCP server connected');
      this.#setTools(tools);
      next.resolve(client);
      return true;
    } catch (err) {
      if (generation !== this.#generation) return false;
      this.#connecting = null;
      this.#logger.warn({ err: { message: (err as Error)?.message ?? String(err) } }, 'MCP server failed to start');
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
      const tools = await listAll(client, this.#options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS);
      if (generation !== this.#generation) return;
      this.#logger.info({ tools: tools.map((t) => t.name) }, 'MCP tool list changed');
      this.#setTools(tools);
    } catch (err) {
      this.#logger.warn({ err: { message: (err as Error)?.message } }, 'listing the tools of an MCP server failed');
    }
  }

  #setTools(tools: readonly McpTool[]): void {
    this.#tools = tools;
    for (const listener of this.#listeners) listener();
  }
}

/** Every page of `tools/list`. */
async function listAll(client: Client, timeout: number): Promise<McpTool[]> {
  const tools: McpTool[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.listTools(cursor === undefined ? {} : { cursor }, { timeout });
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return tools;
}
