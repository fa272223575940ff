/**
 * The in-doubt mode's checks (issue 14 §3). After every child dies, the calls its ledger left
 * `started` without a result are noted (they are in doubt, with or without their side effect
 * made). After the final resume the side-effect file, the sessions and the ledger must agree:
 *
 * - no non-idempotent call ran twice for one call id (nor one operation twice: a call reported
 *   TOOL_NOT_RUN is retried by the model, so a wrong "not run" shows as a second run);
 * - every call that ran has a ledger row; an idempotent call that ran more than once always had
 *   the same key, the one of its run, agent, turn and call id;
 * - every append call has exactly one result in its agent's session; a non-idempotent call in
 *   doubt has TOOL_IN_DOUBT as that result, and nothing else does; an idempotent one was re-run;
 * - TOOL_NOT_RUN only for a call that never ran, success only for one that did;
 * - the ledger holds no `started` row at the end.
 */
import Database from 'better-sqlite3';
import { existsSync } from 'node:fs';
import type { SessionItem } from '../../../src/model/types.js';
import { openStore } from '../../../src/store/sqliteStore.js';
import type { CrashCounts, Violation } from './counts.js';
import { effectsFile, readEffects } from './effects.js';

/** Calls found in doubt after some child died, by `<agent>/<call id>`. */
export type InDoubtSeen = Map<string, { tool: string; withEffect: boolean }>;

const APPEND_TOOLS = new Set(['append', 'append_idem']);

interface LedgerRow {
  agent_id: string;
  turn: number;
  call_id: string;
  tool: string;
  status: string;
}

/** The in-doubt ledger as it is on the file (every row, started and finished). */
function ledger(path: string): LedgerRow[] {
  if (!existsSync(path)) return [];
  const db = new Database(path, { fileMustExist: true });
  try {
    const exists = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'tool_calls'").get();
    return exists ? (db.prepare('SELECT agent_id, turn, call_id, tool, status FROM tool_calls').all() as LedgerRow[]) : [];
  } finally {
    db.close();
  }
}

/** After a child died: note the calls its kill left in doubt. */
export function observeInDoubt(path: string, seen: InDoubtSeen, counts: CrashCounts): void {
  const made = new Set(readEffects(effectsFile(path)).map((l) => l.call));
  for (const row of ledger(path)) {
    const key = `${row.agent_id}/${row.call_id}`;
    if (row.status !== 'started' || seen.has(key)) continue;
    const withEffect = made.has(row.call_id);
    seen.set(key, { tool: row.tool, withEffect });
    if (row.tool === 'append_idem') counts.inDoubtIdempotent++;
    else counts.inDoubtCalls++;
    if (withEffect) counts.inDoubtWithEffect++;
    else counts.inDoubtWithoutEffect++;
  }
}

const codeOf = (item: Extract<SessionItem, { role: 'tool' }>): string | undefined => {
  try {
    return (JSON.parse(item.content) as { error?: { code?: string } }).error?.code;
  } catch {
    return undefined;
  }
};

const groupBy = <T>(items: readonly T[], key: (item: T) => string) => {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    groups.set(k, [...(groups.get(k) ?? []), item]);
  }
  return groups;
};

/** After the final resume: the checks above. Returns the number of violations found. */
export function verifyInDoubt(path: string, seen: InDoubtSeen, counts: CrashCounts, noted: Violation[] = []): number {
  let violations = 0;
  const fail = (what: Violation) => {
    counts[what] += 1;
    violations += 1;
    noted.push(what);
  };
  const lines = readEffects(effectsFile(path));
  counts.effects += lines.length;
  const rows = ledger(path);
  const turnOf = new Map(rows.map((r) => [`${r.agent_id}/${r.call_id}`, r.turn]));
  if (rows.some((r) => r.status === 'started')) fail('ledgerLeftStarted');
  const store = openStore({ path });
  try {
    const run = store.listRuns().at(-1);
    if (!run) return violations;
    const byCall = groupBy(lines, (l) => l.call);
    for (const [call, runs] of byCall) {
      const first = runs[0]!;
      if (first.tool === 'append' && runs.length > 1) fail('nonIdempotentRanTwice');
      if (first.tool === 'append_idem' && runs.length > 1) counts.idempotentReruns++;
      // Every run of a tool with effects went through the ledger.
      const turn = turnOf.get(`${first.agent}/${call}`);
      if (turn === undefined) fail('effectWithoutLedgerRow');
      // One key for every run of the call: the one of its run, agent, turn and call id.
      const expected = turn === undefined ? null : `${run.id}:${first.agent}:${turn}:${call}`;
      if ((expected !== null && first.key !== expected) || runs.some((l) => l.key !== first.key)) fail('idempotencyKeyChanged');
    }
    for (const runs of groupBy(
      lines.filter((l) => l.tool === 'append'),
      (l) => l.op,
    ).values())
      if (runs.length > 1) fail('opRanTwice');
    for (const agent of store.listAgents(run.id)) {
      const session = store.loadSession(agent.id);
      const calls = session.flatMap((i) => (i.role === 'assistant' ? (i.toolCalls ?? []) : [])).filter((c) => APPEND_TOOLS.has(c.name));
      const results = groupBy(
        session.filter((i): i is Extract<SessionItem, { role: 'tool' }> => i.role === 'tool' && APPEND_TOOLS.has(i.name)),
        (i) => i.toolCallId,
      );
      for (const call of calls) {
        const answers = results.get(call.id) ?? [];
        results.delete(call.id);
        if (answers.length !== 1) {
          fail('resultsNotOnce');
          continue;
        }
        const code = codeOf(answers[0]!);
        const doubt = seen.get(`${agent.id}/${call.id}`);
        const ran = byCall.get(call.id)?.length ?? 0;
        if (doubt && call.name === 'append' && code !== 'TOOL_IN_DOUBT') fail('inDoubtNotSurfaced');
        // Re-run after the kill: one more run than the kill left.
        if (doubt && call.name === 'append_idem' && (code !== undefined || ran < (doubt.withEffect ? 2 : 1))) fail('idempotentNotRerun');
        if (code === 'TOOL_IN_DOUBT' && !doubt) fail('inDoubtSpurious');
        if (code === 'TOOL_NOT_RUN') {
          counts.notRunCalls++;
          if (ran > 0) fail('notRunButRan');
        }
        if (code === undefined && ran === 0) fail('successWithoutEffect');
      }
      // A result for a call no answer asked for.
      if (results.size > 0) fail('resultsNotOnce');
    }
  } finally {
    store.close();
  }
  return violations;
}
