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

/** The tool a request's last user message names (`call:<tool> <json args>`), else `work`. */
function answerFor(request: FakeRequest): FakeReply {
  const delayMs = minMs + Math.random() * (maxMs - minMs);
  const body = request.body as { messages?: { role: string; content?: unknown }[] } | undefined;
  const last = body?.messages?.at(-1);
  const text = typeof last?.content === 'string' ? last.content : '';
  const match = /^call:(\w+) (.*)$/s.exec(text);
  const toolCalls = match ? [{ name: match[1]!, arguments: match[2]! }] : [{ name: 'work', arguments: {} }];
  return { message: { toolCalls }, delayMs };
}

const server = await createFakeOpenAIServer(answerFor);
// The requests log would grow with every call: this server keeps none.
setInterval(() => server.requests.splice(0), 1_000).unref();
process.stdout.write(`${server.url}\n`);
