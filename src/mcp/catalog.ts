/**
 * The user tools of a coordinator: the `defineTool` tools, fixed, and the tools of its MCP servers,
 * which change as servers connect, restart and announce `tools/list_changed`.
 *
 * Names: an MCP tool keeps its own name when no other tool (built-in, user tool, another server's)
 * has it; otherwise it is offered as `<server>__<tool>`. Names the model cannot use are made safe
 * the same way (characters outside [a-zA-Z0-9_-] become `_`).
 *
 * Per-agent tool sets: a skill `tools:<name>` (`<name>` a server or a tool name) limits the user
 * tools of the agent that has it to the ones it names, and a child never gets more than its parent.
 * @module
 */
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import { ConfigError, TroupeError } from '../errors.js';
import { compileTool, TOOL_NAME, type CompiledTool, type Tool } from '../tools/defineTool.js';
import { isMcpServer, type McpServer, type McpServerOptions } from './config.js';
import { McpConnection, type McpServerStatus } from './connection.js';
import { isReplayed, ReplayedConnection, standsIn, type ServerConnection } from './replayed.js';
import { adaptTool, originOf, type McpToolOrigin } from './tools.js';

export interface CatalogEntry {
  readonly tool: CompiledTool;
  /** The MCP server it comes from; null for a `defineTool` tool. */
  readonly server: string | null;
  /** For an MCP tool: where it comes from (what a replay needs beside its spec). */
  readonly origin?: McpToolOrigin;
}

/** The prefix of skills that name an agent's tool set. */
const TOOL_SET_SKILL = 'tools:';

/** The tool set a list of skills names (null: no restriction). */
export function toolSetOf(skills: readonly string[]): string[] | null {
  const names = skills.filter((s) => s.startsWith(TOOL_SET_SKILL)).map((s) => s.slice(TOOL_SET_SKILL.length).trim());
  return names.length === 0 ? null : names;
}

/** Whether `entry` is in every one of `sets` (an agent's and its ancestors' tool sets). */
export const inSets = (entry: CatalogEntry, sets: readonly (readonly string[])[]): boolean =>
  sets.every((set) => set.includes(entry.tool.name) || (entry.server !== null && set.includes(entry.server)));

const safeName = (name: string) => {
  const safe = name.replace(/[^a-zA-Z0-9_-]/g, '_').slice(0, 64);
  return /^[a-zA-Z]/.test(safe) ? safe : `t${safe}`.slice(0, 64);
};

export class ToolCatalog {
  readonly #fixed = new Map<string, CatalogEntry>();
  readonly #servers: { options: McpServerOptions; conn: ServerConnection; answer?: (tool: CompiledTool) => CompiledTool }[] = [];
  readonly #reserved: ReadonlySet<string>;
  readonly #logger: Logger;
  #entries = new Map<string, CatalogEntry>();
  #version = 0;
  readonly #listeners = new Set<() => void>();
  readonly #statusListeners = new Set<(status: McpServerStatus) => void>();

