/**
 * How a host lets a run go after a clean shutdown, decided from its rows: done, parked until its
 * earliest idle deadline, or hosted on (something woke while it was being let go).
 * @module
 */
import { approvalsFromEvents, APPROVAL_EVENT } from '../host/async/approvals.js';
import { idleDeadline, TERMINAL_STATUSES } from '../../machines/types.js';
import type { ReleaseState } from '../store/postgres/lease.js';
import type { StorePort } from '../store/port.js';
import type { AgentRow } from '../store/types.js';

/** The earliest idle deadline of agents waiting on agents (what wakes a parked run), or null. */
export function nextDeadline(agents: readonly AgentRow[], idleResumeMs: number): number | null {
  let next: number | null = null;
  for (const a of agents) {
    const at = idleDeadline(a.status, a, idleResumeMs);
    if (at !== null && (next === null || at < next)) next = at;
  }
  return next;
}

/** How to let a run go, from its rows after a clean shutdown. */
function releaseStateOf(agents: readonly AgentRow[], interactive: boolean, idleResumeMs: number): ReleaseState {
  const terminal = new Set<string>(TERMINAL_STATUSES);
  const root = agents.find((a) => a.parentId === null);
  if (agents.every((a) => terminal.has(a.status)) || (!interactive && root && terminal.has(root.status))) return { state: 'done' };
  return { state: 'parked', wakeAt: nextDeadline(agents, idleResumeMs) };
}

/** Whether a waiting or stalled agent has undelivered mail (it is woken by it: not a run to let go). */
function hasMailFor(agents: readonly AgentRow[], pending: readonly { to: string }[]): boolean {
  const parked = new Set(agents.filter((a) => a.status === 'waiting' || a.status === 'stalled').map((a) => a.id));
  return pending.some((m) => parked.has(m.to));
}

/**
 * How to let a run go after a clean shutdown, read from its rows: runnable when an agent is running
 * or mail waits for a parked one, or an approval was answered yes and its tool has not run
 * (someone must host it on), else done or parked until its deadline.
 */
export async function releaseStateAfter(
  port: Pick<StorePort, 'getRun' | 'listAgents' | 'pendingMessagesOf' | 'eventsOf'>,
  runId: string,
  idleResumeMs: number,
): Promise<ReleaseState> {
  const run = await port.getRun(runId);
  const rows = await port.listAgents(runId);
  if (rows.some((a) => a.status === 'running') || hasMailFor(rows, await port.pendingMessagesOf(runId))) return { state: 'runnable' };
  const approved = approvalsFromEvents(await port.eventsOf(runId, APPROVAL_EVENT), (id) => id).some((a) => a.state === 'approved');
  if (approved) return { state: 'runnable' };
  return releaseStateOf(rows, run?.interactive ?? false, idleResumeMs);
}
