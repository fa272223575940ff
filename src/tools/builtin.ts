/**
 * The built-in tools every agent has: the lifecycle tools that settle a turn (wait_for_agents,
 * sleep_until, agent_finish, finish, respond_to_user) and the graph tools (spawn_agent, spawn_agents,
 * send_message, stop_agent, view_agent_graph; the spawn tools in builtinSpawn.ts). Each declares JSON Schema parameters, validated before it runs.
 * Refusals are thrown as TroupeErrors and go back to the model as `{ success: false, error }`.
 * @module
 */
import { TroupeError } from '../errors.js';
import type { JsonSchema } from '../model/types.js';
import type { MessagePriority } from '../store/types.js';
import { canSpawn, define, everyone, isRoot, object, str, strings, type BuiltinTool } from './builtinKit.js';
import { SPAWN_TOOLS } from './builtinSpawn.js';
import type { AgentSummary } from './ports.js';

/** Children a `no_active_agents` result lists one by one; past this, it counts them by status. */
const LISTED_CHILDREN = 20;

/**
 * The children in a `no_active_agents` result: each one (a small team), or, for a parent of many,
 * their count by status and the ones that did not complete (at most LISTED_CHILDREN), so a wait of
 * a parent of thousands does not repeat all of them (their reports came one by one).
 */
function childrenPart(children: readonly AgentSummary[]): Record<string, unknown> {
  if (children.length <= LISTED_CHILDREN) return { agents: children };
  const byStatus: Record<string, number> = {};
  for (const c of children) byStatus[c.status] = (byStatus[c.status] ?? 0) + 1;
  const others = children.filter((c) => c.status !== 'completed');
  return {
    children_by_status: byStatus,
    agents: others.slice(0, LISTED_CHILDREN),
    ...(others.length > LISTED_CHILDREN ? { agents_not_listed: others.length - LISTED_CHILDREN } : {}),
  };
}

const clampSeconds = (s: number) => Math.min(300, Math.max(1, s));

/**
 * A wait's result when mail came: `pending` messages follow. `last`: nothing could still answer the
 * wait (Read): the result says so, and a parent can finish on its last reports rather than pay a
 * call to hear `no_active_agents` from its next wait.
 */
export function messagesArrived(pending: number, last: boolean): Record<string, unknown> {
  if (!last) return { wait_outcome: 'message_arrived', pending_messages: pending, note: 'The messages follow.' };
  return {
    wait_outcome: 'message_arrived',
    pending_messages: pending,
    no_active_agents: true,
    note: 'The messages follow, and they are the last: no agent that could message you is still active and none of your executions or delegations is running. Continue your work or finish; do not wait again.',
  };
}

/**
 * A finish tool's spec for an agent with an output schema: its parameters gain a required `value`
 * described by the schema (the tool's own schema, validated before it runs, never has one).
 */
export function withValueParameter(spec: { name: string; description: string; parameters: JsonSchema }, output: JsonSchema) {
  const parameters = spec.parameters as { properties: Record<string, JsonSchema>; required: string[] };
  return {
    name: spec.name,
    description: `${spec.description} Pass your result as \`value\`: it must match the output schema set for you.`,
    parameters: {
      ...spec.parameters,
      properties: { ...parameters.properties, value: { description: 'Your result, matching the output schema', ...output } },
      required: [...parameters.required, 'value'],
    },
  };
}

const sendMessage = define({
  name: 'send_message',
  description: 'Send a message to your parent, one of your children or a sibling (by agent id or name). The recipient reads it at the start of its next turn.',
  parameters: object(
    {
      to: str('Recipient agent id or name', { minLength: 1 }),
      content: str('The message', { minLength: 1 }),
      type: { type: 'string', enum: ['information', 'query', 'instruction'] },
      priority: { type: 'string', enum: ['low', 'normal', 'high', 'urgent'] },
    },
    ['to', 'content'],
  ),
  offeredTo: everyone,
  run(args, { host, agent }) {
    const { messageId, target } = host.sendFromAgent(agent, args.to as string, args.content as string, {
      type: (args.type as string | undefined) ?? 'information',
      priority: (args.priority as MessagePriority | undefined) ?? 'normal',
    });
    const gated = target.status === 'failed' || target.status === 'crashed';
    return {
      result: {
        success: true,
        message_id: messageId,
        target_agent_id: target.id,
        delivery_status: gated ? 'queued' : 'delivered',
        ...(gated ? { note: `${target.name} is ${target.status}; it only wakes for a message from the user, so it will not read this soon.` } : {}),
      },
    };
  },
});

