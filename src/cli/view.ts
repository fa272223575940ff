/**
 * How the CLI puts runs into words: the tree and the budget bar (`troupe tree`, `status` and the
 * live view), what agents do (`activityText`), and one line per event for piped output. The live
 * view itself is in liveView.ts.
 * @module
 */
import type { ApprovalView } from '../host/async/approvals.js';
import type { BudgetState, Coordinator } from '../host/createCoordinator.js';
import type { TreeNode } from '../host/views/registry.js';
import type { AgentActivity, AgentInfo, TroupeEvent } from '../host/runtime.js';
import { forTerminal } from './terminal.js';

export type ViewMode = 'tty' | 'lines' | 'json';

export interface Output {
  write(text: string): void;
}

const STATUS_MARK: Record<string, string> = {
  running: '▶',
  waiting: '…',
  stalled: '⏸',
  budgetPaused: '$',
  completed: '✓',
  stopped: '■',
  failed: '✗',
  crashed: '☠',
};

const usd = (value: number) => `$${value.toFixed(value >= 1 ? 2 : 4)}`;

/** The ids of the pending approvals among `approvals`, by the agent that asked (what {@link treeLines} shows). */
export function pendingAsks(approvals: readonly ApprovalView[]): Map<string, string[]> {
  const asks = new Map<string, string[]>();
  for (const a of approvals) if (a.state === 'pending') asks.set(a.agentId, [...(asks.get(a.agentId) ?? []), a.id]);
  return asks;
}

/**
 * The agent tree as text lines: name, status, turns, spend, last tool (each safe for a terminal);
 * an agent with approvals pending (`asks`: their ids by agent id) says which it waits on.
 */
export function treeLines(nodes: readonly TreeNode[], indent = '', asks: ReadonlyMap<string, readonly string[]> = new Map()): string[] {
  const lines: string[] = [];
  for (const n of nodes) {
    const mark = STATUS_MARK[n.status] ?? '?';
    const last = n.lastTool ? `  last=${forTerminal(n.lastTool)}` : '';
    const pending = asks.get(n.id);
    const waits = pending?.length
      ? ` (asks approval ${forTerminal(pending.join(', '))})`
      : n.status === 'waiting' && n.waitKind === 'user'
        ? ' (waits for you)'
        : '';
    lines.push(`${indent}${mark} ${forTerminal(n.name)} (${forTerminal(n.id)})  ${forTerminal(n.status)}${waits}  turns=${n.turns}  ${usd(n.spentUsd)}${last}`);
    lines.push(...treeLines(n.children, `${indent}  `, asks));
  }
  return lines;
}

/** `[#########-----------] $0.45 of $1.00 (45 %)`, or the spend alone without a limit. */
export function budgetBar(budget: Pick<BudgetState, 'spentUsd' | 'limitUsd' | 'reserveStopped' | 'budgetStopped' | 'paused'>, width = 24): string {
  const flags = [budget.reserveStopped && 'reserve tripped', budget.budgetStopped && 'budget stopped', budget.paused && 'paused'].filter(Boolean);
  const suffix = flags.length > 0 ? `  (${flags.join(', ')})` : '';
  if (budget.limitUsd === null) return `spent ${usd(budget.spentUsd)}${suffix}`;
  const share = Math.min(1, budget.spentUsd / budget.limitUsd);
  const filled = Math.round(share * width);
  return `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${usd(budget.spentUsd)} of ${usd(budget.limitUsd)} (${Math.floor(share * 100)} %)${suffix}`;
}

const seconds = (ms: number) => (ms < 1000 ? `${ms} ms` : `${Math.round(ms / 100) / 10} s`);

/** What a transient failure was, in words a user knows. */
function retryCause(a: Extract<AgentActivity, { kind: 'retry' }>): string {
  const status = a.status === undefined ? '' : ` (${a.status})`;
  switch (a.code) {
    case 'PROVIDER_RATE_LIMITED':
      return `rate limited${status}`;
    case 'PROVIDER_CONNECTION':
      return `cannot reach the model server (${a.message.replace(/^Connection to the model server failed: /, '')})`;
    case 'PROVIDER_TIMEOUT':
      return 'the model call timed out';
    case 'PROVIDER_UNAVAILABLE':
      return `the model server is unavailable${status}`;
    default:
      return `${a.code}: ${a.message}`;
  }
}

/** One activity in words: `rate limited (429), retrying in 8 s (2/5)`. */
export function activityText(a: AgentActivity): string {
  switch (a.kind) {
    case 'tool':
      return `calls ${a.tool}`;
    case 'retry':
      return `${retryCause(a)}, retrying in ${seconds(a.delayMs)} (${a.retry}/${a.maxRetries})`;
    case 'nudge':
      return `answered in plain text: nudged (${a.attempt}/${a.limit})`;
  }
}

