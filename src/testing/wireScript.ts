/**
 * Scripts for the fake OpenAI server, written per agent: route each request to the agent it was
 * made for (read from troupe's system prompt), and reuse a `scriptedModel` scenario over the wire.
 * @module
 */
import type { Script, ScriptStep } from '../model/scriptedModel.js';
import type { FakeReply, FakeRequest, FakeUsage } from './fakeOpenAIServer.js';

/** Requests troupe makes on its own behalf (compaction summaries) are routed under this name. */
export const TROUPE_CALLS = '(troupe)';

/** The agent a request was made for: troupe's system prompt starts "You are NAME (id …)". */
export function agentNameOf(request: FakeRequest): string {
  const messages = (request.body as { messages?: { role: string; content: unknown }[] } | null)?.messages ?? [];
  const system = messages.find((m) => m.role === 'system')?.content;
  const match = typeof system === 'string' ? /^You are (\S+) \(id /.exec(system) : null;
  return match ? match[1]! : TROUPE_CALLS;
}

const HTTP_STATUS: Record<string, number> = {
  PROVIDER_RATE_LIMITED: 429,
  PROVIDER_UNAVAILABLE: 503,
  PROVIDER_TIMEOUT: 408,
  PROVIDER_CONNECTION: 502,
  PROVIDER_AUTH: 401,
  PROVIDER_BAD_REQUEST: 400,
  PROVIDER_CONTEXT_OVERFLOW: 400,
  PROVIDER_REFUSAL: 400,
  PROVIDER_INVALID_RESPONSE: 500,
};

/** One scripted-model step as the wire reply that makes openaiModel produce the same turn. */
export function stepToReply(step: ScriptStep): FakeReply {
  const delay = step.delayMs ? { delayMs: step.delayMs } : {};
  if (step.error) {
    const status = step.error.status ?? HTTP_STATUS[step.error.code] ?? 500;
    const overflow = step.error.code === 'PROVIDER_CONTEXT_OVERFLOW';
    return {
      status,
      headers: step.error.retryAfterMs === undefined ? {} : { 'retry-after-ms': String(step.error.retryAfterMs) },
      body: {
        error: {
          message: step.error.message ?? (overflow ? "This model's maximum context length was exceeded." : `scripted ${step.error.code}`),
          type: 'scripted',
          param: null,
          code: overflow ? 'context_length_exceeded' : null,
        },
      },
      ...delay,
    };
  }
  const calls = step.tools ?? (step.tool ? [{ name: step.tool, args: step.args ?? {} }] : []);
  const usage: FakeUsage | undefined = step.usage
    ? { promptTokens: step.usage.inputTokens ?? 0, completionTokens: step.usage.outputTokens ?? 0, cachedTokens: step.usage.cachedInputTokens ?? 0 }
    : undefined;
  return {
    message: {
      content: step.text ?? null,
      refusal: step.refusal ?? null,
      toolCalls: calls.map((c) => ({ name: c.name, arguments: typeof c.args === 'string' ? c.args : (c.args ?? {}) })),
    },
    ...(usage ? { usage } : {}),
    ...delay,
  };
}

export interface RoutedScript {
  readonly script: (request: FakeRequest) => FakeReply;
  /** Replies not yet served, per agent name. */
  remaining(): Record<string, number>;
}

/**
 * A server script that answers each agent from its own list, in order, whatever the interleaving
 * of agents. A request with no reply left gets a 500 naming the agent.
 */
export function routeByAgent(replies: Record<string, FakeReply[]>): RoutedScript {
  const queues = new Map(Object.entries(replies).map(([name, list]) => [name, [...list]]));
  return {
    script: (request) => {
      const name = agentNameOf(request);
      return (
        queues.get(name)?.shift() ?? {
          status: 500,
          body: { error: { message: `fake OpenAI server: no reply left for ${name}`, type: 'script_exhausted', param: null, code: null } },
        }
      );
    },
    remaining: () => Object.fromEntries([...queues].map(([name, list]) => [name, list.length])),
  };
}

/**
 * A scripted-model scenario as per-agent wire replies. `answered` skips, per agent, the steps of
 * calls already answered (e.g. counted from the sessions of a run being resumed): an answered
 * call consumed its step and every error step before it.
 */
export function repliesFromScript(script: Script, answered: Record<string, number> = {}): Record<string, FakeReply[]> {
  const out: Record<string, FakeReply[]> = {};
  for (const [name, steps] of Object.entries(script.agents)) {
    let skip = answered[name] ?? 0;
    let start = 0;
    while (skip > 0 && start < steps.length) {
      if (!steps[start]!.error) skip--;
      start++;
    }
    out[name] = steps.slice(start).map(stepToReply);
  }
  return out;
}
