/**
 * Typed sub-agent results (issue 35): an output schema set at spawn (or given to `start`), the
 * finish value checked against it with bounded attempts, the value kept in the report, and
 * notices that carry their facts as data.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { z } from 'zod';
import { createCoordinator } from '../../../src/host/createCoordinator.js';
import { resumeCoordinator } from '../../../src/host/resumeCoordinator.js';
import { scriptedModel } from '../../../src/model/scriptedModel.js';
import type { ToolSpec } from '../../../src/model/types.js';
import { memoryStore } from '../../../src/store/memoryStore.js';
import { openStore } from '../../../src/store/sqliteStore.js';
import { MAX_OUTPUT_SCHEMA_BYTES } from '../../../src/tools/outputSchema.js';
import { flush, team, TERMINAL } from '../../helpers/team.js';

const TOTAL = { type: 'object', properties: { total: { type: 'integer' } }, required: ['total'], additionalProperties: false };
const spawnCalc = (extra: Record<string, unknown> = { output_schema: TOTAL }) => ({ tool: 'spawn_agent', args: { name: 'calc', task: 'add it up', ...extra } });
const waitCalc = { tool: 'wait_for_agents', args: { reason: 'calc' } };
const finish = { tool: 'finish', args: { summary: 'done' } };
const calcFinish = (value?: unknown) => ({ tool: 'agent_finish', args: { summary: 'summed', ...(value === undefined ? {} : { value }) } });

/** The attempt a RESULT_INVALID refusal reports (undefined: not a refusal). */
const attemptOf = (r: { result: { error?: unknown } }) => (r.result.error as { attempt?: number } | undefined)?.attempt;
const finishSpec = (tools: readonly ToolSpec[], name: string) => tools.find((t) => t.name === name)!;

