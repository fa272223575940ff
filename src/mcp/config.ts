/**
 * `mcpServer(...)`: a Model Context Protocol server as an entry of `tools` — stdio (a command troupe
 * starts) or streamable HTTP (a URL). Checked when it is declared, like `defineTool`.
 * @module
 */
import { ConfigError } from '../errors.js';
import type { ToolRisk } from '../tools/defineTool.js';

/** Per-tool overrides of what the server's annotations say. */
export interface McpToolOverride {
  risk?: ToolRisk;
  idempotent?: boolean;
  timeoutMs?: number;
}

interface McpCommon {
  /** Names the server in logs, in `<server>__<tool>` names and in `tools:<server>` skills. */
  name: string;
  /** Overrides by the server's own tool name. */
  tools?: Record<string, McpToolOverride>;
  /** How long connecting and listing may take before the attempt counts as failed. Default 30 s. */
  connectTimeoutMs?: number;
  /**
   * A result whose text is larger than this (characters) is refused with MCP_RESULT_TOO_LARGE; its
   * images are sent to the model while text and base64 together stay within it (an image over it
   * is described as not shown). Default 1 000 000. Any message of the server is read only up to
   * 8 bytes per character of it, and at least 8 MiB: a longer one is cut off as it arrives
   * (MCP_RESULT_TOO_LARGE for the call it answers), never read whole.
   */
  maxResultChars?: number;
  /**
   * The most tools the server may list. A server listing more fails to start with
   * MCP_TOO_MANY_TOOLS (retried with backoff like any failed start; a `list_changed` that goes
   * over keeps the tools listed before). Every tool goes into every model request. Default 256.
   */
  maxTools?: number;
  /**
   * The most `tools/list` pages read in one listing; a server with more pages fails to start with
   * MCP_LIST_TOO_LONG (like maxTools). Default 100.
   */
  maxListPages?: number;
}

export interface McpStdioServerOptions extends McpCommon {
  command: string;
  args?: string[];
  /**
   * The server's whole environment besides PATH (needed to find the command): nothing of troupe's
   * own environment is inherited, so OPENAI_API_KEY never reaches a tool server unless named here.
   */
  env?: Record<string, string>;
  cwd?: string;
}

export interface McpHttpServerOptions extends McpCommon {
  url: string;
  /** Sent with every request (e.g. Authorization); never logged. */
  headers?: Record<string, string>;
}

export type McpServerOptions = McpStdioServerOptions | McpHttpServerOptions;

/** A checked MCP server declaration (what `mcpServer` returns). */
export interface McpServer {
  readonly kind: 'mcp';
  readonly options: Readonly<McpServerOptions>;
}

export const isMcpServer = (value: unknown): value is McpServer =>
  typeof value === 'object' && value !== null && (value as { kind?: unknown }).kind === 'mcp' && typeof (value as { options?: unknown }).options === 'object';

/** Server names: they prefix tool names (`<server>__<tool>`, at most 64 characters in all). */
const SERVER_NAME = /^[a-zA-Z][a-zA-Z0-9_-]{0,31}$/;
const RISKS: readonly ToolRisk[] = ['read_only', 'mutation', 'destructive'];

const show = (v: unknown) => JSON.stringify(v) ?? String(v);

function stringRecord(where: string, value: unknown): Record<string, string> {
  if (typeof value !== 'object' || value === null || Array.isArray(value) || Object.values(value).some((v) => typeof v !== 'string')) {
    throw new ConfigError(`Expected ${where} to be an object of strings`);
  }
  return value as Record<string, string>;
}

const positive = (where: string, v: unknown) => {
  if (v !== undefined && !(typeof v === 'number' && Number.isFinite(v) && v > 0)) throw new ConfigError(`Expected ${where} to be a number > 0, got ${show(v)}`);
};

const positiveInt = (where: string, v: unknown) => {
  if (v !== undefined && !(Number.isSafeInteger(v) && (v as number) > 0)) throw new ConfigError(`Expected ${where} to be an integer > 0, got ${show(v)}`);
};

