/**
 * A tool result that carries images besides its value (an MCP tool's image content): the value is
 * the tool result the model reads, and the images follow the turn's tool results as a user message
 * with image parts (Chat Completions tool messages cannot carry images).
 * @module
 */

/** One image, base64-encoded. */
export interface ToolImage {
  readonly mimeType: string;
  readonly data: string;
}

const BRAND = Symbol('troupe.toolOutput');

export interface ToolOutput {
  readonly [BRAND]: true;
  readonly value: unknown;
  readonly images: readonly ToolImage[];
}

export const toolOutput = (value: unknown, images: readonly ToolImage[]): ToolOutput => ({ [BRAND]: true, value, images });

export const isToolOutput = (v: unknown): v is ToolOutput => typeof v === 'object' && v !== null && (v as { [BRAND]?: unknown })[BRAND] === true;
