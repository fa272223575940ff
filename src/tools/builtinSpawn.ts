/**
 * The spawn built-ins: `spawn_agent` starts one sub-agent, `spawn_agents` many in one call — all or
 * none: every entry and the limits for the whole batch are checked before the first is registered,
 * and its result is the new ids in the order given (a parent that spawns thousands keeps a small
 * request: a batch costs its entries and one id each, not a result per child).
 * @module
 */
import { TroupeError } from '../errors.js';
import type { JsonSchema } from '../model/types.js';
import type { AgentTerms } from '../store/types.js';
import { canSpawn, define, object, str, strings, type BuiltinTool } from './builtinKit.js';
import { compileOutputSchema } from './outputSchema.js';
import type { SpawnRequest } from './ports.js';

/** The most children one `spawn_agents` call may start (as many as one answer may carry calls). */
const MAX_SPAWN_BATCH = 128;

/** What a sub-agent is given: spawn_agent's parameters, and each entry of spawn_agents'. */
const CHILD = {
  name: str('Short name for the sub-agent', { minLength: 1, maxLength: 64 }),
  task: str('The complete task for the sub-agent, with everything it needs to know', { minLength: 1 }),
  skills: strings('Up to 5 skills to load for it; a skill "tools:<server or tool name>" limits its tools to those named', { maxItems: 5 }),
  inherit_context: { type: 'boolean', description: 'Give it your conversation as background (default false)' },
  output_schema: {
    type: 'object',
    description: 'A JSON Schema for the result: it must then finish with a `value` that matches it, which you receive as data',
  },
  profile: str('The name of one of the profiles listed above: its model, tools, prompt and limits (default: none, like you)', { minLength: 1 }),
  budget_usd: {
    type: 'number',
    exclusiveMinimum: 0,
    description: 'An allowance in USD for it and every agent it spawns, set aside from yours; what it leaves unspent comes back to you when it ends',
  },
} satisfies Record<string, JsonSchema>;

/** The same parameters without their descriptions. */
const undescribed = (properties: Record<string, JsonSchema>): Record<string, JsonSchema> =>
  Object.fromEntries(Object.entries(properties).map(([key, { description: _, ...schema }]) => [key, schema]));

/** A tool call's entry as the host's request; an invalid output schema refuses it (TOOL_INPUT_INVALID) before anything is registered. */
function request(args: Record<string, unknown>): SpawnRequest {
  const output = args.output_schema === undefined ? undefined : compileOutputSchema(args.output_schema).schema;
  const allowanceUsd = args.budget_usd as number | undefined;
  const profile = args.profile as string | undefined;
  const terms: AgentTerms | null =
    output === undefined && allowanceUsd === undefined && profile === undefined
      ? null
      : {
          ...(output === undefined ? {} : { output }),
          ...(allowanceUsd === undefined ? {} : { allowanceUsd }),
          ...(profile === undefined ? {} : { profile }),
        };
  return {
    name: args.name as string,
    task: args.task as string,
    skills: (args.skills as string[] | undefined) ?? [],
    inheritContext: (args.inherit_context as boolean | undefined) ?? false,
    terms,
  };
}

const spawnAgent = define({
  name: 'spawn_agent',
  description:
    'Start a sub-agent that works in parallel on a task. It reports back with agent_finish; if it stops, fails or crashes you get a notice instead. Returns its agent_id. To start several, use spawn_agents.',
  parameters: object(CHILD, ['name', 'task']),
  offeredTo: canSpawn,
  run(args, { host, agent }) {
    const [child] = host.spawnChildren(agent, [request(args)]);
    return {
      result: {
        success: true,
        agent_id: child!.id,
        name: child!.name,
        message: 'Running in parallel; its report will arrive as a message (wait_for_agents waits for it).',
      },
    };
  },
});

const spawnAgents = define({
  name: 'spawn_agents',
  description: `Start several sub-agents in one call (up to ${MAX_SPAWN_BATCH}), each as spawn_agent would: all or none — if one entry is invalid or the batch would exceed a limit, none is started. Returns their agent_ids in the order given.`,
  parameters: object(
    {
      agents: {
        type: 'array',
        description: 'The sub-agents to start, each with the parameters of spawn_agent',
        minItems: 1,
        maxItems: MAX_SPAWN_BATCH,
        // Described once, in spawn_agent: every agent's tool list carries both tools on every request.
        items: object(undescribed(CHILD), ['name', 'task']),
      },
    },
    ['agents'],
  ),
  offeredTo: canSpawn,
  run(args, { host, agent }) {
    const entries = args.agents as Record<string, unknown>[];
    const reqs = entries.map((entry, i) => {
      try {
        return request(entry);
      } catch (e) {
        throw atEntry(e, i, entry.name);
      }
    });
    const children = host.spawnChildren(agent, reqs);
    return {
      result: {
        success: true,
        agent_ids: children.map((c) => c.id),
        message: `${children.length} running in parallel (ids in the order given); their reports will arrive as messages (wait_for_agents waits for them).`,
      },
    };
  },
});

/** An entry's refusal, naming the entry (its code kept). */
export function atEntry(e: unknown, index: number, name: unknown): unknown {
  if (!(e instanceof TroupeError)) return e;
  const at = `agents[${index}]${typeof name === 'string' ? ` (${name})` : ''}`;
  return new TroupeError(e.code, `${at}: ${e.message}`, { retryable: e.retryable, ...(e.details ? { details: e.details } : {}), cause: e });
}

export const SPAWN_TOOLS: readonly BuiltinTool[] = [spawnAgent, spawnAgents];
