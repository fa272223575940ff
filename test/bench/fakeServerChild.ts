/**
 * The fake OpenAI-compatible server in a process of its own, so that a bench counts only the
 * client's CPU. Every request is answered with one `work` tool call (or `agent_finish` when the
 * request's last message says so, see `answerFor`) after a delay drawn uniformly from
 * [minMs, maxMs]. Prints its URL as one line on stdout, then serves until killed.
 *
 * Usage: node fakeServerChild.js <minMs> <maxMs>
 * @module
 */
import { createFakeOpenAIServer, type FakeReply, type FakeRequest } from '../../src/testing/fakeOpenAIServer.js';

const [minMs = 0, maxMs = minMs] = process.argv.slice(2).map(Number);

/** Children one spawn_agents call starts at most (troupe refuses more than 128). */
const BATCH = 128;

type Call = { name: string; arguments: Record<string, unknown> };
type Message = { role: string; content?: unknown };

/**
 * The team of the scale bench, scripted from the request alone (the agent's task is its first user
 * message): a task `spawn:K` spawns K children (`work:10`), 128 per turn in one spawn_agents call, then waits until no agent
 * is active and finishes; a task `work:N` calls the tool `work` N times, then agent_finish. Any
 * other request gets one `work` call.
 */
function callsFor(messages: readonly Message[]): Call[] {
  const task = messages.find((m) => m.role === 'user');
  const text = typeof task?.content === 'string' ? task.content : '';
  const count = (role: string) => messages.filter((m) => m.role === role).length;
  const spawn = /spawn:(\d+)/.exec(text);
  if (spawn) {
    const children = Number(spawn[1]);
    const spawned = Math.min(children, count('assistant') * BATCH);
    if (spawned < children) {
      const agents = Array.from({ length: Math.min(BATCH, children - spawned) }, (_, i) => ({ name: `w${spawned + i}`, task: 'work:10' }));
      return [{ name: 'spawn_agents', arguments: { agents } }];
    }
    const last = messages.findLast((m) => m.role === 'tool');
    const done = typeof last?.content === 'string' && last.content.includes('no_active_agents');
    return [done ? { name: 'finish', arguments: { summary: 'all done' } } : { name: 'wait_for_agents', arguments: { reason: 'reports' } }];
  }
  const work = /work:(\d+)/.exec(text);
  if (work && count('tool') >= Number(work[1])) return [{ name: 'agent_finish', arguments: { summary: 'ok' } }];
  return [{ name: 'work', arguments: {} }];
}

function answerFor(request: FakeRequest): FakeReply {
  const delayMs = minMs + Math.random() * (maxMs - minMs);
  const body = request.body as { messages?: Message[] } | undefined;
  return { message: { toolCalls: callsFor(body?.messages ?? []) }, delayMs };
}

const server = await createFakeOpenAIServer(answerFor);
// The requests log would grow with every call: this server keeps none.
setInterval(() => server.requests.splice(0), 1_000).unref();
process.stdout.write(`${server.url}\n`);
