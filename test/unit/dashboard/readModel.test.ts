/**
 * The dashboard's read model over the store port: what a waiting agent waits on, the run picked,
 * status spans, and an operator pause journalled once.
 */
import { describe, expect, it } from 'vitest';
import { pickRun, readTeam, readTimeline } from '../../../src/dashboard/readModel.js';
import { portOf } from '../../../src/store/port.js';
import { team } from '../../helpers/team.js';

const script = {
  agents: {
    lead: [
      { tools: ['a', 'b'].map((name) => ({ name: 'spawn_agent', args: { name, task: 'a part' } })) },
      { tool: 'wait_for_agents', args: { reason: 'both parts' } },
      { tool: 'wait_for_agents', args: { reason: 'the other part' } },
      { tool: 'respond_to_user', args: { message: 'Both parts are in.' } },
    ],
    a: [{ tool: 'agent_finish', args: { summary: 'part a' } }],
    // b stays in its model call until the clock moves.
    b: [{ tool: 'agent_finish', args: { summary: 'part b' }, delayMs: 10_000 }],
  },
};

describe('readTeam and readTimeline', () => {
  it('a waiting agent waits on its active children by name, then on the user', async () => {
    const t = team(script, { interactive: true });
    const rootId = await t.c.start({ name: 'lead', task: 'Split it.' });
    const port = portOf(t.store);
    await t.c.waitFor(rootId, ['waiting']);
    await t.c.waitFor(t.byName('a').id, ['completed']);
    const waitsOf = async () => Object.fromEntries((await readTeam(port)).agents.map((a) => [a.name, a.waitingOn]));
    await expect.poll(waitsOf).toEqual({ lead: 'b', a: null, b: null });

    await t.advance(10_000);
    await t.c.waitFor(t.byName('b').id, ['completed']);
    await t.c.whenIdle();
    expect(await waitsOf()).toEqual({ lead: 'the user', a: null, b: null });
    const counts = (await readTeam(port)).counts;
    expect(counts).toEqual({ waiting: 1, completed: 2 });
    await t.c.shutdown();
  });

  it('status spans follow the agent.status rows; an operator pause and resume are run marks, once each', async () => {
    const t = team(script, { interactive: true });
    const rootId = await t.c.start({ name: 'lead', task: 'Split it.' });
    await t.c.waitFor(rootId, ['waiting']);
    await t.c.pauseBudget();
    await t.c.pauseBudget(); // already paused: no second mark
    await t.c.resumeBudget();
    const timeline = await readTimeline(portOf(t.store));
    expect(timeline.marks.map((m) => m.label)).toEqual(['budget paused', 'budget resumed']);
    const lead = timeline.lanes.find((l) => l.name === 'lead')!;
    const changes = t.store.listEvents(t.c.runId).filter((e) => e.type === 'agent.status' && e.agentId === rootId);
    expect(changes.length).toBeGreaterThan(0);
    expect(lead.spans.map((s) => s.status)).toEqual(['running', ...changes.map((e) => e.data.to)]);
    expect(lead.spans.slice(1).map((s) => s.from)).toEqual(changes.map((e) => e.at));
    expect(lead.spans.at(-1)!.to).toBeNull();
    for (let i = 1; i < lead.spans.length; i++) expect(lead.spans[i - 1]!.to).toBe(lead.spans[i]!.from);
    await t.c.shutdown();
  });

  it('tool calls, budget warnings (once per band) and the trip are marks on the agents’ lanes, at the times they happened', async () => {
    const paid = (step: object, costUsd: number) => ({ ...step, usage: { costUsd } });
    const graph = { tool: 'view_agent_graph', args: {} };
    const t = team(
      {
        agents: {
          lead: [
            paid({ tool: 'spawn_agent', args: { name: 'a', task: 'spend' } }, 1),
            { tool: 'wait_for_agents', args: { reason: 'a' } },
            graph,
            graph,
            { tool: 'finish', args: { summary: 'done' } },
          ],
          // Spent before each of a's calls: 1, 7.5 (75 %: notice), 8 (80 %: urgent), 8.5 (85 %: critical; its call would cross the reserve line: tripped).
          a: [paid(graph, 6.5), paid(graph, 0.5), paid(graph, 0.5), paid(graph, 0.6), { tool: 'agent_finish', args: { summary: 'ok' } }],
        },
      },
      { budget: { limitUsd: 10, reserveFraction: 0.9 } },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'Spend.' });
    await t.c.waitFor(rootId, ['completed', 'stopped', 'failed']);
    await t.c.whenIdle();
    const timeline = await readTimeline(portOf(t.store));
    const lane = (name: string) => timeline.lanes.find((l) => l.name === name)!;
    const a = lane('a');
    const events = t.store.listEvents(t.c.runId);
    const toolEvents = events.filter((e) => e.type === 'tool.call' && e.agentId === a.agentId);
    expect(toolEvents).toHaveLength(3);
    expect(a.marks.filter((m) => m.kind === 'tool').map((m) => [m.at, m.label])).toEqual(toolEvents.map((e) => [e.at, 'tool call: view_agent_graph']));
    const warnings = events.filter((e) => e.type === 'budget.warning' && e.agentId === a.agentId);
    expect(a.marks.filter((m) => m.kind === 'warning').map((m) => [m.at, m.label])).toEqual([
      [warnings[0]!.at, 'budget NOTICE: 75% spent ($7.5000)'],
      [warnings[1]!.at, 'budget URGENT: 80% spent ($8.0000)'],
      [warnings[2]!.at, 'budget CRITICAL: 85% spent ($8.5000)'],
    ]);
    // The root's bands are wider (85 % is its second): given once however many calls it makes past it.
    expect(
      lane('lead')
        .marks.filter((m) => m.kind === 'warning')
        .map((m) => m.label),
    ).toEqual(['budget URGENT: 85% spent ($8.5000)']);
    expect(
      lane('lead')
        .marks.filter((m) => m.kind === 'tool')
        .map((m) => m.label),
    ).toContain('tool call: spawn_agent');
    // The reserve trip: run-wide, and on the lane of the agent whose call tripped it.
    expect(timeline.marks.map((m) => m.kind)).toContain('trip');
    const trip = timeline.marks.find((m) => m.kind === 'trip')!;
    expect(a.marks.filter((m) => m.kind === 'trip')).toEqual([trip]);
    expect(lane('lead').marks.filter((m) => m.kind === 'trip')).toEqual([]);
    await t.c.shutdown();
  });

  it('pickRun: the latest run, a named one, or RUN_NOT_FOUND', async () => {
    const t = team(script, { interactive: true });
    const port = portOf(t.store);
    await expect(pickRun(port, undefined)).rejects.toMatchObject({ code: 'RUN_NOT_FOUND' });
    await t.c.start({ name: 'lead', task: 'Split it.' });
    expect((await pickRun(port, undefined)).id).toBe(t.c.runId);
    expect((await pickRun(port, t.c.runId)).id).toBe(t.c.runId);
    await expect(pickRun(port, 'run_other')).rejects.toMatchObject({ code: 'RUN_NOT_FOUND' });
    await t.c.shutdown();
  });
});
