/**
 * `npm run crash -- --trials 1000 [--seed N] [--normal] [--negative]`: run the kill -9 harness and
 * print its counts (not a test; see crash.test.ts for the CI run).
 */
import { runCrashTrials } from './harness.js';

const args = process.argv.slice(2);
const value = (flag: string, fallback: number) => {
  const i = args.indexOf(flag);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};

const counts = await runCrashTrials({
  trials: value('--trials', 200),
  seed: value('--seed', 1),
  parallel: value('--parallel', 2),
  synchronous: args.includes('--normal') ? 'NORMAL' : 'FULL',
  buggy: args.includes('--negative'),
});
console.log(JSON.stringify(counts, null, 2));
process.exit(counts.failingSeeds.length > 0 && !args.includes('--negative') ? 1 : 0);
