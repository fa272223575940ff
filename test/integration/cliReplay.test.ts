/**
 * `troupe replay` (issue 37): the demo — the real openai client against the fake server, a real
 * SQLite file, a real clock — replays identically from its database; an unknown run is a typed
 * RUN_NOT_FOUND (exit 4). With --live-from, a run recorded against one server replays up to the
 * chosen turn and is answered from there by another.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/sqliteStore.js';
import { createFakeOpenAIServer } from '../../src/testing/fakeOpenAIServer.js';
import { jsonLines, troupe, workdir } from '../helpers/cli.js';

describe('troupe replay', () => {
  it('replays the demo run identically, and refuses an unknown run with RUN_NOT_FOUND', async () => {
    const cwd = workdir();
    const demo = await troupe(['demo', '--json'], cwd);
    expect(demo.code).toBe(0);
    const runId = jsonLines(demo.stdout).find((l) => typeof l.runId === 'string')!.runId as string;
    const replayed = await troupe(['replay', runId, '--db', '.troupe/demo.db', '--json'], cwd);
    expect(replayed.stderr).toBe('');
    expect(replayed.code).toBe(0);
    const [line] = jsonLines(replayed.stdout);
    expect(line).toMatchObject({ runId, outcome: 'identical', divergence: null });
    expect(line!.calls).toBeGreaterThan(10);
    const unknown = await troupe(['replay', 'run_nope', '--db', '.troupe/demo.db'], cwd);
    expect(unknown.code).toBe(4);
    expect(unknown.stderr).toContain('RUN_NOT_FOUND');
  });

  it('--live-from: the recording is checked up to the turn, the live model answers from it; bad points and strays are refused', async () => {
    await using recorded = await createFakeOpenAIServer([
      { message: { toolCalls: [{ name: 'view_agent_graph', arguments: {} }] } },
      { message: { toolCalls: [{ name: 'finish', arguments: { summary: 'recorded ending' } }] } },
    ]);
    const cwd = workdir();
    const run = await troupe(['run', 'Say hello', '--model', 'm', '--base-url', recorded.url, '--api-key', 'k', '--json'], cwd);
    expect(run.code, run.stderr).toBe(0);
    const store = openStore({ path: join(cwd, '.troupe/troupe.db'), readonly: true });
    const runId = store.listRuns().at(-1)!.id;
    const root = store.listAgents(runId)[0]!;
    store.close();
    await using live = await createFakeOpenAIServer([{ message: { toolCalls: [{ name: 'finish', arguments: { summary: 'live ending' } }] } }]);
    // By name: turn 1 replayed from the recording, turn 2 asked of the live server.
    const byName = await troupe(['replay', runId, '--live-from', `${root.name}:2`, '--base-url', live.url, '--json'], cwd, {
      OPENAI_API_KEY: 'sk-live-secret',
    });
    expect(byName.code, byName.stderr).toBe(0);
    expect(jsonLines(byName.stdout)[0]).toMatchObject({ runId, outcome: 'live', divergence: null, calls: 1 });
    expect(live.requests).toHaveLength(1);
    expect(live.requests[0]!.headers.authorization).toBe('Bearer sk-live-secret');
    expect(JSON.stringify(live.requests[0]!.body)).toContain('view_agent_graph');
    expect(recorded.requests).toHaveLength(2);
    // By id, in text.
    await using again = await createFakeOpenAIServer([{ message: { toolCalls: [{ name: 'finish', arguments: { summary: 'live ending' } }] } }]);
    const byId = await troupe(['replay', runId, '--live-from', `${root.id}:2`, '--base-url', again.url], cwd);
    expect(byId.stdout).toContain(`identical up to ${root.name}'s turn 2 (1 model calls`);
    expect(byId.code).toBe(0);
    // Refused with exit 2 or 4, asking nothing of any server.
    const before = [live.requests.length, again.requests.length];
    expect((await troupe(['replay', runId, '--live-from', 'nobody'], cwd)).code).toBe(2);
    expect((await troupe(['replay', runId, '--base-url', live.url], cwd)).code).toBe(2);
    const stranger = await troupe(['replay', runId, '--live-from', 'nobody:1', '--base-url', live.url], cwd);
    expect([stranger.code, stranger.stderr]).toEqual([4, expect.stringContaining('AGENT_NOT_FOUND')]);
    expect([live.requests.length, again.requests.length]).toEqual(before);
  });
});