describe('typed results: a child with an output schema', () => {
  it('a value that fails the schema twice and then passes: the parent gets one notice, its data holding the value, its text showing it', async () => {
    const t = team({
      agents: {
        lead: [spawnCalc(), waitCalc, finish],
        calc: [calcFinish(), calcFinish({ total: 'many' }), calcFinish({ total: 42 })],
      },
    });
    const rootId = await t.c.start({ name: 'lead', task: 'sum' });
    await t.c.waitFor(rootId, [...TERMINAL]);
    const calc = t.byName('calc');
    expect(calc.status).toBe('completed');

    // The two refusals told the child what was wrong and how many attempts it had used.
    const refusals = t.toolResults(calc.id).filter((r) => r.name === 'agent_finish');
    expect(refusals.map((r) => r.result.error?.code ?? 'ok')).toEqual(['RESULT_INVALID', 'RESULT_INVALID', 'ok']);
    expect(refusals[0]!.result.error).toMatchObject({ attempt: 1, max_attempts: 3, errors: [expect.stringContaining('value is missing')] });
    expect(refusals[1]!.result.error).toMatchObject({ attempt: 2, errors: ['/total must be integer'] });

    // Exactly one notice, its value as data and as text.
    const notices = t.messagesTo(rootId).filter((m) => m.from === calc.id);
    expect(notices).toHaveLength(1);
    expect(notices[0]!.type).toBe('completion');
    expect(notices[0]!.data).toEqual({
      agentId: calc.id,
      name: 'calc',
      status: 'completed',
      stint: 0,
      success: true,
      value: { total: 42 },
      stopReason: null,
      errorCode: null,
    });
    expect(notices[0]!.content).toContain('Value (JSON, matches the output schema you gave): {"total":42}');

    // The report keeps it: in the views, the store row, and result().
    expect(calc.report?.value).toEqual({ total: 42 });
    expect(t.store.getAgent(calc.id)?.report?.value).toEqual({ total: 42 });
    const result = await t.c.result(calc.id);
    expect(result).toMatchObject({ status: 'completed', value: { total: 42 }, stopReason: null, error: null });

    // The child was shown the schema: in its first input and as agent_finish's `value`.
    const childCalls = t.model.calls.filter((c) => c.agentId === calc.id);
    const firstInput = childCalls[0]!.request.messages.find((m) => m.role === 'user')!.content as string;
    expect(firstInput).toContain(`call agent_finish with a \`value\` that matches this JSON Schema`);
    expect(firstInput).toContain(JSON.stringify(TOTAL));
    const spec = finishSpec(childCalls[0]!.request.tools, 'agent_finish');
    expect((spec.parameters as { properties: Record<string, unknown> }).properties.value).toMatchObject(TOTAL);
    expect((spec.parameters as { required: string[] }).required).toContain('value');
    t.model.assertComplete();
    await t.c.shutdown();
  });

  it('a child that never passes ends failed with RESULT_SCHEMA_FAILED, and its parent’s notice says so as data', async () => {
    const t = team({
      agents: {
        lead: [spawnCalc(), waitCalc, finish],
        calc: [calcFinish({ total: 1.5 }), calcFinish({ sum: 1 }), calcFinish('forty-two')],
      },
    });
    const rootId = await t.c.start({ name: 'lead', task: 'sum' });
    await t.c.waitFor(rootId, [...TERMINAL]);
    const calc = t.byName('calc');
    expect(calc.status).toBe('failed');
    expect(calc.error?.code).toBe('RESULT_SCHEMA_FAILED');
    const last = t.toolResults(calc.id).at(-1)!;
    expect(last.result.error).toMatchObject({ code: 'RESULT_INVALID', attempt: 3, max_attempts: 3 });
    const notices = t.messagesTo(rootId).filter((m) => m.from === calc.id);
    expect(notices.map((m) => m.type)).toEqual(['failed']);
    expect(notices[0]!.data).toMatchObject({ agentId: calc.id, status: 'failed', errorCode: 'RESULT_SCHEMA_FAILED', stopReason: null });
    expect(notices[0]!.data).not.toHaveProperty('value');
    expect(await t.c.result(calc.id)).toMatchObject({ status: 'failed', value: undefined, error: { code: 'RESULT_SCHEMA_FAILED' } });
    t.model.assertComplete();
    await t.c.shutdown();
  });

  it('limits.maxResultTries bounds the attempts (1: the first invalid value fails the child)', async () => {
    const t = team({ agents: { lead: [spawnCalc(), waitCalc, finish], calc: [calcFinish({ total: 'x' })] } }, { limits: { maxResultTries: 1 } });
    const rootId = await t.c.start({ name: 'lead', task: 'sum' });
    await t.c.waitFor(rootId, [...TERMINAL]);
    expect(t.byName('calc')).toMatchObject({ status: 'failed', error: { code: 'RESULT_SCHEMA_FAILED' } });
    t.model.assertComplete();
    await t.c.shutdown();
  });

  it('refusals earlier in the same turn count: two invalid finish calls in one answer use two attempts', async () => {
    const twice = {
      tools: [
        { name: 'agent_finish', args: { summary: 's', value: { total: 'a' } } },
        { name: 'agent_finish', args: { summary: 's', value: { total: 'b' } } },
      ],
    };
    const t = team({ agents: { lead: [spawnCalc(), waitCalc, finish], calc: [twice] } }, { limits: { maxResultTries: 2 } });
    const rootId = await t.c.start({ name: 'lead', task: 'sum' });
    await t.c.waitFor(rootId, [...TERMINAL]);
    expect(t.toolResults(t.byName('calc').id).map((r) => attemptOf(r))).toEqual([1, 2]);
    expect(t.byName('calc')).toMatchObject({ status: 'failed', error: { code: 'RESULT_SCHEMA_FAILED' } });
    t.model.assertComplete();
    await t.c.shutdown();
  });

  it('a revived child starts a new stint with its attempts afresh, and its second notice carries the new stint', async () => {
    const t = team(
      {
        agents: {
          lead: [spawnCalc(), waitCalc, finish],
          calc: [calcFinish({ total: 'a' }), calcFinish({ total: 'b' }), calcFinish({ total: 'c' }), calcFinish({ total: 'd' }), calcFinish({ total: 5 })],
        },
      },
      { interactive: true },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'sum' });
    await t.c.waitFor(rootId, [...TERMINAL]);
    const calcId = t.byName('calc').id;
    expect(t.c.get(calcId)).toMatchObject({ status: 'failed', error: { code: 'RESULT_SCHEMA_FAILED' } });
    await t.c.send(calcId, { content: 'try again' });
    await t.c.waitFor(calcId, ['completed']);
    expect(t.toolResults(calcId).map((r) => attemptOf(r) ?? 'ok')).toEqual([1, 2, 3, 1, 'ok']);
    expect(
      t
        .messagesTo(rootId)
        .filter((m) => m.from === calcId)
        .map((m) => [m.type, m.data?.stint, m.data?.value]),
    ).toEqual([
      ['failed', 0, undefined],
      ['completion', 1, { total: 5 }],
    ]);
    t.model.assertComplete();
    await t.c.shutdown();
  });

  it('the attempts survive a restart: bounded in total, not per boot', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'troupe-')), 'run.db');
    const clock = new SimulatedClock();
    const first = openStore({ path });
    // Two refusals, then a call that hangs until the process dies.
    const model1 = scriptedModel(
      {
        agents: {
          lead: [spawnCalc(), waitCalc],
          calc: [calcFinish({ total: 'a' }), calcFinish({ total: 'b' }), { delayMs: 600_000, ...calcFinish({ total: 1 }) }],
        },
      },
      { clock },
    );
    const c1 = createCoordinator({ model: model1, store: first, clock });
    const rootId = await c1.start({ name: 'lead', task: 'sum' });
    while (model1.calls.filter((c) => c.agentName === 'calc').length < 3) await flush();
    const calcId = c1.list().find((a) => a.name === 'calc')!.id;
    await c1.shutdown();
    first.close();

    // After the restart one attempt is left: the next invalid value fails the child. A count
    // reset by the restart would refuse it (attempt 1 of 3) and ask the script for more.
    const second = openStore({ path });
    const model2 = scriptedModel({ agents: { calc: [calcFinish({ total: 'c' })], lead: [finish] } }, { clock });
    const c2 = await resumeCoordinator({ store: second, model: model2, clock });
    await c2.waitFor(rootId, [...TERMINAL]);
    expect(c2.get(calcId)).toMatchObject({ status: 'failed', error: { code: 'RESULT_SCHEMA_FAILED' } });
    const notices = second.listMessages(c2.runId).filter((m) => m.to === rootId && m.from === calcId);
    expect(notices.map((m) => [m.type, m.data?.errorCode])).toEqual([['failed', 'RESULT_SCHEMA_FAILED']]);
    model2.assertComplete();
    await c2.shutdown();
    expect(second.verifyChecksums()).toEqual({ messages: [], sessionItems: [] });
    second.close();
  });

  it('the value is kept in the file: the report, the terms and the notice data read back after a close', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'troupe-')), 'run.db');
    const clock = new SimulatedClock();
    const first = openStore({ path });
    const model1 = scriptedModel({ agents: { lead: [spawnCalc(), waitCalc, finish], calc: [calcFinish({ total: 7 })] } }, { clock });
    const c1 = createCoordinator({ model: model1, store: first, clock });
    const rootId = await c1.start({ name: 'lead', task: 'sum' });
    await c1.waitFor(rootId, [...TERMINAL]);
    const calcId = c1.list().find((a) => a.name === 'calc')!.id;
    await c1.shutdown();
    first.close();
    const second = openStore({ path });
    expect(second.getAgent(calcId)?.report?.value).toEqual({ total: 7 });
    expect(second.getAgent(calcId)?.terms?.output).toEqual(TOTAL);
    const notice = second.listMessages(second.getAgent(calcId)!.runId).find((m) => m.from === calcId)!;
    expect(notice.data).toMatchObject({ value: { total: 7 }, status: 'completed' });
    second.close();
  });
});

