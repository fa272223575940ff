/**
 * `troupe send`, `stop`, `finish-execution` and `finish-delegation`: requests from outside a run, the same on every
 * store (DESIGN §13). Each is posted to the run's inbox and applied by whoever hosts the run:
 * - another process hosts it (the process driving it, a worker): that host applies it and answers;
 * - nobody does: this command claims the run, hosts it just long enough to apply the request
 *   through its coordinator (hosting/applyHere.ts), and lets it go for its next host.
 * A message is checked against the coordinator's rules before anything is posted to a run nobody
 * hosts (a refusal writes nothing); each refusal has its own exit code.
 * @module
 */
import { isActive } from '../../machines/types.js';
import { messageRefusal } from '../host/mail/messageRules.js';
import { resolveLimits } from '../host/resolveOptions.js';
import { applyHere } from '../hosting/applyHere.js';
import type { RunStore } from '../hosting/runStore.js';
import { ConfigError, TroupeError } from '../errors.js';
import type { InboxKind, InboxResult, RunRow } from '../store/types.js';
import { finishDelegationArgs, finishExecutionArgs, type Io } from './args.js';
import { EXIT, exitCodeFor } from './exitCodes.js';
import { findAgent, findRun, nextHost, openRuns, savedSettings } from './runs.js';
import type { Values } from './flags.js';
import { forTerminal } from './terminal.js';

/** Statuses in which a live agent does not take up a message until something else happens. */
const PARKED_FOR_MAIL = new Set(['budgetPaused']);

const pause = () => new Promise((resolve) => setTimeout(resolve, 100));

/** The exit code of a refusal the run answered (older answers carry the code only as a prefix). */
const refusalExit = (result: InboxResult) => exitCodeFor(result.code ?? /^([A-Z_]+):/.exec(result.message)?.[1]);

interface Outside {
  kind: InboxKind;
  payload: Record<string, unknown>;
  /** The run it goes to, if the request names it (else `--run`, else the latest main run). */
  runOf?: (runs: RunStore) => Promise<string | undefined>;
  /** Refused before anything is posted to a run nobody hosts (the rules its host would apply). */
  check?: (runs: RunStore, run: RunRow) => Promise<void>;
  /** What the answer means once applied to a run nobody hosts (its next host carries on). */
  idle?: (result: InboxResult) => string;
}

/**
 * Post a request to its run and report the answer. Hosted elsewhere: wait (up to `waitMs`) for the
 * host's answer, and for a message until it is in the agent's session ("delivered") unless the
 * agent is parked where a message does not wake it. Nobody hosts it: apply it here.
 */
export async function outside(values: Values, io: Io, request: Outside, waitMs = 15_000): Promise<number> {
  const runs = await openRuns(values, io);
  try {
    const run = await findRun(runs, values.run ?? (await request.runOf?.(runs)));
    const post = () => runs.post({ runId: run.id, kind: request.kind, payload: request.payload, at: Date.now() });
    if (!(await runs.hostOf(run.id)).hosted) await request.check?.(runs, run);
    const claim = await runs.claim(run.id);
    if (claim === null) return await answered(runs, await post(), io, waitMs);
    let id: number;
    try {
      id = await post();
    } catch (err) {
      await claim.release({ state: 'runnable' });
      throw err;
    }
    const limits = (await savedSettings(runs, run.id)).limits;
    const result = (await applyHere(claim, limits ? { limits } : {})).get(id);
    if (!result) throw new TroupeError('RUN_NOT_LIVE', `request ${id} to run ${run.id} was not applied`);
    if (!result.ok) return refused(result, io);
    io.out.write(`${forTerminal(request.idle?.(result) ?? result.message)}\n`);
    return EXIT.OK;
  } finally {
    await runs.close();
  }
}

function refused(result: InboxResult, io: Io): number {
  io.err.write(`troupe: ${forTerminal(result.message)}\n`);
  return refusalExit(result);
}

