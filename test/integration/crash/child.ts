/**
 * Crash-harness child process (not a test; run by harness.ts from the compiled dist/).
 *
 *   node dist/test/integration/crash/child.js <db> <start|resume|recover-loop|own> <seed> [FULL|NORMAL][+thread|+auto] [default|in-doubt|group]
 *
 * `+thread`: the store commits on a worker thread (`openStore({ commitThread: true })`). `+auto`:
 * on the main thread, then on the thread from a point 0-49 ms after its first commit (by the seed), as
 * `'auto'` moves them (with thresholds every commit meets, so the move is certain). Neither: on
 * the main thread only.
 *
 * start: a root spawns workers (the team of the trial mode, see teams.ts); meanwhile this process
 * sends user messages and prints `ACK <id>` once `send()` has resolved (the message is committed).
 * resume: resumeCoordinator and run to the end, printing `DONE <status>`. recover-loop: run the
 * recovery transaction in a loop (to be killed inside it). own: try to own the file; print
 * `LEADER` and hold it, or `REFUSED` on RUN_LOCKED.
 *
 * Planted bugs (negative controls), by BUGGY=:
 * - `ack-early`: the ACK is printed before the message is sent (a write-behind acknowledgement).
 * - `skip-started`: the in-doubt ledger's `started` rows never reach the store (a runtime that
 *   runs a tool before its ledger row is durable, or forgets it): a call cut by a crash then
 *   looks never started.
 * - `commit-behind`: the store port resolves a commit at once and applies it a moment later
 *   (a port that acknowledges before the transaction is durable).
 *
 * Progress lines, which the harness counts to time its kill (by events, not by the clock, so the
 * kill lands at the same point of the run on a quiet and on a loaded machine): `BOOT` once the
 * code is loaded, `OPEN` once the file is open, `RUN` once the run and its root exist (start) or
 * `RESUMED` once recovery and the respawn are done (resume), `TICK` at every model call of a
 * worker (or every pass of the recovery loop), `TOOL` / `EFFECT` around an append tool's side
 * effect, and in group mode `GROUP <agents> <message ids>` / `GROUPED` around a commit of several
 * agents' writes.
 */
import { createCoordinator, type Coordinator } from '../../../src/host/createCoordinator.js';
import { recoverRun, resumeCoordinator } from '../../../src/host/resumeCoordinator.js';
import { portOf, type StorePort, type WriteOp } from '../../../src/store/port.js';
import { openStore } from '../../../src/store/sqliteStore.js';
import { team as teamOf, type TeamName } from './teams.js';
import { effectsFile } from './effects.js';

const [path, mode, seedText, sync, teamArg] = process.argv.slice(2) as [string, string, string, string | undefined, string | undefined];
let seed = Number(seedText) >>> 0 || 1;
const random = () => (seed = (seed * 1664525 + 1013904223) >>> 0) / 2 ** 32;
const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const print = (line: string) => void process.stdout.write(`${line}\n`);
const BUGGY = process.env.BUGGY ?? '';
const teamName = (teamArg ?? 'default') as TeamName;

/** The live coordinator (the delegate tool dispatches through it). */
let coordinator: Coordinator<StorePort> | undefined;

const team = teamOf(teamName, { random, pause, print, coordinator: () => coordinator!, effectsPath: effectsFile(path) }, Number(seedText));
const options = { model: team.model, tools: team.tools, limits: team.limits, idleResumeMs: 60_000 };

/** The agents whose rows a write touches. */
function agentOf(w: WriteOp): string | null {
  switch (w.op) {
    case 'registerAgent':
      return w.agent.id;
    case 'updateAgent':
      return w.id;
    case 'enqueueMessage':
      return w.message.to;
    case 'markDelivered':
    case 'appendSession':
    case 'replaceSession':
    case 'finishToolCalls':
      return w.agentId;
    case 'recordUsage':
    case 'startToolCall':
      return w.row.agentId;
    default:
      return null;
  }
}

/**
 * The port the coordinator writes through: the file's, seen (group mode prints the commits that
 * carry several agents' writes) or broken on purpose (the planted bugs).
 */
