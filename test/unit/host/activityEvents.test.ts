/**
 * What views are told between status changes: `agent.activity` for tool calls, retries (with the
 * wait and the count) and nudges, and `budget.tripped` with the reason in words — the next call's
 * estimate that would pass the line, or the call that passed it.
 */
import { describe, expect, it } from 'vitest';
import type { TroupeEvent } from '../../../src/host/runtime.js';
import type { ScriptStep } from '../../../src/model/scriptedModel.js';
import { team, TERMINAL } from '../../helpers/team.js';

const paid = (step: ScriptStep, usd: number, reserveUsd?: number): ScriptStep => ({
  ...step,
  usage: { costUsd: usd },
  ...(reserveUsd === undefined ? {} : { reserveUsd }),
});
const graph: ScriptStep = { tool: 'view_agent_graph', args: {} };

function events(t: ReturnType<typeof team>): TroupeEvent[] {
  const seen: TroupeEvent[] = [];
  t.c.subscribe((e) => seen.push(e));
  return seen;
}

describe('agent.activity', () => {
  it('a tool call, a rate-limited call retried after its wait (n of max), a plain-text nudge', async () => {
    const t = team({
      agents: {
        lead: [
          graph,
          { error: { code: 'PROVIDER_RATE_LIMITED', status: 429, message: 'slow down', retryAfterMs: 8_000 } },
          { text: 'just words' },
          { tool: 'finish', args: { summary: 'done' } },
        ],
      },
    });
    const seen = events(t);
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.advance(60_000);
    expect((await t.c.waitFor(rootId, TERMINAL)).status).toBe('completed');
    const activities = seen.flatMap((e) => (e.type === 'agent.activity' ? [e.activity] : []));
    expect(activities).toEqual([
      { kind: 'tool', tool: 'view_agent_graph' },
      { kind: 'retry', code: 'PROVIDER_RATE_LIMITED', message: 'slow down', status: 429, retry: 1, maxRetries: 5, delayMs: 8_000 },
      { kind: 'nudge', attempt: 1, limit: 3 },
      { kind: 'tool', tool: 'finish' },
    ]);
  });
});

describe('budget.tripped says why', () => {
  it('the reserve: a child whose next call, at its estimate, would pass the reserve line', async () => {
    const t = team(
      {
        agents: {
          lead: [
            paid({ tool: 'spawn_agent', args: { name: 'scout', task: 'look' } }, 1),
            { tool: 'wait_for_agents', args: { reason: 'scout' } },
            paid({ tool: 'finish', args: { summary: 'done' } }, 0.5),
          ],
          scout: [paid(graph, 7), paid(graph, 1, 2), { tool: 'agent_finish', args: { summary: 'never' } }],
        },
      },
      { budget: { limitUsd: 10 } },
    );
    const seen = events(t);
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.advance(60_000);
    await t.c.waitFor(rootId, TERMINAL);
    const trips = seen.filter((e) => e.type === 'budget.tripped');
    expect(trips).toHaveLength(1);
    expect(trips[0]).toMatchObject({ kind: 'reserve', spentUsd: 8, limitUsd: 10 });
    expect((trips[0] as { reason: string }).reason).toBe(
      "scout's next call, estimated at $2.00, would take $8.00 spent past the sub-agent reserve line $9.00 (90 % of $10.00)",
    );
  });

  it.each([
    ['refused: the root’s next call would pass the limit', 7, undefined, "lead's next call, estimated at $7.00, would take $4.00 spent past the limit $10.00"],
    ['crossed: a call that cost more than it reserved', 7, 1, "lead's call brought the spend to $11.00, at or past the limit $10.00"],
  ] as const)('the stop, %s', async (_label, cost, reserve, reason) => {
    const t = team(
      { agents: { lead: [paid(graph, 4), paid(graph, cost, reserve), { tool: 'finish', args: { summary: 'never' } }] } },
      { budget: { limitUsd: 10, reserveFraction: 1 } },
    );
    const seen = events(t);
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.advance(60_000);
    await t.c.waitFor(rootId, TERMINAL);
    const trips = seen.filter((e) => e.type === 'budget.tripped');
    expect(trips.map((e) => (e as { kind: string; reason: string }).kind)).toEqual(['stop']);
    expect(trips.map((e) => (e as { kind: string; reason: string }).reason)).toEqual([reason]);
  });
});
