/**
 * Failure fingerprints across agents (issue 34 item 9): the same tool failing the same way for 3
 * children of a team journals one `team.failure_pattern` event and tells their parent once — not
 * for 2 agents, not for other arguments or another error class, and not again after a restart.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { createCoordinator } from '../../src/host/createCoordinator.js';
import type { TroupeEvent } from '../../src/host/runtime.js';
import { resumeCoordinator } from '../../src/host/resumeCoordinator.js';
import { scriptedModel, type Script, type ScriptStep } from '../../src/model/scriptedModel.js';
import { openStore } from '../../src/store/sqliteStore.js';
import { defineTool } from '../../src/tools/defineTool.js';
import { flush, team, TERMINAL } from '../helpers/team.js';

/** A broken API client: every call fails; a url under /slow times out its own way. */
const fetchApi = defineTool({
  name: 'fetch_api',
  description: 'Fetch an API resource.',
  parameters: { type: 'object', properties: { url: { type: 'string' }, retries: { type: 'number' } }, required: ['url'] },
  execute: ({ url }: { url: string }) => {
    if (url.includes('/slow')) throw new RangeError(`gave up on ${url}`);
    throw new TypeError(`cannot read ${url}`);
  },
});

type Args = Record<string, unknown>;

/** A lead that spawns one child per args and waits; each child calls fetch_api with its args, then finishes. */
function script(children: Args[]): Script {
  const names = children.map((_, i) => `w${i + 1}`);
  const agents: Record<string, ScriptStep[]> = {
    lead: [
      {
        tools: [
          ...names.map((name) => ({ name: 'spawn_agent', args: { name, task: 'Fetch the report.' } })),
          { name: 'wait_for_agents', args: { reason: 'workers' } },
        ],
      },
      ...Array.from({ length: 6 }, () => ({ tool: 'wait_for_agents', args: { reason: 'workers' } })),
    ],
  };
  children.forEach((args, i) => {
    agents[names[i]!] = [
      { tool: 'fetch_api', args },
      { tool: 'agent_finish', args: { summary: 'could not fetch' } },
    ];
  });
  return { agents };
}

const PATTERN_NOTICE = 'failure_pattern';

async function run(children: Args[]) {
  const t = team(script(children), { tools: [fetchApi] });
  const events: TroupeEvent[] = [];
  t.c.subscribe((e) => events.push(e));
  const rootId = await t.c.start({ name: 'lead', task: 'Get the report.' });
  await flush();
  for (let i = 1; i <= children.length; i++) await t.c.waitFor(t.byName(`w${i}`).id, [...TERMINAL]);
  await flush();
  const rows = t.store.listEvents(t.c.runId).filter((e) => e.type === 'team.failure_pattern');
  const notices = t.messagesTo(rootId).filter((m) => m.type === PATTERN_NOTICE);
  const live = events.filter((e) => e.type === 'team.failure_pattern');
  await t.c.shutdown();
  return { rows, notices, live, t };
}

