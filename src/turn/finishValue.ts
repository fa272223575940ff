/**
 * The value an agent with an output schema finishes with (`agent_finish`, or `finish` for a root):
 * checked before the finish tool runs. A missing or invalid value is answered as a RESULT_INVALID
 * tool error listing what is wrong, and the agent keeps working; the attempt that reaches
 * `limits.maxResultTries` in the stint ends the agent failed with RESULT_SCHEMA_FAILED.
 *
 * The attempts are counted from the session, which is persisted: each refusal's result records
 * the turn it answered, and those from the stint's first turn on count. So a restart continues the
 * count (bounded in total, not per boot), and a revived agent (a new stint) starts afresh. A
 * compaction that summarises refusals away forgets them (it only happens on context overflow).
 * @module
 */
import type { TurnOutcome } from '../../machines/types.js';
import type { SessionItem, ToolCall } from '../model/types.js';
import type { OutputCheck } from '../tools/outputSchema.js';

/** The finish tools, and which one is the agent's own. */
export const FINISH_TOOLS: ReadonlySet<string> = new Set(['agent_finish', 'finish']);
export const ownFinishTool = (agent: { readonly parentId: string | null }) => (agent.parentId === null ? 'finish' : 'agent_finish');

/** The turn a RESULT_INVALID result answered, or null for any other result. */
function refusedTurn(item: SessionItem): number | null {
  if (item.role !== 'tool' || !item.isError || !FINISH_TOOLS.has(item.name) || !item.content.includes('"RESULT_INVALID"')) return null;
  try {
    const error = (JSON.parse(item.content) as { error?: { code?: unknown; turn?: unknown } }).error;
    return error?.code === 'RESULT_INVALID' && typeof error.turn === 'number' ? error.turn : null;
  } catch {
    return null;
  }
}

/** Values refused since the stint's first turn (in the session, and earlier in this turn). */
export function refusedAttempts(items: Iterable<SessionItem>, stintStart: number): number {
  let n = 0;
  for (const item of items) {
    const turn = refusedTurn(item);
    if (turn !== null && turn >= stintStart) n += 1;
  }
  return n;
}

/** A finish call's value checked: the args to run it with, or its refusal (and, at the bound, the failed outcome). */
export type FinishCheck = { args: Record<string, unknown> } | { refusal: string; outcome: TurnOutcome | null };

export async function checkFinishValue(
  output: OutputCheck,
  call: ToolCall,
  args: Record<string, unknown>,
  at: { turn: number; refused: number; maxAttempts: number },
): Promise<FinishCheck> {
  const given = Object.prototype.hasOwnProperty.call(args, 'value');
  const checked = given ? await output.check(args.value) : { ok: false as const, errors: ['value is missing: pass the result as `value`'] };
  if (checked.ok) return { args: { ...args, value: checked.value } };
  const attempt = at.refused + 1;
  const last = attempt >= at.maxAttempts;
  const message = last
    ? `The value does not match your output schema, and this was attempt ${attempt} of ${at.maxAttempts}: you have failed.`
    : `The value does not match your output schema (attempt ${attempt} of ${at.maxAttempts}): fix it and call ${call.name} again with a matching \`value\`.`;
  const refusal = JSON.stringify({
    success: false,
    error: { code: 'RESULT_INVALID', message, errors: checked.errors, attempt, max_attempts: at.maxAttempts, turn: at.turn },
  });
  if (!last) return { refusal, outcome: null };
  const error = {
    code: 'RESULT_SCHEMA_FAILED',
    message: `${call.name} was called ${attempt} times with a value that does not match the output schema; last errors: ${checked.errors.join('; ')}`,
    retryable: false,
  };
  return { refusal, outcome: { kind: 'failed', error } };
}
