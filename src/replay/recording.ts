/**
 * A run's recording, read back for a replay: its row, its root, the ids it handed out, the user
 * tools' results (from the requests that carried them and the sessions), and the steps the owner applied in order — each model call (its request as the
 * call log keeps it, and its answer or error) and each input from outside.
 * @module
 */
import { TroupeError } from '../errors.js';
import type { RecordedCall, RecordedInput } from '../host/calls/callLog.js';
import type { McpTool } from '../mcp/connection.js';
import type { SessionItem } from '../model/types.js';
import { portOf, type StorePort } from '../store/port.js';
import { READ_TRIES, rewrittenSince, writesOf, type CommitEntry } from '../fork/journal.js';
import type { Read } from '../tools/ports.js';
import type { ToolImage } from '../tools/toolOutput.js';
import { CALL_EVENT, COMMIT_EVENT, INPUT_EVENT, READ_EVENT, TOOL_EVENT, type AgentRow, type RunRow, type Store } from '../store/types.js';
import type { MailRead } from '../turn/ports.js';

/** What a replay reads of a store; with `eventsOf`, it can tell a session rewritten while it read (a run hosted elsewhere). */
export type ReplayReads = Pick<StorePort, 'getRun' | 'listAgents' | 'historyOf' | 'listMessages' | 'loadSession'> & Partial<Pick<StorePort, 'eventsOf'>>;

/**
 * One step the owner applied: a model call answered (or cut short), an input from outside, a
 * user tool's end (recordings made since the call log kept them); or a restart — the owner's process ended (a crash, a shutdown) and a new one resumed the run: its
 * recovery commit (the one commit that sets the run's `interactive`, resumeCoordinator.ts) says where.
 * `effectsAt`: for a call, when its agent's first status change after it was recorded (before the
 * next step), the time the answer's effects carry (a notice says when its child ended); else its
 * own time.
 */
export type Step = (
  | { kind: 'call'; call: RecordedCall }
  | { kind: 'input'; input: RecordedInput }
  | { kind: 'restart' }
  /**
   * A user tool's execution ended (`toolKey`): its recorded result is given here, not before;
   * `window`: before the commit holding the step before it was done (as a call's).
   */
  | { kind: 'tool'; key: string; window: boolean }
) & { at: number; effectsAt: number };

/** A user tool's recorded result. */
interface ToolResult {
  content: string;
  isError: boolean;
  /**
   * How many steps the recording had committed before the commit that held this result began:
   * they were applied before the tool ended (an input, another agent's answer that came while it
   * ran), so the replay gives the result only once it has applied them. Known on a durable store
   * (its commit journal); unset otherwise.
   */
  after?: number;
  /** Its place among the results the journal holds (the order they were committed in). */
  order?: number;
  /** The images it showed the model (an MCP tool's image content), as the turn's images message carried them. */
  images?: ToolImage[];
}

/** A user tool's failure: what its error was (turn/fingerprint.ts `errorClassOf`). */
type ToolErrors = Map<string, string[]>;

export interface Recording {
  run: RunRow;
  root: AgentRow;
  agents: AgentRow[];
  steps: Step[];
  /** Agent ids in the order they were handed out. */
  agentIds: string[];
  /** Message ids troupe generated, in the order it queued them (keyed sends derive theirs). */
  messageIds: string[];
  /** Per agent id and tool call id: the results its user tools gave, in order. */
  toolResults: Map<string, ToolResult[]>;
  /** Each agent's session as the recording ended it. */
  sessions: Map<string, SessionItem[]>;
  /** Per agent id and tool call id: the classes of its user tools' failures, in order. */
  toolErrors: ToolErrors;
  /**
   * Per MCP server name: the tools the recording's requests offered from it, as the server listed
   * them (own name, the description and schema the requests carried, its hints), first seen first.
   */
  mcpTools: Map<string, McpTool[]>;
  /**
   * User tool calls that ended in a process of the recording that died before their results were
   * committed (a later call of the same answer had started): `<process>:<toolKey>`, the first
   * process 0. Their results were never kept; the replay ends them as they ended.
   */
  endedUnrecorded: Set<string>;
  /**
   * The mailbox reads that took messages (`readKey`): how many, and whether they were the last
   * (a read recorded without `last` was not), in order. Null: the recording has none (made before
   * the call log kept them, or no agent ever read a message) — every read takes what waits, as it
   * did then.
   */
  reads: Map<string, Read[]> | null;
  /** Written to a durable store (its commits grouped per event-loop turn, not per microtask drain). */
  durable: boolean;
  /** When the recording's last event happened (a timer after the last step may still have moved an agent). */
  endsAt: number;
}