const waitForAgents = define({
  name: 'wait_for_agents',
  description:
    'Park until a message from another agent arrives (a report, a notice, a reply), one of your own async executions or delegations ends, or the wait times out. Wait only when an agent you spawned or messaged still owes you an answer, or your own work is still running: never poll. One wait per turn.',
  parameters: object(
    {
      reason: str('What you are waiting for', { minLength: 1 }),
      until: str('"all": sleep through your children\'s reports until the last, then read them all (anything else still wakes you)', { enum: ['any', 'all'] }),
      timeout_seconds: { type: 'number', description: 'Give up after this many seconds (clamped to 1..300)' },
    },
    ['reason'],
  ),
  offeredTo: everyone,
  run(args, { host, agent, callId, state }) {
    if (state.waited) return { result: { wait_outcome: 'already_waited', note: 'Only one wait per turn.' } };
    state.waited = true;
    // The budget outcomes first: when the budget is why a stop was requested, they say why.
    const flags = host.budgetFlags(agent);
    if (flags.budgetStopped) return { result: { wait_outcome: 'budget_stopped' } };
    if (flags.reserveStopped && !isRoot(agent)) return { result: { wait_outcome: 'reserve_stopped' } };
    if (host.isStopRequested(agent)) return { result: { wait_outcome: 'stopped' } };
    const all = args.until === 'all';
    // A wait for all the children parks on reports while more are coming (a replay's read as recorded).
    const pending = state.pinned?.count ?? (all && host.gathers(agent) ? 0 : host.pendingCount(agent));
    if (pending > 0) {
      const last = state.pinned?.last ?? host.nobodyToAnswer(agent);
      state.read = { count: pending, last };
      return { result: messagesArrived(pending, last) };
    }
    // An agent parks on anything that can still answer: an active agent that could message it, or
    // its own executions and delegations, whose end wakes it (no polling, no paid call meanwhile).
    if (host.nobodyToAnswer(agent)) {
      return {
        result: {
          wait_outcome: 'no_active_agents',
          note: 'No agent that could message you is still active and none of your executions or delegations is running: nobody will answer. Continue your work or finish.',
          ...childrenPart(host.childrenSummary(agent)),
        },
      };
    }
    const seconds = args.timeout_seconds as number | undefined;
    return {
      deferred: {
        kind: 'wait',
        waitKind: 'agents',
        callId,
        tool: 'wait_for_agents',
        timeoutMs: seconds === undefined ? null : clampSeconds(seconds) * 1000,
        at: host.now(),
        ...(all ? { until: 'all' as const } : {}),
      },
    };
  },
});

/** The longest a `sleep_until` may sleep. */
const MAX_SLEEP_SECONDS = 30 * 86_400;
/** An ISO-8601 date and time with an explicit offset: hosts in other time zones read the same instant. */
const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/;

/** The deadline a `sleep_until` call asks for, on the run's clock; refused (TOOL_INPUT_INVALID) unless exactly one of seconds/until is given and within 30 days. */
function sleepDeadline(args: Record<string, unknown>, now: number): number {
  const seconds = args.seconds as number | undefined;
  const until = args.until as string | undefined;
  if ((seconds === undefined) === (until === undefined)) {
    throw new TroupeError('TOOL_INPUT_INVALID', 'Give exactly one of seconds (how long to sleep) or until (an ISO-8601 time).');
  }
  let at: number;
  if (seconds !== undefined) at = now + Math.ceil(seconds * 1000);
  else {
    at = ISO_INSTANT.test(until!) ? Date.parse(until!) : NaN;
    if (Number.isNaN(at)) {
      throw new TroupeError('TOOL_INPUT_INVALID', `until must be an ISO-8601 time with an offset, like 2026-12-05T09:00:00Z; got ${JSON.stringify(until)}.`);
    }
  }
  if (at - now > MAX_SLEEP_SECONDS * 1000) throw new TroupeError('TOOL_INPUT_INVALID', 'You can sleep at most 30 days at a time.');
  return at;
}

const sleepUntil = define({
  name: 'sleep_until',
  description:
    'Sleep until a time: you park at no cost and wake when it comes (a message or a stop wakes you sooner). Use it to come back to something later, not to wait for agents. One wait per turn.',
  parameters: object(
    {
      seconds: { type: 'number', minimum: 0, maximum: MAX_SLEEP_SECONDS, description: 'Sleep this many seconds (at most 30 days)' },
      until: str('Or sleep until this ISO-8601 time with an offset, e.g. 2026-12-05T09:00:00Z (at most 30 days away)', { minLength: 1 }),
      reason: str('What you will do when you wake', { minLength: 1 }),
    },
    [],
  ),
  offeredTo: everyone,
  run(args, { host, agent, callId, state }) {
    const now = host.now();
    const at = sleepDeadline(args, now);
    if (state.waited) return { result: { wait_outcome: 'already_waited', note: 'Only one wait per turn.' } };
    state.waited = true;
    if (host.isStopRequested(agent)) return { result: { wait_outcome: 'stopped' } };
    const pending = state.pinned?.count ?? host.pendingCount(agent);
    if (pending > 0) {
      state.read = { count: pending, last: false };
      return { result: messagesArrived(pending, false) };
    }
    // A time already past answers at once: nothing to sleep for.
    if (at <= now) return { result: { wait_outcome: 'timer_fired', note: 'That time has already come.' } };
    // The deadline is persisted as the wait's start and length (idleDeadline): it survives restarts and failovers.
    return { deferred: { kind: 'wait', waitKind: 'timer', callId, tool: 'sleep_until', timeoutMs: at - now, at: now } };
  },
});

