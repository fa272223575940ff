/**
 * What the CLI shows while agents run: a redrawn tree with a budget bar on a TTY, one line per
 * event otherwise, JSON lines with `--json`. Also the static tree and status renderings used by
 * `troupe tree` and `troupe status`.
 * @module
 */
import type { BudgetState, Coordinator } from '../host/createCoordinator.js';
import type { TreeNode } from '../host/registry.js';
import type { TroupeEvent } from '../host/runtime.js';
import { forTerminal, jsonLine } from './terminal.js';

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

/** The agent tree as text lines: name, status, turns, spend, last tool (each safe for a terminal). */
export function treeLines(nodes: readonly TreeNode[], indent = ''): string[] {
  const lines: string[] = [];
  for (const n of nodes) {
    const mark = STATUS_MARK[n.status] ?? '?';
    const last = n.lastTool ? `  last=${forTerminal(n.lastTool)}` : '';
    lines.push(`${indent}${mark} ${forTerminal(n.name)} (${forTerminal(n.id)})  ${forTerminal(n.status)}  turns=${n.turns}  ${usd(n.spentUsd)}${last}`);
    lines.push(...treeLines(n.children, `${indent}  `));
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

/** One event as a line for non-TTY output (safe for a terminal); null for events not worth a line. */
export function eventLine(event: TroupeEvent): string | null {
  switch (event.type) {
    case 'agent.status':
      return `${forTerminal(event.name).padEnd(10)} ${event.from ?? 'new'} → ${event.to}`;
    case 'agent.said':
      return `${forTerminal(event.name).padEnd(10)} says: ${forTerminal(event.text, true)}`;
    case 'coordinator.failed':
      return `coordinator stopped: ${forTerminal(event.error.code)}: ${forTerminal(event.error.message)}`;
    default:
      return null;
  }
}

/**
 * Attach a live view to a coordinator; returns a function that draws the final frame and detaches.
 * The TTY view redraws at most every `intervalMs`, in place.
 */
export function attachView(coordinator: Coordinator, mode: ViewMode, out: Output, intervalMs = 100): () => void {
  if (mode === 'json') {
    const unsubscribe = coordinator.subscribe((event) => out.write(`${jsonLine(event)}\n`));
    return unsubscribe;
  }
  if (mode === 'lines') {
    const unsubscribe = coordinator.subscribe((event) => {
      const line = eventLine(event);
      if (line !== null) out.write(`  ${line}\n`);
    });
    return unsubscribe;
  }
  let drawn = 0;
  let timer: ReturnType<typeof setTimeout> | null = null;
  const lastSaid = new Map<string, string>();
  const draw = () => {
    timer = null;
    const lines = [budgetBar(coordinator.budget()), ...treeLines(coordinator.tree())];
    const said = [...lastSaid].map(([name, text]) => `  ${forTerminal(name)}: ${forTerminal(text.length > 100 ? `${text.slice(0, 97)}...` : text)}`);
    const frame = [...lines, ...said];
    // Move up over the previous frame and clear it, then draw the new one.
    const clear = drawn > 0 ? `\x1b[${drawn}F\x1b[0J` : '';
    out.write(`${clear}${frame.join('\n')}\n`);
    drawn = frame.length;
  };
  const schedule = () => {
    if (timer === null) timer = setTimeout(draw, intervalMs);
  };
  const unsubscribe = coordinator.subscribe((event) => {
    if (event.type === 'agent.said') lastSaid.set(event.name, event.text.replace(/\s+/g, ' '));
    schedule();
  });
  const unsubscribeRegistry = coordinator.registry.subscribe(schedule);
  draw();
  return () => {
    unsubscribe();
    unsubscribeRegistry.unsubscribe();
    if (timer !== null) clearTimeout(timer);
    draw();
  };
}