describe('typed results: spawning', () => {
  it('an invalid or oversized output schema refuses the spawn with TOOL_INPUT_INVALID, and nothing is registered', async () => {
    const huge = { type: 'object', description: 'x'.repeat(MAX_OUTPUT_SCHEMA_BYTES) };
    const t = team({
      agents: {
        lead: [spawnCalc({ output_schema: { type: 'no-such-type' } }), spawnCalc({ output_schema: huge }), finish],
      },
    });
    const rootId = await t.c.start({ name: 'lead', task: 'sum' });
    await t.c.waitFor(rootId, [...TERMINAL]);
    const results = t.toolResults(rootId).filter((r) => r.name === 'spawn_agent');
    expect(results.map((r) => r.result.error?.code)).toEqual(['TOOL_INPUT_INVALID', 'TOOL_INPUT_INVALID']);
    expect(results[0]!.result.error?.message).toContain('The output schema is invalid');
    expect(results[1]!.result.error?.message).toContain(`at most ${MAX_OUTPUT_SCHEMA_BYTES}`);
    expect(t.c.list().map((a) => a.name)).toEqual(['lead']);
    await t.c.shutdown();
  });

  it('an agent without a schema is unchanged: no value parameter, a value refused as before, no value in its notice', async () => {
    const t = team({
      agents: {
        lead: [spawnCalc({}), waitCalc, finish],
        calc: [calcFinish({ total: 1 }), calcFinish()],
      },
    });
    const rootId = await t.c.start({ name: 'lead', task: 'sum' });
    await t.c.waitFor(rootId, [...TERMINAL]);
    const calc = t.byName('calc');
    const spec = finishSpec(t.model.calls.find((c) => c.agentId === calc.id)!.request.tools, 'agent_finish');
    expect(spec.parameters).not.toHaveProperty('properties.value');
    expect(spec.description).not.toContain('value');
    expect(t.toolResults(calc.id).map((r) => r.result.error?.code ?? 'ok')).toEqual(['TOOL_INPUT_INVALID', 'ok']);
    const notice = t.messagesTo(rootId).find((m) => m.from === calc.id)!;
    expect(notice.data).toEqual({ agentId: calc.id, name: 'calc', status: 'completed', stint: 0, success: true, stopReason: null, errorCode: null });
    expect(notice.content).not.toContain('Value (JSON');
    // Its calls share one tool list object (the list every such child gets), not a per-agent copy.
    expect(t.model.calls.find((c) => c.agentId === calc.id)!.request.tools).toBe(t.model.calls.filter((c) => c.agentId === calc.id).at(-1)!.request.tools);
    await t.c.shutdown();
  });

  it('a stopped child’s notice carries the stop reason as data', async () => {
    const t = team({
      agents: {
        lead: [spawnCalc(), waitCalc, finish],
        calc: [{ delayMs: 600_000, ...calcFinish({ total: 1 }) }],
      },
    });
    const rootId = await t.c.start({ name: 'lead', task: 'sum' });
    while (!t.model.calls.some((c) => c.agentName === 'calc')) await flush();
    const calcId = t.byName('calc').id;
    await t.c.stop(calcId);
    await t.c.waitFor(rootId, [...TERMINAL]);
    const notices = t.messagesTo(rootId).filter((m) => m.from === calcId);
    expect(notices.map((m) => m.type)).toEqual(['stopped']);
    expect(notices[0]!.data).toEqual({ agentId: calcId, name: 'calc', status: 'stopped', stint: 0, stopReason: 'requested', errorCode: null });
    expect(await t.c.result(calcId)).toMatchObject({ status: 'stopped', stopReason: 'requested', value: undefined });
    await t.c.shutdown();
  });
});

