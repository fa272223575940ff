import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { readTimeline } from '../../src/dashboard/readModel.js';
import type { TroupeEvent } from '../../src/host/views/views.js';
import { portOf } from '../../src/store/port.js';
import { MemoryQuotaStore } from '../../src/providers/quota.js';
import { team, TERMINAL } from '../helpers/team.js';

const finish = { tool: 'finish', args: { summary: 'done' } };
const childFinish = { tool: 'agent_finish', args: { summary: 'done' } };
const graph = { tool: 'view_agent_graph', args: {} };

/** Calls per fixed simulated minute. */
const perMinute = (starts: number[]) => {
  const counts = new Map<number, number>();
  for (const at of starts) counts.set(Math.floor(at / 60_000), (counts.get(Math.floor(at / 60_000)) ?? 0) + 1);
  return counts;
};

describe('quota: one per model endpoint', () => {
  it("a run's 20 agents with a quota of 6 requests per minute make at most 6 calls per simulated minute", async () => {
    const names = Array.from({ length: 20 }, (_, i) => `w${i}`);
    const agents: Record<string, unknown[]> = {
      lead: [
        { tools: names.map((name) => ({ name: 'spawn_agent', args: { name, task: 'x' } })) },
        ...names.map(() => ({ tool: 'wait_for_agents', args: { reason: 'all' } })),
        finish,
      ],
    };
    for (const name of names) agents[name] = [graph, childFinish];
    const t = team({ agents } as never, {
      limits: { maxChildren: 20 },
      concurrency: { model: 20 },
      quota: { requestsPerMinute: 6 },
      quotaStore: new MemoryQuotaStore(),
    });
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.advance(12 * 60_000, 5_000);
    expect((await t.c.waitFor(rootId, [...TERMINAL])).status).toBe('completed');
    const starts = t.model.calls.map((c) => c.at);
    expect(starts.length).toBeGreaterThanOrEqual(41);
    const counts = perMinute(starts);
    for (const n of counts.values()) expect(n).toBeLessThanOrEqual(6);
    // The quota did hold calls back: 41+ calls at 6 a minute take at least 7 minutes.
    expect(Math.max(...starts)).toBeGreaterThanOrEqual(6 * 60_000);
    await t.c.shutdown();
  });

  it('two runs of one process on one endpoint share its quota', async () => {
    const clock = new SimulatedClock();
    const quotaStore = new MemoryQuotaStore();
    const endpoint = 'https://fake/v1#key1';
    const script = { agents: { lead: [graph, graph, graph, finish] } };
    const a = team(script, { clock, quota: { requestsPerMinute: 3 }, quotaStore });
    const b = team(script, { clock, quota: { requestsPerMinute: 3 }, quotaStore });
    Object.assign(a.model, { endpoint });
    Object.assign(b.model, { endpoint });
    const ids = [await a.c.start({ name: 'lead', task: 'x' }), await b.c.start({ name: 'lead', task: 'x' })];
    await a.advance(4 * 60_000, 5_000);
    expect((await a.c.waitFor(ids[0]!, [...TERMINAL])).status).toBe('completed');
    expect((await b.c.waitFor(ids[1]!, [...TERMINAL])).status).toBe('completed');
    const starts = [...a.model.calls, ...b.model.calls].map((c) => c.at);
    expect(starts).toHaveLength(8);
    for (const n of perMinute(starts).values()) expect(n).toBeLessThanOrEqual(3);
    await a.c.shutdown();
    await b.c.shutdown();
  });

  it('one 429 with retry-after pauses the endpoint for every agent, not only the one that got it, and says so', async () => {
    const t = team(
      {
        agents: {
          lead: [
            {
              tools: [
                { name: 'spawn_agent', args: { name: 'a', task: 'x' } },
                { name: 'spawn_agent', args: { name: 'b', task: 'x' } },
              ],
            },
            { tool: 'wait_for_agents', args: { reason: 'a, b' } },
            { tool: 'wait_for_agents', args: { reason: 'a, b' } },
            finish,
          ],
          a: [{ error: { code: 'PROVIDER_RATE_LIMITED', status: 429, retryAfterMs: 5_000 } }, childFinish],
          // b's first call is in flight when a gets its 429; its next call must wait for the pause.
          b: [{ delayMs: 1_000, ...graph }, childFinish],
        },
      },
      { quota: { requestsPerMinute: 100 }, quotaStore: new MemoryQuotaStore(), retry: { maxRetries: 3, baseDelayMs: 100, maxDelayMs: 60_000 } },
    );
    const events: TroupeEvent[] = [];
    t.c.subscribe((e) => e.type === 'provider.quota' && events.push(e));
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.advance(20_000, 500);
    expect((await t.c.waitFor(rootId, [...TERMINAL])).status).toBe('completed');
    const rateLimited = t.model.calls.find((c) => c.agentName === 'a')!.at;
    const later = (name: string) => t.model.calls.filter((c) => c.agentName === name).slice(1);
    expect(later('a').length).toBe(1);
    expect(later('b').length).toBe(1);
    for (const call of [...later('a'), ...later('b'), ...later('lead')]) {
      if (call.at > rateLimited) expect(call.at).toBeGreaterThanOrEqual(rateLimited + 5_000);
    }
    expect(later('b')[0]!.at).toBeGreaterThanOrEqual(rateLimited + 5_000);
    expect(events).toEqual([expect.objectContaining({ type: 'provider.quota', state: 'paused', until: rateLimited + 5_000 })]);
    // On record: the dashboard's timeline marks it.
    expect(t.store.listEvents(t.c.runId).filter((e) => e.type === 'provider.quota')).toHaveLength(1);
    const marks = (await readTimeline(portOf(t.store))).marks.map((m) => m.label);
    expect(marks).toContain(`provider said 429: paused for every agent until ${new Date(rateLimited + 5_000).toISOString()}`);
    await t.c.shutdown();
  });

  it('rejects a malformed quota with CONFIG_INVALID', () => {
    expect(() => team({ agents: {} }, { quota: { requestsPerMinute: 0 } })).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID' }));
    expect(() => team({ agents: {} }, { quota: { rpm: 5 } as never })).toThrow(/quota\.rpm/);
    expect(() => team({ agents: {} }, { quota: { tokensPerMinute: 1.5 } })).toThrow(/quota\.tokensPerMinute/);
    expect(() => team({ agents: {} }, { quotaStore: {} as never })).toThrow(/quotaStore/);
  });
});
