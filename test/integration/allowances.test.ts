/**
 * Budgets per subtree (issue 35): a spawn's `budget_usd` opens an allowance for the child's
 * subtree. Deterministic ledgers through the scripted model (each step says what its call costs,
 * and its estimate is exact), as in budget.test.ts.
 */
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { readTeam } from '../../src/dashboard/readModel.js';
import { resumeCoordinator } from '../../src/host/resumeCoordinator.js';
import { scriptedModel, type ScriptStep } from '../../src/model/scriptedModel.js';
import { portOf } from '../../src/store/port.js';
import { openStore } from '../../src/store/sqliteStore.js';
import { troupe, workdir } from '../helpers/cli.js';
import { flush, team, TERMINAL } from '../helpers/team.js';

const paid = (step: ScriptStep, usd: number): ScriptStep => ({ ...step, usage: { costUsd: usd } });
const graph: ScriptStep = { tool: 'view_agent_graph', args: {} };
const finish = (summary = 'done'): ScriptStep => ({ tool: 'finish', args: { summary } });
const report = (summary: string): ScriptStep => ({ tool: 'agent_finish', args: { summary } });
const wait: ScriptStep = { tool: 'wait_for_agents', args: { reason: 'children' } };
/** A call that answers only when the clock moves this far (a call in flight at a restart). */
const hang: ScriptStep = { ...graph, delayMs: 1e9 };
const child = (name: string, budgetUsd?: number) => ({
  name: 'spawn_agent',
  args: { name, task: `work as ${name}`, ...(budgetUsd === undefined ? {} : { budget_usd: budgetUsd }) },
});
const spawn = (...children: ReturnType<typeof child>[]): ScriptStep => ({ tools: children });