/** How long after an answer its agent's status change still counts as its effect (processing, not a timer). */
const EFFECTS_MS = 1_000;

/** Whether a status change of `agentId` at `at` is the effect of answering `step`. */
const causedBy = (step: Step | undefined, agentId: string | null, at: number): boolean =>
  step?.kind === 'call' && step.call.agentId === agentId && at - step.at < EFFECTS_MS;

/** Resume's recovery commit: the only writer of a run's `interactive` after its start. */
const isRecovery = (entry: CommitEntry): boolean => entry.ops.some((w) => w.op === 'updateRun' && 'interactive' in w.patch);

export const toolKey = (agentId: string, callId: string) => `${agentId}\u0000${callId}`;

/** A mailbox read's key: the process of the recording (the first 0), the agent, its turn's read or its wait's. */
export const readKey = (process: number, agentId: string, read: MailRead) =>
  `${process}\u0000${agentId}\u0000${'turn' in read ? `turn ${read.turn}` : `call ${read.callId}`}`;

/** The reads of an embedded store, or a port's (SQLite, PostgreSQL, memory). */
export function readsOf(store: Store | ReplayReads): ReplayReads {
  return 'transaction' in store ? portOf(store) : store;
}

/** Read a run's recording; RUN_NOT_FOUND if there is no such run, or no call log of it to replay. */
export async function readRecording(reads: ReplayReads, runId: string): Promise<Recording> {
  const run = await reads.getRun(runId);
  if (!run) throw new TroupeError('RUN_NOT_FOUND', `No run ${runId} in this database`);
  const { agents, events, messages, writesAt, sessions } = await readRows(reads, runId);
  const root = agents.find((a) => a.id === run.rootId) ?? agents.find((a) => a.parentId === null);
  const steps: Step[] = [];
  const toolSets = new Map<number, RecordedCall['tools']>();
  const mcpTools = new Map<string, McpTool[]>();
  let effects = true;
  let endsAt = run.createdAt;
  const toolErrors: ToolErrors = new Map();
  let durable = false;
  /** Per tool call: its results as the commit journal holds them, in order, each with the steps committed before it. */
  const journaled = new Map<string, ToolResult[]>();
  let committedSteps = 0;
  let order = 0;
  /** This process's started tool calls, by agent and turn, in order; and the calls with a result. */
  let started = new Map<string, string[]>();
  const endedUnrecorded = new Set<string>();
  const hasResult = new Set<string>();
  let process = 0;
  let mailReads: Map<string, Read[]> | null = null;
  for (const e of events) {
    if (e.type === COMMIT_EVENT) {
      durable = true;
      const entry = e.data as unknown as CommitEntry;
      const recovery = isRecovery(entry);
      // What a recovery writes (a call cut in doubt by the crash) comes with the restart, not before.
      const after = recovery ? steps.length + 1 : committedSteps;
      if (recovery) {
        // The process died: of each answer's calls it had started, all but the last had ended.
        for (const [turn, calls] of started) {
          const agentId = turn.slice(0, turn.indexOf('\u0000'));
          for (const callId of calls.slice(0, -1)) if (!hasResult.has(toolKey(agentId, callId))) endedUnrecorded.add(`${process}:${toolKey(agentId, callId)}`);
        }
        started = new Map();
        process++;
      }
      for (const op of writesAt.get(e)!) {
        if (op.op === 'startToolCall') {
          const turn = `${op.row.agentId}\u0000${op.row.turn}`;
          started.set(turn, [...(started.get(turn) ?? []), op.row.callId]);
        }
        if (op.op !== 'appendSession') continue;
        for (const item of op.items) {
          if (item.role !== 'tool') {
            imagesOf(journaled, op.agentId, item);
            continue;
          }
          const key = toolKey(op.agentId, item.toolCallId);
          hasResult.add(key);
          journaled.set(key, [...(journaled.get(key) ?? []), { content: item.content, isError: item.isError === true, after, order: order++ }]);
        }
      }
      if (recovery) steps.push({ kind: 'restart', at: e.at, effectsAt: e.at });
      committedSteps = steps.length;
    }
    endsAt = Math.max(endsAt, e.at);
    if (e.type === READ_EVENT && e.agentId !== null) {
      const { count, last, ...read } = e.data as MailRead & { count: number; last?: boolean };
      const key = readKey(process, e.agentId, read);
      mailReads ??= new Map();
      mailReads.set(key, [...(mailReads.get(key) ?? []), { count, last: last === true }]);
      continue;
    }
    if (e.type === TOOL_EVENT && e.agentId !== null) {
      const key = toolKey(e.agentId, String(e.data.callId));
      if (e.data.ended === true) {
        // One that ended in the instant it began (a synchronous tool, a simulated clock) is no
        // step: its result is given inside the call, racing what is in flight as it did.
        if (e.data.t0 === e.at) continue;
        steps.push({ kind: 'tool', key, window: e.data.window === true, at: e.at, effectsAt: e.at });
        effects = true;
        continue;
      }
      toolErrors.set(key, [...(toolErrors.get(key) ?? []), String(e.data.errorClass)]);
      continue;
    }
    if (e.type === CALL_EVENT) steps.push({ kind: 'call', call: withTools(e.data as unknown as RecordedCall, toolSets, mcpTools), at: e.at, effectsAt: e.at });
    else if (e.type === INPUT_EVENT) steps.push({ kind: 'input', input: e.data as unknown as RecordedInput, at: e.at, effectsAt: e.at });
    else if (e.type === 'agent.status' && effects && causedBy(steps.at(-1), e.agentId, e.at)) {
      steps.at(-1)!.effectsAt = e.at;
      effects = false;
      continue;
    } else continue;
    effects = true;
  }
  if (!root || !steps.some((s) => s.kind === 'call')) {
    throw new TroupeError('RUN_NOT_FOUND', `Run ${runId} has no call log to replay (it was made by a troupe without replay, or never called a model)`);
  }
  // A tool's result is in the next request its agent made (a compaction may take it out of the
  // session later), or, after its agent's last call, only in the session.
  const toolResults = new Map<string, ToolResult[]>();
  for (const step of steps) {
    if (step.kind === 'call' && step.call.purpose === 'main') for (const item of step.call.add) collectTool(toolResults, step.call.agentId, item);
  }
  for (const agent of agents) {
    const inSession = new Map<string, ToolResult[]>();
    for (const item of sessions.get(agent.id)!) collectTool(inSession, agent.id, item);
    for (const [key, results] of inSession) {
      const known = toolResults.get(key) ?? [];
      if (results.length > known.length) toolResults.set(key, [...known, ...results.slice(known.length)]);
    }
  }
  // On a durable store the journal holds every result as it was appended, once (a resumed agent's
  // first request repeats its session), with where it came among the steps.
  for (const [key, results] of journaled) toolResults.set(key, results);
  return {
    run,
    root,
    agents,
    steps,
    agentIds: agents.map((a) => a.id),
    messageIds: messages.filter((m) => !(m.noticeKey ?? '').startsWith('send:')).map((m) => m.id),
    toolResults,
    sessions,
    toolErrors,
    mcpTools,
    endedUnrecorded,
    reads: mailReads,
    durable,
    endsAt,
  };
}

