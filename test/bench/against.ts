/**
 * `npm run bench:against -- <git ref> [rounds]`: this checkout against an older commit, measured in
 * the same session. This VM's speed varies up to ~4× between days and ~1.6× between processes, so
 * a figure is only comparable with a baseline taken beside it: the two builds run in alternating
 * fresh processes (againstChild.ts), `rounds` times each (default 3), and the ratio of their
 * medians is the finding. The ref is checked out as a git worktree in the temp folder, installed
 * from its own lock file (`npm ci`) and built once; later runs reuse it (`git worktree remove` it
 * when done).
 * @module
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { median } from './workloads.js';

const [ref, roundsArg] = process.argv.slice(2);
const rounds = Number(roundsArg ?? 3);
if (!ref || !Number.isInteger(rounds) || rounds < 1) {
  process.stderr.write('usage: npm run bench:against -- <git ref> [rounds]\n');
  process.exit(2);
}
const repo = fileURLToPath(new URL('../../../', import.meta.url));
const run = (cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = process.env) =>
  execFileSync(cmd, args, { cwd, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();

let sha: string;
try {
  sha = run('git', ['rev-parse', '--verify', '--quiet', `${ref}^{commit}`], repo);
} catch {
  process.stderr.write(`bench:against: ${ref} is not a commit of this repository\n`);
  process.exit(2);
}
const tree = join(tmpdir(), `troupe-against-${sha.slice(0, 12)}`);
if (!existsSync(join(tree, 'dist'))) {
  process.stderr.write(`building ${ref} (${sha.slice(0, 12)}) in ${tree}\n`);
  if (!existsSync(tree)) run('git', ['worktree', 'add', '--detach', tree, sha], repo);
  run('npm', ['ci', '--no-audit', '--no-fund'], tree);
  run('npm', ['run', 'build', '--silent'], tree);
}

const child = fileURLToPath(new URL('./againstChild.js', import.meta.url));
const builds = [
  { name: ref, dist: join(tree, 'dist') },
  { name: 'this checkout', dist: join(repo, 'dist') },
];

const units = {
  solo: ['µs per in-memory turn, steady state', 'first 25 runs'],
  durable: ['µs per durable turn (SQLite FULL), after a warm-up', 'first run'],
  fanout: ['ms for 1,000 children × 5 turns, durable FULL', 'first run'],
  resume: ["ms to resume that team's finished run from its file", 'first open'],
  loop: ['ms of event-loop delay, p99, while a durable FULL team of 200 children × 5 turns runs', 'first run'],
} as const;
// AGAINST_METRICS=loop,durable measures only those.
const chosen = process.env.AGAINST_METRICS?.split(',');
for (const metric of (['solo', 'durable', 'fanout', 'resume', 'loop'] as const).filter((m) => !chosen || chosen.includes(m))) {
  const values = builds.map(() => [] as number[]);
  const colds = builds.map(() => [] as number[]);
  for (let r = 0; r < rounds; r++) {
    builds.forEach((b, i) => {
      const out = JSON.parse(run(process.execPath, [child, b.dist, metric], repo, { ...process.env, NODE_ENV: 'production' })) as {
        value: number;
        cold: number;
      };
      values[i]!.push(out.value);
      colds[i]!.push(out.cold);
    });
  }
  const [unit, coldName] = units[metric];
  const [before, after] = [median(values[0]!), median(values[1]!)];
  process.stdout.write(`${unit} (median of ${rounds} alternating processes each):\n`);
  builds.forEach((b, i) =>
    process.stdout.write(
      `  ${b.name.padEnd(14)} ${median(values[i]!).toFixed(1).padStart(7)} (per process ${values[i]!.map((v) => v.toFixed(1)).join(', ')}; ` +
        `${coldName} ${median(colds[i]!).toFixed(1)})\n`,
    ),
  );
  process.stdout.write(`  ratio          ${(after / before).toFixed(2)}× (this checkout ÷ ${ref})\n`);
}
