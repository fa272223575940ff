/**
 * `troupe/testing`: one deterministic scenario per invariant, each built to exercise the rule the
 * checker guards (the random model-based suite in test/property covers the rest), plus the
 * checkers' own behaviour on a broken trace.
 */
import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import { defineTool } from '../../src/tools/defineTool.js';
import { behaviours } from '../../src/testing/arbitraries.js';
import { assertInvariants, checkInvariants, InvariantViolation, oneReportPerStint } from '../../src/testing/invariants.js';
import { simulateTeam, type Behaviour } from '../../src/testing/simulate.js';

const tool = (name: string, args: Record<string, unknown> = {}, extra: Partial<Behaviour> = {}): Behaviour => ({ kind: 'tool', name, args, ...extra }) as Behaviour;
const text = (t = 'just talking'): Behaviour => ({ kind: 'text', text: t });
const spawn = (...names: string[]): Behaviour => ({ kind: 'tools', calls: names.map((name) => ({ name: 'spawn_agent', args: { name, task: 'work' } })) });
const wait = tool('wait_for_agents', { reason: 'children' });

describe('invariant scenarios (each passes on the real code)', () => {
  it('a stalled child that is later stopped: one stall notice, then its one terminal notice', async () => {
    await using sim = await simulateTeam({ interactive: true, behaviours: { lead: [spawn('ana'), wait, wait], ana: [text(), text(), text()] } });
    await sim.start();
    await sim.settle();
    const ana = sim.coordinator.list().find((a) => a.name === 'ana')!;
    expect(ana.status).toBe('stalled');
    await sim.coordinator.stop(ana.id);
    await sim.settle();
    assertInvariants(sim);
    const types = sim.store.listMessages(sim.coordinator.runId).filter((m) => m.from === ana.id).map((m) => m.type);
    expect(types).toEqual(['stalled', 'stopped']);
  });

  it('plain text four times in a row (interactive): the recovery counter stops at its cap', async () => {
    await using sim = await simulateTeam({ interactive: true, behaviours: { lead: [text(), text(), text(), text()] } });
    await sim.start();
    await sim.settle();
    assertInvariants(sim);
    expect(sim.coordinator.get(sim.rootId!).status).toBe('stalled');
  });

  // One model call at a time: ana's slow call holds the slot while ben's and cal's queue behind
  // it. When it ends, ben's call takes the slot before ana's spend is recorded; cal's is still
  // queued when the stop lands, and must never start.
  const queued = (anaCost: number, anaReserve: number) => ({
    lead: [{ kind: 'tools' as const, calls: [...['ana', 'ben', 'cal'].map((name) => ({ name: 'spawn_agent', args: { name, task: 'work' } })), { name: 'wait_for_agents', args: { reason: 'children' } }] }],
    ana: [tool('view_agent_graph', {}, { delayMs: 1_000, costUsd: anaCost, reserveUsd: anaReserve })],
    ben: [tool('view_agent_graph', {}, { costUsd: 0 })],
    cal: [tool('view_agent_graph', {}, { costUsd: 0 })],
  });

  it('a call still queued when the budget stops never starts', async () => {
    await using sim = await simulateTeam({ behaviours: queued(5, 0.5), budget: { limitUsd: 4, reserveFraction: 1 }, concurrency: { model: 1 } });
    await sim.start();
    await sim.advance(2_000);
    assertInvariants(sim);
    expect(sim.coordinator.budget().budgetStopped).toBe(true);
    expect(sim.trace.calls.map((c) => c.agentName)).not.toContain('cal');
  });

  it('a sub-agent call still queued when the reserve trips never starts', async () => {
    await using sim = await simulateTeam({ behaviours: queued(6, 1), budget: { limitUsd: 10, reserveFraction: 0.5 }, concurrency: { model: 1 } });
    await sim.start();
    await sim.advance(2_000);
    assertInvariants(sim);
    expect(sim.coordinator.budget()).toMatchObject({ reserveStopped: true, budgetStopped: false });
    expect(sim.trace.calls.map((c) => c.agentName)).not.toContain('cal');
  });

  it('after a restart a parked agent stays parked until something wakes it', async () => {
    const slow = tool('view_agent_graph', {}, { delayMs: 60_000 });
    // ana is mid-call at the restart and runs again afterwards; lead waits on her throughout.
    await using sim = await simulateTeam({ behaviours: { lead: [spawn('ana'), wait], ana: [slow, slow] } });
    await sim.start();
    await sim.settle();
    expect(sim.coordinator.get(sim.rootId!).status).toBe('waiting');
    await sim.restart();
    await sim.settle();
    assertInvariants(sim);
    expect(sim.coordinator.get(sim.rootId!).status).toBe('waiting');
  });

  it('a failed child is not revived by its parent’s message; a user message revives it', async () => {
    await using sim = await simulateTeam({
      behaviours: {
        lead: [spawn('ana'), wait, tool('send_message', { to: 'ana', content: 'try again' }), wait],
        ana: [{ kind: 'error', code: 'PROVIDER_AUTH', status: 401 }, tool('agent_finish', { summary: 'ok' })],
      },
    });
    await sim.start();
    await sim.settle();
    const ana = sim.coordinator.list().find((a) => a.name === 'ana')!;
    assertInvariants(sim);
    expect(sim.coordinator.get(ana.id).status).toBe('failed');
    expect(await sim.send(ana.id, 'please retry')).toBe(true);
    await sim.settle();
    assertInvariants(sim);
    expect(sim.coordinator.get(ana.id).status).toBe('completed');
  });

  it('an acknowledged message reaches a waiting agent exactly once', async () => {
    await using sim = await simulateTeam({ behaviours: { lead: [spawn('ana'), wait, wait], ana: [tool('view_agent_graph', {}, { delayMs: 60_000 })] } });
    await sim.start();
    await sim.settle();
    expect(await sim.send(sim.rootId!, 'hello lead')).toBe(true);
    await sim.settle();
    expect(sim.store.loadSession(sim.rootId!).filter((i) => i.content === 'hello lead')).toHaveLength(1);
    assertInvariants(sim);
  });

  it('spawning past maxChildren is refused, so no parent ever has more active children', async () => {
    await using sim = await simulateTeam({
      behaviours: { lead: [spawn('ana', 'ben', 'cal'), wait], ana: [tool('view_agent_graph', {}, { delayMs: 60_000 })], ben: [tool('view_agent_graph', {}, { delayMs: 60_000 })], cal: [] },
      limits: { maxChildren: 2 },
    });
    await sim.start();
    await sim.settle();
    assertInvariants(sim);
    expect(sim.coordinator.list()).toHaveLength(3);
  });

  it('spend stays under the limit when calls cost what they reserved', async () => {
    await using sim = await simulateTeam({
      behaviours: { lead: [0.6, 0.6, 0.6].map((costUsd) => tool('view_agent_graph', {}, { costUsd })) },
      budget: { limitUsd: 1 },
    });
    await sim.start();
    await sim.settle();
    assertInvariants(sim);
    expect(sim.coordinator.budget().spentUsd).toBeLessThanOrEqual(1);
  });
});

