/**
 * Durable approvals (issue 33 items 1–3): a step the rules hold for a person is a row answered from
 * anywhere, once; the agent parks on it at no cost; the answer survives a restart, and so does the
 * window an approval opens.
 */
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import type { ApprovalRules } from '../../src/host/async/approvalRules.js';
import { resumeCoordinator } from '../../src/host/resumeCoordinator.js';
import { scriptedModel, type Script } from '../../src/model/scriptedModel.js';
import { memoryStore } from '../../src/store/memoryStore.js';
import { defineTool } from '../../src/tools/defineTool.js';
import { flush, team } from '../helpers/team.js';
import { dropTableTool } from '../helpers/approvals.js';

function tools() {
  const { runs, tool: dropTable } = dropTableTool();
  const note = defineTool({
    name: 'write_note',
    description: 'Write a note.',
    parameters: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
    risk: 'mutation',
    execute: (args: { text: string }) => {
      runs.push(args);
      return 'noted';
    },
  });
  return { runs, list: [dropTable, note] };
}

const rules: ApprovalRules = { ask: ['destructive'] };

/** The lead asks to drop a table, waits for the answer, then tells the user. */
const askThenWait: Script = {
  agents: {
    lead: [
      { tools: [{ name: 'drop_table', args: { table: 'users' } }] },
      { tools: [{ name: 'wait_for_agents', args: { reason: 'the approval' } }] },
      { tools: [{ name: 'respond_to_user', args: { message: 'done' } }] },
    ],
  },
};

const lastUserText = (messages: readonly { role: string; content: unknown }[]) => JSON.stringify(messages.filter((m) => m.role === 'user').at(-1));