function portFor(store: ReturnType<typeof openStore>): StorePort {
  const inner = portOf(store);
  const port: StorePort = Object.create(inner) as StorePort;
  port.commit = (ops) => {
    const kept = BUGGY === 'skip-started' ? ops.filter((w) => w.op !== 'startToolCall') : ops;
    const agents = teamName === 'group' ? new Set(kept.map(agentOf).filter((a) => a !== null)).size : 0;
    const apply = () => {
      // The messages the group carries: all or none of them may be on the file after a kill inside it.
      if (agents >= 2) print(`GROUP ${agents} ${kept.flatMap((w) => (w.op === 'enqueueMessage' ? [w.message.id] : [])).join(',')}`);
      // Durable once it resolves: at once on the main thread (synchronous inside), when the commit
      // thread answers on it. GROUPED is printed then, before anything chained on the commit runs.
      const done = inner.commit(kept);
      return agents >= 2 ? done.then(() => print('GROUPED')) : done;
    };
    if (BUGGY === 'commit-behind') {
      setTimeout(() => void apply().catch(() => undefined), 10);
      return Promise.resolve();
    }
    if (teamName !== 'group') return apply();
    // Group mode: asynchronous, as a networked store's commit would be (it resolves in a later
    // macrotask, not at once), so that anything let out before the commit resolves (an effect run
    // early) gets the chance to show before a kill lands inside the commit.
    return new Promise<void>((resolve, reject) => setImmediate(() => void apply().then(resolve, reject)));
  };
  return port;
}

async function sendUserMessages(c: Coordinator<StorePort>, sender: number): Promise<void> {
  for (let i = 0; ; i++) {
    await pause(2 + random() * team.sendGapMs);
    const targets = c.list().filter((a) => a.status === 'running' || a.status === 'waiting');
    if (targets.length === 0) return;
    const target = targets[Math.floor(random() * targets.length)]!;
    const content = `user note ${seedText}-${sender}-${i}`;
    if (BUGGY === 'ack-early') {
      // The planted bug: a write-behind that acknowledges at once and commits a moment later.
      print(`ACK ${content}`);
      await pause(20);
    }
    try {
      await c.send(target.id, { content });
    } catch {
      // Refused (the agent finished meanwhile): not acknowledged. The buggy mode takes back its early ACK.
      if (BUGGY === 'ack-early') print(`NACK ${content}`);
      continue;
    }
    if (BUGGY !== 'ack-early') print(`ACK ${content}`);
  }
}

/** The owning store of `own` mode, kept referenced for the life of the process. */
export let owned: unknown;

async function main(): Promise<void> {
  if (mode === 'own') {
    try {
      owned = openStore({ path }); // kept referenced: a collected connection would release the lock
    } catch (err) {
      if ((err as { code?: string }).code === 'RUN_LOCKED') {
        process.stdout.write('REFUSED\n');
        return;
      }
      throw err;
    }
    process.stdout.write('LEADER\n');
    setInterval(() => {}, 1 << 30); // stay alive, holding the lock, until killed
    return new Promise(() => {});
  }
  print('BOOT');
  const commitThread = sync?.endsWith('+thread') ? true : sync?.endsWith('+auto') ? { windowMs: seed % 50, share: 0, commitMs: 0 } : false;
  const store = openStore({ path, synchronous: sync?.startsWith('NORMAL') ? 'NORMAL' : 'FULL', commitThread });
  const port = portFor(store);
  print('OPEN');
  if (mode === 'recover-loop') {
    for (;;) {
      await recoverRun(port, undefined, {});
      print('TICK');
    }
  }
  if (mode === 'start') {
    const c = createCoordinator({ ...options, store: port });
    coordinator = c;
    const rootId = await c.start({ name: 'lead', task: 'split the job' });
    print('RUN');
    for (let i = 0; i < team.senders; i++) void sendUserMessages(c, i);
    await c.waitFor(rootId, ['completed', 'failed', 'crashed', 'stopped']);
    print(`DONE ${c.get(rootId).status}`);
    return;
  }
  const c = await resumeCoordinator({ ...options, store: port });
  coordinator = c;
  print('RESUMED');
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
