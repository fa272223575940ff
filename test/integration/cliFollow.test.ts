/**
 * `troupe follow`: a run's live stream on the terminal from another process (issue 38). The demo
 * runs in one process while another follows its file from its first event to its end; a follow
 * after the end reads the same stream, `--after` picks up exactly after a seq, and the text form
 * says each status change and what agents said.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/sqliteStore.js';
import { spawnTroupe, troupe, workdir } from '../helpers/cli.js';

interface Line {
  seq: number;
  type: string;
  agentId?: string;
  name?: string;
  to?: string;
}

const parse = (stdout: string): Line[] =>
  stdout
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Line);

describe('troupe follow', { timeout: 120_000 }, () => {
  it('follows the demo from another process to its end; --after resumes exactly after a seq; text lines say what happened', async () => {
    const cwd = workdir();
    const db = join(cwd, '.troupe', 'demo.db');
    const demo = spawnTroupe(['demo', '--json'], cwd);
    // The follower starts as soon as the run exists: the demo is still going (or just done).
    await expect.poll(() => existsSync(db) && openStore({ path: db, readonly: true }).listRuns().length > 0, { timeout: 30_000, interval: 20 }).toBe(true);
    const followed = await troupe(['follow', '--db', db, '--json'], cwd);
    expect(await demo.exited).toEqual({ code: 0, signal: null });
    expect(followed.code, followed.stderr).toBe(0);
    const lines = parse(followed.stdout);

    const store = openStore({ path: db, readonly: true });
    const run = store.listRuns().at(-1)!;
    const rows = store.readStream(run.id, 0, 100_000);
    const root = store.listAgents(run.id).find((a) => a.id === run.rootId)!;
    store.close();
    // From the first event to the end, nothing missed, nothing twice: exactly the committed stream.
    expect(lines.map((l) => l.seq)).toEqual(rows.map((_, i) => i + 1));
    expect(lines.map((l) => [l.seq, l.type, l.agentId ?? null])).toEqual(rows.map((r) => [r.seq, r.type, r.agentId]));
    expect(lines.some((l) => l.type === 'agent.status' && l.agentId === root.id && l.to === 'completed')).toBe(true);

    const rest = await troupe(['follow', '--db', db, '--json', '--after', '5'], cwd);
    expect(rest.code, rest.stderr).toBe(0);
    expect(parse(rest.stdout).map((l) => l.seq)).toEqual(lines.slice(5).map((l) => l.seq));

    const text = await troupe(['follow', '--db', db], cwd);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toMatch(new RegExp(`^${root.name} +running → completed$`, 'm'));
    expect(text.stderr).toMatch(/^following run run_\S+ of .* after event 0/m);
    expect(text.stderr).toMatch(new RegExp(`is over \\(last event ${rows.length}\\)`));

    const bad = await troupe(['follow', '--db', db, '--after', 'soon'], cwd);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/after/);
  });
});