describe('durable approvals', () => {
  it('a destructive step waits as a row; approved with edited arguments it runs once with them, and the agent is told', async () => {
    const { runs, list } = tools();
    const t = team(askThenWait, { tools: list, interactive: true, approvals: rules });
    const lead = await t.c.start({ name: 'lead', task: 'Clean up.' });
    await t.c.waitFor(lead, ['waiting']);
    await flush();
    // Asked, nothing ran, the agent parks on it (0 model calls while it waits).
    expect(runs).toEqual([]);
    expect(t.toolResults(lead)[0]!.result).toMatchObject({ approval: 'pending', approval_id: 'ap-1' });
    expect(t.c.approvals.list()).toMatchObject([{ id: 'ap-1', tool: 'drop_table', risk: 'destructive', state: 'pending', args: { table: 'users' } }]);
    expect(t.model.calls).toHaveLength(2);
    await t.advance(60_000, 10_000);
    expect(t.model.calls).toHaveLength(2);

    expect(await t.c.approvals.approve('ap-1', { args: { table: 'users_tmp' } })).toContain('approved with edited arguments');
    await t.advance(10, 10);
    expect(runs).toEqual([{ table: 'users_tmp' }]);
    expect(t.model.calls).toHaveLength(3);
    expect(lastUserText(t.model.calls[2]!.request.messages)).toContain(
      'Approval ap-1: drop_table was approved with edited arguments and ran. Its result: dropped users_tmp',
    );
    expect(t.c.approvals.list()[0]).toMatchObject({ state: 'ran', answer: { approved: true, args: { table: 'users_tmp' } } });

    // A second answer changes nothing.
    expect(await t.c.approvals.approve('ap-1')).toContain('already approved');
    await expect(t.c.approvals.deny('ap-9', 'no')).rejects.toMatchObject({ code: 'APPROVAL_NOT_FOUND' });
    await t.advance(10, 10);
    expect(runs).toHaveLength(1);
    t.model.assertComplete();
    await t.c.shutdown();
  });

  it('denied, the step never runs and the model sees the reason', async () => {
    const { runs, list } = tools();
    const t = team(askThenWait, { tools: list, interactive: true, approvals: rules });
    const lead = await t.c.start({ name: 'lead', task: 'Clean up.' });
    await t.c.waitFor(lead, ['waiting']);
    await flush();
    await t.c.approvals.deny('ap-1', 'users is the production table');
    await t.advance(10, 10);
    expect(runs).toEqual([]);
    expect(lastUserText(t.model.calls[2]!.request.messages)).toContain('drop_table was not approved: users is the production table. It did not run.');
    expect(t.c.approvals.list()[0]).toMatchObject({ state: 'denied', answer: { approved: false, reason: 'users is the production table' } });
    await t.c.shutdown();
  });

  it('an approval pending across a restart is answered on the next host, through its inbox, once', async () => {
    const { runs, list } = tools();
    const store = memoryStore();
    const t = team(askThenWait, { tools: list, interactive: true, approvals: rules, store });
    const lead = await t.c.start({ name: 'lead', task: 'Clean up.' });
    await t.c.waitFor(lead, ['waiting']);
    await flush();
    await t.c.shutdown();

    const model = scriptedModel({ agents: { lead: [{ tools: [{ name: 'respond_to_user', args: { message: 'done' } }] }] } }, { clock: t.clock });
    const again = await resumeCoordinator({ store, model, clock: t.clock, tools: list, approvals: rules });
    await flush();
    expect(again.approvals.list()).toMatchObject([{ id: 'ap-1', state: 'pending' }]);
    const answer = await again.applyRequest({ id: 1, kind: 'approval', payload: { approval: 'ap-1', approve: true } });
    expect(answer).toMatchObject({ ok: true });
    await flush();
    expect(runs).toEqual([{ table: 'users' }]);
    expect(model.calls).toHaveLength(1);
    expect(lastUserText(model.calls[0]!.request.messages)).toContain('drop_table was approved and ran. Its result: dropped users');
    expect(await again.applyRequest({ id: 2, kind: 'approval', payload: { approval: 'ap-1', approve: true } })).toMatchObject({
      ok: true,
      message: expect.stringContaining('already'),
    });
    await again.shutdown();

    // A third host runs nothing again and tells nothing again.
    const third = scriptedModel({ agents: { lead: [] } }, { clock: t.clock });
    const last = await resumeCoordinator({ store, model: third, clock: t.clock, tools: list, approvals: rules });
    await flush();
    expect(runs).toHaveLength(1);
    expect(third.calls).toHaveLength(0);
    await last.shutdown();
  });

  it('an approved tool cut by its host ending is in doubt: the next host tells the agent and does not run it again', async () => {
    const runs: unknown[] = [];
    const hang = defineTool({
      name: 'migrate',
      description: 'Migrate.',
      parameters: { type: 'object', properties: {} },
      risk: 'destructive',
      execute: () => {
        runs.push(1);
        return new Promise(() => undefined);
      },
    });
    const store = memoryStore();
    const script: Script = {
      agents: { lead: [{ tools: [{ name: 'migrate', args: {} }] }, { tools: [{ name: 'wait_for_agents', args: { reason: 'the approval' } }] }] },
    };
    const t = team(script, { tools: [hang], interactive: true, approvals: rules, store });
    const lead = await t.c.start({ name: 'lead', task: 'Migrate.' });
    await t.c.waitFor(lead, ['waiting']);
    await flush();
    await t.c.approvals.approve('ap-1');
    await flush();
    expect(runs).toHaveLength(1);
    await t.c.shutdown();

    const model = scriptedModel({ agents: { lead: [{ tools: [{ name: 'respond_to_user', args: { message: 'checking' } }] }] } }, { clock: t.clock });
    const again = await resumeCoordinator({ store, model, clock: t.clock, tools: [hang], approvals: rules });
    await flush();
    expect(runs).toHaveLength(1);
    expect(lastUserText(model.calls[0]!.request.messages)).toContain('whether it took effect is unknown');
    expect(again.approvals.list()[0]).toMatchObject({ state: 'in_doubt' });
    await again.shutdown();
  });

  it('a run without a user refuses what would ask, unless it is allowed; read-only and uncovered risks never ask', async () => {
    const { runs, list } = tools();
    const script: Script = {
      agents: {
        lead: [
          { tools: [{ name: 'drop_table', args: { table: 'a' } }] },
          { tools: [{ name: 'write_note', args: { text: 'x' } }] },
          { tools: [{ name: 'finish', args: { summary: 'ok' } }] },
        ],
      },
    };
    const t = team(script, { tools: list, approvals: rules });
    const lead = await t.c.start({ name: 'lead', task: 'Clean up.' });
    await t.c.waitFor(lead, ['completed']);
    const first = t.session(lead).find((i) => i.role === 'tool')!;
    expect(JSON.parse((first as { content: string }).content).error).toMatchObject({
      code: 'APPROVAL_DENIED',
      message: expect.stringContaining('no user to ask'),
    });
    expect(runs).toEqual([{ text: 'x' }]);
    await t.c.shutdown();

    const allowed = tools();
    const t2 = team(script, { tools: allowed.list, approvals: { ...rules, allow: ['drop_*'] } });
    await t2.c.start({ name: 'lead', task: 'Clean up.' });
    await t2.c.waitFor(t2.byName('lead').id, ['completed']);
    expect(allowed.runs).toEqual([{ table: 'a' }, { text: 'x' }]);
    await t2.c.shutdown();
  });

  it("per agent: an agent whose name or profile matches a key of approvals.agents follows its own rules; the others the run's", async () => {
    const { runs, list } = tools();
    const both = (table: string, text: string) => [{ tools: [{ name: 'drop_table', args: { table } }] }, { tools: [{ name: 'write_note', args: { text } }] }];
    const script: Script = {
      agents: {
        lead: [
          { tools: [{ name: 'spawn_agent', args: { name: 'ops-1', task: 'Clean up.' } }] },
          { tools: [{ name: 'spawn_agent', args: { name: 'scribe', task: 'Clean up.', profile: 'careful' } }] },
          ...both('lead', 'lead'),
          { tools: [{ name: 'wait_for_agents', args: { reason: 'both' } }] },
          { tools: [{ name: 'finish', args: { summary: 'ok' } }] },
        ],
        'ops-1': [...both('ops', 'ops'), { tools: [{ name: 'agent_finish', args: { summary: 'ok' } }] }],
        scribe: [...both('scribe', 'scribe'), { tools: [{ name: 'agent_finish', args: { summary: 'ok' } }] }],
      },
    };
    const perAgent: ApprovalRules = {
      ask: ['destructive'],
      // ops-1 by its name's prefix: its drops are pre-authorised; scribe by its profile: its notes ask too.
      agents: { 'ops*': { allow: ['drop_*'] }, careful: { ask: ['mutation', 'destructive'] } },
    };
    const t = team(script, { tools: list, approvals: perAgent, profiles: { careful: { description: 'Asks before any change.' } } });
    const lead = await t.c.start({ name: 'lead', task: 'Clean up.' });
    await t.c.waitFor(lead, ['completed']);
    // A refused call's result names its code; a call that ran answers its own text.
    const refused = (name: string) =>
      t
        .session(t.byName(name).id)
        .filter((i) => i.role === 'tool' && i.content.includes('APPROVAL_DENIED'))
        .map((i) => (i.role === 'tool' ? i.name : ''));
    expect(refused('lead')).toEqual(['drop_table']);
    expect(refused('ops-1')).toEqual([]);
    expect(refused('scribe')).toEqual(['drop_table', 'write_note']);
    expect(runs).toEqual(expect.arrayContaining([{ text: 'lead' }, { table: 'ops' }, { text: 'ops' }]));
    expect(runs).toHaveLength(3);
    t.model.assertComplete();
    await t.c.shutdown();
    expect(() => team(askThenWait, { approvals: { agents: { ops: { alow: [] } } } as unknown as ApprovalRules })).toThrow(
      /Unknown approvals.agents\["ops"\] rule "alow"/,
    );
  });

  it("an approval's window survives a restart: the agent's mutations run without asking inside it, and ask after it", async () => {
    const clock = new SimulatedClock();
    const store = memoryStore();
    const { runs, list } = tools();
    const both: ApprovalRules = { ask: ['mutation', 'destructive'], windowMs: 60_000 };
    const t = team(askThenWait, { tools: list, interactive: true, approvals: both, store, clock });
    const lead = await t.c.start({ name: 'lead', task: 'Clean up.' });
    await t.c.waitFor(lead, ['waiting']);
    await flush();
    await t.c.approvals.approve('ap-1');
    await t.advance(10, 10);
    await t.c.waitFor(lead, ['waiting']);
    await t.c.shutdown();

    clock.increment(30_000);
    const note = { tools: [{ name: 'write_note', args: { text: 'inside' } }] };
    const model = scriptedModel({ agents: { lead: [note, { tools: [{ name: 'respond_to_user', args: { message: 'a' } }] }, note] } }, { clock });
    const again = await resumeCoordinator({ store, model, clock, tools: list, approvals: both });
    await again.send(lead, { content: 'note it' });
    await flush();
    expect(runs).toEqual([{ table: 'users' }, { text: 'inside' }]);

    clock.increment(60_000);
    await again.send(lead, { content: 'again' });
    await flush();
    expect(runs).toHaveLength(2);
    expect(again.approvals.list().at(-1)).toMatchObject({ id: 'ap-2', tool: 'write_note', state: 'pending' });
    await again.shutdown();
  });

  describe("an execution an approved step started continues its agent only inside the approval's window, across a restart", () => {
    const EXECUTION = '7f1c3a52-9d4e-4b8a-a1f0-2c6d8e9b0a13';
    const provision = defineTool({
      name: 'provision',
      description: 'Start provisioning (asynchronous).',
      parameters: { type: 'object', properties: {} },
      risk: 'mutation',
      execute: () => `provisioning — execution ${EXECUTION} running.`,
    });
    const mutations: ApprovalRules = { ask: ['mutation', 'destructive'], windowMs: 30 * 60_000 };
    // No idle auto-resume meanwhile: only the execution could wake the agent.
    const DAY = 86_400_000;
    const wait = { tools: [{ name: 'wait_for_agents', args: { reason: 'the answer' } }] };

    async function approvedThenKilled() {
      const clock = new SimulatedClock();
      const store = memoryStore();
      const t = team(
        { agents: { lead: [{ tools: [{ name: 'provision', args: {} }] }, wait, wait] } },
        { tools: [provision], interactive: true, approvals: mutations, store, clock, idleResumeMs: DAY },
      );
      const lead = await t.c.start({ name: 'lead', task: 'Provision.' });
      await t.c.waitFor(lead, ['waiting']);
      await flush();
      await t.c.approvals.approve('ap-1');
      await flush();
      await t.c.waitFor(lead, ['waiting']);
      await flush();
      expect(t.model.calls).toHaveLength(3);
      await t.c.shutdown();
      const users = store.loadSession(lead).filter((i) => i.role === 'user').length;
      return { clock, store, lead, users };
    }

    it('inside the window: the execution finishing after the restart continues the agent with no user message', async () => {
      const { clock, store, lead, users } = await approvedThenKilled();
      clock.increment(60_000);
      const model = scriptedModel({ agents: { lead: [{ tools: [{ name: 'respond_to_user', args: { message: 'up' } }] }] } }, { clock });
      const again = await resumeCoordinator({ store, model, clock, tools: [provision], approvals: mutations, idleResumeMs: DAY });
      expect(await again.executions.finish(EXECUTION, { status: 'completed', result: 'host up' })).toBe(true);
      await flush();
      expect(model.calls).toHaveLength(1);
      expect(JSON.stringify(model.calls[0]!.request.messages)).toContain(`execution ${EXECUTION} completed: host up`);
      expect(store.loadSession(lead).filter((i) => i.role === 'user').length).toBe(users);
      await again.shutdown();
    });

    it('outside it: the execution waits (no model call) until a person acts', async () => {
      const { clock, store } = await approvedThenKilled();
      clock.increment(31 * 60_000);
      const model = scriptedModel({ agents: { lead: [] } }, { clock });
      const again = await resumeCoordinator({ store, model, clock, tools: [provision], approvals: mutations, idleResumeMs: DAY });
      expect(await again.executions.finish(EXECUTION, { status: 'completed', result: 'host up' })).toBe(true);
      await flush();
      expect(model.calls).toHaveLength(0);
      await again.shutdown();
    });
  });

  it("the user's assent in chat, quoted by the agent, opens its window: the plan's mutations run without asking, also after a restart", async () => {
    const { runs, list } = tools();
    const store = memoryStore();
    const rulesBoth: ApprovalRules = { ask: ['mutation', 'destructive'] };
    const say = (message: string) => ({ tools: [{ name: 'respond_to_user', args: { message } }] });
    const t = team(
      {
        agents: {
          lead: [
            say('Plan: write a note. OK?'),
            { tools: [{ name: 'record_assent', args: { quote: 'sure, I never said that' } }] },
            { tools: [{ name: 'record_assent', args: { quote: 'yes, go ahead' } }] },
            { tools: [{ name: 'write_note', args: { text: 'first' } }] },
            say('done'),
          ],
        },
      },
      { tools: list, interactive: true, approvals: rulesBoth, store },
    );
    const lead = await t.c.start({ name: 'lead', task: 'Take notes.' });
    await t.c.waitFor(lead, ['waiting']);
    await t.c.send(lead, { content: 'yes, go ahead' });
    await flush();
    await t.c.waitFor(lead, ['waiting']);
    const results = t
      .session(lead)
      .filter((i) => i.role === 'tool')
      .map((i) => (i as { content: string }).content);
    expect(results[1]).toContain('TOOL_INPUT_INVALID');
    expect(JSON.parse(results[2]!)).toMatchObject({ assent_recorded: true, window_minutes: 30 });
    expect(runs).toEqual([{ text: 'first' }]);
    expect(t.c.approvals.list()).toEqual([]);
    await t.c.shutdown();

    const model = scriptedModel({ agents: { lead: [{ tools: [{ name: 'write_note', args: { text: 'second' } }] }, say('done again')] } }, { clock: t.clock });
    const again = await resumeCoordinator({ store, model, clock: t.clock, tools: list, approvals: rulesBoth });
    await again.send(lead, { content: 'one more' });
    await flush();
    expect(runs).toEqual([{ text: 'first' }, { text: 'second' }]);
    expect(again.approvals.list()).toEqual([]);
    await again.shutdown();
  });

  it('an approved tool still running keeps the run from idle: a host lets its run go only once it ended', async () => {
    let finish: (value: string) => void = () => undefined;
    const slow = defineTool({
      name: 'migrate',
      description: 'Migrate.',
      parameters: { type: 'object', properties: {} },
      risk: 'destructive',
      execute: () => new Promise<string>((resolve) => (finish = resolve)),
    });
    const script: Script = {
      agents: {
        lead: [
          { tools: [{ name: 'migrate', args: {} }] },
          { tools: [{ name: 'wait_for_agents', args: { reason: 'it' } }] },
          { tools: [{ name: 'respond_to_user', args: { message: 'migrated' } }] },
        ],
      },
    };
    const t = team(script, { tools: [slow], interactive: true, approvals: rules, idleResumeMs: 86_400_000 });
    const lead = await t.c.start({ name: 'lead', task: 'Migrate.' });
    await t.c.waitFor(lead, ['waiting']);
    await flush();
    await t.c.approvals.approve('ap-1');
    let idle = false;
    void t.c.whenIdle().then(() => (idle = true));
    await flush();
    expect(idle).toBe(false);
    finish('migrated');
    await flush();
    expect(idle).toBe(true);
    expect(t.c.approvals.list()[0]).toMatchObject({ state: 'ran' });
    expect(t.model.calls).toHaveLength(3);
    await t.c.shutdown();
  });

  it('rules are checked: a typo is refused with CONFIG_INVALID', () => {
    expect(() => team(askThenWait, { approvals: { ask: ['everything'] } as unknown as ApprovalRules })).toThrow(/approvals.ask/);
    expect(() => team(askThenWait, { approvals: { alow: [] } as unknown as ApprovalRules })).toThrow(/Unknown approvals rule "alow"/);
  });
});
