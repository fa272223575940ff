/**
 * fast-check arbitraries for what a model does on a turn: a call to any built-in or user tool with
 * valid or invalid arguments, plain text, a transient, fatal, refusal or context-overflow error,
 * with optional delays and costs. Needs `fast-check` (an optional peer dependency of troupe).
 * @module
 */
import fc from 'fast-check';
import type { Behaviour } from './simulate.js';

export interface BehaviourSpace {
  /** Names agents may spawn, message, wait on or stop (the root's name first). */
  names: readonly string[];
  /** Your tools, with an arbitrary of valid arguments for each. */
  userTools?: readonly { name: string; args: fc.Arbitrary<Record<string, unknown>> }[];
  /** Include the interactive tool respond_to_user. */
  interactive?: boolean;
  /** Arbitrary delays on the simulated clock (default true). */
  delays?: boolean;
  /** Arbitrary costs in USD, up to this much per call (default: none). */
  maxCostUsd?: number;
}

const word = fc.constantFrom('alpha', 'beta', 'gamma', 'delta');

/** One behaviour. */
export function behaviour(space: BehaviourSpace): fc.Arbitrary<Behaviour> {
  const name = fc.constantFrom(...space.names);
  const tool = (n: string, args: fc.Arbitrary<Record<string, unknown>>): fc.Arbitrary<Behaviour> => args.map((a) => ({ kind: 'tool' as const, name: n, args: a }));
  const calls: fc.Arbitrary<Behaviour>[] = [
    tool('view_agent_graph', fc.constant({})),
    tool('wait_for_agents', fc.record({ reason: word }, { requiredKeys: ['reason'] })),
    tool('wait_for_agents', fc.record({ reason: word, timeout_seconds: fc.integer({ min: 1, max: 600 }) })),
    tool('spawn_agent', fc.record({ name, task: word })),
    tool('send_message', fc.record({ to: name, content: word })),
    tool('stop_agent', fc.record({ id: name })),
    tool('agent_finish', fc.record({ summary: word, findings: fc.array(word, { maxLength: 2 }) })),
    tool('finish', fc.record({ summary: word })),
    ...(space.interactive ? [tool('respond_to_user', fc.record({ message: word }))] : []),
    ...(space.userTools ?? []).map((t) => tool(t.name, t.args)),
    // Invalid: malformed JSON, a missing required field, a tool that does not exist.
    fc.constantFrom<Behaviour>(
      { kind: 'tool', name: 'spawn_agent', args: '{"name": ' },
      { kind: 'tool', name: 'send_message', args: { content: 'no recipient' } },
      { kind: 'tool', name: 'no_such_tool', args: {} },
    ),
  ];
  const other = fc.constantFrom<Behaviour>(
    { kind: 'text', text: 'Just talking, no tool.' },
    { kind: 'refusal', text: 'I will not.' },
    { kind: 'error', code: 'PROVIDER_RATE_LIMITED', status: 429, retryAfterMs: 1_000 },
    { kind: 'error', code: 'PROVIDER_UNAVAILABLE', status: 503 },
    { kind: 'error', code: 'PROVIDER_AUTH', status: 401 },
    { kind: 'error', code: 'PROVIDER_CONTEXT_OVERFLOW', status: 400 },
  );
  const base = fc.oneof({ arbitrary: fc.oneof(...calls), weight: 4 }, { arbitrary: other, weight: 1 });
  const delay = space.delays === false ? fc.constant(undefined) : fc.option(fc.integer({ min: 1, max: 30_000 }), { nil: undefined, freq: 3 });
  const cost = space.maxCostUsd === undefined ? fc.constant(undefined) : fc.integer({ min: 0, max: Math.round(space.maxCostUsd * 100) }).map((c) => c / 100);
  return fc.tuple(base, delay, cost).map(([b, delayMs, costUsd]) => ({
    ...b,
    ...(delayMs === undefined ? {} : { delayMs }),
    ...(costUsd === undefined ? {} : { costUsd }),
  }));
}

/** Behaviour lists for every agent name (the root first), up to `maxPerAgent` calls each. */
export function behaviours(space: BehaviourSpace & { maxPerAgent?: number }): fc.Arbitrary<Record<string, Behaviour[]>> {
  const list = fc.array(behaviour(space), { maxLength: space.maxPerAgent ?? 8 });
  return fc.tuple(...space.names.map(() => list)).map((lists) => Object.fromEntries(space.names.map((n, i) => [n, lists[i]!])));
}
