/**
 * MCP tools as troupe tools: the server's JSON Schema passed to the model unchanged (and validated
 * before every call), risk and idempotence from the annotations (a per-tool override wins), and
 * results turned into text the model reads — and images it sees: an image block (PNG, JPEG, GIF or
 * WebP) is described in the text and sent as an image after the turn's tool results, as long as the
 * whole result stays within `maxResultChars` (its base64 counted); an image over that is described
 * as not shown, never sent.
 *
 * Risk: `readOnlyHint` → `read_only`; else `destructiveHint: true` → `destructive`; else `mutation`.
 * `idempotentHint: true` → `idempotent` (a call cut by a crash is re-run with the same key, sent to
 * the server as `_meta["troupe/idempotencyKey"]`).
 * @module
 */
import type { Logger } from 'pino';
import { TroupeError } from '../errors.js';
import { compileTool, type CompiledTool, type Tool, type ToolRisk } from '../tools/defineTool.js';
import { toolOutput, type ToolImage } from '../tools/toolOutput.js';
import type { McpServerOptions } from './config.js';
import type { CallToolResult, McpConnection, McpTool } from './connection.js';
import { DEFAULT_MAX_RESULT_CHARS } from './limits.js';

/**
 * Where an offered MCP tool comes from, as a replay needs it beside the spec the request carried:
 * its server, its own name, and the server's hints (what risk and idempotence derive from).
 */
export interface McpToolOrigin {
  server: string;
  tool: string;
  hints?: Pick<NonNullable<McpTool['annotations']>, 'readOnlyHint' | 'destructiveHint' | 'idempotentHint'>;
}

/** The origin of `listed`, offered by `server` (only the hints it set). */
export function originOf(server: string, listed: McpTool): McpToolOrigin {
  const a = listed.annotations ?? {};
  const hints = Object.fromEntries(
    (['readOnlyHint', 'destructiveHint', 'idempotentHint'] as const).filter((k) => typeof a[k] === 'boolean').map((k) => [k, a[k]]),
  );
  return Object.keys(hints).length === 0 ? { server, tool: listed.name } : { server, tool: listed.name, hints };
}

/** The `_meta` key that carries a call's idempotency key to the server. */
const IDEMPOTENCY_META_KEY = 'troupe/idempotencyKey';

export function riskOf(tool: McpTool): ToolRisk {
  const a = tool.annotations;
  if (a?.readOnlyHint === true) return 'read_only';
  if (a?.destructiveHint === true) return 'destructive';
  return 'mutation';
}

type Block = CallToolResult['content'][number];

/** The image types models take as input; others are described, not sent. */
const SHOWN_IMAGE_TYPES = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

const bytesOf = (base64: string) => Math.floor((base64.length * 3) / 4);

/** One content block as text the model can read (an image is described; `shown` says whether it is sent too). */
function blockText(block: Block, image: { shown: boolean; why?: string } | undefined): string {
  switch (block.type) {
    case 'text':
      return block.text;
    case 'image':
      return image?.shown
        ? `[image ${block.mimeType}, ${bytesOf(block.data)} bytes: shown to you after the tool results]`
        : `[image ${block.mimeType}, ${bytesOf(block.data)} bytes: not shown, ${image?.why ?? 'not an image the model takes'}]`;
    case 'audio':
      return `[audio ${block.mimeType}, ${bytesOf(block.data)} bytes]`;
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

type Shown = Map<Block, { shown: boolean; why?: string }>;

/** The text the model reads (with structured content, `{ content, structuredContent }`) and its size. */
function textOf(blocks: readonly Block[], structured: unknown, images: Shown): { out: unknown; text: string; size: number } {
  const text = blocks.map((b) => blockText(b, images.get(b))).join('\n');
  const out: unknown = structured !== undefined ? { content: text, structuredContent: structured } : text;
  return { out, text, size: typeof out === 'string' ? out.length : JSON.stringify(out).length };
}

/**
 * The result the model reads: the text of its content blocks, and with structured content
 * `{ content, structuredContent }`; with images it may see, a ToolOutput carrying them. An error
 * result throws TOOL_FAILED (the model sees it as a tool error); text over `maxChars` throws
 * MCP_RESULT_TOO_LARGE. Images go in order while the text and their base64 stay within `maxChars`;
 * the rest are described as not shown.
 */
export function resultOf(server: string, tool: string, result: CallToolResult, maxChars: number): unknown {
  const blocks = Array.isArray(result.content) ? result.content : [];
  const images: Shown = new Map();
  const candidates: Extract<Block, { type: 'image' }>[] = [];
  const overLimit = { shown: false, why: `the result would be over its limit of ${maxChars} characters` };
  for (const block of blocks) {
    if (block.type !== 'image') continue;
    if (!SHOWN_IMAGE_TYPES.has(block.mimeType)) images.set(block, { shown: false, why: 'the model takes only PNG, JPEG, GIF and WebP images' });
    else if (!BASE64.test(block.data)) images.set(block, { shown: false, why: 'its data is not base64' });
    else {
      candidates.push(block);
      images.set(block, overLimit);
    }
  }
  // Described as not shown, the text is at its longest: what is left of the limit is the images' room.
  let room = maxChars - textOf(blocks, result.structuredContent, images).size;
  for (const block of candidates) {
    if (block.data.length > room) continue;
    room -= block.data.length;
    images.set(block, { shown: true });
  }
  const { out, text, size } = textOf(blocks, result.structuredContent, images);
  if (size > maxChars) {
    throw new TroupeError('MCP_RESULT_TOO_LARGE', `${tool} (MCP server "${server}") returned ${size} characters, over the limit of ${maxChars}; ask for less.`);
  }
  if (result.isError === true) throw new TroupeError('TOOL_FAILED', `${tool} (MCP server "${server}") returned an error: ${text || 'no details'}`);
  const shown: ToolImage[] = candidates.filter((b) => images.get(b)?.shown).map((b) => ({ mimeType: b.mimeType, data: b.data }));
  return shown.length === 0 ? out : toolOutput(out, shown);
}

/**
 * The troupe tool for one listed MCP tool, named `name` (its own name, or `<server>__<tool>` when
 * names collide); null (logged) when its schema or description cannot make a valid tool.
 */
export function adaptTool(conn: Pick<McpConnection, 'call'>, options: McpServerOptions, listed: McpTool, name: string, logger: Logger): CompiledTool | null {
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
