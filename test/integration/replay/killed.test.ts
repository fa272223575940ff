/**
 * Replay of a run killed with kill -9 mid-run and resumed in another process (issue 37): a team
 * with the crash harness's in-doubt tools runs on a SQLite file in a child (killedChild.ts), is
 * SIGKILLed with a model call in flight, or with a non-idempotent tool's effect in doubt
 * (TOOL_IN_DOUBT on resume), a new child resumes it to its end, and `replayRun` of the file — one
 * recording across both processes and the recovery between them — is identical: the replay kills
 * its own coordinator where the recording's process died and resumes on what it had committed.
 * The real-time team (four workers, latent tools, user messages while they run) replays
 * identically because each user tool's end is a recorded step (0 of 10 before it; mutations: tool
 * ends ignored fails every trial, their commit window ignored fails about 3 in 8), and each
 * mailbox read's count is recorded (`replay.read`): when several workers' reports land in one
 * commit window, the root's woken wait reads as many as the recording's did, however the replay's
 * timings fell. Before the reads were recorded it diverged there in 2 of 30 kills beside two CPU
 * burners (0 of 10 on a quiet machine); with them, 30 of 30 under the burners and 10 of 10 quiet.
 * Mutation, reads ignored by the replay: 2 of 30 kills under the burners diverge at the root's
 * wait count, and every one of 30 kept recordings at the end (a recorded read the code never
 * made). The deterministic check of the reads is test/unit/replay/mailReads.test.ts.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { replayRun } from '../../../src/replay/replayRun.js';
import { openStore } from '../../../src/store/sqliteStore.js';
import { READ_EVENT } from '../../../src/store/types.js';
import { runChild, type KillPlan } from '../crash/runChild.js';
import { killedTeam, type KilledTeamName } from './killedTeam.js';

const CHILD = fileURLToPath(new URL('../../../dist/test/integration/replay/killedChild.js', import.meta.url));
const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

/** Run the team, kill it on `plan`'s line, resume it to its end; the file. */
async function killedAndResumed(plan: KillPlan, seed: number, team: KilledTeamName = 'single'): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'troupe-replay-kill-'));
  dirs.push(dir);
  const path = join(dir, 'run.db');
  const first = await runChild(CHILD, [path, 'start', String(seed), team, `${plan.line}:${plan.count}`], plan, {});
  expect(first.failed).toBeNull();
  expect(first.killed).toBe(true);
  const second = await runChild(CHILD, [path, 'resume', String(seed), team], null, {});
  expect(second.failed).toBeNull();
  expect(second.done).toBe('completed');
  return path;
}

/** The team as the test replays it: its tools (never executed), limits and model name. */
function coordinatorOptions(team: KilledTeamName = 'single') {
  const never = () => new Promise<void>(() => {});
  const options = killedTeam({ random: Math.random, pause: never, print: () => undefined, coordinator: () => null!, effectsPath: '/nonexistent' }, team);
  return { model: { name: options.model.name }, coordinator: { tools: options.tools, limits: options.limits, idleResumeMs: options.idleResumeMs } };
}

describe('replay of a run killed with kill -9 and resumed', () => {
  it.each([
    // The worker's model call has begun (TICK 5: the root's two, the worker's third).
    ['a model call in flight', { line: 'TICK', count: 5, jitter: 0 }, false],
    // Its third answer's `append` (not idempotent) has its `started` row, not its effect.
    ['a tool started, its effect not made', { line: 'TOOL', count: 6, jitter: 0 }, true],
    // Its effect is made and fsynced, its result not recorded.
    ['a tool whose effect is made, its result not recorded', { line: 'EFFECT', count: 6, jitter: 0 }, true],
  ] as const)('killed with %s: replays identically', async (_, plan, inDoubt) => {
    const path = await killedAndResumed(plan, 11);
    const store = openStore({ path, readonly: true });
    try {
      const [run] = store.listRuns();
      const worker = store.listAgents(run!.id).find((a) => a.name === 'w0')!;
      // The resume told the worker its call was cut in doubt (the kill landed where it was meant to).
      expect(JSON.stringify(store.loadSession(worker.id)).includes('TOOL_IN_DOUBT')).toBe(inDoubt);
      const result = await replayRun(store, run!.id, coordinatorOptions());
      expect(result.divergence).toBeNull();
      expect(result.outcome).toBe('identical');
      expect(result.calls).toBe(store.historyOf(run!.id).filter((e) => e.type === 'replay.call').length);
      // The replay's worker ends with the recording's session, the in-doubt result in it.
      expect(result.store.loadSession(worker.id)).toEqual(store.loadSession(worker.id));
    } finally {
      store.close();
    }
  });
});

/** How many killed real-time team runs the test replays (REPLAY_KILL_TRIALS to measure more). */
const TRIALS = Number(process.env.REPLAY_KILL_TRIALS ?? 6);

describe('replay of a real-time team killed with kill -9 and resumed', () => {
  // Four workers whose tools take a few ms, user messages arriving while they run: each tool's end
  // falls among other agents' answers and the inputs as the timings did, in both processes.
  it(`replays identically (${TRIALS} kills at varied points)`, { timeout: 20_000 + TRIALS * 15_000 }, async () => {
    const outcomes: string[] = [];
    for (let trial = 0; trial < TRIALS; trial++) {
      const seed = 101 + trial;
      const plan: KillPlan = trial % 2 === 0 ? { line: 'TICK', count: 6 + (trial % 11), jitter: 0 } : { line: 'TOOL', count: 8 + (trial % 13), jitter: 0 };
      const path = await killedAndResumed(plan, seed, 'team');
      const store = openStore({ path, readonly: true });
      try {
        const [run] = store.listRuns();
        const history = store.historyOf(run!.id);
        const inputs = history.filter((e) => e.type === 'replay.input').length;
        // Reads that took several messages at once: where the root's wait count depended on when it read.
        const reads = history.filter((e) => e.type === READ_EVENT && Number(e.data.count) > 1).length;
        const result = await replayRun(store, run!.id, coordinatorOptions('team'));
        outcomes.push(
          `${plan.line}:${plan.count} inputs=${inputs} reads>1=${reads} ${result.outcome}${result.divergence ? ` ${JSON.stringify(result.divergence)}` : ''}`,
        );
      } finally {
        store.close();
      }
    }
    if (process.env.REPLAY_KILL_TRIALS) process.stderr.write(`${outcomes.join('\n')}\n`);
    // Every kill replays identically: no divergence is tolerated.
    expect(outcomes.filter((o) => !/ identical$/.test(o))).toEqual([]);
  });
});