const agentFinish = define({
  name: 'agent_finish',
  description: 'Finish your task and send your parent a completion report. Ends your work.',
  parameters: object(
    {
      summary: str('What you did and what you found', { minLength: 1 }),
      findings: strings('Individual findings'),
      open_items: strings('Unresolved items that need follow-up'),
      success: { type: 'boolean', description: 'Whether the task succeeded (default true)' },
    },
    ['summary'],
  ),
  offeredTo: (a) => !isRoot(a),
  run(args, { host, agent }) {
    if (isRoot(agent)) throw new TroupeError('TOOL_NOT_ALLOWED', 'agent_finish is for sub-agents; you are the root: call finish.');
    host.assertNothingOutstanding(agent);
    const report = {
      summary: args.summary as string,
      findings: (args.findings as string[] | undefined) ?? [],
      openItems: (args.open_items as string[] | undefined) ?? [],
      success: (args.success as boolean | undefined) ?? true,
      // Only an agent with an output schema gets here with a value, checked against it (turn/finishValue.ts).
      ...(args.value === undefined ? {} : { value: args.value }),
    };
    return { result: { success: true, agent_completed: true, parent_notified: true }, settle: { kind: 'finish', report } };
  },
});

const finish = define({
  name: 'finish',
  description: 'Finish the whole run with the final answer. Refused while other agents are still active.',
  parameters: object({ summary: str('The final answer / report', { minLength: 1 }) }, ['summary']),
  offeredTo: (a) => isRoot(a),
  run(args, { host, agent }) {
    if (!isRoot(agent)) {
      throw new TroupeError('TOOL_NOT_ALLOWED', 'finish is for the root agent; you are a sub-agent: call agent_finish.');
    }
    host.assertNothingOutstanding(agent);
    const report = { summary: args.summary as string, findings: [], openItems: [], success: true, ...(args.value === undefined ? {} : { value: args.value }) };
    return { result: { success: true, run_completed: true }, settle: { kind: 'finish', report } };
  },
});

const respondToUser = define({
  name: 'respond_to_user',
  description: 'Answer the user and hand control back to them: you park until they reply. Leave message empty to deliver the text you just wrote.',
  parameters: object({ message: str('What to tell the user') }, []),
  offeredTo: (_a, run) => run.interactive,
  run(args, { host, agent, callId, state }) {
    if (!host.interactive) {
      throw new TroupeError('TOOL_NOT_ALLOWED', 'No user is attached to this run: keep working, or finish.');
    }
    const message = (args.message as string | undefined) || state.text;
    if (!message) throw new TroupeError('TOOL_INPUT_INVALID', 'Nothing has been said to the user: pass a message.');
    if (state.waited) return { result: { status: 'already_waited', note: 'Only one wait per turn.' } };
    state.waited = true;
    host.said(agent, message);
    if (host.pendingFromUser(agent)) {
      return { result: { status: 'message_arrived', note: 'Your reply was delivered; the user has already written again.' } };
    }
    return {
      deferred: { kind: 'wait', waitKind: 'user', callId, tool: 'respond_to_user', timeoutMs: null, at: host.now() },
    };
  },
});

const stopAgent = define({
  name: 'stop_agent',
  description: 'Stop one of your descendants after its current turn (with cascade, its own sub-agents first). You get a notice when it has stopped.',
  parameters: object(
    {
      id: str('Agent id or name', { minLength: 1 }),
      cascade: { type: 'boolean', description: 'Also stop its descendants (default true)' },
    },
    ['id'],
  ),
  // Only descendants can be stopped: an agent at limits.maxDepth has none to name.
  offeredTo: canSpawn,
  run(args, { host, agent }) {
    const stopping = host.stopFromAgent(agent, args.id as string, (args.cascade as boolean | undefined) ?? true);
    return {
      result: {
        success: true,
        stopping,
        note: 'The stop is graceful: each agent finishes its current turn first.',
      },
    };
  },
});

const viewAgentGraph = define({
  name: 'view_agent_graph',
  description: 'Show every agent of the run with its status, as a tree.',
  parameters: object({}, []),
  offeredTo: everyone,
  run(_args, { host, agent }) {
    return { result: host.graphView(agent) };
  },
});

const recordAssent = define({
  name: 'record_assent',
  description:
    "The user agreed to the plan you stated: quote their words exactly. Steps of that plan then run without asking for approval while the approval window lasts (the user's assent counts as an approval).",
  parameters: object({ quote: str("The user's words of assent, exactly as they wrote them", { minLength: 2 }) }, ['quote']),
  offeredTo: (_a, run) => run.interactive,
  run(args, { host, agent }) {
    const { windowMs } = host.assent(agent, args.quote as string);
    return { result: { assent_recorded: true, window_minutes: Math.round(windowMs / 60_000) } };
  },
});

export const BUILTIN_TOOLS: ReadonlyMap<string, BuiltinTool> = new Map(
  [...SPAWN_TOOLS, sendMessage, waitForAgents, sleepUntil, agentFinish, finish, respondToUser, stopAgent, viewAgentGraph, recordAssent].map((t) => [t.name, t]),
);
