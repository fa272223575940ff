/**
 * Background review (seeds/001): every N productive turns a leaf reviewer forks from the agent's
 * session, may propose one note, is bounded, metered as `review`, and never breaks the agent.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { resumeCoordinator } from '../../src/host/resumeCoordinator.js';
import { openStore } from '../../src/store/sqliteStore.js';
import type { TroupeEvent } from '../../src/host/runtime.js';
import { createCoordinator } from '../../src/host/createCoordinator.js';
import { isTroupeError } from '../../src/errors.js';
import { scriptedModel, type ScriptedModel, type ScriptStep } from '../../src/model/scriptedModel.js';
import { REVIEW_PROMPT } from '../../src/turn/review.js';
import { defineTool } from '../../src/tools/defineTool.js';
import { flush, team } from '../helpers/team.js';

const look = defineTool({ name: 'look', description: 'Look around.', parameters: { type: 'object' }, execute: () => ({ seen: 'a cat' }) });
const looks = (n: number, costUsd = 0): ScriptStep[] => Array.from({ length: n }, () => ({ tool: 'look', args: {}, usage: { costUsd } }));
const finish: ScriptStep = { tool: 'finish', args: { summary: 'done' } };
const note = (title: string, costUsd = 0): ScriptStep => ({
  tool: 'propose_note',
  args: { title, content: 'When a cat is seen, look twice.' },
  usage: { costUsd },
});
const done: ScriptStep = { tool: 'review_done', args: { reason: 'nothing new' } };

const reviewCalls = (model: ScriptedModel) => model.calls.filter((c) => c.agentName === 'lead:review');

describe('background review', () => {
  it('is off by default', async () => {
    const t = team({ agents: { lead: [...looks(4), finish] } }, { tools: [look] });
    const rootId = await t.c.start({ name: 'lead', task: 'Look.' });
    await t.c.waitFor(rootId, ['completed']);
    await t.c.reviews.settled();
    expect(reviewCalls(t.model)).toHaveLength(0);
    expect(t.c.reviews.notes()).toEqual([]);
    await t.c.shutdown();
  });

  it('forks every N productive turns; the reviewer reads the fork, proposes one note, and the agent never sees it', async () => {
    const t = team(
      {
        agents: {
          lead: [...looks(4, 0.01), finish],
          // First review: a note, then done. Second review: nothing worth keeping.
          'lead:review': [note('Look twice', 0.002), done, { text: 'Nothing to keep.', usage: { costUsd: 0.002 } }],
        },
      },
      { tools: [look], review: { everyTurns: 2 } },
    );
    const events: TroupeEvent[] = [];
    t.c.subscribe((e) => events.push(e));
    const rootId = await t.c.start({ name: 'lead', task: 'Look.' });
    await t.c.waitFor(rootId, ['completed']);
    await t.c.reviews.settled();

    const reviews = reviewCalls(t.model);
    expect(reviews).toHaveLength(3);
    const first = reviews[0]!.request;
    expect(first.purpose).toBe('review');
    expect(first.tools.map((tool) => tool.name)).toEqual(['propose_note', 'review_done']);
    expect(first.messages.at(-1)).toEqual({ role: 'user', content: REVIEW_PROMPT });
    // Forked after the second productive turn: the agent's two look calls are in it, answered.
    expect(first.messages.filter((m) => m.role === 'tool' && m.name === 'look')).toHaveLength(2);
    expect(reviews[1]!.request.messages.at(-1)).toMatchObject({ role: 'tool', name: 'propose_note' });

    expect(t.c.reviews.notes()).toEqual([
      {
        id: expect.stringMatching(/^n[0-9a-f]{12}$/),
        agentId: rootId,
        agentName: 'lead',
        title: 'Look twice',
        content: 'When a cat is seen, look twice.',
        at: expect.any(Number),
      },
    ]);
    expect(events.filter((e) => e.type === 'review.note')).toHaveLength(1);
    // The agent's own session and calls never contain the review.
    expect(JSON.stringify(t.session(rootId))).not.toContain('propose_note');
    expect(t.model.calls.filter((c) => c.agentName === 'lead').every((c) => !JSON.stringify(c.request.messages).includes(REVIEW_PROMPT))).toBe(true);
    // Metered as review, against the reviewed agent.
    expect(t.c.get(rootId).spentByPurpose.review).toBeCloseTo(0.004, 10);
    expect(t.c.get(rootId).spentByPurpose.main).toBeCloseTo(0.04, 10);
    t.model.assertComplete();
    await t.c.shutdown();
  });

  it('counts only productive turns (tool calls), not plain-text ones', async () => {
    const t = team(
      { agents: { lead: [looks(1)[0]!, { text: 'Thinking.' }, looks(1)[0]!, finish], 'lead:review': [done] } },
      { tools: [look], review: { everyTurns: 2 } },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'Look.' });
    await t.c.waitFor(rootId, ['completed']);
    await t.c.reviews.settled();
    // look, (text), look → one review; finish alone is not two.
    expect(reviewCalls(t.model)).toHaveLength(1);
    expect(reviewCalls(t.model)[0]!.request.messages.filter((m) => m.role === 'tool' && m.name === 'look')).toHaveLength(2);
    await t.c.shutdown();
  });

  it('sub-agents are exempt by default: only the root is reviewed', async () => {
    const script = () => ({
      agents: {
        lead: [{ tool: 'spawn_agent', args: { name: 'helper', task: 'Look.' } }, { tool: 'wait_for_agents', args: { reason: 'helper' } }, finish],
        helper: [...looks(2), finish],
        'lead:review': [done, done],
        'helper:review': [done, done],
      },
    });
    const t = team(script(), { tools: [look], review: { everyTurns: 1, maxSteps: 1 } });
    const rootId = await t.c.start({ name: 'lead', task: 'Delegate.' });
    await t.c.waitFor(rootId, ['completed']);
    await t.c.reviews.settled();
    expect(t.model.calls.filter((c) => c.agentName === 'helper:review')).toHaveLength(0);
    expect(reviewCalls(t.model).length).toBeGreaterThan(0);
    await t.c.shutdown();

    // With review.subAgents, the helper is reviewed too.
    const u = team(script(), { tools: [look], review: { everyTurns: 1, maxSteps: 1, subAgents: true } });
    const rootU = await u.c.start({ name: 'lead', task: 'Delegate.' });
    await u.c.waitFor(rootU, ['completed']);
    await u.c.reviews.settled();
    expect(u.model.calls.filter((c) => c.agentName === 'helper:review').length).toBeGreaterThan(0);
    await u.c.shutdown();
  });

  it('runs on the auxiliary model when one is set, charged as review', async () => {
    const auxiliary = scriptedModel({ agents: { 'lead:review': [note('Look twice', 0.003)] } });
    const t = team({ agents: { lead: [...looks(1, 0.01), finish] } }, { tools: [look], review: { everyTurns: 2, maxSteps: 1 }, auxiliaryModel: auxiliary });
    const rootId = await t.c.start({ name: 'lead', task: 'Look.' });
    await t.c.waitFor(rootId, ['completed']);
    await t.c.reviews.settled();
    // The agents' model never saw the review; the auxiliary model answered it.
    expect(reviewCalls(t.model)).toHaveLength(0);
    expect(auxiliary.calls.map((c) => [c.agentName, c.request.purpose])).toEqual([['lead:review', 'review']]);
    expect(t.store.listUsage(t.c.runId).filter((u) => u.purpose === 'review')).toHaveLength(1);
    expect(t.c.get(rootId).spentByPurpose.review).toBeCloseTo(0.003, 10);
    expect(t.c.reviews.notes().map((n) => n.title)).toEqual(['Look twice']);
    await t.c.shutdown();
  });

  it('the cadence survives a crash: a resumed run reviews at the turn it would have without the restart', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'troupe-')), 'run.db');
    const clock = new SimulatedClock();
    const first = openStore({ path });
    // Two productive turns commit; the third is mid-call when the process dies.
    const c1 = createCoordinator({
      model: scriptedModel({ agents: { lead: [...looks(2), { delayMs: 60_000, tool: 'look', args: {} }] } }, { clock }),
      store: first,
      clock,
      tools: [look],
      review: { everyTurns: 3 },
    });
    const rootId = await c1.start({ name: 'lead', task: 'Look.' });
    while (first.loadSession(rootId).filter((i) => i.role === 'tool' && i.name === 'look').length < 2) await flush();
    await c1.shutdown();
    first.close();

    // After the restart, the first productive turn is the third: the review falls due there.
    const second = openStore({ path });
    const model = scriptedModel({ agents: { lead: [...looks(1), finish], 'lead:review': [done] } }, { clock });
    const c2 = await resumeCoordinator({ store: second, model, clock, tools: [look], review: { everyTurns: 3 } });
    await c2.waitFor(rootId, ['completed']);
    await c2.reviews.settled();
    const reviews = reviewCalls(model);
    expect(reviews).toHaveLength(1);
    expect(reviews[0]!.request.messages.filter((m) => m.role === 'tool' && m.name === 'look')).toHaveLength(3);
    model.assertComplete();
    await c2.shutdown();
    second.close();
  });

  it('a reviewer cannot act: other tools are refused, it is never reviewed itself, and maxSteps bounds it', async () => {
    const t = team(
      {
        agents: {
          lead: [...looks(1), finish],
          'lead:review': [
            { tool: 'spawn_agent', args: { name: 'helper', task: 'x' } },
            { tool: 'propose_note', args: { title: 'two\nlines', content: 'x' } },
            { tool: 'propose_note', args: { title: 'never reached', content: 'x' } },
          ],
        },
      },
      { tools: [look], review: { everyTurns: 2, maxSteps: 2 } },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'Look.' });
    await t.c.waitFor(rootId, ['completed']);
    await t.c.reviews.settled();
    // Two productive turns (look, finish): one review, stopped after maxSteps calls.
    const reviews = reviewCalls(t.model);
    expect(reviews).toHaveLength(2);
    expect(t.model.unconsumed()['lead:review']).toHaveLength(1);
    const second = reviews[1]!.request.messages.at(-1)!;
    expect(second).toMatchObject({ role: 'tool', name: 'spawn_agent', isError: true });
    expect(JSON.parse(second.content as string).error.code).toBe('TOOL_NOT_FOUND');
    expect(t.c.list()).toHaveLength(1);
    expect(t.c.reviews.notes()).toEqual([]);
    expect(t.model.calls.some((c) => c.agentName.endsWith(':review:review'))).toBe(false);
    await t.c.shutdown();
  });

  it('a failing review is swallowed: the agent goes on and finishes', async () => {
    const t = team(
      {
        agents: {
          lead: [...looks(2), finish],
          'lead:review': [{ error: { code: 'PROVIDER_AUTH', message: 'boom' } }],
        },
      },
      { tools: [look], review: { everyTurns: 1, maxSteps: 1 } },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'Look.' });
    const info = await t.c.waitFor(rootId, ['completed', 'failed', 'crashed']);
    await t.c.reviews.settled();
    expect(info.status).toBe('completed');
    expect(info.error).toBeNull();
    expect(t.c.reviews.notes()).toEqual([]);
    await t.c.shutdown();
  });

  it('is skipped when it does not fit under the reserve line, and never trips a stop', async () => {
    // Limit $1, reserve at 90%: after the first look the run has spent $0.85; a review reserving
    // $0.10 does not fit under $0.90, so it is never called; the root finishes under the limit.
    const t = team(
      {
        agents: {
          lead: [...looks(1, 0.85), { tool: 'finish', args: { summary: 'done' }, usage: { costUsd: 0.01 } }],
          'lead:review': [note('too dear', 0.1)],
        },
      },
      { tools: [look], review: { everyTurns: 1 }, budget: { limitUsd: 1 } },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'Look.' });
    const info = await t.c.waitFor(rootId, ['completed', 'stopped']);
    await t.c.reviews.settled();
    expect(info.status).toBe('completed');
    expect(reviewCalls(t.model)).toHaveLength(0);
    expect(t.c.budget()).toMatchObject({ reserveStopped: false, budgetStopped: false });
    await t.c.shutdown();
  });

  it('rejects invalid review options with CONFIG_INVALID', () => {
    const model = scriptedModel({ agents: {} });
    for (const review of [
      { everyTurns: 0 },
      { everyTurns: 1.5 },
      { everyTurns: 2, maxSteps: 11 },
      { everyTurns: 2, subAgents: 'yes' },
      { everyTurns: 2, often: true },
      {},
      'yes',
    ]) {
      let caught: unknown;
      try {
        createCoordinator({ model, review: review as never });
      } catch (err) {
        caught = err;
      }
      expect(isTroupeError(caught) && caught.code === 'CONFIG_INVALID').toBe(true);
    }
  });
});
