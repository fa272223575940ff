/**
 * The fake OpenAI-compatible server in a process of its own, so that a bench counts only the
 * client's CPU. Every request is answered with one `work` tool call (or `agent_finish` when the
 * request's last message says so, see `answerFor`) after a delay in [minMs, maxMs]. The delay is a
 * hash of the caller and its turn (`delayFor`), not a fresh random draw: the scale bench's
 * baseline names the same callers and turns, so troupe and the ideal wait the same latencies and
 * their ratio measures troupe, not the luck of two draws (one K = 1,000 run read 85 % of the ideal,
 * the next 101 %, with unseeded draws). Prints its URL as one line on stdout, then serves until killed.
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
 * message): a task `spawn:K` spawns K children (`work:10`), 128 per turn in one spawn_agents call, then waits for all
 * of them (`until: "all"`: woken once, by the last report) and finishes; a task `work:N` calls the tool `work` N times, then agent_finish. Any
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
    return [done ? { name: 'finish', arguments: { summary: 'all done' } } : { name: 'wait_for_agents', arguments: { reason: 'reports', until: 'all' } }];
  }
  const work = /work:(\d+)/.exec(text);
  if (work && count('tool') >= Number(work[1])) return [{ name: 'agent_finish', arguments: { summary: 'ok' } }];
  return [{ name: 'work', arguments: {} }];
}

/**
 * The caller and its turn: troupe's agents are named in their system prompt ("You are agent w17
 * (…)"), the baseline's requests say `baseline <name> <turn>`; the turn is the answers so far. A
 * root's call answered with `finish` is its turn `final` in both: how many waits troupe's root
 * made before it is troupe's timing, and its last call must not draw another latency than the
 * baseline's last (it did: 1.1 s against 1.8, which put a team at 100.8 % of the ideal).
 */
function keyOf(messages: readonly Message[], calls: readonly Call[]): string {
  const first = typeof messages[0]?.content === 'string' ? messages[0].content : '';
  const baseline = /^baseline (\S+) (\S+)$/.exec(first);
  if (baseline) return `${baseline[1]}#${baseline[2]}`;
  const name = /You are (?:agent )?(\S+) \(/.exec(first)?.[1] ?? '?';
  if (calls.some((c) => c.name === 'finish')) return `${name}#final`;
  return `${name}#${messages.filter((m) => m.role === 'assistant').length}`;
}

/** A delay in [minMs, maxMs] fixed by `key` (FNV-1a, then a finaliser so near keys spread). */
function delayFor(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  h ^= h >>> 16;
  return minMs + ((h >>> 0) / 2 ** 32) * (maxMs - minMs);
}

function answerFor(request: FakeRequest): FakeReply {
  const messages = (request.body as { messages?: Message[] } | undefined)?.messages ?? [];
  const calls = callsFor(messages);
  return { message: { toolCalls: calls }, delayMs: delayFor(keyOf(messages, calls)) };
}

const server = await createFakeOpenAIServer(answerFor);
// The requests log would grow with every call: this server keeps none.
setInterval(() => server.requests.splice(0), 1_000).unref();
process.stdout.write(`${server.url}\n`);
