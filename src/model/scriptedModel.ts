/**
 * A model that replays a script, keyed by agent name: each agent consumes its own list of steps in
 * order. A step is a tool call (or several), plain text, a refusal, an injected provider error,
 * optionally after a delay on the injected clock. It records every call and reports unused steps.
 * @module
 */
import { systemClock, sleep, type Clock } from '../clock.js';
import { isErrorCode, ProviderError, TroupeError, type ErrorCode } from '../errors.js';
import type { TurnUsage } from '../../machines/types.js';
import type { Model, ModelRequest, ModelTurn, ToolCall } from './types.js';

export interface ScriptToolCall {
  name: string;
  /** An object is JSON-encoded; a string is sent as-is (to script malformed arguments). */
  args?: Record<string, unknown> | string;
}

export interface ScriptStep {
  tool?: string;
  args?: Record<string, unknown> | string;
  tools?: ScriptToolCall[];
  text?: string;
  refusal?: string;
  error?: { code: Extract<ErrorCode, `PROVIDER_${string}`>; message?: string; status?: number; retryAfterMs?: number };
  /** Wait this long (on the clock) before answering; aborting the call cancels the wait. */
  delayMs?: number;
  usage?: Partial<TurnUsage>;
  /**
   * What the budget reserves before this step's call (USD). Default: the step's `usage.costUsd`,
   * i.e. an exact estimate; set it lower to script a call that costs more than was reserved.
   */
  reserveUsd?: number;
}

export interface Script {
  description?: string;
  agents: Record<string, ScriptStep[]>;
}

export interface ScriptedCall {
  agentId: string;
  agentName: string;
  turn: number;
  /** The clock's time when the call started. */
  at: number;
  request: ModelRequest;
  step: ScriptStep | undefined;
}

export interface ScriptedModel extends Model {
  readonly calls: ScriptedCall[];
  /** Steps never consumed, per agent name. */
  unconsumed(): Record<string, ScriptStep[]>;
  /** Throws SCRIPT_UNCONSUMED if any step is left. */
  assertComplete(): void;
}

function validateScript(script: Script): void {
  if (typeof script !== 'object' || script === null || typeof script.agents !== 'object' || script.agents === null) {
    throw new TroupeError('CONFIG_INVALID', 'Expected a script with an "agents" object keyed by agent name');
  }
  for (const [name, steps] of Object.entries(script.agents)) {
    if (!Array.isArray(steps)) throw new TroupeError('CONFIG_INVALID', `Expected script.agents.${name} to be an array`);
    steps.forEach((step, i) => {
      const kinds = ['tool', 'tools', 'text', 'refusal', 'error'].filter((k) => k in step);
      if (kinds.length !== 1) {
        throw new TroupeError(
          'CONFIG_INVALID',
          `Expected script.agents.${name}[${i}] to have exactly one of tool, tools, text, refusal, error; got ${kinds.join(', ') || 'none'}`,
        );
      }
      if (step.error && !(isErrorCode(step.error.code) && step.error.code.startsWith('PROVIDER_'))) {
        throw new TroupeError('CONFIG_INVALID', `Expected script.agents.${name}[${i}].error.code to be a PROVIDER_* code`);
      }
    });
  }
}

/**
 * @example
 * const model = scriptedModel({ agents: { lead: [{ tool: 'finish', args: { summary: 'done' } }] } });
 */
export function scriptedModel(script: Script, options: { clock?: Clock } = {}): ScriptedModel {
  validateScript(script);
  const clock = options.clock ?? systemClock;
  const queues = new Map(Object.entries(script.agents).map(([name, steps]) => [name, [...steps]]));
  const calls: ScriptedCall[] = [];
  /** The step that answered each request: its estimate stays that step's once consumed. */
  const answered = new WeakMap<ModelRequest, ScriptStep>();
  let callSeq = 0;

  const toCalls = (step: ScriptStep, agentName: string): ToolCall[] => {
    const list: ScriptToolCall[] = step.tools ?? (step.tool ? [{ name: step.tool, args: step.args ?? {} }] : []);
    return list.map((c) => ({
      id: `call_${agentName}_${++callSeq}`,
      name: c.name,
      arguments: typeof c.args === 'string' ? c.args : JSON.stringify(c.args ?? {}),
    }));
  };

  return {
    name: 'scripted',
    calls,
    // `options.signal` is read only for a delay.
    async complete(request: ModelRequest, options): Promise<ModelTurn> {
      const step = queues.get(request.agent.name)?.shift();
      calls.push({ agentId: request.agent.id, agentName: request.agent.name, turn: request.turn, at: clock.now(), request, step });
      if (!step) {
        throw new TroupeError('SCRIPT_EXHAUSTED', `The script has no step left for agent "${request.agent.name}" (turn ${request.turn})`);
      }
      if (step.delayMs) await sleep(clock, step.delayMs, options.signal);
      if (step.error) {
        throw new ProviderError(step.error.code, step.error.message ?? `scripted ${step.error.code}`, {
          ...(step.error.status === undefined ? {} : { status: step.error.status }),
          ...(step.error.retryAfterMs === undefined ? {} : { retryAfterMs: step.error.retryAfterMs }),
        });
      }
      answered.set(request, step);
      return {
        text: step.text ?? null,
        toolCalls: toCalls(step, request.agent.name),
        refusal: step.refusal ?? null,
        ...(step.usage ? { usage: step.usage } : {}),
      };
    },
    // The scripted model prices its own calls (so a budget accepts it without a price): each step
    // says what its call costs (`usage.costUsd`) and reserves (`reserveUsd`); a step without
    // either costs $0, and the budget charges a call without usage at this estimate.
    estimateCostUsd(request: ModelRequest): number {
      // Error steps are retries of the same call: the step that answers it says what it costs. A
      // request already answered (the budget settling it) is its own step's.
      const next = answered.get(request) ?? queues.get(request.agent.name)?.find((step) => !step.error);
      return next?.reserveUsd ?? next?.usage?.costUsd ?? 0;
    },
    unconsumed: () => Object.fromEntries([...queues].filter(([, steps]) => steps.length > 0)),
    assertComplete() {
      const left = Object.entries(Object.fromEntries([...queues].filter(([, s]) => s.length > 0)));
      if (left.length > 0) {
        const summary = left.map(([name, steps]) => `${name}: ${steps.length}`).join(', ');
        throw new TroupeError('SCRIPT_UNCONSUMED', `Scripted steps never used: ${summary}`);
      }
    },
  };
}