  constructor(tools: readonly (Tool | McpServer)[], deps: { clock: Clock; logger: Logger; reserved: ReadonlySet<string> }) {
    this.#reserved = deps.reserved;
    this.#logger = deps.logger;
    for (const entry of tools) {
      if (isMcpServer(entry)) {
        if (this.#servers.some((s) => s.options.name === entry.options.name)) {
          throw new ConfigError(`Expected MCP server names to be unique, got "${entry.options.name}" twice`);
        }
        // A replay's stand-in connects to nothing: its tools are the recording's (replayed.ts).
        const conn = standsIn(entry) ? new ReplayedConnection(entry) : new McpConnection(entry.options, deps);
        conn.onToolsChanged(() => this.#rebuild());
        conn.onStatus((status) => {
          for (const listener of this.#statusListeners) listener(status);
        });
        this.#servers.push({ options: entry.options, conn, ...(isReplayed(entry) ? { answer: entry.replayed.answer } : {}) });
        continue;
      }
      const compiled = compileTool(entry);
      if (deps.reserved.has(compiled.name) || this.#fixed.has(compiled.name)) {
        throw new ConfigError(`Expected tool names to be unique and not shadow a built-in, got "${compiled.name}" twice`);
      }
      this.#fixed.set(compiled.name, { tool: compiled, server: null });
    }
    this.#rebuild();
  }

  /** Grows by one whenever the tools change (cached tool lists compare it). */
  get version(): number {
    return this.#version;
  }

  get hasServers(): boolean {
    return this.#servers.length > 0;
  }

  /** Where the MCP tool offered as `name` comes from; undefined for any other tool. */
  origin(name: string): McpToolOrigin | undefined {
    return this.#entries.get(name)?.origin;
  }

  get(name: string): CatalogEntry | undefined {
    return this.#entries.get(name);
  }

  values(): IterableIterator<CatalogEntry> {
    return this.#entries.values();
  }

  /** Where each MCP server stands now. */
  servers(): McpServerStatus[] {
    return this.#servers.map((s) => s.conn.status);
  }

  /** Called when an MCP server fails to start, connects, or is lost. */
  onServerStatus(listener: (status: McpServerStatus) => void): () => void {
    this.#statusListeners.add(listener);
    return () => this.#statusListeners.delete(listener);
  }

  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * Start every MCP server (once); resolves when each first attempt connected or failed. A server
   * that failed keeps restarting with backoff; its tools appear when it connects.
   */
  start(): Promise<void> {
    return Promise.all(this.#servers.map((s) => s.conn.start())).then(() => undefined);
  }

  /**
   * `start`, and with `strict` a server whose first start failed is MCP_SERVER_UNAVAILABLE (every
   * server is stopped first: nothing is left running for a run that does not go on).
   */
  async startStrict(strict: boolean): Promise<void> {
    await this.start();
    const down = strict ? this.servers().filter((s) => s.state !== 'connected') : [];
    if (down.length === 0) return;
    await this.close();
    throw new TroupeError(
      'MCP_SERVER_UNAVAILABLE',
      `${down.map((s) => `MCP server "${s.server}" failed to start (${s.error ?? 'no answer'})`).join('; ')}; with strictMcp (--strict-mcp) the run does not go on without its tools`,
    );
  }

  /** Stop every server (stdio processes end). */
  async close(): Promise<void> {
    await Promise.all(this.#servers.map((s) => s.conn.close()));
  }

  #rebuild(): void {
    // How often each raw name is offered: by a built-in, a user tool, or any server.
    const count = new Map<string, number>();
    const bump = (name: string) => count.set(name, (count.get(name) ?? 0) + 1);
    for (const name of this.#reserved) bump(name);
    for (const name of this.#fixed.keys()) bump(name);
    for (const { conn } of this.#servers) for (const name of new Set(conn.tools.map((t) => t.name))) bump(name);
    const entries = new Map(this.#fixed);
    for (const { options, conn, answer } of this.#servers) {
      const seen = new Set<string>();
      for (const listed of conn.tools) {
        if (seen.has(listed.name)) continue;
        seen.add(listed.name);
        const unique = count.get(listed.name) === 1 && TOOL_NAME.test(listed.name);
        const name = unique ? listed.name : safeName(`${options.name}__${listed.name}`);
        if (entries.has(name) || this.#reserved.has(name)) {
          this.#logger.warn({ mcpServer: options.name, tool: listed.name, name }, 'an MCP tool was left out: its name collides even with the server prefix');
          continue;
        }
        const tool = adaptTool(conn, options, listed, name, this.#logger);
        if (tool) entries.set(name, { tool: answer ? answer(tool) : tool, server: options.name, origin: originOf(options.name, listed) });
      }
    }
    this.#entries = entries;
    this.#version += 1;
    for (const listener of this.#listeners) listener();
  }
}
