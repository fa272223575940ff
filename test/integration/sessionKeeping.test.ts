/**
 * Sessions kept within what the model takes, before every call (issue 34 items 5 and 6, seed 002):
 * a prompt estimated past `session.compactAt` of the model's context window is compacted first, so
 * a long session never overflows; only the newest `session.maxImages` images are sent.
 */
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { createCoordinator } from '../../src/host/createCoordinator.js';
import { resumeCoordinator } from '../../src/host/resumeCoordinator.js';
import { openaiModel } from '../../src/model/openaiModel.js';
import { scriptedModel } from '../../src/model/scriptedModel.js';
import type { SessionItem } from '../../src/model/types.js';
import { memoryStore } from '../../src/store/memoryStore.js';
import { createFakeOpenAIServer, type FakeRequest } from '../../src/testing/fakeOpenAIServer.js';
import { defineTool } from '../../src/tools/defineTool.js';
import { imageDroppedText, SUMMARY_HEADER } from '../../src/turn/compaction.js';
import { agentOf, call, openaiTeam, text } from '../helpers/provider.js';
import { team, TERMINAL } from '../helpers/team.js';
import { toolOutput } from '../../src/tools/toolOutput.js';

/** Each result adds ~700 characters to the session. */
const lookup = defineTool({
  name: 'lookup',
  description: 'Look a key up.',
  parameters: { type: 'object', properties: { key: { type: 'string' } }, required: ['key'], additionalProperties: false },
  execute: ({ key }: { key: string }) => ({ key, value: `${key}:`.padEnd(700, 'x') }),
});

const messagesOf = (r: FakeRequest) => (r.body as { messages: unknown[] }).messages;
/** troupe's own estimate (prices.ts): about three characters per token. */
const tokensOf = (r: FakeRequest) => Math.ceil(JSON.stringify(messagesOf(r)).length / 3);

describe('compaction before the call', () => {
  // The system prompt and the tool list take ~1,400 of these tokens; the session grows ~310 a turn.
  const WINDOW = 4_000;
  const lookups = Array.from({ length: 16 }, (_, i) => call('lookup', { key: `k${i}` }));

  it('a long session is compacted before it nears the window: no request passes it, the summaries are metered as compaction', async () => {
    const t = await openaiTeam(
      { lead: [...lookups, call('finish', { summary: 'done' })], '(troupe)': Array.from({ length: 8 }, (_, i) => text(`summary ${i}`)) },
      { model: { contextWindow: WINDOW }, coordinator: { tools: [lookup] } },
    );
    await using _ = t;
    const rootId = await t.c.start({ name: 'lead', task: 'Look up k0..k15.' });
    expect(await t.c.waitFor(rootId, TERMINAL)).toMatchObject({ status: 'completed' });
    const lead = t.server.requests.filter((r) => agentOf(r) === 'lead');
    expect(lead).toHaveLength(17);
    // Never near the window (the line is 80 % of it, on troupe's estimate of the whole request).
    expect(Math.max(...lead.map(tokensOf))).toBeLessThan(0.8 * WINDOW);
    // Compacted when due, not every turn: each summary makes room for three turns or more (a bound
    // in turns, not a count: the built-in tools' schemas share the window, and grow with them).
    const compactions = t.store.listUsage(t.c.runId).filter((u) => u.purpose === 'compaction').length;
    expect(compactions).toBeGreaterThan(0);
    expect(compactions).toBeLessThanOrEqual(lookups.length / 3);
    expect(t.unused()['(troupe)']).toBe(8 - compactions);
    expect(JSON.stringify(messagesOf(lead.at(-1)!))).toContain(SUMMARY_HEADER);
  });

  it('on the auxiliary model when one is set: the summaries go there and their usage rows name it', async () => {
    const auxiliary = scriptedModel({ agents: { lead: Array.from({ length: 8 }, (_, i) => ({ text: `summary ${i}` })) } });
    const t = await openaiTeam(
      { lead: [...lookups, call('finish', { summary: 'done' })] },
      { model: { contextWindow: WINDOW }, coordinator: { tools: [lookup], auxiliaryModel: auxiliary } },
    );
    await using _ = t;
    const rootId = await t.c.start({ name: 'lead', task: 'Look up k0..k15.' });
    expect(await t.c.waitFor(rootId, TERMINAL)).toMatchObject({ status: 'completed' });
    // The fake server (the agents' model) saw no summary request; the auxiliary model answered them.
    expect(t.server.requests.every((r) => agentOf(r) === 'lead')).toBe(true);
    const usage = t.store.listUsage(t.c.runId);
    const compactions = usage.filter((u) => u.purpose === 'compaction');
    expect(compactions.length).toBeGreaterThan(0);
    expect(auxiliary.calls.map((c) => c.request.purpose)).toEqual(compactions.map(() => 'compaction'));
    expect(new Set(compactions.map((u) => u.model))).toEqual(new Set(['scripted']));
    expect(new Set(usage.filter((u) => u.purpose === 'main').map((u) => u.model))).toEqual(new Set(['fake-model']));
  });

  it('an auxiliary model the budget cannot price is refused with the run', () => {
    const model = { ...scriptedModel({ agents: {} }), price: { inputPer1M: 1, outputPer1M: 1 } };
    expect(() => createCoordinator({ model, auxiliaryModel: { name: 'cheap', complete: model.complete }, budget: { limitUsd: 1 } })).toThrow(/auxiliaryModel/);
    expect(() =>
      createCoordinator({
        model,
        auxiliaryModel: { name: 'cheap', complete: model.complete },
        budget: { limitUsd: 1, prices: { cheap: { inputPer1M: 0.1, outputPer1M: 0.4 } } },
      }),
    ).not.toThrow();
  });

  it('without a declared window nothing is compacted ahead (the same session grows past it)', async () => {
    const t = await openaiTeam({ lead: [...lookups, call('finish', { summary: 'done' })] }, { coordinator: { tools: [lookup] } });
    await using _ = t;
    const rootId = await t.c.start({ name: 'lead', task: 'Look up k0..k15.' });
    expect(await t.c.waitFor(rootId, TERMINAL)).toMatchObject({ status: 'completed' });
    expect(Math.max(...t.server.requests.map(tokensOf))).toBeGreaterThan(WINDOW);
    expect(t.store.listUsage(t.c.runId).some((u) => u.purpose === 'compaction')).toBe(false);
  });

  it('rejects a window or a line that cannot work', () => {
    const model = scriptedModel({ agents: {} });
    expect(() => createCoordinator({ model: { ...model, contextWindow: 0 } })).toThrow(/contextWindow/);
    expect(() => createCoordinator({ model, session: { compactAt: 1.5 } })).toThrow(/compactAt/);
    expect(() => createCoordinator({ model, session: { maxImages: -1 } })).toThrow(/maxImages/);
  });
});

