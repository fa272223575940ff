/**
 * The teams the crash-harness child runs (child.ts), one per trial mode. Each model is a pure
 * function of the conversation, so a resumed run continues correctly; randomness only paces.
 *
 * - `default`: a root spawns 4 workers that take 8 turns of a `work` tool, one of them a
 *   `delegate` (a background job), message their parent and finish.
 * - `in-doubt`: 4 workers take 6 turns, each calling one or two tools that append a line to a
 *   side-effect file (fsynced): `append` (not idempotent) and `append_idem` (idempotent). A call
 *   reported TOOL_NOT_RUN is retried (same operation, new call), as the message invites; a call
 *   reported TOOL_IN_DOUBT is not (the model is told to check first).
 * With CRASH_MCP=1 the default team's work is the `write_note` tool of an MCP server over stdio
 *   (the test fixture, a child of this process): an MCP mutation, killed mid-call like any tool.
 * - `group`: 24–40 workers take 4 quick turns at once, so that each commit carries the writes of
 *   many agents (the group boundaries the kills aim at).
 */
import type { Coordinator } from '../../../src/host/createCoordinator.js';
import type { StorePort } from '../../../src/store/port.js';
import type { Model, ModelRequest, ModelTurn, SessionItem, ToolCall } from '../../../src/model/types.js';
import { fileURLToPath } from 'node:url';
import { mcpServer, type McpServer } from '../../../src/mcp/config.js';
import { defineTool, type Tool } from '../../../src/tools/defineTool.js';
import { appendEffect, type EffectLine } from './effects.js';

export type TeamName = 'default' | 'in-doubt' | 'group';

/** What a team needs of its process. */
export interface TeamIO {
  random(): number;
  pause(ms: number): Promise<void>;
  print(line: string): void;
  /** The live coordinator (the delegate tool dispatches through it). */
  coordinator(): Coordinator<StorePort>;
  /** The side-effect file of the in-doubt tools. */
  effectsPath: string;
}

export interface Team {
  model: Model;
  tools: (Tool | McpServer)[];
  /** User messages sent side by side (each waits for its acknowledgement before the next). */
  senders: number;
  /** Pause between two user messages of one sender, at most (ms). */
  sendGapMs: number;
  limits: { maxTurns: number; maxChildren?: number };
}

/** The default team's work is an MCP server's tool (CRASH_MCP=1; the crash test's MCP variant). */
const MCP = process.env.CRASH_MCP === '1';

const WORKERS = 4;
const WORK_TURNS = 8;
const IN_DOUBT_TURNS = 6;
const GROUP_TURNS = 4;

function caller(request: ModelRequest) {
  let n = 0;
  const done = request.messages.filter((m) => m.role === 'assistant').length;
  // Unique in the run and a function of the conversation: a re-asked answer gets the same ids.
  const id = () => `c-${request.agent.id}-${done}-${n++}`;
  return { done, id, call: (name: string, args: object): ToolCall => ({ id: id(), name, arguments: JSON.stringify(args) }) };
}

/** The root: spawn `workers`, wait for their reports, finish once none is left. */
function rootTurn(request: ModelRequest, workers: number): ModelTurn {
  const { done, call } = caller(request);
  if (done === 0) return { text: null, toolCalls: Array.from({ length: workers }, (_, i) => call('spawn_agent', { name: `w${i}`, task: `part ${i}` })) };
  const last = request.messages.findLast((m) => m.role === 'tool');
  const idle = last?.role === 'tool' && last.content.includes('no_active_agents');
  return { text: null, toolCalls: [idle ? call('finish', { summary: 'all parts done' }) : call('wait_for_agents', { reason: 'reports' })] };
}

function defaultTeam(io: TeamIO): Team {
  const delegate = defineTool({
    name: 'delegate',
    description: 'dispatch a background job whose result comes back later',
    parameters: { type: 'object', properties: { goal: { type: 'string' } }, required: ['goal'] },
    execute: ({ goal }, { agentId }) => {
      const c = io.coordinator();
      const id = c.delegations.dispatch(agentId, goal as string);
      setTimeout(
        () => {
          // Acknowledged only once committed.
          c.delegations.complete(agentId, id, `result of ${goal as string}`).then(
            () => io.print(`DDONE ${agentId}/${id}`),
            // The agent or the coordinator is gone: the delegation stays running until recovery.
            () => undefined,
          );
        },
        5 + io.random() * 40,
      );
      return { delegation_id: id };
    },
  });
  const model: Model = {
    name: 'crash-harness',
    async complete(request: ModelRequest): Promise<ModelTurn> {
      // The workers' calls are the run's fixed amount of work (WORKERS × (WORK_TURNS + 1)); the
      // root's wakes vary with the user messages, so they are not counted.
      if (request.agent.parentId !== null) io.print('TICK');
      await io.pause(io.random() * 6);
      if (request.agent.parentId === null) return rootTurn(request, WORKERS);
      const { done, call } = caller(request);
      if (done < WORK_TURNS) {
        const unit = MCP ? call('write_note', { note: `${request.agent.name} step ${done}` }) : call('work', { step: done });
        const calls = [done === 2 ? call('delegate', { goal: `job of ${request.agent.name}` }) : unit];
        if (done % 3 === 1) calls.push(call('send_message', { to: request.agent.parentId, content: `progress from ${request.agent.name}` }));
        return { text: null, toolCalls: calls };
      }
      return { text: null, toolCalls: [call('agent_finish', { summary: `${request.agent.name} finished` })] };
    },
  };
  const fixture = fileURLToPath(new URL('../../fixtures/mcp/server.js', import.meta.url));
  const tools = MCP ? [mcpServer({ name: 'fx', command: process.execPath, args: [fixture] }), delegate] : [work(io, 3), delegate];
  return { model, tools, senders: 1, sendGapMs: 10, limits: { maxTurns: 50 } };
}

