/**
 * `troupe fork <run> --at <agent>:<turn>`: a new run from a committed point of another
 * (fork/fork.ts), written under a claim of the new run (forkClaimed).
 * @module
 */
import { ConfigError } from '../errors.js';
import { forkClaimed, type ForkPoint } from '../fork/fork.js';
import type { Io } from './args.js';
import { EXIT } from './exitCodes.js';
import type { Values } from './flags.js';
import { openRuns } from './runs.js';

/** `<agent>:<turn>` given to `flag` (fork's --at, replay's --live-from): the agent's name or id, and a turn ≥ 0. */
export function parseAgentTurn(at: string | undefined, flag = '--at'): ForkPoint {
  const colon = at?.lastIndexOf(':') ?? -1;
  const turn = at === undefined ? NaN : Number(at.slice(colon + 1));
  if (at === undefined || colon <= 0 || !/^\d+$/.test(at.slice(colon + 1)) || !Number.isSafeInteger(turn)) {
    throw new ConfigError(`Expected ${flag} <agent>:<turn> (an agent's name or id and a turn ≥ 0), got ${at === undefined ? 'nothing' : JSON.stringify(at)}`);
  }
  return { agent: at.slice(0, colon), turn };
}

export async function fork(args: string[], values: Values, io: Io): Promise<number> {
  const [runId] = args;
  if (!runId) throw new ConfigError('Usage: troupe fork <run> --at <agent>:<turn>');
  const at = parseAgentTurn(values.at);
  const runs = await openRuns(values, io);
  try {
    const forked = await forkClaimed(runs, runId, at);
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
