/**
 * The call log's request encoding (src/host/calls/callLog.ts): each call is recorded as what changed
 * since the same agent's last call of the same purpose — `keep` items of that request, then `add`.
 * Pinned directly, since a replay rebuilds the same messages from a larger `add` too: a log that
 * kept comparing against an agent's first request, or against its call of another purpose, replays
 * fine and silently records O(session) per call.
 */
import { describe, expect, it } from 'vitest';
import { CallLog, type RecordedCall } from '../../../src/host/calls/callLog.js';
import type { ModelRequest, SessionItem, UsagePurpose } from '../../../src/model/types.js';
import type { EventRow } from '../../../src/store/types.js';

const agent = { id: 'a1', name: 'lead', parentId: null, depth: 0 };
const user = (content: string): SessionItem => ({ role: 'user', content });

function harness() {
  const rows: EventRow[] = [];
  const log = new CallLog({ stage: (row) => rows.push(row), runId: 'r1', now: () => 0, flushes: () => 0 });
  const call = (items: readonly SessionItem[], purpose?: UsagePurpose): RecordedCall => {
    const request: ModelRequest = { agent, system: 'sys', messages: items, tools: [], turn: 1, ...(purpose ? { purpose } : {}) };
    log.begin(request, { items, length: items.length }).answered({ text: 'ok', toolCalls: [] });
    return rows.at(-1)!.data as unknown as RecordedCall;
  };
  return { call, log };
}

describe('call log: each request is recorded as its change since the last of its kind', () => {
  it('adds only the items after the previous call, however many calls came before', () => {
    const { call } = harness();
    const session: SessionItem[] = [user('task')];
    expect(call(session)).toMatchObject({ keep: 0, add: [user('task')] });
    for (let i = 1; i <= 3; i++) {
      session.push(user(`step ${i}`));
      const recorded = call(session);
      expect(recorded.keep).toBe(i);
      expect(recorded.add).toEqual([user(`step ${i}`)]);
    }
  });

  it("keeps each purpose's chain apart: a compaction between two main calls does not reset the main one", () => {
    const { call } = harness();
    const session: SessionItem[] = [user('task'), user('one')];
    call(session);
    const summary = [user('summarise this')];
    expect(call(summary, 'compaction')).toMatchObject({ keep: 0, add: summary });
    session.push(user('two'));
    expect(call(session)).toMatchObject({ keep: 2, add: [user('two')] });
    // And the compaction chain continues from its own last request.
    expect(call([...summary, user('more')], 'compaction')).toMatchObject({ keep: 1, add: [user('more')] });
  });

  it('records an agent it was told to forget in full again', () => {
    const { call, log } = harness();
    const session: SessionItem[] = [user('task')];
    call(session);
    session.push(user('again'));
    log.forget(agent.id);
    expect(call(session)).toMatchObject({ keep: 0, add: session, system: 'sys' });
  });
});
