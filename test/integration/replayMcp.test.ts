/**
 * Replay of a run that used MCP tools (issue 37): recorded on SQLite against the real stdio fixture
 * server (test/fixtures/mcp/server.ts), it replays with no server reachable — the recording's tool
 * listing (specs and the server's hints) offered in its place, every call answered from the
 * recording — from the library and from `troupe replay`; what the code under test changes about
 * those tools (a server left out, a name now taken, an override) is a reported divergence.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createCoordinator } from '../../src/host/createCoordinator.js';
import type { ApprovalPolicy } from '../../src/host/options.js';
import { mcpServer, type McpServerOptions } from '../../src/mcp/config.js';
import { scriptedModel, type Script } from '../../src/model/scriptedModel.js';
import type { SessionItem } from '../../src/model/types.js';
import { replayRun } from '../../src/replay/replayRun.js';
import type { ReplayReads } from '../../src/replay/recording.js';
import { portOf } from '../../src/store/port.js';
import { memoryStore } from '../../src/store/memoryStore.js';
import { openStore } from '../../src/store/sqliteStore.js';
import type { Tool } from '../../src/tools/defineTool.js';
import { createFakeOpenAIServer } from '../../src/testing/fakeOpenAIServer.js';
import { jsonLines, troupe, workdir } from '../helpers/cli.js';
import { callsThenFinish, codeOf, FIXTURE, stdioServer, toolItems } from '../helpers/mcp.js';
import { TERMINAL } from '../helpers/team.js';
import { searchTool } from '../helpers/tools.js';

const search = (name?: string): Tool => searchTool(name === undefined ? {} : { name });

/** The fixture's tools used: read-only, a mutation, a destructive one (asks approval), one that fails. */
const script: Script = {
  agents: {
    lead: [
      {
        tools: [
          { name: 'echo', args: { text: 'hi' } },
          { name: 'search', args: { q: 'parser' } },
          { name: 'write_note', args: { note: 'n1' } },
          { name: 'wipe', args: {} },
          { name: 'fail', args: {} },
        ],
      },
      { tool: 'spawn_agent', args: { name: 'scout', task: 'Add.', skills: ['tools:fx'] } },
      { tool: 'wait_for_agents', args: { reason: 'the scout' } },
      { tool: 'finish', args: { summary: 'done' } },
    ],
    scout: [
      {
        tools: [
          { name: 'add', args: { a: 2, b: 3 } },
          { name: 'picture', args: {} },
        ],
      },
      { tool: 'agent_finish', args: { summary: '5' } },
    ],
  },
};

/** A policy that denies destructive steps, and the steps it was asked about. */
function policy(): { approvals: ApprovalPolicy; asked: string[] } {
  const asked: string[] = [];
  return {
    asked,
    approvals: {
      request: (req) => {
        asked.push(`${req.action}:${req.risk}`);
        return Promise.resolve(req.risk === 'destructive' ? { approved: false, reason: 'no wiping today' } : { approved: true, reason: 'ok' });
      },
      windowOpen: () => false,
    },
  };
}

/** Unreachable: replaying must not start it (connecting would fail and list no tools). */
const gone = (extra: Partial<McpServerOptions> = {}, name = 'fx') => mcpServer({ name, command: '/nonexistent/mcp-server', ...extra } as McpServerOptions);

async function record() {
  const path = join(mkdtempSync(join(tmpdir(), 'troupe-replay-mcp-')), 'run.db');
  const store = openStore({ path });
  const { approvals, asked } = policy();
  const c = createCoordinator({ store, model: scriptedModel(script), tools: [search(), stdioServer()], approvals });
  const root = await c.start({ name: 'lead', task: 'Use the tools.' });
  expect((await c.waitFor(root, TERMINAL)).status).toBe('completed');
  await c.shutdown();
  return { store, runId: c.runId, root, asked };
}

/** The image parts of a session, as data URLs. */
const imageParts = (session: readonly SessionItem[]) =>
  session.flatMap((i) => (i.role === 'user' && Array.isArray(i.content) ? i.content.flatMap((p) => (p.type === 'image' ? [p.url] : [])) : []));

