/**
 * fast-check arbitraries for what a model does on a turn: a call to any built-in (sleep_until too) or user tool with
 * valid or invalid arguments, plain text, a transient, fatal, refusal or context-overflow error,
 * a model adapter that throws, with optional delays and costs — and mishaps, the runs of turns that
 * end an agent abnormally (crashed, failed, stalled), so that every terminal path is taken often.
 * Needs `fast-check` (an optional peer dependency of troupe).
 * @module
 */
import fc from 'fast-check';
import { DEFAULT_IDLE_LIMIT, DEFAULT_RECOVERY_LIMIT } from '../../machines/types.js';
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
  const tool = (n: string, args: fc.Arbitrary<Record<string, unknown>>): fc.Arbitrary<Behaviour> =>
    args.map((a) => ({ kind: 'tool' as const, name: n, args: a }));
  const calls: fc.Arbitrary<Behaviour>[] = [
    tool('view_agent_graph', fc.constant({})),
    // A wait for the first message, or (until: all) for every child's report in one wake.
    tool('wait_for_agents', fc.record({ reason: word, until: fc.constantFrom('any', 'all') }, { requiredKeys: ['reason'] })),
    tool('wait_for_agents', fc.record({ reason: word, timeout_seconds: fc.integer({ min: 1, max: 600 }) })),
    // A durable timer: seconds away, or an instant on the run's clock (a simulated one starts at 0, so
    // an early instant may be past: answered at once); never longer than a run's advances reach.
    tool('sleep_until', fc.record({ reason: word, seconds: fc.integer({ min: 1, max: 600 }) }, { requiredKeys: ['seconds'] })),
    tool('sleep_until', fc.record({ until: fc.integer({ min: 0, max: 600 }).map((s) => new Date(s * 1000).toISOString()) })),
    tool('spawn_agent', fc.record({ name, task: word })),
    tool(
      'spawn_agents',
      fc.array(fc.record({ name, task: word }), { minLength: 1, maxLength: 3 }).map((agents) => ({ agents })),
    ),
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
      { kind: 'tool', name: 'sleep_until', args: { seconds: 5, until: '1970-01-01T00:00:10Z' } },
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
  return priced(space, base);
}

/** The behaviour with an optional delay and, if the space has costs, a cost. */
function priced(space: BehaviourSpace, base: fc.Arbitrary<Behaviour>): fc.Arbitrary<Behaviour> {
  const delay = space.delays === false ? fc.constant(undefined) : fc.option(fc.integer({ min: 1, max: 30_000 }), { nil: undefined, freq: 3 });
  const cost = space.maxCostUsd === undefined ? fc.constant(undefined) : fc.integer({ min: 0, max: Math.round(space.maxCostUsd * 100) }).map((c) => c / 100);
  return fc.tuple(base, delay, cost).map(([b, delayMs, costUsd]) => ({
    ...b,
    ...(delayMs === undefined ? {} : { delayMs }),
    ...(costUsd === undefined ? {} : { costUsd }),
  }));
}

/**
 * A mishap: the turns that take an agent down, as one unit, so that random lists reach every
 * abnormal end instead of needing several unlikely draws in a row.
 * - crash: the model adapter throws something that is not a ProviderError → crashed;
 * - fail: a non-retryable provider error or a refusal → failed;
 * - plain text until the recovery limit → crashed (autonomous) or stalled (interactive);
 * - waits that time out until the idle limit → stalled (if nothing messages the agent meanwhile).
 */
export function mishap(space: BehaviourSpace): fc.Arbitrary<Behaviour[]> {
  const one = (b: fc.Arbitrary<Behaviour>) => priced(space, b).map((x) => [x]);
  const repeat = (b: fc.Arbitrary<Behaviour>, n: number) => fc.array(priced(space, b), { minLength: n, maxLength: n });
  return fc.oneof(
    one(fc.constant<Behaviour>({ kind: 'crash', message: 'simulated bug: the model adapter threw' })),
    one(
      fc.constantFrom<Behaviour>(
        { kind: 'error', code: 'PROVIDER_AUTH', status: 401 },
        { kind: 'error', code: 'PROVIDER_BAD_REQUEST', status: 400 },
        { kind: 'refusal', text: 'I will not.' },
      ),
    ),
    repeat(fc.constant<Behaviour>({ kind: 'text', text: 'Still thinking, no tool.' }), DEFAULT_RECOVERY_LIMIT),
    fc
      .integer({ min: 1, max: 120 })
      .chain((seconds) =>
        repeat(fc.constant<Behaviour>({ kind: 'tool', name: 'wait_for_agents', args: { reason: 'idle', timeout_seconds: seconds } }), DEFAULT_IDLE_LIMIT),
      ),
  );
}

/**
 * The root's opening in three runs of four: it spawns one or two of the other names in its first
 * turn and waits on them in its second, so that most runs have children to crash, fail and stall
 * (left to chance, the root finishes or fails before spawning anyone in nine runs of ten).
 */
function opening(space: BehaviourSpace): fc.Arbitrary<Behaviour[]> {
  const others = space.names.slice(1);
  if (others.length === 0) return fc.constant([]);
  const team = fc.uniqueArray(fc.constantFrom(...others), { minLength: 1, maxLength: 2 }).map((names): Behaviour[] => [
    { kind: 'tools', calls: names.map((name) => ({ name: 'spawn_agent', args: { name, task: 'work' } })) },
    { kind: 'tool', name: 'wait_for_agents', args: { reason: 'my team', until: 'all' } },
  ]);
  return fc.option(team, { nil: [], freq: 4 });
}

/**
 * Behaviour lists for every agent name (the root first): up to `maxPerAgent` steps each, a step
 * being one behaviour or (one step in five, unless `mishaps` is false) a mishap of up to three
 * calls; the root's list may start with an opening that spawns a team (`team`, default true).
 */
export function behaviours(space: BehaviourSpace & { maxPerAgent?: number; mishaps?: boolean; team?: boolean }): fc.Arbitrary<Record<string, Behaviour[]>> {
  const single = behaviour(space).map((b) => [b]);
  const step = space.mishaps === false ? single : fc.oneof({ arbitrary: single, weight: 4 }, { arbitrary: mishap(space), weight: 1 });
  const list = fc.array(step, { maxLength: space.maxPerAgent ?? 8 }).map((steps) => steps.flat());
  const first = space.team === false ? fc.constant([]) : opening(space);
  return fc
    .tuple(first, ...space.names.map(() => list))
    .map(([open, ...lists]) => Object.fromEntries(space.names.map((n, i) => [n, i === 0 ? [...open, ...lists[i]!] : lists[i]!])));
}