/** Wait for the answer of the process hosting the run. */
async function answered(runs: RunStore, id: number, io: Io, waitMs: number): Promise<number> {
  const deadline = Date.now() + waitMs;
  let result: InboxResult | null = null;
  while (result === null && Date.now() < deadline) {
    result = (await runs.request(id))?.result ?? null;
    if (result === null) await pause();
  }
  if (result === null) {
    io.out.write(`posted to the live run; it has not answered within ${waitMs / 1000} s (its host applies requests while it runs)\n`);
    return EXIT.OK;
  }
  if (!result.ok) return refused(result, io);
  if (result.messageId === undefined) {
    io.out.write(`${forTerminal(result.message)}\n`);
    return EXIT.OK;
  }
  for (;;) {
    const delivery = await runs.delivery(result.messageId);
    if (delivery?.deliveredAt != null) {
      io.out.write(`${forTerminal(result.message.replace(/^queued for/, 'delivered to'))}\n`);
      return EXIT.OK;
    }
    if (delivery === undefined || PARKED_FOR_MAIL.has(delivery.agentStatus) || Date.now() >= deadline) {
      const why = delivery ? ` (${forTerminal(delivery.agentStatus)})` : '';
      io.out.write(`${forTerminal(result.message)}: it waits in the agent's mailbox${why} and is read at its next turn\n`);
      return EXIT.OK;
    }
    await pause();
  }
}

export function send(args: string[], values: Values, io: Io): Promise<number> {
  const [agent, text] = args;
  if (!agent || !text) throw new ConfigError('Usage: troupe send <agent> "<text>"');
  return outside(values, io, {
    kind: 'send',
    payload: { agent, content: text },
    async check(runs, run) {
      const target = await findAgent(runs, run, agent);
      const agents = await runs.reads.listAgents(run.id);
      const pending = (await runs.reads.listMessages(run.id)).filter((m) => m.to === target.id && m.deliveredAt === null).length;
      // The rules a host's coordinator applies, with the limits the run was started with.
      const refusal = messageRefusal(target, text, {
        interactive: run.interactive,
        limits: resolveLimits((await savedSettings(runs, run.id)).limits),
        fromUser: true,
        pending: () => pending,
        parentActiveChildren: () => agents.filter((a) => a.parentId === target.parentId && isActive(a.status)).length,
      });
      if (refusal) throw refusal;
    },
    idle: (result) => `${result.message}: no process is running this run; the agent reads it once ${nextHost(values)} hosts the run`,
  });
}

export function stop(args: string[], values: Values, io: Io): Promise<number> {
  const [agent] = args;
  if (!agent) throw new ConfigError('Usage: troupe stop <agent>');
  return outside(values, io, {
    kind: 'stop',
    payload: { agent },
    check: async (runs, run) => void (await findAgent(runs, run, agent)),
  });
}

/**
 * `troupe finish-execution <id> completed|failed [result]`: the end of an async execution a tool
 * started (its result said `execution <uuid> running`), from any process. It is applied once, and
 * the agent that started it continues with the result (at once if the run is hosted, else once it is).
 */
export function finishExecution(args: string[], values: Values, io: Io): Promise<number> {
  const { id, status, result } = finishExecutionArgs(args);
  return outside(values, io, {
    kind: 'execution',
    payload: { execution: id, status, result },
    async runOf(runs) {
      const runId = await runs.runOfExecution(id);
      if (runId === undefined) throw new TroupeError('EXECUTION_NOT_FOUND', `No agent in ${runs.label} linked an execution ${id}`);
      return runId;
    },
    async check(runs, run) {
      const row = await runs.reads.getExecution(id);
      const agent = row && (await runs.reads.listAgents(run.id)).find((a) => a.id === row.agentId);
      if (!agent) throw new TroupeError('EXECUTION_NOT_FOUND', `No agent of run ${run.id} linked an execution ${id}`);
    },
    idle: (answer) => (/nothing changed$/.test(answer.message) ? answer.message : `${answer.message}, once ${nextHost(values)} hosts the run`),
  });
}

/**
 * `troupe finish-delegation <agent> <delegation> completed|failed [result]`: the end of background
 * work an agent delegated (`coordinator.delegations.dispatch`), from any process. It is applied
 * once; the agent is messaged the result (at once if the run is hosted, else once it is).
 */
export function finishDelegation(args: string[], values: Values, io: Io): Promise<number> {
  const { agent, delegation, status, result } = finishDelegationArgs(args);
  return outside(values, io, {
    kind: 'delegation',
    payload: { agent, delegation, status, result },
    async check(runs, run) {
      const target = await findAgent(runs, run, agent);
      const rows = await runs.reads.listDelegations(run.id);
      if (!rows.some((d) => d.sessionId === target.id && d.delegationId === delegation))
        throw new TroupeError('AGENT_NOT_FOUND', `${target.name} (${target.id}) has no delegation ${delegation} in run ${run.id}`);
    },
    idle: (answer) => (/nothing changed$/.test(answer.message) ? answer.message : `${answer.message}, once ${nextHost(values)} hosts the run`),
  });
}
