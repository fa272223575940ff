/**
 * What every built-in tool is made of (tools/builtin.ts, tools/builtinSpawn.ts): its shape, the
 * per-turn state its calls share, and the schema helpers its parameters are written with.
 * @module
 */
import type { TurnOutcome } from '../../machines/types.js';
import type { TroupeError } from '../errors.js';
import type { JsonSchema } from '../model/types.js';
import { compileSchema } from './defineTool.js';
import type { BuiltinAgent, BuiltinHost, Read } from './ports.js';

/** Per-turn state shared by the tool calls of one model turn. */
export interface TurnToolState {
  /** The lifecycle outcome that ended this turn, if any. */
  settled: TurnOutcome | null;
  settledBy: string | null;
  /** One wait per model turn. */
  waited: boolean;
  /** Plain text of this turn's assistant message (respond_to_user may deliver it). */
  text: string | null;
  /** A replay's recorded read of this call's wait: how many messages it found waiting, and whether they were the last. */
  pinned?: Read;
  /** What this call's wait reported reading (recorded for replay). */
  read?: Read;
}

/** What of the run's options decides which built-ins an agent is offered. */
export interface OfferedRun {
  interactive: boolean;
  /** limits.maxDepth: an agent at it cannot spawn (MAX_DEPTH_EXCEEDED). */
  maxDepth: number;
}

export interface BuiltinEnv {
  host: BuiltinHost;
  agent: BuiltinAgent;
  callId: string;
  state: TurnToolState;
}

/** What a built-in returns: a result now, or a lifecycle wait whose result is written on wake. */
type BuiltinResult = { result: unknown; settle?: TurnOutcome } | { deferred: TurnOutcome };

export interface BuiltinTool {
  name: string;
  description: string;
  parameters: JsonSchema;
  /**
   * Who sees the tool in its tool list (calls from others are refused with a reason). A pure
   * function of the agent's recorded place (parent, depth) and the run's options: the list is part
   * of every request a recording compares.
   */
  offeredTo: (agent: BuiltinAgent, run: OfferedRun) => boolean;
  run(args: Record<string, unknown>, env: BuiltinEnv): BuiltinResult;
  validate: (args: unknown) => TroupeError | null;
}

export const str = (description: string, extra: JsonSchema = {}): JsonSchema => ({ type: 'string', description, ...extra });
export const strings = (description: string, extra: JsonSchema = {}): JsonSchema => ({
  type: 'array',
  items: { type: 'string' },
  description,
  ...extra,
});
export const object = (properties: Record<string, JsonSchema>, required: string[]): JsonSchema => ({
  type: 'object',
  properties,
  required,
  additionalProperties: false,
});

/** The schema is compiled at the first call, not at import: `troupe status` and its kin never validate a tool call. */
export function define(tool: Omit<BuiltinTool, 'validate'>): BuiltinTool {
  let check: BuiltinTool['validate'] | null = null;
  return { ...tool, validate: (args) => (check ??= compileSchema(tool.name, tool.parameters))(args) };
}

export const everyone = () => true;
export const isRoot = (a: BuiltinAgent) => a.parentId === null;
/** An agent at limits.maxDepth is not offered the spawn tools (~2.3 KB per request it could never use); a call anyway is refused as before. */
export const canSpawn = (a: BuiltinAgent, run: OfferedRun) => a.depth < run.maxDepth;
