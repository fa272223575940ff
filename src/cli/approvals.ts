/**
 * `troupe approvals`, `approve` and `deny`: the steps a run's approval rules hold for a person
 * (host/async/approvals.ts), listed and answered from any process, on every store. An answer is an
 * inbox request like `send` (mail.ts): the run's host applies it once and the approved tool runs
 * there; a run nobody hosts records it, and its next host runs the tool.
 * @module
 */
import { approvalsFromEvents, APPROVAL_EVENT, type ApprovalView } from '../host/async/approvals.js';
import { ConfigError, TroupeError } from '../errors.js';
import type { Io } from './args.js';
import { EXIT } from './exitCodes.js';
import type { Values } from './flags.js';
import { outside } from './mail.js';
import { findRun, nextHost, openRuns } from './runs.js';
import type { RunStore } from '../hosting/runStore.js';
import type { RunRow } from '../store/types.js';
import { forTerminal, jsonLine } from './terminal.js';

async function approvalsOf(runs: Pick<RunStore, 'reads'>, run: RunRow): Promise<ApprovalView[]> {
  const [events, agents] = await Promise.all([runs.reads.eventsOf(run.id, APPROVAL_EVENT), runs.reads.listAgents(run.id)]);
  const names = new Map(agents.map((a) => [a.id, a.name]));
  return approvalsFromEvents(events, (id) => names.get(id) ?? id);
}

const line = (a: ApprovalView) =>
  `${a.id}  ${a.state.padEnd(8)}  ${a.agentName}  ${a.tool} (${a.risk})  ${JSON.stringify(a.answer?.args ?? a.args)}` +
  (a.answer?.reason ? `  reason: ${a.answer.reason}` : '');

/** `troupe approvals [--run] [--json]`: the run's approvals, pending first. */
export async function listApprovals(_args: string[], values: Values, io: Io): Promise<number> {
  const runs = await openRuns(values, io, { readOnly: true });
  try {
    const run = await findRun(runs, values.run);
    const all = await approvalsOf(runs, run);
    const ordered = [...all.filter((a) => a.state === 'pending'), ...all.filter((a) => a.state !== 'pending')];
    if (values.json) io.out.write(`${jsonLine({ runId: run.id, approvals: ordered })}\n`);
    else if (ordered.length === 0) io.out.write(`no approvals in run ${run.id}\n`);
    else io.out.write(`${ordered.map((a) => forTerminal(line(a))).join('\n')}\n`);
    return EXIT.OK;
  } finally {
    await runs.close();
  }
}

/** Refused before anything is posted to a run nobody hosts: the approval must exist there. */
const known = (id: string) => async (runs: RunStore, run: RunRow) => {
  if (!(await approvalsOf(runs, run)).some((a) => a.id === id)) {
    throw new TroupeError('APPROVAL_NOT_FOUND', `run ${run.id} has no approval ${JSON.stringify(id)} (troupe approvals lists them)`);
  }
};

/** `troupe approve <id> [--args <json>]`: the step runs (with these arguments), once. */
export function approve(args: string[], values: Values, io: Io): Promise<number> {
  const [id] = args;
  if (!id) throw new ConfigError('Usage: troupe approve <approval> [--args <json>]');
  let edited: Record<string, unknown> | undefined;
  if (values.args !== undefined) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(values.args);
    } catch (err) {
      throw new ConfigError(`Expected --args to be a JSON object: ${(err as Error).message}`);
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new ConfigError('Expected --args to be a JSON object');
    edited = parsed as Record<string, unknown>;
  }
  return outside(values, io, {
    kind: 'approval',
    payload: { approval: id, approve: true, ...(edited ? { args: edited } : {}) },
    check: known(id),
    idle: (result) => (/nothing changed$/.test(result.message) ? result.message : `${result.message} once ${nextHost(values)} hosts the run`),
  });
}

/** `troupe deny <id> --reason <text>`: the step does not run; the agent is told why. */
export function deny(args: string[], values: Values, io: Io): Promise<number> {
  const [id] = args;
  if (!id || !values.reason?.trim()) throw new ConfigError('Usage: troupe deny <approval> --reason "<why>" (the agent is told)');
  return outside(values, io, {
    kind: 'approval',
    payload: { approval: id, approve: false, reason: values.reason },
    check: known(id),
    idle: (result) => (/nothing changed$/.test(result.message) ? result.message : `${result.message} once ${nextHost(values)} hosts the run`),
  });
}
