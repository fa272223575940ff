/**
 * Typed results (issue 35) in the API: `start({ output })` resolves an `AgentId<T>` — a string
 * branded with the type its output schema describes — and `result(id)` the agent's end, its value
 * typed `T`. The brand exists only for the compiler: an `AgentId<T>` is the agent's id.
 * @module
 */
import type { CompletionReport, SerializedError, StopReason } from '../../machines/types.js';
import { TroupeError } from '../errors.js';
import { isStandardSchema, outputCheckOf, type OutputCheck, type OutputOf, type OutputSchema } from '../tools/outputSchema.js';

declare const outputType: unique symbol;

/** An agent's id, carrying the type of the value it finishes with (`unknown`: no output schema). */
export type AgentId<T = unknown> = string & { readonly [outputType]?: T };

/** What an agent's output schema types its id with. */
export type AgentIdOf<S> = AgentId<[S] extends [undefined] ? unknown : OutputOf<S>>;

/** How an agent ended (its first terminal state): `value` is set when it completed with one. */
export interface AgentResult<T = unknown> {
  status: 'completed' | 'failed' | 'crashed' | 'stopped';
  value: T | undefined;
  report: CompletionReport | null;
  stopReason: StopReason | null;
  error: Pick<SerializedError, 'code' | 'message'> | null;
}

/** The root's output check from `start({ output })`; an invalid JSON Schema is CONFIG_INVALID (nothing started). */
export function rootOutput(output: OutputSchema | undefined): { check: OutputCheck; inProcess: boolean } | null {
  if (output === undefined) return null;
  try {
    return { check: outputCheckOf(output), inProcess: isStandardSchema(output) };
  } catch (err) {
    throw new TroupeError('CONFIG_INVALID', `Expected output to be a JSON Schema or a Standard Schema: ${(err as Error).message}`, { cause: err });
  }
}

export function resultOf<T>(info: {
  status: string;
  report: CompletionReport | null;
  stopReason: string | null;
  error: { code: string; message: string } | null;
}): AgentResult<T> {
  return {
    status: info.status as AgentResult['status'],
    value: info.status === 'completed' ? (info.report?.value as T | undefined) : undefined,
    report: info.report,
    stopReason: info.stopReason as StopReason | null,
    error: info.error,
  };
}
