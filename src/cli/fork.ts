/**
 * `troupe fork <run> --at <agent>:<turn>`: a new run from a committed point of another
 * (fork/fork.ts), written under a claim of the new run — on SQLite the file's owner lock, on
 * PostgreSQL the new run's lease, let go parked so that the user decides when it continues.
 * @module
 */
import { ConfigError, TroupeError } from '../errors.js';
import { forkRun, type ForkPoint } from '../fork/fork.js';
import type { Io } from './args.js';
import { EXIT } from './exitCodes.js';
import type { Values } from './flags.js';
import { freshRunId } from '../fork/remap.js';
import { openRuns } from './runs.js';

/** `<agent>:<turn>`: the agent's name or id, and a turn ≥ 0. */
export function parseForkPoint(at: string | undefined): ForkPoint {
  const colon = at?.lastIndexOf(':') ?? -1;
  const turn = at === undefined ? NaN : Number(at.slice(colon + 1));
  if (at === undefined || colon <= 0 || !/^\d+$/.test(at.slice(colon + 1)) || !Number.isSafeInteger(turn)) {
    throw new ConfigError(`Expected --at <agent>:<turn> (an agent's name or id and a turn ≥ 0), got ${at === undefined ? 'nothing' : JSON.stringify(at)}`);
  }
  return { agent: at.slice(0, colon), turn };
}

export async function fork(args: string[], values: Values, io: Io): Promise<number> {
  const [runId] = args;
  if (!runId) throw new ConfigError('Usage: troupe fork <run> --at <agent>:<turn>');
  const at = parseForkPoint(values.at);
  const runs = await openRuns(values, io);
  try {
    const newRunId = freshRunId();
    const claim = await runs.claim(newRunId);
    if (!claim) throw new TroupeError('RUN_LOCKED', `${runs.label} is hosted by another process: fork once it lets the file go`);
    const forked = await forkRun(claim.port, runId, { at, runId: newRunId }).finally(() => undefined);
    // A fork waits for `troupe resume` (a worker would take a runnable one at once); a refusal wrote nothing.
    await claim.release(forked.ok ? { state: 'parked', wakeAt: null } : { state: 'done' });
    if (!forked.ok) throw forked.error;
    const { origin } = forked;
    io.out.write(`${forked.runId}\n`);
    io.err.write(
      `forked ${origin.run} at ${origin.agent}:${origin.turn} (${origin.commits} commits); continue it: troupe resume --run ${forked.runId}${values.db ? ` --db ${values.db}` : ''}\n`,
    );
    return EXIT.OK;
  } finally {
    await runs.close();
  }
}
