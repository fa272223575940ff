/**
 * Teams on the real `openai` client against the fake server, on a simulated clock whose timers can
 * be awaited: a test waits until the run loop arms its backoff (or the model its request timeout)
 * and only then moves time, so nothing depends on how fast the HTTP round trips are.
 */
import { SimulatedClock } from 'xstate';
import { createCoordinator, type Coordinator } from '../../src/host/createCoordinator.js';
import type { CoordinatorOptions } from '../../src/host/options.js';
import { openaiModel, type OpenAIModelOptions } from '../../src/model/openaiModel.js';
import type { SessionItem } from '../../src/model/types.js';
import { memoryStore } from '../../src/store/memoryStore.js';
import { createFakeOpenAIServer, type FakeReply, type FakeRequest, type FakeOpenAIServer } from '../../src/testing/fakeOpenAIServer.js';
import { routeByAgent } from '../../src/testing/wireScript.js';

type Armed = { ms: number; at: number };

/** A SimulatedClock that records every timer armed and lets a test await the next one. */
class WatchedClock extends SimulatedClock {
  readonly armed: Armed[] = [];
  #seen = 0;
  #watchers: { match: (ms: number) => boolean; resolve: (ms: number) => void }[] = [];

  override setTimeout(fn: (...args: unknown[]) => void, ms: number): number {
    const id = super.setTimeout(fn, ms);
    this.armed.push({ ms, at: this.now() });
    const i = this.#watchers.findIndex((w) => w.match(ms));
    if (i >= 0) {
      this.#seen = this.armed.length;
      this.#watchers.splice(i, 1)[0]!.resolve(ms);
    }
    return id;
  }

  /** The next timer (not yet consumed by an earlier call) whose delay matches. */
  nextTimer(match: (ms: number) => boolean): Promise<number> {
    for (let i = this.#seen; i < this.armed.length; i++) {
      if (match(this.armed[i]!.ms)) {
        this.#seen = i + 1;
        return Promise.resolve(this.armed[i]!.ms);
      }
    }
    return new Promise((resolve) => this.#watchers.push({ match, resolve }));
  }
}

export { agentNameOf as agentOf } from '../../src/testing/wireScript.js';

export interface OpenAITeamOptions {
  model?: Partial<OpenAIModelOptions>;
  coordinator?: Partial<CoordinatorOptions>;
}

/**
 * A team whose model is `openaiModel` against a fake server. Replies are scripted per agent name;
 * troupe's own calls (compaction) are scripted under `(troupe)`.
 */
export async function openaiTeam(replies: Record<string, FakeReply[]>, options: OpenAITeamOptions = {}) {
  const clock = new WatchedClock();
  const routed = routeByAgent(replies);
  const arrivals: ((r: FakeRequest) => void)[] = [];
  const server: FakeOpenAIServer = await createFakeOpenAIServer((request) => {
    for (const notify of arrivals.splice(0)) notify(request);
    return (routed.script as (r: FakeRequest) => FakeReply)(request);
  });
  const model = openaiModel({ model: 'fake-model', baseURL: server.url, apiKey: 'sk-test', clock, ...options.model });
  const store = options.coordinator?.store ?? memoryStore();
  const c: Coordinator = createCoordinator({ model, store, clock, ...options.coordinator });
  /** Resolves with the next request the server receives. */
  const nextRequest = () => new Promise<FakeRequest>((resolve) => arrivals.push(resolve));
  /** Wait for the next backoff the run loop arms (any timer of at most 90 s: not a request, tool or idle timeout), then let it pass. */
  const passBackoff = async () => {
    const ms = await clock.nextTimer((t) => t <= 90_000);
    clock.increment(ms);
    return ms;
  };
  const session = (id: string): readonly SessionItem[] => store.loadSession(id);
  /** Replies never served, per agent (agents with none left are omitted). */
  const unused = () => Object.fromEntries(Object.entries(routed.remaining()).filter(([, left]) => left > 0));
  return {
    c,
    clock,
    server,
    store,
    model,
    session,
    nextRequest,
    passBackoff,
    unused,
    async [Symbol.asyncDispose]() {
      await c.shutdown();
      await server.close();
    },
  };
}

export const text = (content: string): FakeReply => ({ message: { content } });
export const call = (name: string, args: Record<string, unknown> | string, content: string | null = null): FakeReply => ({
  message: { content, toolCalls: [{ name, arguments: args }] },
});
export const status = (code: number, headers: Record<string, string> = {}, body?: unknown): FakeReply => ({
  status: code,
  headers,
  ...(body === undefined ? {} : { body }),
});
