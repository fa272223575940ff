/**
 * `troupe replay` (issue 37): the demo — the real openai client against the fake server, a real
 * SQLite file, a real clock — replays identically from its database; an unknown run is a typed
 * RUN_NOT_FOUND (exit 4).
 */
import { describe, expect, it } from 'vitest';
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
});