describe('notices as data', () => {
  it('a crashed child’s notice carries its error code as data', async () => {
    // calc's script is empty: its first call crashes it with SCRIPT_EXHAUSTED.
    const t = team({ agents: { lead: [spawnCalc({}), waitCalc, finish], calc: [] } });
    const rootId = await t.c.start({ name: 'lead', task: 'sum' });
    await t.c.waitFor(rootId, [...TERMINAL]);
    const calcId = t.byName('calc').id;
    const notices = t.messagesTo(rootId).filter((m) => m.from === calcId);
    expect(notices.map((m) => [m.type, m.data])).toEqual([
      ['crashed', { agentId: calcId, name: 'calc', status: 'crashed', stint: 0, stopReason: null, errorCode: 'SCRIPT_EXHAUSTED' }],
    ]);
    await t.c.shutdown();
  });

  it('a stalled child’s notice says so as data', async () => {
    const t = team({ agents: { lead: [spawnCalc({}), waitCalc], calc: [{ text: 'hm' }, { text: 'hm' }, { text: 'hm' }] } }, { interactive: true });
    const rootId = await t.c.start({ name: 'lead', task: 'sum' });
    const calcId = await (async () => {
      while (!t.c.list().some((a) => a.name === 'calc')) await flush();
      return t.byName('calc').id;
    })();
    await t.c.waitFor(calcId, ['stalled']);
    await flush();
    const stalled = t.messagesTo(rootId).filter((m) => m.from === calcId);
    expect(stalled.map((m) => [m.type, m.data])).toEqual([
      ['stalled', { agentId: calcId, name: 'calc', status: 'stalled', stint: 0, stopReason: null, errorCode: null }],
    ]);
    await t.c.shutdown();
  });
});

