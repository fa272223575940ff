/**
 * User tools: a name, a description, JSON Schema parameters validated before every execution, an
 * optional timeout and risk level, and an `execute` that receives the agent's AbortSignal.
 * @module
 */
import type { Ajv, ValidateFunction } from 'ajv';
import type { Logger } from 'pino';
import type { JsonSchema, ToolSpec } from '../model/types.js';
import type { FromSchema } from './fromSchema.js';
import { ConfigError, TroupeError } from '../errors.js';
import { loadedWhenUsed } from '../whenUsed.js';

export type ToolRisk = 'read_only' | 'mutation' | 'destructive';

/**
 * What a tool's `execute` gets besides its arguments. `signal` and `logger` are made on first read
 * (own getters): a tool that never reads them costs neither, and a copy made by spreading
 * (`{ ...context, extra }`) carries both. `JSON.stringify(context)` gives the four identifiers.
 */
export interface ToolContext {
  agentId: string;
  agentName: string;
  runId: string;
  /**
   * Stable for one tool call, across restarts: a tool declared `idempotent` that is re-run after a
   * crash gets the same key, so the system it calls can deduplicate.
   */
  idempotencyKey: string;
  /** Aborted when the agent is stopped or the tool times out. */
  signal: AbortSignal;
  logger: Logger;
}

export interface Tool<Args = Record<string, unknown>> {
  name: string;
  description: string;
  parameters: JsonSchema;
  /** Per-call timeout; defaults to the coordinator's `toolTimeoutMs`. */
  timeoutMs?: number;
  risk?: ToolRisk;
  /**
   * Running it twice with the same `idempotencyKey` has the effect of running it once. A call cut
   * by a crash is then re-run with the same key instead of being reported in doubt.
   */
  idempotent?: boolean;
  execute(args: Args, context: ToolContext): unknown;
}

/** A tool with its compiled argument validator. */
export interface CompiledTool extends Tool {
  validate: (args: unknown) => TroupeError | null;
}

/** Tool names a model API accepts (OpenAI: 1-64 of [a-zA-Z0-9_-]); troupe also wants a letter first. */
export const TOOL_NAME = /^[a-zA-Z][a-zA-Z0-9_-]{0,63}$/;

/**
 * ajv's class, loaded at its first use: its 68 CommonJS files cost a process ~35 ms (measured
 * import of the coordinator: 213 → 177 ms), which every library import, CLI command and crash
 * harness child paid before any schema was compiled.
 */
const ajvPackage = loadedWhenUsed<typeof import('ajv')>('ajv');
export const loadAjv = (): typeof Ajv => ajvPackage().Ajv;

let ajvInstance: Ajv | undefined;
/**
 * The project's ajv. Unknown keywords and formats (e.g. "uri", common in MCP servers' schemas) are
 * ignored, not validated; `logger: false` keeps ajv from printing that to the console (library code
 * never does).
 */
const ajv = (): Ajv => (ajvInstance ??= new (loadAjv())({ allErrors: true, strict: false, useDefaults: true, logger: false }));

/**
 * Compile a JSON Schema with the project's ajv: throws ajv's error when the schema is invalid.
 * `transient`: a schema made at run time (an output schema), dropped from ajv's cache once compiled
 * (the validator keeps working), so a long-lived process does not keep one per agent ever spawned.
 */
export function compileValidator(schema: JsonSchema, transient = false): ValidateFunction {
  try {
    return ajv().compile(schema);
  } finally {
    if (transient) ajv().removeSchema(schema);
  }
}

/** What a validator found wrong with the last value it checked, one line per error. */
export function validationErrors(check: ValidateFunction, root = '(arguments)'): string[] {
  return (check.errors ?? []).map((e) => `${e.instancePath || root} ${e.message ?? 'is invalid'}`);
}

export function compileSchema(name: string, schema: JsonSchema): (args: unknown) => TroupeError | null {
  let check: ValidateFunction;
  try {
    check = compileValidator(schema);
  } catch (err) {
    throw new ConfigError(`Expected tool "${name}" to have a valid JSON Schema for parameters: ${(err as Error).message}`, {
      cause: err,
    });
  }
  return (args) =>
    check(args) ? null : new TroupeError('TOOL_INPUT_INVALID', `Arguments for ${name} do not match its schema: ${validationErrors(check).join('; ')}`);
}

/**
 * Define a tool; the name and schema are checked now, not at the first call.
 * @example
 * const search = defineTool({
 *   name: 'search', description: 'Search the docs',
 *   parameters: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] },
 *   execute: async ({ q }, { signal }) => fetchDocs(q, { signal }),
 * });
 */
export function defineTool<const P extends JsonSchema>(tool: Omit<Tool<FromSchema<P>>, 'parameters'> & { parameters: P }): Tool<FromSchema<P>>;
/** With the arguments' type given: `defineTool<{ q: string }>({ … })`. */
export function defineTool<Args>(tool: Tool<Args>): Tool<Args>;
export function defineTool(tool: Tool<unknown>): Tool<unknown> {
  compileTool(tool as Tool);
  return tool;
}

export function compileTool(tool: Tool): CompiledTool {
  if (typeof tool !== 'object' || tool === null) throw new ConfigError(`Expected a tool object, got ${String(tool)}`);
  if (typeof tool.name !== 'string' || !TOOL_NAME.test(tool.name)) {
    throw new ConfigError(`Expected tool name to match ${TOOL_NAME}, got ${JSON.stringify(tool.name)}`);
  }
  if (typeof tool.description !== 'string' || tool.description.length === 0) {
    throw new ConfigError(`Expected tool "${tool.name}" to have a non-empty description`);
  }
  if (typeof tool.execute !== 'function') throw new ConfigError(`Expected tool "${tool.name}" to have an execute function`);
  if (tool.timeoutMs !== undefined && !(Number.isFinite(tool.timeoutMs) && tool.timeoutMs > 0)) {
    throw new ConfigError(`Expected tool "${tool.name}" timeoutMs to be a number > 0, got ${tool.timeoutMs}`);
  }
  if (tool.risk !== undefined && tool.risk !== 'read_only' && tool.risk !== 'mutation' && tool.risk !== 'destructive') {
    throw new ConfigError(`Expected tool "${tool.name}" risk to be "read_only", "mutation" or "destructive", got ${JSON.stringify(tool.risk)}`);
  }
  if (tool.idempotent !== undefined && typeof tool.idempotent !== 'boolean') {
    throw new ConfigError(`Expected tool "${tool.name}" idempotent to be a boolean, got ${JSON.stringify(tool.idempotent)}`);
  }
  return { ...tool, validate: compileSchema(tool.name, tool.parameters) };
}

export const toToolSpec = (tool: Tool): ToolSpec => ({
  name: tool.name,
  description: tool.description,
  parameters: tool.parameters,
});
