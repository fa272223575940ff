/**
 * spawn_agents (issue 36, item 3): many children in one call, all or none — a bad entry, or a batch
 * that would exceed maxChildren, maxAgents or the parent's budget as a whole, refuses the call and
 * spawns none; the result is the new ids in the order given.
 */
import { describe, expect, it } from 'vitest';
import type { ScriptStep } from '../../src/model/scriptedModel.js';
import { team, TERMINAL } from '../helpers/team.js';

const finish: ScriptStep = { tool: 'finish', args: { summary: 'done' } };
const wait: ScriptStep = { tool: 'wait_for_agents', args: { reason: 'reports' } };
const report: ScriptStep = { tool: 'agent_finish', args: { summary: 'ok' } };
const entry = (name: string, extra: Record<string, unknown> = {}) => ({ name, task: `work as ${name}`, ...extra });
const spawnAgents = (...agents: object[]): ScriptStep => ({ tool: 'spawn_agents', args: { agents } });
const spawnAgent = (name: string): ScriptStep => ({ tool: 'spawn_agent', args: entry(name) });

async function run(lead: ScriptStep[], children: string[], options: Parameters<typeof team>[1] = {}) {
  const t = team({ agents: { lead, ...Object.fromEntries(children.map((n) => [n, [report]])) } }, options);
  const rootId = await t.c.start({ name: 'lead', task: 'probe' });
  expect(await t.c.waitFor(rootId, TERMINAL)).toMatchObject({ status: 'completed' });
  await t.c.whenIdle();
  const spawns = t.toolResults(rootId).filter((r) => r.name === 'spawn_agents' || r.name === 'spawn_agent');
  return { t, rootId, spawns, children: t.c.list().filter((a) => a.id !== rootId) };
}

describe('spawn_agents', () => {
  it('starts every entry in one call and answers their ids in the order given; each reports as a spawn_agent child would', async () => {
    const { spawns, children, t, rootId } = await run([spawnAgents(entry('a'), entry('b'), entry('c')), wait, wait, wait, finish], ['a', 'b', 'c']);
    expect(spawns).toHaveLength(1);
    const ids = spawns[0]!.result.agent_ids as string[];
    expect(spawns[0]!.result).toMatchObject({ success: true });
    expect(ids.map((id) => children.find((c) => c.id === id)?.name)).toEqual(['a', 'b', 'c']);
    expect(children.map((c) => [c.name, c.task, c.status])).toEqual([
      ['a', 'work as a', 'completed'],
      ['b', 'work as b', 'completed'],
      ['c', 'work as c', 'completed'],
    ]);
    expect(t.messagesTo(rootId).filter((m) => m.type === 'completion')).toHaveLength(3);
  });

  it('an entry that fails the schema, carries an invalid output schema or names an unknown profile refuses the whole call: none spawned', async () => {
    const { spawns, children } = await run(
      [
        spawnAgents(entry('a'), { name: 'b' }),
        spawnAgents(entry('a'), entry('b', { output_schema: { type: 'nonsense' } })),
        spawnAgents(entry('a'), entry('b'), entry('c', { profile: 'nobody' })),
        finish,
      ],
      [],
    );
    expect(spawns.map((s) => s.result.error?.code)).toEqual(['TOOL_INPUT_INVALID', 'TOOL_INPUT_INVALID', 'PROFILE_UNKNOWN']);
    expect(spawns[0]!.result.error?.message).toContain('/agents/1');
    expect(spawns[1]!.result.error?.message).toContain('agents[1] (b)');
    expect(spawns[2]!.result.error?.message).toContain('agents[2] (c)');
    expect(children).toHaveLength(0);
  });

  it('maxChildren and maxAgents count the whole batch: one that would pass either is refused with its typed error and spawns none', async () => {
    const { spawns, children } = await run([spawnAgent('a'), spawnAgents(entry('b'), entry('c')), spawnAgents(entry('b')), wait, wait, finish], ['a', 'b'], {
      limits: { maxChildren: 2, maxAgents: 10 },
    });
    expect(spawns.map((s) => s.result.error?.code ?? 'ok')).toEqual(['ok', 'MAX_CHILDREN_EXCEEDED', 'ok']);
    expect(spawns[1]!.result.error?.message).toContain('2 more would exceed it');
    expect(children.map((c) => c.name)).toEqual(['a', 'b']);

    const agents = await run([spawnAgents(entry('a'), entry('b'), entry('c')), spawnAgents(entry('a'), entry('b')), wait, wait, finish], ['a', 'b'], {
      limits: { maxChildren: 10, maxAgents: 3 },
    });
    expect(agents.spawns.map((s) => s.result.error?.code ?? 'ok')).toEqual(['MAX_AGENTS_EXCEEDED', 'ok']);
    expect(agents.children.map((c) => c.name)).toEqual(['a', 'b']);
  });

  it('allowances are set aside together: a batch whose budgets fit one by one but not together is refused, none spawned', async () => {
    const { spawns, children, t } = await run(
      [
        spawnAgents(entry('a', { budget_usd: 5 }), entry('b', { budget_usd: 5 })),
        spawnAgents(entry('a', { budget_usd: 4 }), entry('b', { budget_usd: 4 })),
        wait,
        wait,
        finish,
      ],
      ['a', 'b'],
      { budget: { limitUsd: 10 } },
    );
    expect(spawns.map((s) => s.result.error?.code ?? 'ok')).toEqual(['BUDGET_ALLOWANCE_EXCEEDED', 'ok']);
    expect(spawns[0]!.result.error?.message).toContain('these 2 agents');
    const rows = t.store.listAgents(t.c.runId);
    expect(children.map((c) => [c.name, rows.find((r) => r.id === c.id)?.terms?.allowanceUsd])).toEqual([
      ['a', 4],
      ['b', 4],
    ]);
  });
});