const work = (io: TeamIO, maxMs: number) =>
  defineTool({
    name: 'work',
    description: 'do a unit of work',
    parameters: { type: 'object', properties: { step: { type: 'number' } } },
    execute: async () => {
      await io.pause(io.random() * maxMs);
      return { ok: true };
    },
  });

const hash = (text: string) => [...text].reduce((h, ch) => (h * 31 + ch.charCodeAt(0)) >>> 0, 7);

function inDoubtTeam(io: TeamIO): Team {
  const append = (name: EffectLine['tool']) =>
    defineTool({
      name,
      description: name === 'append' ? 'append a line (not idempotent)' : 'append a line (idempotent by key)',
      parameters: { type: 'object', properties: { op: { type: 'string' }, call: { type: 'string' } }, required: ['op', 'call'] },
      risk: 'mutation',
      ...(name === 'append_idem' ? { idempotent: true } : {}),
      execute: async (args, ctx) => {
        // Its `started` row is committed by now: a kill from here to its result leaves it in doubt.
        io.print('TOOL');
        await io.pause(io.random() * 4);
        appendEffect(io.effectsPath, {
          tool: name,
          call: args.call as string,
          op: args.op as string,
          key: ctx.idempotencyKey,
          agent: ctx.agentId,
          pid: process.pid,
        });
        io.print('EFFECT');
        await io.pause(io.random() * 4);
        return { appended: args.op };
      },
    });
  const model: Model = {
    name: 'crash-harness-in-doubt',
    async complete(request: ModelRequest): Promise<ModelTurn> {
      if (request.agent.parentId !== null) io.print('TICK');
      await io.pause(io.random() * 4);
      if (request.agent.parentId === null) return rootTurn(request, WORKERS);
      const { done, id, call } = caller(request);
      if (done >= IN_DOUBT_TURNS) return { text: null, toolCalls: [call('agent_finish', { summary: `${request.agent.name} finished` })] };
      const retry = notRun(request.messages);
      const h = hash(`${request.agent.name}/${done}`);
      const first: EffectLine['tool'] = h % 2 === 0 ? 'append' : 'append_idem';
      const fresh = h % 3 === 0 ? [first] : [first, first === 'append' ? 'append_idem' : 'append'];
      const ops = retry.length > 0 ? retry : fresh.map((tool, i) => ({ tool, op: `${request.agent.name}-${done}-${i}` }));
      // Each call carries its own id in its arguments, for the side-effect line.
      const calls = ops.map(({ tool, op }) => {
        const callId = id();
        return { id: callId, name: tool, arguments: JSON.stringify({ op, call: callId }) };
      });
      if (done === 3) calls.push(call('send_message', { to: request.agent.parentId, content: `progress from ${request.agent.name}` }));
      return { text: null, toolCalls: calls };
    },
  };
  return { model, tools: [append('append'), append('append_idem')], senders: 1, sendGapMs: 10, limits: { maxTurns: 50 } };
}

/** The append calls of the last answer that were reported TOOL_NOT_RUN: retried with the same operation. */
function notRun(messages: readonly SessionItem[]): { tool: EffectLine['tool']; op: string }[] {
  const at = messages.findLastIndex((m) => m.role === 'assistant');
  const answer = messages[at];
  if (answer?.role !== 'assistant') return [];
  const refused = new Set(messages.slice(at + 1).flatMap((m) => (m.role === 'tool' && m.content.includes('"TOOL_NOT_RUN"') ? [m.toolCallId] : [])));
  return (answer.toolCalls ?? [])
    .filter((c) => refused.has(c.id) && (c.name === 'append' || c.name === 'append_idem'))
    .map((c) => ({ tool: c.name as EffectLine['tool'], op: (JSON.parse(c.arguments) as { op: string }).op }));
}

function groupTeam(io: TeamIO, seed: number): Team {
  const workers = 24 + (seed % 17);
  const model: Model = {
    name: 'crash-harness-group',
    async complete(request: ModelRequest): Promise<ModelTurn> {
      // Answers come at once (one tick later): agents that moved together commit together.
      await io.pause(0);
      if (request.agent.parentId === null) return rootTurn(request, workers);
      const { done, call } = caller(request);
      if (done < GROUP_TURNS) {
        const calls = [call('work', { step: done })];
        if (done === 1) calls.push(call('send_message', { to: request.agent.parentId, content: `progress from ${request.agent.name}` }));
        return { text: null, toolCalls: calls };
      }
      return { text: null, toolCalls: [call('agent_finish', { summary: `${request.agent.name} finished` })] };
    },
  };
  // The root wakes for many reports and user messages: its turns are not what is tested.
  return { model, tools: [work(io, 1)], senders: 3, sendGapMs: 4, limits: { maxTurns: 1_000, maxChildren: workers } };
}

export function team(name: TeamName, io: TeamIO, seed: number): Team {
  return name === 'in-doubt' ? inDoubtTeam(io) : name === 'group' ? groupTeam(io, seed) : defaultTeam(io);
}
