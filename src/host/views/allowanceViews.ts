/**
 * Spend against each allowance a spawn gave (issue 35), read from the agent rows and their spend
 * alone — what `troupe status` and the dashboard show of a run they do not host. A hosting's own
 * `budget().allowances` adds what its calls in flight reserve.
 * @module
 */
import { isActive, type AgentStatus } from '../../../machines/types.js';
import type { AgentTerms } from '../../store/types.js';

export interface AllowanceView {
  agentId: string;
  name: string;
  allowanceUsd: number;
  /** What the owner's whole subtree spent. */
  spentUsd: number;
  /** What came back to the parent once the owner ended (null while it is active). */
  returnedUsd: number | null;
  open: boolean;
}

type Row = { readonly id: string; readonly parentId: string | null; readonly name: string; readonly status: AgentStatus; readonly terms?: AgentTerms | null };

/** The allowances of a run, in the rows' order, each with its subtree's spend. */
export function allowanceViews(rows: readonly Row[], spentOf: (id: string) => number): AllowanceView[] {
  if (!rows.some((r) => r.terms?.allowanceUsd !== undefined)) return [];
  const children = new Map<string, string[]>();
  for (const r of rows) if (r.parentId !== null) children.set(r.parentId, [...(children.get(r.parentId) ?? []), r.id]);
  const subtree = (id: string): number => spentOf(id) + (children.get(id) ?? []).reduce((sum, c) => sum + subtree(c), 0);
  const out: AllowanceView[] = [];
  for (const r of rows) {
    const allowanceUsd = r.terms?.allowanceUsd;
    if (allowanceUsd === undefined) continue;
    const spentUsd = subtree(r.id);
    const open = isActive(r.status);
    out.push({ agentId: r.id, name: r.name, allowanceUsd, spentUsd, returnedUsd: open ? null : Math.max(0, allowanceUsd - spentUsd), open });
  }
  return out;
}

const usd = (value: number) => `$${value.toFixed(2)}`;

/** `a (id) $1.50 of $2.00, returned $0.50` — one line per allowance. */
export function allowanceLine(a: Pick<AllowanceView, 'agentId' | 'name' | 'allowanceUsd' | 'spentUsd' | 'returnedUsd'>): string {
  return `${a.name} (${a.agentId}) ${usd(a.spentUsd)} of ${usd(a.allowanceUsd)}${a.returnedUsd === null ? '' : `, returned ${usd(a.returnedUsd)}`}`;
}