describe('the checkers themselves', () => {
  it('report a broken trace with a sentence naming the agent, and assertInvariants throws them all', async () => {
    await using sim = await simulateTeam({ behaviours: { lead: [spawn('ana'), wait], ana: [tool('agent_finish', { summary: 'done' })] } });
    await sim.start();
    await sim.settle();
    expect(checkInvariants(sim)).toEqual([]);
    // Forge a second report for ana's stint, as a bug would.
    const ana = sim.coordinator.list().find((a) => a.name === 'ana')!;
    const report = sim.store.listMessages(sim.coordinator.runId).find((m) => m.from === ana.id)!;
    sim.store.enqueueMessage({ ...report, id: 'forged', noticeKey: null });
    expect(oneReportPerStint(sim)).toEqual([`ana (${ana.id}) sent 2 stint-closing items over 1 stint(s)`]);
    expect(() => assertInvariants(sim)).toThrow(InvariantViolation);
  });
});

describe('the README example', () => {
  const searchTool = defineTool({
    name: 'search',
    description: 'Search.',
    parameters: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] },
    execute: ({ q }: { q: string }) => ({ hits: [q] }),
  });
  const names = ['lead', 'researcher', 'writer'];
  const search = { name: 'search', args: fc.record({ q: fc.string() }) };

  test.prop([behaviours({ names, userTools: [search], maxCostUsd: 0.5 }), fc.integer({ min: 0, max: 600_000 })], { numRuns: 25 })(
    'my team keeps its promises whatever the model does',
    async (plan, later) => {
      await using sim = await simulateTeam({ behaviours: plan, tools: [searchTool], budget: { limitUsd: 2 }, limits: { maxChildren: 2 } });
      await sim.start('Write a report on X');
      await sim.advance(later, 60_000);
      await sim.restart();
      await sim.send(sim.rootId!, 'wrap it up');
      await sim.advance(600_000, 60_000);
      assertInvariants(sim);
    },
  );
});