/** Check a declaration; throws ConfigError naming the field. */
function checkMcpServer(options: unknown): McpServerOptions {
  if (typeof options !== 'object' || options === null) throw new ConfigError(`Expected MCP server options to be an object, got ${show(options)}`);
  const o = options as Record<string, unknown>;
  if (typeof o.name !== 'string' || !SERVER_NAME.test(o.name)) {
    throw new ConfigError(`Expected MCP server name to match ${SERVER_NAME}, got ${show(o.name)}`);
  }
  const at = `MCP server "${o.name}"`;
  const stdio = o.command !== undefined;
  if (stdio === (o.url !== undefined)) throw new ConfigError(`Expected ${at} to have either a command (stdio) or a url (streamable HTTP)`);
  if (stdio) {
    if (typeof o.command !== 'string' || o.command.length === 0) throw new ConfigError(`Expected ${at} command to be a non-empty string`);
    if (o.args !== undefined && (!Array.isArray(o.args) || o.args.some((a) => typeof a !== 'string')))
      throw new ConfigError(`Expected ${at} args to be an array of strings`);
    if (o.env !== undefined) stringRecord(`${at} env`, o.env);
    if (o.cwd !== undefined && typeof o.cwd !== 'string') throw new ConfigError(`Expected ${at} cwd to be a string`);
    if (o.headers !== undefined) throw new ConfigError(`Expected ${at} headers only with a url`);
  } else {
    let url: URL;
    try {
      url = new URL(o.url as string);
    } catch {
      throw new ConfigError(`Expected ${at} url to be a URL`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ConfigError(`Expected ${at} url to be http(s), got ${url.protocol}`);
    if (o.headers !== undefined) stringRecord(`${at} headers`, o.headers);
    if (o.env !== undefined || o.args !== undefined) throw new ConfigError(`Expected ${at} env and args only with a command`);
  }
  positive(`${at} connectTimeoutMs`, o.connectTimeoutMs);
  positive(`${at} maxResultChars`, o.maxResultChars);
  positiveInt(`${at} maxTools`, o.maxTools);
  positiveInt(`${at} maxListPages`, o.maxListPages);
  if (o.tools !== undefined) {
    if (typeof o.tools !== 'object' || o.tools === null || Array.isArray(o.tools)) throw new ConfigError(`Expected ${at} tools to be an object of overrides`);
    for (const [tool, override] of Object.entries(o.tools as Record<string, unknown>)) {
      const ov = (override ?? {}) as Record<string, unknown>;
      if (typeof override !== 'object' || override === null) throw new ConfigError(`Expected ${at} tools.${tool} to be an object`);
      if (ov.risk !== undefined && !RISKS.includes(ov.risk as ToolRisk))
        throw new ConfigError(`Expected ${at} tools.${tool}.risk to be one of ${RISKS.join(', ')}, got ${show(ov.risk)}`);
      if (ov.idempotent !== undefined && typeof ov.idempotent !== 'boolean') throw new ConfigError(`Expected ${at} tools.${tool}.idempotent to be a boolean`);
      positive(`${at} tools.${tool}.timeoutMs`, ov.timeoutMs);
    }
  }
  return options as McpServerOptions;
}

/**
 * Declare an MCP server whose tools the team gets (pass it in `tools`).
 *
 * - Servers start with the run (`start()`, or `resumeCoordinator` before any agent runs) and stop
 *   on `shutdown()`; one that fails to start or dies is restarted with backoff (min(250 ms·2^n,
 *   30 s)), and calls in flight fail with `MCP_SERVER_UNAVAILABLE`.
 * - Tools are listed at start and on `notifications/tools/list_changed`; a name another tool has
 *   is offered as `<server>__<tool>`; arguments are validated against the server's JSON Schema.
 * - Risk: `readOnlyHint` → `read_only`, else `destructiveHint` → `destructive`, else `mutation`;
 *   `idempotentHint` → re-run after a crash with the key in `_meta["troupe/idempotencyKey"]`.
 * - Results: text joined; `{ content, structuredContent }` when structured; images described;
 *   `isError` is `TOOL_FAILED`; over `maxResultChars` is `MCP_RESULT_TOO_LARGE`, and so is a
 *   message over 8 bytes per such character (at least 8 MiB), cut off as it arrives. A call that
 *   overruns its timeout is `TOOL_TIMEOUT` and the server is sent `notifications/cancelled`.
 * - Listing stops at `maxTools` tools (256) and `maxListPages` pages (100): a server over either
 *   fails to start with `MCP_TOO_MANY_TOOLS` / `MCP_LIST_TOO_LONG`, logged and retried with
 *   backoff like a server that cannot be reached; the run goes on without its tools.
 * - A skill `tools:<server>` or `tools:<tool>` limits an agent's user tools; a child never gets
 *   a tool its parent lacks.
 * - A stdio server gets only the `env` it names plus HOME, LOGNAME, PATH, SHELL, TERM, USER; its
 *   stderr goes to the log. Header values are never logged and are redacted like the API key.
 * @example
 * const fs = mcpServer({ name: 'fs', command: 'npx', args: ['-y', '@modelcontextprotocol/server-filesystem', '.'] });
 * const tracker = mcpServer({ name: 'tracker', url: 'https://mcp.example.com/mcp', headers: { authorization: `Bearer ${token}` } });
 * createCoordinator({ model, tools: [fs, tracker] });
 */
export function mcpServer(options: McpServerOptions): McpServer {
  return Object.freeze({ kind: 'mcp' as const, options: Object.freeze({ ...checkMcpServer(options) }) });
}

/** Where a server lives, for logs: never headers, never the query or credentials of a URL. */
export function describeServer(options: McpServerOptions): Record<string, unknown> {
  if ('url' in options) {
    const u = new URL(options.url);
    return { mcpServer: options.name, url: `${u.origin}${u.pathname}`, headers: Object.keys(options.headers ?? {}) };
  }
  return { mcpServer: options.name, command: options.command };
}
