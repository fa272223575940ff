/**
 * `npm run crash -- --trials 1000 [--seed N] [--mode default|in-doubt|group] [--normal] [--negative [bug]]`:
 * run the kill -9 harness and print its counts (not a test; see crash.test.ts for the CI run).
 * `--negative` plants the mode's bug (child.ts): ack-early, skip-started or commit-behind.
 */
import { runCrashTrials, type CrashOptions } from './harness.js';
import type { TeamName } from './teams.js';

const args = process.argv.slice(2);
const value = (flag: string, fallback: number) => {
  const i = args.indexOf(flag);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
const text = (flag: string) => {
  const i = args.indexOf(flag);
  const next = i >= 0 ? args[i + 1] : undefined;
  return next === undefined || next.startsWith('--') ? undefined : next;
};

const mode = (text('--mode') ?? 'default') as TeamName;
const NEGATIVE: Record<TeamName, NonNullable<CrashOptions['buggy']>> = { default: 'ack-early', 'in-doubt': 'skip-started', group: 'commit-behind' };
const negative = args.includes('--negative');
const counts = await runCrashTrials({
  trials: value('--trials', 200),
  seed: value('--seed', 1),
  parallel: value('--parallel', 2),
  mode,
  synchronous: args.includes('--normal') ? 'NORMAL' : 'FULL',
  buggy: negative ? ((text('--negative') as CrashOptions['buggy']) ?? NEGATIVE[mode]) : false,
});
console.log(JSON.stringify(counts, null, 2));
process.exit(counts.failingSeeds.length > 0 && !negative ? 1 : 0);