/** Why an agent ended up failed, crashed or stopped, when the coordinator knows. */
export function endReason(info: Pick<AgentInfo, 'status' | 'error' | 'stopReason'> | undefined): string | null {
  if (!info) return null;
  if ((info.status === 'failed' || info.status === 'crashed') && info.error) return `${info.error.code}: ${info.error.message}`;
  if (info.status === 'stopped' && info.stopReason) return info.stopReason;
  return null;
}

export type Lookup = (agentId: string) => AgentInfo | undefined;
/** What {@link eventLine} reads of an agent: a coordinator's view, or a stored row (troupe follow). */
type EndLookup = (agentId: string) => Pick<AgentInfo, 'status' | 'error' | 'stopReason' | 'waitKind'> | undefined;

/** A coordinator's `get` that answers undefined instead of throwing for an unknown agent. */
export const lookupIn =
  (c: Pick<Coordinator, 'get'>): Lookup =>
  (id) => {
    try {
      return c.get(id);
    } catch {
      return undefined;
    }
  };

/** What an MCP server's change means to the user, in one line (drive.ts says it on stderr, or above the live view). */
export function mcpLine(status: { server: string; state: string; tools: number; error: string | null }): string {
  const server = `MCP server "${forTerminal(status.server)}"`;
  const why = forTerminal(status.error ?? 'no answer');
  if (status.state === 'connected') return `${server} connected: ${status.tools} tools`;
  if (status.state === 'lost') return `${server} was lost (${why}); its tools fail until it is back (restarted with backoff)`;
  return `${server} failed to start (${why}); the run goes on without its tools until it starts (retried with backoff; --strict-mcp makes this fatal)`;
}

/** What a breaker change means, in words. */
function breakerText(event: { endpoint: string; state: string; failures: number }): string {
  const endpoint = forTerminal(event.endpoint.replace(/#.*$/, ''));
  if (event.state === 'open') return `${endpoint} is down (${event.failures} failures in a row): circuit open, calls wait for a probe`;
  if (event.state === 'halfOpen') return `${endpoint}: probing`;
  return `${endpoint} answers again: circuit closed, calls resume`;
}

/** What an approval's change means, and for a pending one how to answer it. */
function approvalText(a: ApprovalView): string {
  const step = `${a.tool} ${JSON.stringify(a.answer?.args ?? a.args)}`;
  switch (a.state) {
    case 'pending':
      return `asks approval ${a.id} for ${step} (${a.risk}): troupe approve ${a.id} [--args <json>], or troupe deny ${a.id} --reason <why>`;
    case 'denied':
      return `approval ${a.id} denied: ${a.answer?.reason ?? ''}`;
    case 'ran':
      return `approval ${a.id}: ${step} ran`;
    default:
      return `approval ${a.id}: ${a.tool} ${a.state}`;
  }
}

/** One event as a line for non-TTY output (safe for a terminal); null for events not worth a line. */
export function eventLine(event: TroupeEvent, lookup: EndLookup = () => undefined): string | null {
  switch (event.type) {
    case 'agent.status': {
      const info = event.to === 'failed' || event.to === 'crashed' || event.to === 'stopped' || event.to === 'waiting' ? lookup(event.agentId) : undefined;
      const why = endReason(info);
      const waits = event.to === 'waiting' && info?.waitKind === 'user' ? ' (waits for you)' : '';
      return `${forTerminal(event.name).padEnd(10)} ${event.from ?? 'new'} → ${event.to}${waits}${why ? `: ${forTerminal(why)}` : ''}`;
    }
    case 'agent.said':
      return `${forTerminal(event.name).padEnd(10)} says: ${forTerminal(event.text, true)}`;
    case 'agent.activity':
      return `${forTerminal(event.name).padEnd(10)} ${forTerminal(activityText(event.activity))}`;
    case 'budget.tripped':
      return `${'budget'.padEnd(10)} ${event.kind === 'stop' ? 'stopped the run' : 'reserve tripped, sub-agents stop'}: ${forTerminal(event.reason)}`;
    case 'provider.breaker':
      return `${'provider'.padEnd(10)} ${breakerText(event)}`;
    case 'provider.quota':
      return `${'provider'.padEnd(10)} ${forTerminal(event.endpoint.replace(/#.*$/, ''))} said 429: paused for every agent until ${new Date(event.until).toISOString()}`;
    case 'team.failure_pattern':
      return `${'team'.padEnd(10)} tool ${forTerminal(event.tool)} fails the same way (${forTerminal(event.errorClass)}) for ${forTerminal(event.agents.map((a) => a.name).join(', '))}`;
    case 'approval':
      return `${forTerminal(event.approval.agentName).padEnd(10)} ${forTerminal(approvalText(event.approval))}`;
    case 'run.deadlock':
      return `${'run'.padEnd(10)} deadlock: ${event.waits.length} wait(s) nothing can answer; the agents are woken`;
    case 'coordinator.failed':
      return `coordinator stopped: ${forTerminal(event.error.code)}: ${forTerminal(event.error.message)}`;
    default:
      return null;
  }
}