/**
 * The run's agents, history and messages, its journal's writes in full (the session items its
 * entries name read back from the rows) and every agent's session — read again while another
 * process hosting the run rewrote a session in between (fork.ts reads the same way); RUN_LOCKED
 * after three tries. Reads that cannot list the journal alone (`eventsOf`) are taken as they are.
 */
async function readRows(reads: ReplayReads, runId: string) {
  for (let attempt = 1; ; attempt++) {
    const [agents, events, messages] = await Promise.all([reads.listAgents(runId), reads.historyOf(runId), reads.listMessages(runId)]);
    const loaded = new Map<string, Promise<SessionItem[]>>();
    const sessionOf = (agentId: string) => loaded.get(agentId) ?? loaded.set(agentId, reads.loadSession(agentId)).get(agentId)!;
    const entries = events.filter((e) => e.type === COMMIT_EVENT);
    const read = await writesOf(
      entries.map((e) => e.data as unknown as CommitEntry),
      sessionOf,
    );
    const sessions = new Map<string, SessionItem[]>();
    for (const agent of agents) sessions.set(agent.id, await sessionOf(agent.id));
    const eventsOf = reads.eventsOf?.bind(reads);
    if (!eventsOf || !(await rewrittenSince({ eventsOf }, runId, entries.length))) {
      if (!read.ok) throw read.error;
      return { agents, events, messages, sessions, writesAt: new Map(entries.map((e, i) => [e, read.writes[i]!])) };
    }
    if (attempt === READ_TRIES)
      throw new TroupeError('RUN_LOCKED', `The sessions of run ${runId} were rewritten while the replay read them, ${READ_TRIES} times: replay again`);
  }
}