describe('typed results: the API', () => {
  it('a root with a zod schema: validated in-process (refinements too), persisted as its JSON Schema, the result typed', async () => {
    // The refinement has no JSON Schema form: only the in-process check can refuse 'yes'.
    const Answer = z.object({ answer: z.string().refine((s) => s === s.toUpperCase(), 'must be upper case'), n: z.number().int() });
    const store = memoryStore();
    const model = scriptedModel({
      agents: {
        lead: [
          { tool: 'finish', args: { summary: 'x', value: { answer: 'yes', n: 2 } } },
          { tool: 'finish', args: { summary: 'x', value: { answer: 'YES', n: 1.5 } } },
          { tool: 'finish', args: { summary: 'done', value: { answer: 'YES', n: 2 } } },
        ],
      },
    });
    const c = createCoordinator({ model, store });
    const rootId = await c.start({ name: 'lead', task: 'answer', output: Answer });
    const result = await c.result(rootId);
    expectTypeOf(result.value).toEqualTypeOf<{ answer: string; n: number } | undefined>();
    expect(result).toMatchObject({ status: 'completed', value: { answer: 'YES', n: 2 } });
    const refusals = store
      .loadSession(rootId)
      .filter((i) => i.role === 'tool')
      .map((i) => (JSON.parse((i as { content: string }).content) as { error?: { code: string; errors: string[] } }).error);
    expect(refusals.map((e) => e?.code ?? 'ok')).toEqual(['RESULT_INVALID', 'RESULT_INVALID', 'ok']);
    expect(refusals[0]!.errors).toEqual(['/answer must be upper case']);
    expect(refusals[1]!.errors.join(' ')).toMatch(/^\/n /);
    expect(store.getAgent(rootId)?.terms?.output).toMatchObject({ type: 'object', required: ['answer', 'n'] });
    expect(store.getAgent(rootId)?.terms?.output).not.toHaveProperty('$schema');
    // The root's finish shows the schema's JSON form.
    const spec = finishSpec(model.calls[0]!.request.tools, 'finish');
    expect((spec.parameters as { properties: Record<string, unknown> }).properties.value).toMatchObject({ properties: { answer: { type: 'string' } } });
    model.assertComplete();
    await c.shutdown();
  });

  it('after a resume a Standard Schema root is checked by its persisted JSON Schema form (its refinements are not)', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'troupe-')), 'run.db');
    const clock = new SimulatedClock();
    const Answer = z.object({ answer: z.string().refine((s) => s === s.toUpperCase(), 'must be upper case'), n: z.number().int() });
    const first = openStore({ path });
    const model1 = scriptedModel({ agents: { lead: [{ delayMs: 600_000, ...finish }] } }, { clock });
    const c1 = createCoordinator({ model: model1, store: first, clock });
    const rootId = await c1.start({ name: 'lead', task: 'answer', output: Answer });
    while (model1.calls.length < 1) await flush();
    await c1.shutdown();
    first.close();

    const second = openStore({ path });
    const model2 = scriptedModel(
      {
        agents: {
          lead: [
            { tool: 'finish', args: { summary: 'x', value: { answer: 'yes', n: 1.5 } } },
            { tool: 'finish', args: { summary: 'done', value: { answer: 'yes', n: 2 } } },
          ],
        },
      },
      { clock },
    );
    const c2 = await resumeCoordinator({ store: second, model: model2, clock });
    const result = await c2.result(rootId);
    expect(result).toMatchObject({ status: 'completed', value: { answer: 'yes', n: 2 } });
    model2.assertComplete();
    await c2.shutdown();
    second.close();
  });

  it('a root with a const JSON Schema: the result is typed from it; an invalid schema is CONFIG_INVALID and starts nothing', async () => {
    const model = scriptedModel({ agents: { lead: [{ tool: 'finish', args: { summary: 'done', value: { ok: true, tags: ['a'] } } }] } });
    const c = createCoordinator({ model, store: memoryStore() });
    await expect(c.start({ name: 'lead', task: 't', output: { type: 'nope' } })).rejects.toMatchObject({ code: 'CONFIG_INVALID' });
    expect(c.list()).toEqual([]);
    const rootId = await c.start({
      name: 'lead',
      task: 't',
      output: { type: 'object', properties: { ok: { type: 'boolean' }, tags: { type: 'array', items: { type: 'string' } } }, required: ['ok'] },
    });
    const result = await c.result(rootId);
    expectTypeOf(result.value).toEqualTypeOf<{ ok: boolean; tags?: string[] } | undefined>();
    expect(result.value).toEqual({ ok: true, tags: ['a'] });
    // Without a schema the id is a plain AgentId: its value is unknown.
    const plain = createCoordinator({ model: scriptedModel({ agents: { lead: [finish] } }), store: memoryStore() });
    const plainId = await plain.start({ name: 'lead', task: 't' });
    expectTypeOf((await plain.result(plainId)).value).toEqualTypeOf<unknown>();
    expectTypeOf(plainId).toExtend<string>();
    await plain.shutdown();
    await c.shutdown();
  });
});