describe('budgets per subtree', () => {
  it('a spawn whose allowance does not fit is refused with BUDGET_ALLOWANCE_EXCEEDED and nothing spawned; unspent allowances return; status and the dashboard show them', async () => {
    const cwd = workdir();
    mkdirSync(join(cwd, '.troupe'));
    const store = openStore({ path: join(cwd, '.troupe', 'troupe.db') });
    const t = team(
      {
        agents: {
          // 9.5 > the run's sub-agent line $9 (90 % of $10); 5 fits.
          lead: [spawn(child('big', 9.5), child('a', 5)), wait, wait, wait, finish()],
          // 5 > a's own line $4.50 (90 % of its $5); 3 fits.
          a: [paid(spawn(child('b', 5), child('b', 3)), 0.5), wait, wait, paid(report('a'), 1)],
          b: [paid(report('b'), 1)],
        },
      },
      { budget: { limitUsd: 10 }, store },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    expect((await t.c.waitFor(rootId, TERMINAL)).status).toBe('completed');
    await t.c.whenIdle();
    const refusals = (name: string) =>
      t
        .toolResults(t.byName(name).id)
        .filter((r) => r.name === 'spawn_agent' && r.result.error)
        .map((r) => r.result.error!);
    expect(refusals('lead')).toEqual([
      expect.objectContaining({ code: 'BUDGET_ALLOWANCE_EXCEEDED', message: expect.stringMatching(/the run's budget has \$9\.00 left/) }),
    ]);
    expect(refusals('a')).toEqual([
      expect.objectContaining({ code: 'BUDGET_ALLOWANCE_EXCEEDED', message: expect.stringMatching(/allowance of a has \$4\.00 left/) }),
    ]);
    expect(t.c.list().map((a) => a.name)).toEqual(['lead', 'a', 'b']);
    // b spent $1 of $3 and gave $2 back to a; a's subtree spent $2.50 of $5.
    expect(t.c.budget().allowances).toEqual([
      { agentId: t.byName('a').id, name: 'a', allowanceUsd: 5, spentUsd: 2.5, reservedUsd: 0, returnedUsd: 2.5, open: false },
      { agentId: t.byName('b').id, name: 'b', allowanceUsd: 3, spentUsd: 1, reservedUsd: 0, returnedUsd: 2, open: false },
    ]);
    // The same read from the database alone: the dashboard's read model and troupe status.
    const [a, b] = [t.byName('a').id, t.byName('b').id];
    const views = [
      { agentId: a, name: 'a', allowanceUsd: 5, spentUsd: 2.5, returnedUsd: 2.5, open: false },
      { agentId: b, name: 'b', allowanceUsd: 3, spentUsd: 1, returnedUsd: 2, open: false },
    ];
    expect((await readTeam(portOf(store))).budget.allowances).toEqual(views);
    await t.c.shutdown();
    store.close();
    expect(JSON.parse((await troupe(['status', '--json'], cwd)).stdout)).toMatchObject({ budget: { spentUsd: 2.5, allowances: views } });
    const text = (await troupe(['status'], cwd)).stdout;
    expect(text).toContain(`a (${a}) $2.50 of $5.00, returned $2.50`);
    expect(text).toContain(`b (${b}) $1.00 of $3.00, returned $2.00`);
  });

  it('an owner whose own call does not fit its allowance stops with its subtree (reason allowance); the parent is told why', async () => {
    const t = team({
      agents: {
        lead: [spawn(child('a', 2)), wait, hang],
        // 0.5 + 1 fits $2; the next $1 does not: a and b stop.
        a: [paid(spawn(child('b')), 0.5), paid(graph, 1), paid(graph, 1)],
        b: [{ ...graph, delayMs: 5_000 }, paid(report('b'), 0.1)],
      },
    });
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    await t.advance(10_000);
    await t.c.waitFor(t.byName('b').id, TERMINAL);
    expect(t.byName('a')).toMatchObject({ status: 'stopped', stopReason: 'allowance', spentUsd: 1.5 });
    expect(t.byName('b')).toMatchObject({ status: 'stopped', stopReason: 'allowance' });
    const told = t.messagesTo(rootId).filter((m) => m.from === t.byName('a').id);
    expect(told.map((m) => m.content).join('\n')).toMatch(/stopped by its budget allowance being spent/);
    expect(t.c.budget().allowances).toEqual([expect.objectContaining({ name: 'a', spentUsd: 1.5, returnedUsd: 0.5, open: false })]);
  });

  it("an allowance's reserve trips once: its sub-agents stop, its owner alone is told, once, across a restart on SQLite", async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'troupe-allowance-')), 'run.db');
    const clock = new SimulatedClock();
    const store = openStore({ path });
    const t = team(
      {
        agents: {
          lead: [spawn(child('a', 10)), wait],
          // a's line is $9: 1 + 3 + 3 = 7 spent, the next $3 of b or c does not fit.
          a: [paid(spawn(child('b'), child('c')), 1), wait, hang],
          b: [paid(graph, 3), paid(graph, 3), paid(report('b'), 1)],
          c: [paid(graph, 3), paid(graph, 3), paid(report('c'), 1)],
        },
      },
      { store, clock },
    );
    await t.c.start({ name: 'lead', task: 'x' });
    await flush();
    for (const name of ['b', 'c']) expect(await t.c.waitFor(t.byName(name).id, TERMINAL)).toMatchObject({ status: 'stopped', stopReason: 'reserve' });
    const aId = t.byName('a').id;
    await flush();
    expect(t.c.get(aId).status).toBe('running');
    const reserveNotices = () => store.listMessages(t.c.runId).filter((m) => m.type === 'budget_reserve_stop');
    expect(reserveNotices().map((m) => m.to)).toEqual([aId]);
    expect(t.c.budget()).toMatchObject({ reserveStopped: false, allowances: [expect.objectContaining({ name: 'a', spentUsd: 7, open: true })] });
    await t.c.shutdown();
    store.close();

    // After the restart the tripped reserve was restored: a may spawn no sub-agent, as the run's
    // tripped reserve refuses its root (a restored $7 alone is under a's $9 line).
    const reopened = openStore({ path });
    const model = scriptedModel(
      { agents: { lead: [hang], a: [paid(spawn(child('d')), 0.5), paid(report('a'), 1)], d: [paid(graph, 0.5), paid(report('d'), 0.5)] } },
      { clock },
    );
    const again = await resumeCoordinator({ store: reopened, model, clock });
    expect((await again.waitFor(aId, TERMINAL)).status).toBe('completed');
    expect(again.list().map((x) => x.name)).not.toContain('d');
    const spawned = reopened
      .loadSession(aId)
      .filter((i) => i.role === 'tool' && i.name === 'spawn_agent')
      .map((i) => JSON.parse(i.content as string) as { error?: { code: string } });
    expect(spawned.at(-1)?.error?.code).toBe('BUDGET_RESERVE_REACHED');
    expect(again.get(aId)).toMatchObject({ status: 'completed' });
    expect(reopened.listMessages(again.runId).filter((m) => m.type === 'budget_reserve_stop')).toHaveLength(1);
    expect(again.budget().allowances).toEqual([expect.objectContaining({ name: 'a', spentUsd: 8.5, returnedUsd: 1.5, open: false })]);
    await again.shutdown();
    reopened.close();
  });

  it("an agent under an allowance is warned against that allowance, not the run's limit", async () => {
    const t = team({ agents: { lead: [spawn(child('a', 2)), wait, hang], a: [paid(graph, 1.6), paid(report('a'), 0.1)] } }, { budget: { limitUsd: 100 } });
    await t.c.start({ name: 'lead', task: 'x' });
    await flush();
    await t.c.waitFor(t.byName('a').id, TERMINAL);
    const last = t.model.calls
      .filter((c) => c.request.agent.name === 'a')
      .at(-1)!
      .request.messages.at(-1)!.content;
    expect(last).toContain('[BUDGET URGENT] $1.60 of $2.00 spent (80%). This is the allowance of your subtree.');
    expect(last).toContain('the agents under you are stopped; at 100% you are stopped too');
  });

  it("a call refused only because a sibling's allowance holds the room stops that caller alone: the run's reserve does not trip, the allowance's owner goes on", async () => {
    const t = team(
      {
        agents: {
          // big holds $8.50 of the run's $9 sub-agent line; small's $1 call finds $0.50 left.
          lead: [spawn(child('big', 8.5), child('small')), wait, wait, finish()],
          big: [paid(graph, 0.5), paid(report('big is done'), 0.5)],
          small: [paid(graph, 1)],
        },
      },
      { budget: { limitUsd: 10 } },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'x' });
    expect((await t.c.waitFor(rootId, TERMINAL)).status).toBe('completed');
    expect(t.c.get(t.byName('small').id)).toMatchObject({ status: 'stopped' });
    expect(t.c.get(t.byName('big').id)).toMatchObject({ status: 'completed', report: { summary: 'big is done' } });
    expect(t.c.budget()).toMatchObject({ reserveStopped: false, budgetStopped: false, spentUsd: 1 });
    expect(t.messagesTo(rootId).map((m) => m.type)).not.toContain('budget_reserve_stop');
    await t.c.shutdown();
  });
});
