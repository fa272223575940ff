/**
 * What agents read: system prompts, first inputs, nudges, mail headers.
 * @module
 */
import type { JsonSchema, SessionItem } from '../model/types.js';
import type { MessageRow } from '../store/types.js';

export interface AgentIdentity {
  id: string;
  name: string;
  parentId: string | null;
  parentName: string | null;
}

/** `canSpawn`: the agent is offered spawn_agent (below limits.maxDepth); a root that is not works alone. */
export function systemPrompt(agent: AgentIdentity, interactive: boolean, extra: string | undefined, canSpawn = true): string {
  const role =
    agent.parentId === null
      ? canSpawn
        ? 'You lead a team of agents. Split the work with spawn_agent, collect reports, and call finish with the final answer when everything is done.'
        : 'You work alone: this run allows no sub-agents. Do the task with your tools and call finish with the final answer when it is done.'
      : `You are a sub-agent working for ${agent.parentName} (${agent.parentId}). Do your task, then call agent_finish with a report.`;
  const lines = [
    `You are ${agent.name} (id ${agent.id}), an agent in a troupe team.`,
    role,
    'Every turn must end with a tool call: plain text alone neither ends your work nor reaches anyone.',
    'Use wait_for_agents to wait on agents you have spawned or messaged, or on your own executions and delegations still running: you are woken when one ends, so never poll them.',
    'Use sleep_until to come back to something at a later time, even days away: you park at no cost and wake then, or sooner when a message comes.',
  ];
  if (interactive) lines.push('A human is attached: use respond_to_user to answer them and hand control back.');
  if (extra) lines.push('', extra);
  return lines.join('\n');
}

/** What an agent with an output schema is told (nothing for one without: its texts are as before). */
const outputPart = (tool: string, output: JsonSchema) =>
  `Your result is data: call ${tool} with a \`value\` that matches this JSON Schema (a value that does not match is refused, and after a few refusals you fail):\n${JSON.stringify(output)}`;

/** `notes`: what the root reads of the store's promoted notes (notes/notes.ts notesText), if any. */
export function rootFirstInput(
  agent: AgentIdentity,
  task: string,
  skills: string[],
  output: JsonSchema | null = null,
  notes: string | null = null,
): SessionItem {
  const parts = [`You are agent ${agent.name} (${agent.id}), the root of this team. Call finish when the whole task is done.`];
  if (skills.length > 0) parts.push(`Skills: ${skills.join(', ')}`);
  if (notes !== null) parts.push(notes);
  parts.push(`Task:\n${task}`);
  if (output) parts.push(outputPart('finish', output));
  return { role: 'user', content: parts.join('\n\n') };
}

const clip = (text: string, max: number) => (text.length <= max ? text : `${text.slice(0, max)} […${text.length - max} more characters]`);

/**
 * A conversation as plain text: a child's inherited background, or what a compaction summarises.
 * Images are never copied; `maxItemChars` clips each entry.
 */
export function transcript(items: readonly SessionItem[], maxItemChars = Infinity): string {
  const lines: string[] = [];
  for (const item of items) {
    if (item.role === 'tool') lines.push(clip(`[tool ${item.name} result] ${item.content}`, maxItemChars));
    else if (item.role === 'assistant') {
      if (item.content) lines.push(clip(`[assistant] ${item.content}`, maxItemChars));
      for (const call of item.toolCalls ?? []) lines.push(clip(`[assistant called ${call.name}] ${call.arguments}`, maxItemChars));
    } else {
      const text = typeof item.content === 'string' ? item.content : item.content.map((p) => (p.type === 'text' ? p.text : '[screenshot omitted]')).join(' ');
      lines.push(clip(`[user] ${text}`, maxItemChars));
    }
  }
  return lines.join('\n');
}

/** Text of the parent's conversation shown to a child as background (images are never copied). */
export const inheritedContext = (parentSession: readonly SessionItem[]): string => transcript(parentSession);

/** A child's first input: one user message (strict-alternation providers reject two). */
export function childFirstInput(
  agent: AgentIdentity,
  task: string,
  skills: string[],
  background: string | null,
  output: JsonSchema | null = null,
): SessionItem {
  const parts: string[] = [];
  if (background) {
    parts.push(
      '=== Inherited context from parent (background only) ===',
      background,
      '=== End of inherited context ===',
      "Treat the context above as background only; do not continue the parent's work.",
    );
  }
  parts.push(
    `You are agent ${agent.name} (${agent.id}); your parent is ${agent.parentName} (${agent.parentId}). Keep your own identity. Call agent_finish when your task is done.`,
  );
  if (skills.length > 0) parts.push(`Skills: ${skills.join(', ')}`);
  parts.push(`Task:\n${task}`);
  if (output) parts.push(outputPart('agent_finish', output));
  return { role: 'user', content: parts.join('\n\n') };
}

export function nudgeText(isRoot: boolean, interactive: boolean, attempt: number, limit: number): string {
  const finishTool = isRoot ? 'finish' : 'agent_finish';
  const lines = [
    'Your last turn ended without a tool call. Plain text does not end your work',
    interactive ? 'and does not hand control to the user.' : 'and plain-text final answers are ignored.',
    'Call exactly one tool now.',
  ];
  if (interactive) {
    lines.push(
      'If you have something for the user and nothing to do until they answer, call respond_to_user.',
      // Without this, models repeat their whole answer inside respond_to_user: read twice, paid twice.
      'If you already wrote your answer as plain text, call respond_to_user with no message: that text is delivered as it is, so do not repeat it.',
    );
  }
  lines.push(
    'If you are blocked on another agent, call wait_for_agents.',
    `If the whole job is done, call ${finishTool}.`,
    `(recovery attempt ${attempt}/${limit})`,
  );
  return lines.join(' ');
}

/** A mailbox message as the agent reads it. User text is passed through unchanged. */
export function messageToItem(message: MessageRow): SessionItem {
  if (message.from === 'user') return { role: 'user', content: message.content };
  const who = message.from === 'system' ? 'system' : `${message.fromName} (${message.from})`;
  return {
    role: 'user',
    content: `[Message from ${who} | type=${message.type} | priority=${message.priority}]\n${message.content}`,
  };
}
