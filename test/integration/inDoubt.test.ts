/**
 * Tool calls cut by a crash (issue 14 §3): never re-run blindly. A call that may have had effects
 * is marked started (committed) before it runs; after a restart, a started call with no result is
 * reported TOOL_IN_DOUBT, once; read-only and idempotent tools are re-run (idempotent ones with the
 * same key); a call that never started is reported TOOL_NOT_RUN.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { createCoordinator } from '../../src/host/createCoordinator.js';
import { resumeCoordinator } from '../../src/host/resumeCoordinator.js';
import { scriptedModel, type Script } from '../../src/model/scriptedModel.js';
import type { SessionItem } from '../../src/model/types.js';
import { openStore } from '../../src/store/sqliteStore.js';
import { defineTool } from '../../src/tools/defineTool.js';
import { flush, TERMINAL } from '../helpers/team.js';

function tools() {
  const ran = { look: 0, deploy: [] as string[], charge: [] as string[], block: 0 };
  let entered!: () => void;
  const blocking = new Promise<void>((resolve) => (entered = resolve));
  const list = [
    defineTool({ name: 'look', description: 'Read.', parameters: { type: 'object' }, risk: 'read_only', execute: () => ({ seen: ++ran.look }) }),
    defineTool({
      name: 'deploy',
      description: 'Deploy a service.',
      parameters: { type: 'object', properties: { service: { type: 'string' } }, required: ['service'] },
      risk: 'mutation',
      execute: ({ service }: { service: string }) => {
        ran.deploy.push(service);
        return { deployed: service };
      },
    }),
    defineTool({
      name: 'charge',
      description: 'Charge a card (idempotent by key).',
      parameters: { type: 'object' },
      risk: 'mutation',
      idempotent: true,
      execute: (_args, { idempotencyKey }) => {
        ran.charge.push(idempotencyKey);
        return { charged: true };
      },
    }),
    defineTool({
      name: 'block',
      description: 'Never returns (the process dies while it runs).',
      parameters: { type: 'object' },
      execute: () => {
        ran.block += 1;
        entered();
        return new Promise(() => undefined);
      },
    }),
  ];
  return { list, ran, blocking };
}

const results = (session: readonly SessionItem[]) =>
  session
    .filter((i): i is Extract<SessionItem, { role: 'tool' }> => i.role === 'tool')
    .map((i) => ({ id: i.toolCallId, name: i.name, result: JSON.parse(i.content) as { error?: { code: string } } }));

describe('tool calls cut by a crash', () => {
  it('are resolved once: read-only and idempotent re-run, started ones in doubt, unstarted ones not run', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'troupe-')), 'run.db');
    const clock = new SimulatedClock();
    const t1 = tools();
    const first: Script = {
      agents: {
        lead: [
          {
            tools: [
              { name: 'look', args: {} },
              { name: 'charge', args: {} },
              { name: 'deploy', args: { service: 'api' } },
              { name: 'spawn_agent', args: { name: 'w', task: 'work' } },
              { name: 'block', args: {} },
              { name: 'deploy', args: { service: 'web' } },
            ],
          },
        ],
        w: [{ delayMs: 60_000, tool: 'agent_finish', args: { summary: 'w done' } }],
      },
    };
    const c = createCoordinator({ model: scriptedModel(first, { clock }), store: openStore({ path }), clock, tools: t1.list });
    const rootId = await c.start({ name: 'lead', task: 'Ship it.' });
    await t1.blocking;
    expect(c.store.startedToolCalls(rootId).map((r) => r.tool)).toEqual(['charge', 'deploy', 'block']);
    // The process dies while block runs: nothing of this turn's results was committed.
    await c.shutdown();
    c.store.close();
    expect(t1.ran).toMatchObject({ look: 1, deploy: ['api'], block: 1 });

    // Resume with the same tools (a new process): its second turn is long, and it "crashes" again.
    const t2 = tools();
    const store = openStore({ path });
    const second = scriptedModel(
      {
        agents: {
          lead: [{ delayMs: 600_000, tool: 'finish', args: { summary: 'never' } }],
          w: [{ delayMs: 600_000, tool: 'agent_finish', args: { summary: 'w done' } }],
        },
      },
      { clock },
    );
    const again = await resumeCoordinator({ store, model: second, clock, tools: t2.list });
    await flush();
    await flush();
    const byName = results(store.loadSession(rootId));
    const codeOf = (name: string, n = 0) => byName.filter((r) => r.name === name)[n]?.result.error?.code ?? 'ok';
    expect(codeOf('look')).toBe('ok');
    expect(codeOf('charge')).toBe('ok');
    expect(codeOf('deploy', 0)).toBe('TOOL_IN_DOUBT');
    expect(codeOf('spawn_agent')).toBe('TOOL_IN_DOUBT');
    expect(codeOf('block')).toBe('TOOL_IN_DOUBT');
    expect(codeOf('deploy', 1)).toBe('TOOL_NOT_RUN');
    // Re-run: the read-only tool and the idempotent one, with the key of the first attempt.
    expect(t2.ran).toMatchObject({ look: 1, deploy: [], block: 0 });
    expect(t2.ran.charge).toEqual(t1.ran.charge);
    expect(t1.ran.charge[0]).toMatch(new RegExp(`:${rootId}:1:`));
    // The ledger closed every call it had marked started, with these results.
    expect(store.startedToolCalls(rootId)).toEqual([]);
    await again.shutdown();
    store.close();

    // A second restart surfaces nothing again: each cut call got exactly one result.
    const t3 = tools();
    const store3 = openStore({ path });
    const third = scriptedModel(
      {
        agents: {
          lead: [
            { tool: 'wait_for_agents', args: { reason: 'w' } },
            { tool: 'finish', args: { summary: 'shipped' } },
          ],
          w: [{ tool: 'agent_finish', args: { summary: 'w done' } }],
        },
      },
      { clock },
    );
    const last = await resumeCoordinator({ store: store3, model: third, clock, tools: t3.list });
    expect(await last.waitFor(rootId, TERMINAL)).toMatchObject({ status: 'completed' });
    const session = store3.loadSession(rootId);
    const cutIds = session.find((i): i is Extract<SessionItem, { role: 'assistant' }> => i.role === 'assistant')!.toolCalls!.map((call) => call.id);
    expect(cutIds).toHaveLength(6);
    // The cut turn's results: everything between its answer and the next (scripted models of
    // different processes reuse call ids, so count by position).
    const firstAnswer = session.findIndex((i) => i.role === 'assistant');
    const nextAnswer = session.findIndex((i, n) => n > firstAnswer && i.role === 'assistant');
    const all = results(session.slice(firstAnswer, nextAnswer));
    for (const id of cutIds) expect(all.filter((r) => r.id === id)).toHaveLength(1);
    expect(all.filter((r) => r.result.error?.code === 'TOOL_IN_DOUBT')).toHaveLength(3);
    expect(t3.ran).toMatchObject({ look: 0, deploy: [], charge: [], block: 0 });
    await last.shutdown();
    store3.close();
  });

  it('a turn that completes leaves no call in doubt, and read-only tools are never in the ledger', async () => {
    const clock = new SimulatedClock();
    const t = tools();
    const store = openStore({ path: ':memory:' });
    const c = createCoordinator({
      model: scriptedModel(
        {
          agents: {
            lead: [
              {
                tools: [
                  { name: 'look', args: {} },
                  { name: 'deploy', args: { service: 'api' } },
                ],
              },
              { tool: 'finish', args: { summary: 'ok' } },
            ],
          },
        },
        { clock },
      ),
      store,
      clock,
      tools: t.list,
    });
    const rootId = await c.start({ name: 'lead', task: 'x' });
    await c.waitFor(rootId, TERMINAL);
    expect(store.startedToolCalls(rootId)).toEqual([]);
    await c.shutdown();
  });

  it('risk and idempotent are validated when a tool is defined', () => {
    const base = { name: 'x', description: 'x', parameters: { type: 'object' }, execute: () => 1 };
    expect(() => defineTool({ ...base, risk: 'dangerous' as never })).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID' }));
    expect(() => defineTool({ ...base, idempotent: 'yes' as never })).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID' }));
  });
});