const PICTURE = `data:image/png;base64,${Buffer.from('not really a png').toString('base64')}`;

describe('replay of MCP tools', () => {
  it('replays identically from SQLite with no server reachable: the recorded tools offered, their results and failures given, approvals asked as they were', async () => {
    const { store, runId, root, asked } = await record();
    try {
      expect(asked).toEqual(['search:mutation', 'write_note:mutation', 'wipe:destructive']);
      const recorded = toolItems(store.loadSession(root));
      expect(recorded.map((t) => t.name)).toEqual(['echo', 'search', 'write_note', 'wipe', 'fail', 'spawn_agent', 'wait_for_agents', 'finish']);
      expect(recorded.slice(0, 5).map(codeOf)).toEqual([null, null, null, 'APPROVAL_DENIED', 'TOOL_FAILED']);
      expect(recorded[0]!.content).toBe('echo: hi');
      const replayed = policy();
      const result = await replayRun(store, runId, { coordinator: { tools: [search(), gone()], approvals: replayed.approvals } });
      expect(result.divergence).toBeNull();
      expect(result.outcome).toBe('identical');
      // The server's hints came from the recording: the same steps asked for approval.
      expect(replayed.asked).toEqual(asked);
      expect(toolItems(await result.store.loadSession(root))).toEqual(recorded);
      const scout = store.listAgents(runId).find((a) => a.name === 'scout')!;
      const scoutTools = toolItems(store.loadSession(scout.id));
      expect(scoutTools[0]).toEqual({ name: 'add', content: JSON.stringify({ content: '{"sum":5}', structuredContent: { sum: 5 } }), isError: false });
      expect(toolItems(await result.store.loadSession(scout.id))).toEqual(scoutTools);
      // The picture's pixels were shown again, after the turn's tool results, as they were recorded.
      expect(imageParts(await result.store.loadSession(scout.id))).toEqual([PICTURE]);
      expect(await result.store.loadSession(scout.id)).toEqual(store.loadSession(scout.id));
      expect(Object.values(result.statuses)).toEqual(['completed', 'completed']);
    } finally {
      store.close();
    }
  });

  it('a server the code leaves out, a tool name now taken, an override, a changed recorded result: each is the first divergence', async () => {
    const { store, runId } = await record();
    try {
      const replay = (tools: (Tool | ReturnType<typeof gone>)[], reads: ReplayReads = portOf(store)) =>
        replayRun(reads, runId, { coordinator: { tools, approvals: policy().approvals } });

      const left = await replay([search()]);
      expect(left.divergence).toMatchObject({ agent: 'lead', turn: 1, kind: 'request' });
      expect(left.divergence!.diff).toMatch(/^tools: recorded \[.*, search, echo, add, .*\], now \[.*, search\]$/);

      // A user tool named echo: the server's echo is offered as fx__echo now.
      const taken = await replay([search(), search('echo'), gone()]);
      expect(taken.divergence).toMatchObject({ agent: 'lead', turn: 1, kind: 'request' });
      expect(taken.divergence!.diff).toContain('fx__echo');

      // The override is the code's: echo destructive now asks, is denied (a failure where it answered).
      const override = await replay([search(), gone({ tools: { echo: { risk: 'destructive' } } })]);
      expect(override.divergence).toMatchObject({ agent: 'lead', turn: 2, kind: 'tool call' });
      expect(override.divergence!.diff).toMatch(/^message 3 of 7 \(result of echo call_lead_1\): recorded «.*echo: hi"}» now «.*\\"success\\":false/);

      // The recording's echo result changed in the request that carried it: the replay gives the
      // result the commit journal holds (as the tool gave it), and that request is the divergence.
      const reads = portOf(store);
      const changed: ReplayReads = {
        ...reads,
        historyOf: async (id) =>
          (await reads.historyOf(id)).map((e) =>
            e.type === 'replay.call' ? { ...e, data: JSON.parse(JSON.stringify(e.data).replace('"echo: hi"', '"echo: changed"')) as typeof e.data } : e,
          ),
      };
      const result = await replay([search(), gone()], changed);
      expect(result.divergence).toMatchObject({ agent: 'lead', kind: 'tool call' });
      expect(result.divergence!.diff).toMatch(/result of echo .*recorded «.*echo: changed.*» now «.*echo: hi/);
    } finally {
      store.close();
    }
  });

  it.each([
    ['on SQLite, from the commit journal', () => openStore({ path: join(mkdtempSync(join(tmpdir(), 'troupe-replay-mcp-')), 'run.db') })],
    ['in memory, from the requests that carried them', () => memoryStore()],
  ])('results with images, text, resource links, an embedded resource and structured content replay identically %s', async (_where, open) => {
    const store = open();
    try {
      const pictures: Script = {
        agents: {
          lead: [
            {
              tools: [
                { name: 'picture', args: {} },
                { name: 'echo', args: { text: 'between' } },
                { name: 'picture', args: { mixed: true } },
              ],
            },
            { tool: 'picture', args: { mixed: true } },
            { tool: 'finish', args: { summary: 'seen' } },
          ],
        },
      };
      const c = createCoordinator({ store, model: scriptedModel(pictures), tools: [stdioServer()] });
      const root = await c.start({ name: 'lead', task: 'Look.' });
      expect((await c.waitFor(root, TERMINAL)).status).toBe('completed');
      await c.shutdown();
      const recorded = store.loadSession(root);
      const blue = `data:image/gif;base64,${Buffer.from('a blue gif').toString('base64')}`;
      // The recording showed every picture: three in the first turn's images message, two in the second's.
      expect(imageParts(recorded)).toEqual([PICTURE, PICTURE, blue, PICTURE, blue]);
      const mixed = toolItems(recorded)[2]!;
      expect(JSON.parse(mixed.content)).toEqual({
        content: expect.stringMatching(
          /^two squares\n\[image image\/png, .*\n\[resource file:\/\/\/squares\/blue.gif "blue"\]\n\[image image\/gif, .*\nred, then blue$/,
        ),
        structuredContent: { squares: ['red', 'blue'] },
      });
      const result = await replayRun(store, c.runId, { coordinator: { tools: [gone()] } });
      expect(result.divergence).toBeNull();
      expect(result.outcome).toBe('identical');
      expect(await result.store.loadSession(root)).toEqual(recorded);
    } finally {
      store.close();
    }
  });

  it('troupe replay offers the config file’s servers from the recording, starting none', async () => {
    await using server = await createFakeOpenAIServer(
      callsThenFinish([
        { name: 'echo', arguments: { text: 'over stdio' } },
        { name: 'add', arguments: { a: 1, b: 2 } },
        { name: 'picture', arguments: {} },
      ]),
    );
    const cwd = workdir();
    const config = (command: string, args: string[]) =>
      writeFileSync(
        join(cwd, 'troupe.config.json'),
        JSON.stringify({ model: 'm', baseURL: server.url, apiKey: 'k', approvals: false, mcpServers: { fx: { command, args } } }),
      );
    config(process.execPath, [FIXTURE]);
    const r = await troupe(['run', 'Use the tools', '--json'], cwd);
    expect(r.code, r.stderr).toBe(0);
    const runId = jsonLines(r.stdout).find((l) => typeof l.runId === 'string')!.runId as string;
    // The model saw the picture: the replay must show it again (it compares every request it answers).
    expect(JSON.stringify(server.requests[1]!.body)).toContain(`"url":"${PICTURE}"`);
    // The server is gone now: a replay that started it would have none of its tools.
    config('/nonexistent/mcp-server', []);
    const replayed = await troupe(['replay', runId, '--json'], cwd);
    expect(replayed.stderr).toBe('');
    expect(jsonLines(replayed.stdout)).toEqual([{ runId, outcome: 'identical', divergence: null, calls: 2, inputs: 0 }]);
    // Without the server in the config file, its tools are missing: a divergence, exit 1.
    writeFileSync(join(cwd, 'none.json'), JSON.stringify({ model: 'm' }));
    const without = await troupe(['replay', runId, '--config', 'none.json'], cwd);
    expect(without.code).toBe(1);
    expect(without.stdout).toMatch(/diverged at lead \(.*\) turn 1, a different request: tools: recorded \[.*echo, add.*\], now/);
  });
});
