/**
 * An MCP server a replay stands in for (issue 37): it connects to nothing and lists the tools the
 * recording's requests offered from that server (their specs and the server's hints, as the call
 * log kept them); each tool's calls are answered by the replay (`answer`), never by a server.
 * @module
 */
import { TroupeError } from '../errors.js';
import type { CompiledTool } from '../tools/defineTool.js';
import type { McpServer } from './config.js';
import type { McpConnection, McpServerStatus, McpTool } from './connection.js';

/** What the catalog uses of a connection. */
export type ServerConnection = Pick<McpConnection, 'tools' | 'status' | 'onStatus' | 'onToolsChanged' | 'start' | 'close' | 'call'>;

/** A server declaration whose tools come from a recording. */
export interface ReplayedMcpServer extends McpServer {
  readonly replayed: {
    /** The recorded listing; null: the server is started (a replay that goes live calls it from then on). */
    readonly tools: readonly McpTool[] | null;
    /** The adapted tool with the replay's answers in place of the server's. */
    answer(tool: CompiledTool): CompiledTool;
  };
}

export const isReplayed = (server: McpServer): server is ReplayedMcpServer => 'replayed' in server;

/** Whether the catalog stands in for `server` with its recorded tools (else it connects). */
export const standsIn = (server: McpServer): server is ReplayedMcpServer => isReplayed(server) && server.replayed.tools !== null;

/** Connected at `start` with the recorded tools, as a server that answered its listing at once. */
export class ReplayedConnection implements ServerConnection {
  readonly #listed: readonly McpTool[];
  #tools: readonly McpTool[] = [];
  #status: McpServerStatus;
  readonly #toolListeners = new Set<() => void>();
  readonly #statusListeners = new Set<(status: McpServerStatus) => void>();

  constructor(server: ReplayedMcpServer) {
    this.#listed = server.replayed.tools ?? [];
    this.#status = { server: server.options.name, state: 'starting', tools: 0, error: null };
  }

  get tools(): readonly McpTool[] {
    return this.#tools;
  }

  get status(): McpServerStatus {
    return this.#status;
  }

  onStatus(listener: (status: McpServerStatus) => void): () => void {
    this.#statusListeners.add(listener);
    return () => this.#statusListeners.delete(listener);
  }

  onToolsChanged(listener: () => void): () => void {
    this.#toolListeners.add(listener);
    return () => this.#toolListeners.delete(listener);
  }

  start(): Promise<void> {
    if (this.#status.state === 'starting') {
      // The order a real connection keeps: its tools, then its status (connection.ts).
      this.#tools = this.#listed;
      for (const listener of this.#toolListeners) listener();
      this.#status = { ...this.#status, state: 'connected', tools: this.#listed.length };
      for (const listener of this.#statusListeners) listener(this.#status);
    }
    return Promise.resolve();
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  /** Never reached: the replay answers every call of the adapted tools (`answer`). */
  call(): never {
    throw new TroupeError('INTERNAL', 'a replayed MCP server is never called: the replay answers its tools');
  }
}