/**
 * `call` with its tool list in full: the log writes a list once and numbers it (callLog.ts). Where
 * it writes one, the MCP tools in it join their servers' listings.
 */
function withTools(call: RecordedCall, toolSets: Map<number, RecordedCall['tools']>, mcpTools: Map<string, McpTool[]>): RecordedCall {
  if (call.toolSet === undefined) return call;
  if (call.tools !== undefined) {
    toolSets.set(call.toolSet, call.tools);
    for (const spec of call.mcp === undefined ? [] : call.tools) {
      const origin = call.mcp![spec.name];
      if (!origin) continue;
      const listed = mcpTools.get(origin.server) ?? [];
      if (listed.some((t) => t.name === origin.tool)) continue;
      listed.push({
        name: origin.tool,
        description: spec.description,
        inputSchema: spec.parameters as McpTool['inputSchema'],
        ...(origin.hints ? { annotations: origin.hints } : {}),
      });
      mcpTools.set(origin.server, listed);
    }
  } else if (toolSets.has(call.toolSet)) call.tools = toolSets.get(call.toolSet);
  else throw new TroupeError('STORE_CORRUPT', `The call log names tool list ${call.toolSet} before it recorded it (${call.name}, turn ${call.turn})`);
  return call;
}

function collectTool(into: Map<string, ToolResult[]>, agentId: string, item: SessionItem): void {
  if (item.role !== 'tool') return imagesOf(into, agentId, item);
  const key = toolKey(agentId, item.toolCallId);
  const list = into.get(key) ?? [];
  list.push({ content: item.content, isError: item.isError === true });
  into.set(key, list);
}

/** `[The image returned by <tool> (tool call <id>)]`, `[The <n> images returned by …]`: the text before a call's images (turn/toolCalls.ts `imagesItem`). */
const IMAGES_OF = /^\[(?:The image|The \d+ images) returned by .+ \(tool call (.+)\)\]$/;
const DATA_URL = /^data:([^;,]+);base64,(.*)$/s;

/**
 * The images a turn's images message (the user message after its tool results) showed, each given
 * to the last result collected of the call it names — what the tool returned besides its text.
 */
function imagesOf(into: Map<string, ToolResult[]>, agentId: string, item: SessionItem): void {
  if (item.role !== 'user' || typeof item.content === 'string') return;
  let images: ToolImage[] | null = null;
  for (const part of item.content) {
    if (part.type === 'text') {
      const callId = IMAGES_OF.exec(part.text)?.[1];
      const result = callId === undefined ? undefined : into.get(toolKey(agentId, callId))?.at(-1);
      images = result && !result.isError ? (result.images = []) : null;
      continue;
    }
    const url = DATA_URL.exec(part.url);
    if (images && url) images.push({ mimeType: url[1]!, data: url[2]! });
  }
}
