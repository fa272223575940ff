/**
 * A child process for the replay-after-kill test (killed.test.ts; not a test itself, run compiled
 * from dist/): its team (killedTeam.ts) on a SQLite file, printing the crash harness's progress
 * lines (crash/runChild.ts reads them).
 *
 *   node dist/test/integration/replay/killedChild.js <db> <start|resume> <seed> <single|team> [<line>:<count>]
 *
 * start: `<line>:<count>` freezes the team on the `count`-th `line` (TICK: a model call
 * has begun; TOOL: an append tool's `started` row is committed, its effect not yet made; EFFECT:
 * its effect is made, its result not yet recorded) — every later pause of the team never ends, so
 * the parent's SIGKILL, however late it lands, finds that call still in flight. resume: resume the
 * run to its end and print `DONE <status>`. In both, the team's senders (if any) send user
 * messages to running agents until none is left.
 */
import { createCoordinator, type Coordinator } from '../../../src/host/createCoordinator.js';
import { resumeCoordinator } from '../../../src/host/resumeCoordinator.js';
import { portOf, type StorePort } from '../../../src/store/port.js';
import { openStore } from '../../../src/store/sqliteStore.js';
import { killedTeam, type KilledTeamName } from './killedTeam.js';
import { effectsFile } from '../crash/effects.js';

const [path, mode, seedText, teamName, freeze] = process.argv.slice(2) as [string, string, string, KilledTeamName, string | undefined];
const [freezeLine, freezeCount] = (freeze ?? ':0').split(':') as [string, string];
let seed = Number(seedText) >>> 0 || 1;
const random = () => (seed = (seed * 1664525 + 1013904223) >>> 0) / 2 ** 32;
const seen = new Map<string, number>();
let frozen = false;
const print = (line: string) => {
  const n = (seen.get(line) ?? 0) + 1;
  seen.set(line, n);
  if (mode === 'start' && line === freezeLine && n === Number(freezeCount)) frozen = true;
  process.stdout.write(`${line}\n`);
};
const pause = (ms: number) => (frozen ? new Promise<void>(() => {}) : new Promise<void>((resolve) => setTimeout(resolve, ms)));

let coordinator: Coordinator<StorePort> | undefined;
const { senders, sendGapMs, ...options } = killedTeam({ random, pause, print, coordinator: () => coordinator!, effectsPath: effectsFile(path) }, teamName);

/** One sender: a user message to a running worker (its tools under way), a pause, again, until none is running. */
async function sendUserMessages(c: Coordinator<StorePort>, sender: number): Promise<void> {
  for (let i = 0; ; i++) {
    await pause(1 + random() * sendGapMs);
    const targets = c.list().filter((a) => a.parentId !== null && a.status === 'running');
    if (targets.length === 0) return;
    const target = targets[Math.floor(random() * targets.length)]!;
    // Refused (the agent finished meanwhile): the next one.
    await c.send(target.id, { content: `user note ${mode}-${sender}-${i}` }).catch(() => undefined);
  }
}

async function main(): Promise<void> {
  print('BOOT');
  const store = openStore({ path });
  const port = portOf(store);
  print('OPEN');
  if (mode === 'start') {
    const c = createCoordinator({ ...options, store: port });
    coordinator = c;
    await c.start({ name: 'lead', task: 'split the job' });
    for (let i = 0; i < senders; i++) void sendUserMessages(c, i);
    print('RUN');
    await new Promise(() => {}); // until killed
  }
  const c = await resumeCoordinator({ ...options, store: port });
  coordinator = c;
  print('RESUMED');
  for (let i = 0; i < senders; i++) void sendUserMessages(c, i);
  const root = c.list().find((a) => a.parentId === null)!;
  const end = await c.waitFor(root.id, ['completed', 'failed', 'crashed', 'stopped'], { timeoutMs: 20_000 });
  await c.whenIdle();
  print(`DONE ${end.status}`);
  await c.shutdown();
  store.close();
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`child failed: ${String((err as Error)?.stack ?? err)}\n`);
    process.exit(3);
  },
);