describe('failure patterns across a team', () => {
  it('3 children, the same failure with their keys in different orders: one event, one notice to the parent', async () => {
    const url = 'https://api.example.test/v1/report';
    const { rows, notices, live, t } = await run([
      { url, retries: 1 },
      { retries: 2, url },
      { url, retries: 3 },
    ]);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.data).toMatchObject({
      tool: 'fetch_api',
      errorClass: 'TOOL_FAILED:TypeError',
      agents: ['w1', 'w2', 'w3'].map((name) => ({ name, id: t.byName(name).id })),
    });
    expect(live).toHaveLength(1);
    expect(live[0]).toMatchObject({ type: 'team.failure_pattern', tool: 'fetch_api', fingerprint: rows[0]!.data.fingerprint });
    expect(notices).toHaveLength(1);
    expect(notices[0]!.content).toContain("The tool 'fetch_api' fails the same way (TOOL_FAILED:TypeError) for w1, w2, w3");
    expect(notices[0]!.data).toMatchObject({ tool: 'fetch_api', children: ['w1', 'w2', 'w3'].map((n) => t.byName(n).id) });
    expect(notices[0]!.noticeKey).toMatch(/^failure_pattern:[0-9a-f]{16}:\d+:/);
  });

  it('the root failing the same way as two of its children: one event naming all three; the root, their parent, told of its children only', async () => {
    const url = 'https://api.example.test/v1/report';
    const base = script([{ url }, { url }]);
    const [spawns, ...waits] = base.agents.lead!;
    // The lead calls the broken tool itself in its first turn, beside its two spawns.
    const [wait, ...spawnCalls] = [...spawns!.tools!].reverse();
    const lead = [{ tools: [...spawnCalls.reverse(), { name: 'fetch_api', args: { url } }, wait!] }, ...waits];
    const t = team({ agents: { ...base.agents, lead } }, { tools: [fetchApi] });
    const rootId = await t.c.start({ name: 'lead', task: 'Get the report.' });
    await flush();
    for (const name of ['w1', 'w2']) await t.c.waitFor(t.byName(name).id, [...TERMINAL]);
    await flush();
    const rows = t.store.listEvents(t.c.runId).filter((e) => e.type === 'team.failure_pattern');
    expect(rows).toHaveLength(1);
    expect((rows[0]!.data.agents as { name: string }[]).map((a) => a.name).sort()).toEqual(['lead', 'w1', 'w2']);
    // Nobody is above the root: its notice, as their parent, names its two children.
    const notices = t.messagesTo(rootId).filter((m) => m.type === PATTERN_NOTICE);
    expect(notices).toHaveLength(1);
    expect(notices[0]!.data).toMatchObject({ children: ['w1', 'w2'].map((n) => t.byName(n).id) });
    await t.c.shutdown();
  });

  it('2 children are not a pattern', async () => {
    const { rows, notices } = await run([{ url: 'https://a.test/x' }, { url: 'https://a.test/x' }]);
    expect(rows).toHaveLength(0);
    expect(notices).toHaveLength(0);
  });

  it('other arguments, or another error class, for the third child: no pattern', async () => {
    for (const third of [{ url: 'https://a.test/other' }, { url: 'https://a.test/slow' }]) {
      const { rows, notices } = await run([
        { url: third.url.endsWith('slow') ? 'https://a.test/slow' : 'https://a.test/x' },
        { url: 'https://a.test/x' },
        third,
      ]);
      expect(rows).toHaveLength(0);
      expect(notices).toHaveLength(0);
    }
  });

  it("a built-in's refusal (the model's misuse) is no pattern: 3 children calling the root's finish", async () => {
    const agents: Record<string, ScriptStep[]> = { lead: script([{}, {}, {}]).agents.lead! };
    for (const w of ['w1', 'w2', 'w3'])
      agents[w] = [
        { tool: 'finish', args: { summary: 'done' } },
        { tool: 'agent_finish', args: { summary: 'done' } },
      ];
    const t = team({ agents }, { tools: [fetchApi] });
    const rootId = await t.c.start({ name: 'lead', task: 'Get the report.' });
    await flush();
    for (const n of ['w1', 'w2', 'w3']) await t.c.waitFor(t.byName(n).id, [...TERMINAL]);
    await flush();
    expect(t.toolResults(t.byName('w1').id)[0]?.result.error?.code).toBe('TOOL_NOT_ALLOWED');
    expect(t.messagesTo(rootId).filter((m) => m.type === PATTERN_NOTICE)).toHaveLength(0);
    await t.c.shutdown();
  });

  it('failurePatterns: false turns it off', async () => {
    const t = team(script([{ url: 'u' }, { url: 'u' }, { url: 'u' }]), { tools: [fetchApi], failurePatterns: false });
    const rootId = await t.c.start({ name: 'lead', task: 'Get the report.' });
    await flush();
    for (const n of ['w1', 'w2', 'w3']) await t.c.waitFor(t.byName(n).id, [...TERMINAL]);
    await flush();
    expect(t.messagesTo(rootId).filter((m) => m.type === PATTERN_NOTICE)).toHaveLength(0);
    await t.c.shutdown();
  });
});

describe('failure patterns across a restart', () => {
  it('the notice is not repeated when the same agents fail the same way again after a resume', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'troupe-')), 'run.db');
    const clock = new SimulatedClock();
    const args = { url: 'https://api.example.test/v1/report' };
    const workers = ['w1', 'w2', 'w3'];
    const lead: ScriptStep[] = [
      {
        tools: [
          ...workers.map((name) => ({ name: 'spawn_agent', args: { name, task: 'Fetch the report.' } })),
          { name: 'wait_for_agents', args: { reason: 'workers' } },
        ],
      },
      ...Array.from({ length: 6 }, () => ({ tool: 'wait_for_agents', args: { reason: 'workers' } })),
    ];
    // Each worker fails once, then its next model call hangs until the process goes away.
    const first = scriptedModel(
      {
        agents: {
          lead,
          ...Object.fromEntries(
            workers.map((w) => [
              w,
              [
                { tool: 'fetch_api', args },
                { delayMs: 3_600_000, tool: 'agent_finish', args: { summary: 'x' } },
              ],
            ]),
          ),
        },
      },
      { clock },
    );
    const store = openStore({ path });
    const c = createCoordinator({ model: first, store, clock, tools: [fetchApi] });
    const rootId = await c.start({ name: 'lead', task: 'Get the report.' });
    await flush(60);
    const notices = () => store.listMessages(c.runId).filter((m) => m.to === rootId && m.type === PATTERN_NOTICE);
    expect(notices()).toHaveLength(1);
    await c.shutdown();
    store.close();

    // After the restart the same three fail the same way again, within the window: not told twice.
    const second = scriptedModel(
      {
        agents: {
          lead: Array.from({ length: 6 }, () => ({ tool: 'wait_for_agents', args: { reason: 'workers' } })),
          ...Object.fromEntries(
            workers.map((w) => [
              w,
              [
                { tool: 'fetch_api', args },
                { tool: 'agent_finish', args: { summary: 'could not fetch' } },
              ],
            ]),
          ),
        },
      },
      { clock },
    );
    const reopened = openStore({ path });
    const again = await resumeCoordinator({ store: reopened, model: second, clock, tools: [fetchApi] });
    for (const w of workers) {
      const id = again.list().find((a) => a.name === w)!.id;
      await again.waitFor(id, [...TERMINAL]);
    }
    await flush();
    expect(second.calls.filter((call) => call.agentName !== 'lead').length).toBeGreaterThanOrEqual(6);
    const after = reopened.listMessages(again.runId).filter((m) => m.to === rootId && m.type === PATTERN_NOTICE);
    expect(after).toHaveLength(1);
    expect(reopened.listEvents(again.runId).filter((e) => e.type === 'team.failure_pattern')).toHaveLength(1);
    await again.shutdown();
    reopened.close();
  });
});
