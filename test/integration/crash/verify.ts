/** The invariants every trial mode keeps, checked on the file after each crash and after the final resume. */
import { recoverRun } from '../../../src/host/resumeCoordinator.js';
import { openStore } from '../../../src/store/sqliteStore.js';
import type { CrashCounts, Violation } from './counts.js';

const STINT_TYPES = new Set(['completion', 'completed', 'failed', 'crashed', 'stopped']);

/** Check the file after a crash. Returns the number of violations found. */
export async function verify(
  path: string,
  acked: Set<string>,
  ackedDone: Set<string>,
  counts: CrashCounts,
  finished: boolean,
  noted: Violation[] = [],
): Promise<number> {
  let violations = 0;
  const fail = (what: Violation, n = 1) => {
    counts[what] += n;
    violations += 1;
    noted.push(what);
  };
  const store = openStore({ path });
  try {
    if (store.integrityCheck() !== 'ok') fail('integrityFailures');
    const bad = store.verifyChecksums();
    if (bad.messages.length + bad.sessionItems.length > 0) fail('checksumFailures');
    const run = store.listRuns().at(-1);
    if (!run) {
      // Killed before the run existed: nothing can have been acknowledged.
      if (acked.size > 0) fail('lostAcks', acked.size);
      return violations;
    }
    const messages = store.listMessages(run.id);
    const contents = new Set(messages.map((m) => m.content));
    for (const content of acked) {
      if (contents.has(content)) continue;
      fail('lostAcks');
      acked.delete(content); // counted once, not again at the next check
    }
    // Delivered exactly once: a delivered message's text is in its agent's session once.
    for (const m of messages) {
      if (m.deliveredAt === null || m.from !== 'user') continue;
      const copies = store.loadSession(m.to).filter((i) => i.role === 'user' && i.content === m.content).length;
      if (copies !== 1) fail('duplicateDeliveries');
    }
    // One item closes each child stint; a terminal child's current stint has its item.
    const agents = store.listAgents(run.id);
    for (const a of agents) {
      if (a.parentId === null) continue;
      const items = messages.filter((m) => m.from === a.id && m.to === a.parentId && STINT_TYPES.has(m.type));
      const keys = new Set(items.map((m) => m.noticeKey));
      if (keys.size !== items.length || items.length > a.stint + 1) fail('duplicateNotices');
      const terminal = ['completed', 'failed', 'crashed', 'stopped'].includes(a.status);
      if (terminal && !keys.has(`notice:${a.id}:${a.stint}`)) fail('missingNotices');
    }
    // Recovery twice changes nothing.
    const dump = () => JSON.stringify([store.listRuns(), store.listAgents(run.id), store.listMessages(run.id)]);
    await recoverRun(store, run.id, {});
    const once = dump();
    await recoverRun(store, run.id, {});
    if (dump() !== once) fail('recoveryNotIdempotent');
    // Delegations: after recovery none is running; each ended one told its agent exactly once;
    // one acknowledged as completed is never downgraded to interrupted.
    const delegations = store.listDelegations(run.id);
    const after = store.listMessages(run.id);
    for (const d of delegations) {
      if (d.status === 'running') fail('delegationsLeftRunning');
      const told = after.filter((m) => m.noticeKey === `deleg:${d.sessionId}:${d.delegationId}`);
      if (told.length !== 1 || told[0]!.to !== d.sessionId) fail('delegationMessagesWrong');
      if (ackedDone.has(`${d.sessionId}/${d.delegationId}`) && d.status !== 'completed') {
        fail('delegationsDowngraded');
        ackedDone.delete(`${d.sessionId}/${d.delegationId}`);
      }
    }
    if (finished) {
      counts.delegations += delegations.length;
      counts.delegationsInterrupted += delegations.filter((d) => d.status === 'interrupted').length;
    }
    const root = agents.find((a) => a.parentId === null);
    if (finished && root?.status !== 'completed') {
      fail('runsNotCompleted');
      if (counts.errors.length < 3)
        counts.errors.push(
          `run not completed: root ${root?.status} after ${root?.turns} turns, stop ${root?.stopReason}, error ${JSON.stringify(root?.error)}`,
        );
    }
  } finally {
    store.close();
  }
  return violations;
}

/**
 * A kill inside a group commit: the messages the group enqueued are all on the file or none is
 * (a group is one transaction). Returns the number of violations found.
 */
export function verifyGroupAtomic(path: string, ids: readonly string[], counts: CrashCounts, noted: Violation[] = []): number {
  if (ids.length < 2) return 0;
  const store = openStore({ path });
  try {
    const run = store.listRuns().at(-1);
    const present = new Set((run ? store.listMessages(run.id) : []).map((m) => m.id));
    const landed = ids.filter((id) => present.has(id)).length;
    counts.groupsCheckedAtomic++;
    if (landed === 0 || landed === ids.length) return 0;
    counts.tornGroups++;
    noted.push('tornGroups');
    return 1;
  } finally {
    store.close();
  }
}