describe('the image budget', () => {
  const image = (n: number): SessionItem => ({
    role: 'user',
    content: [
      { type: 'text', text: `screenshot ${n}` },
      { type: 'image', url: `data:image/png;base64,IMG${n}` },
    ],
  });

  it('only the newest maxImages images are sent; older ones become a placeholder, in the stored session too', async () => {
    const store = memoryStore();
    const clock = new SimulatedClock();
    const first = createCoordinator({
      model: scriptedModel({ agents: { lead: [{ delayMs: 60_000, tool: 'finish', args: { summary: 'never' } }] } }, { clock }),
      store,
      clock,
    });
    const rootId = await first.start({ name: 'lead', task: 'Compare the pages.' });
    await first.shutdown();
    store.appendSession(rootId, [image(1), image(2), image(3)]);
    await using server = await createFakeOpenAIServer([call('finish', { summary: 'compared' })]);
    const c = await resumeCoordinator({
      store,
      clock,
      session: { maxImages: 2 },
      model: openaiModel({ model: 'fake-model', baseURL: server.url, apiKey: 'sk-test', clock }),
    });
    expect((await c.waitFor(rootId, TERMINAL)).status).toBe('completed');
    const sent = JSON.stringify(messagesOf(server.requests[0]!));
    expect(sent).not.toContain('IMG1');
    expect(sent).toContain('IMG2');
    expect(sent).toContain('IMG3');
    expect(sent).toContain(imageDroppedText(2));
    const stored = JSON.stringify(store.loadSession(rootId));
    expect(stored).not.toContain('IMG1');
    expect(stored).toContain('screenshot 1');
    await c.shutdown();
  });

  it('images a tool returns within one cycle are counted as they arrive: the request after the third shot carries two', async () => {
    const screenshot = defineTool({
      name: 'screenshot',
      description: 'Take a screenshot.',
      parameters: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] },
      execute: ({ n }: { n: number }) => toolOutput({ taken: n }, [{ mimeType: 'image/png', data: `SHOT${n}` }]),
    });
    const shot = (n: number) => ({ tool: 'screenshot', args: { n } });
    const t = team(
      { agents: { lead: [shot(1), shot(2), shot(3), { tool: 'finish', args: { summary: 'seen' } }] } },
      { tools: [screenshot], session: { maxImages: 2 } },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'Look.' });
    expect((await t.c.waitFor(rootId, TERMINAL)).status).toBe('completed');
    const last = JSON.stringify(t.model.calls.at(-1)!.request.messages);
    expect(last).not.toContain('SHOT1');
    expect(last).toContain('SHOT2');
    expect(last).toContain('SHOT3');
    expect(last).toContain(imageDroppedText(2));
    await t.c.shutdown();
  });
});
