/**
 * MCP tools as troupe tools: the server's JSON Schema passed to the model unchanged (and validated
 * before every call), risk and idempotence from the annotations (a per-tool override wins), and
 * results turned into text the model reads.
 *
 * Risk: `readOnlyHint` → `read_only`; else `destructiveHint: true` → `destructive`; else `mutation`.
 * `idempotentHint: true` → `idempotent` (a call cut by a crash is re-run with the same key, sent to
 * the server as `_meta["troupe/idempotencyKey"]`).
 * @module
 */
import type { Logger } from 'pino';
import { TroupeError } from '../errors.js';
import { compileTool, type CompiledTool, type Tool, type ToolRisk } from '../tools/defineTool.js';
import type { McpServerOptions } from './config.js';
import type { CallToolResult, McpConnection, McpTool } from './connection.js';

export const DEFAULT_MAX_RESULT_CHARS = 1_000_000;
/** The `_meta` key that carries a call's idempotency key to the server. */
export const IDEMPOTENCY_META_KEY = 'troupe/idempotencyKey';

export function riskOf(tool: McpTool): ToolRisk {
  const a = tool.annotations;
  if (a?.readOnlyHint === true) return 'read_only';
  if (a?.destructiveHint === true) return 'destructive';
  return 'mutation';
}

type Block = CallToolResult['content'][number];

/** One content block as text the model can read (binary content is described, not inlined). */
function blockText(block: Block): string {
  switch (block.type) {
    case 'text':
      return block.text;
    case 'image':
    case 'audio':
      return `[${block.type} ${block.mimeType}, ${Math.floor((block.data.length * 3) / 4)} bytes]`;
    case 'resource_link':
      return `[resource ${block.uri}${block.name ? ` "${block.name}"` : ''}]`;
    case 'resource': {
      const r = block.resource as { uri: string; text?: string; mimeType?: string };
      return typeof r.text === 'string' ? r.text : `[resource ${r.uri}${r.mimeType ? ` ${r.mimeType}` : ''}]`;
    }
    default:
      return `[${(block as { type: string }).type} content]`;
  }
}

/**
 * The result the model reads: the text of its content blocks, and with structured content
 * `{ content, structuredContent }`. An error result throws TOOL_FAILED (the model sees it as a
 * tool error); a result over `maxChars` throws MCP_RESULT_TOO_LARGE.
 */
export function resultOf(server: string, tool: string, result: CallToolResult, maxChars: number): unknown {
  const blocks = Array.isArray(result.content) ? result.content : [];
  const text = blocks.map(blockText).join('\n');
  const out: unknown = result.structuredContent !== undefined ? { content: text, structuredContent: result.structuredContent } : text;
  const size = typeof out === 'string' ? out.length : JSON.stringify(out).length;
  if (size > maxChars) {
    throw new TroupeError('MCP_RESULT_TOO_LARGE', `${tool} (MCP server "${server}") returned ${size} characters, over the limit of ${maxChars}; ask for less.`);
  }
  if (result.isError === true) throw new TroupeError('TOOL_FAILED', `${tool} (MCP server "${server}") returned an error: ${text || 'no details'}`);
  return out;
}

/**
 * The troupe tool for one listed MCP tool, named `name` (its own name, or `<server>__<tool>` when
 * names collide); null (logged) when its schema or description cannot make a valid tool.
 */
export function adaptTool(conn: McpConnection, options: McpServerOptions, listed: McpTool, name: string, logger: Logger): CompiledTool | null {
  const override = options.tools?.[listed.name] ?? {};
  const maxChars = options.maxResultChars ?? DEFAULT_MAX_RESULT_CHARS;
  const tool: Tool = {
    name,
    description: listed.description || listed.title || `${listed.name} (from the MCP server "${options.name}")`,
    parameters: listed.inputSchema as Record<string, unknown>,
    risk: override.risk ?? riskOf(listed),
    idempotent: override.idempotent ?? listed.annotations?.idempotentHint === true,
    ...(override.timeoutMs !== undefined ? { timeoutMs: override.timeoutMs } : {}),
    execute: async (args, ctx) =>
      resultOf(options.name, listed.name, await conn.call(listed.name, args, ctx.signal, { [IDEMPOTENCY_META_KEY]: ctx.idempotencyKey }), maxChars),
  };
  try {
    return compileTool(tool);
  } catch (err) {
    logger.warn({ mcpServer: options.name, tool: listed.name, err: { message: (err as Error).message } }, 'an MCP tool was left out: it is not a valid tool');
    return null;
  }
}
