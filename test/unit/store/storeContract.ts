/**
 * The contract every `Store` implementation passes (the memory store now, SQLite next): one
 * suite, run against each implementation, so they cannot drift apart.
 */
import { describe, expect, it } from 'vitest';
import type { SessionItem } from '../../../src/model/types.js';
import type { AgentRow, NewMessage, Store } from '../../../src/store/types.js';
import { newAgentRow } from '../../../src/store/rows.js';

export function agentRow(id: string, over: Partial<AgentRow> = {}): AgentRow {
  return { ...newAgentRow({ id, runId: 'run1', name: `n-${id}`, parentId: null, depth: 0, task: 'task', skills: [] }, 1), ...over };
}

const msg = (to: string, content: string, over: Partial<NewMessage> = {}): NewMessage => ({
  id: `m-${content}`,
  runId: 'run1',
  to,
  from: 'user',
  fromName: 'user',
  type: 'instruction',
  priority: 'normal',
  content,
  interrupt: true,
  createdAt: 5,
  ...over,
});

const FIRST: SessionItem = { role: 'user', content: 'identity + task' };

export function describeStoreContract(name: string, create: () => Store) {
  describe(`Store contract: ${name}`, () => {
    const fresh = () => {
      const store = create();
      store.insertRun({
        id: 'run1',
        createdAt: 1,
        interactive: false,
        rootId: null,
        budget: { limitUsd: null, budgetStopped: false, reserveStopped: false, paused: false, resumeEpoch: 0, reserveNoticeClaimed: false },
      });
      return store;
    };

    it('refuses a second run with the same id as CONFIG_INVALID, keeping the first', () => {
      const store = fresh();
      expect(() => store.insertRun({ id: 'run1', createdAt: 9, interactive: true, rootId: null, budget: store.getRun('run1')!.budget })).toThrow(
        expect.objectContaining({ code: 'CONFIG_INVALID' }),
      );
      expect(store.getRun('run1')).toMatchObject({ createdAt: 1, interactive: false });
    });

    it('registers an agent together with its first input', () => {
      const store = fresh();
      store.registerAgent(agentRow('a'), [FIRST]);
      expect(store.getAgent('a')).toEqual(agentRow('a'));
      expect(store.loadSession('a')).toEqual([FIRST]);
      expect(store.listAgents('run1').map((a) => a.id)).toEqual(['a']);
      expect(() => store.registerAgent(agentRow('a'), [FIRST])).toThrow(expect.objectContaining({ code: 'AGENT_EXISTS' }));
    });

    it('updates agents and runs by patch; rows handed out are copies', () => {
      const store = fresh();
      store.registerAgent(agentRow('a'), [FIRST]);
      store.updateAgent('a', { status: 'waiting', waitKind: 'agents', pendingWait: { callId: 'c', tool: 'wait_for_agents' } });
      const row = store.getAgent('a')!;
      expect(row).toMatchObject({ status: 'waiting', waitKind: 'agents', pendingWait: { callId: 'c' }, name: 'n-a' });
      row.status = 'crashed';
      expect(store.getAgent('a')!.status).toBe('waiting');
      store.updateRun('run1', { rootId: 'a' });
      expect(store.getRun('run1')?.rootId).toBe('a');
    });

    it('queues messages FIFO, counts them, and marks them delivered up to one (the owner put them in the session)', () => {
      const store = fresh();
      store.registerAgent(agentRow('a'), [FIRST]);
      const first = store.enqueueMessage(msg('a', 'one'))!;
      store.enqueueMessage(msg('a', 'two', { from: 'b', fromName: 'bee', type: 'query' }));
      store.enqueueMessage(msg('a', 'three'));
      expect(first.deliveredAt).toBeNull();
      expect(store.pendingCount('a')).toBe(3);
      expect(store.pendingMessagesOf('run1').map((m) => m.content)).toEqual(['one', 'two', 'three']);
      const second = store.pendingMessagesOf('run1')[1]!;
      store.markDelivered('a', second.id, 9);
      expect(store.pendingCount('a')).toBe(1);
      expect(store.pendingMessagesOf('run1').map((m) => m.content)).toEqual(['three']);
      expect(store.listMessages('run1').map((m) => m.deliveredAt)).toEqual([9, 9, null]);
    });

    it('accepts a notice key once', () => {
      const store = fresh();
      store.registerAgent(agentRow('a'), [FIRST]);
      expect(store.enqueueMessage(msg('a', 'n1', { noticeKey: 'notice:b:0' }))?.noticeKey).toBe('notice:b:0');
      expect(store.enqueueMessage(msg('a', 'n2', { noticeKey: 'notice:b:0' }))).toBeNull();
      expect(store.enqueueMessage(msg('a', 'n3', { noticeKey: 'notice:b:1' }))).not.toBeNull();
      expect(store.pendingMessagesOf('run1').map((m) => m.content)).toEqual(['n1', 'n3']);
    });

    it('lists runs', () => {
      const store = fresh();
      expect(store.listRuns().map((r) => r.id)).toEqual(['run1']);
    });

    it('a message to an unknown agent is refused', () => {
      const store = fresh();
      expect(() => store.enqueueMessage(msg('ghost', 'x'))).toThrow(expect.objectContaining({ code: 'AGENT_NOT_FOUND' }));
    });

    it('a transaction that throws leaves nothing behind: mail stays queued, no session rows', () => {
      const store = fresh();
      store.registerAgent(agentRow('a'), [FIRST]);
      store.enqueueMessage(msg('a', 'keep me'));
      expect(() =>
        store.transaction(() => {
          store.markDelivered('a', store.pendingMessagesOf('run1')[0]!.id, 3);
          store.appendSession('a', [{ role: 'user', content: 'keep me' }]);
          store.updateAgent('a', { status: 'stalled' });
          store.registerAgent(agentRow('b'), [FIRST]);
          store.enqueueMessage(msg('a', 'half-sent'));
          store.appendEvent({ runId: 'run1', agentId: 'a', type: 'x', data: {}, at: 3 });
          throw new Error('disk on fire');
        }),
      ).toThrow('disk on fire');
      expect(store.pendingMessagesOf('run1').map((m) => [m.content, m.deliveredAt])).toEqual([['keep me', null]]);
      expect(store.loadSession('a')).toEqual([FIRST]);
      expect(store.getAgent('a')!.status).toBe('running');
      expect(store.getAgent('b')).toBeUndefined();
      expect(store.listEvents('run1')).toEqual([]);
    });

    it('an update changes no row handed out before it, and a rolled-back pair of updates restores the first values', () => {
      const store = fresh();
      store.registerAgent(agentRow('a'), [FIRST]);
      const before = store.getAgent('a')!;
      const listed = store.listAgents('run1');
      store.updateAgent('a', { turns: 4, lastTool: 'x' });
      expect(before.turns).toBe(0);
      expect(listed.find((r) => r.id === 'a')!.lastTool).toBeNull();
      expect(() =>
        store.transaction(() => {
          store.updateAgent('a', { turns: 5, status: 'waiting', waitKind: 'agents' });
          store.updateAgent('a', { turns: 6, lastTool: 'y' });
          throw new Error('undo');
        }),
      ).toThrow('undo');
      expect(store.getAgent('a')).toMatchObject({ turns: 4, lastTool: 'x', status: 'running', waitKind: null });
    });

    it('nested transactions join the outer one', () => {
      const store = fresh();
      store.registerAgent(agentRow('a'), [FIRST]);
      expect(() =>
        store.transaction(() => {
          store.transaction(() => store.appendSession('a', [{ role: 'user', content: 'inner' }]));
          throw new Error('outer fails');
        }),
      ).toThrow();
      expect(store.loadSession('a')).toEqual([FIRST]);
    });

    it('keeps the usage ledger and the event journal in order', () => {
      const store = fresh();
      for (const costUsd of [0.5, 0.25]) {
        store.recordUsage({ runId: 'run1', agentId: 'a', purpose: 'main', model: 'm', inputTokens: 1, outputTokens: 2, cachedInputTokens: 0, costUsd, at: 1 });
      }
      store.appendEvent({ runId: 'run1', agentId: null, type: 'first', data: { n: 1 }, at: 1 });
      store.appendEvent({ runId: 'run1', agentId: 'a', type: 'second', data: {}, at: 2 });
      expect(store.listUsage('run1').map((u) => u.costUsd)).toEqual([0.5, 0.25]);
      expect(store.listEvents('run1').map((e) => e.type)).toEqual(['first', 'second']);
      expect(store.listUsage('other')).toEqual([]);
    });

    it('keeps delegations: running → terminal once; ids unique per session', () => {
      const store = fresh();
      const row = {
        sessionId: 'a',
        delegationId: 'deleg_0001',
        runId: 'run1',
        goal: 'g',
        status: 'running' as const,
        dispatchedAt: 1,
        completedAt: null,
        resultText: null,
        startedBoot: store.boot,
      };
      store.insertDelegation(row);
      expect(() => store.insertDelegation(row)).toThrow(expect.objectContaining({ code: 'AGENT_EXISTS' }));
      expect(store.finishDelegation('a', 'deleg_0001', { status: 'completed', at: 5, resultText: 'ok' })).toBe(true);
      expect(store.finishDelegation('a', 'deleg_0001', { status: 'interrupted', at: 6, resultText: 'late' })).toBe(false);
      expect(store.finishDelegation('a', 'deleg_9999', { status: 'failed', at: 6, resultText: 'x' })).toBe(false);
      expect(store.listDelegations('run1')).toEqual([{ ...row, status: 'completed', completedAt: 5, resultText: 'ok' }]);
      expect(store.listDelegations('other')).toEqual([]);
    });

    it('keeps re-entry budgets and drops stale ones', () => {
      const store = fresh();
      store.putReentryBudget({ sessionId: 'a', count: 2, lastWakeAt: 100 });
      store.putReentryBudget({ sessionId: 'b', count: 1, lastWakeAt: 10 });
      store.putReentryBudget({ sessionId: 'a', count: 3, lastWakeAt: 200 });
      expect(store.reentryBudgetsOf(['a', 'b'])).toEqual([
        { sessionId: 'a', count: 3, lastWakeAt: 200 },
        { sessionId: 'b', count: 1, lastWakeAt: 10 },
      ]);
      expect(store.dropReentryBudgets(50)).toBe(1);
      expect(store.reentryBudgetsOf(['a', 'b'])).toEqual([{ sessionId: 'a', count: 3, lastWakeAt: 200 }]);
      expect(typeof store.boot).toBe('number');
    });

    it('a session handed out does not change when the session grows', () => {
      const store = fresh();
      store.registerAgent(agentRow('a'), [FIRST]);
      const before = store.loadSession('a');
      store.appendSession('a', [{ role: 'assistant', content: 'hi' }]);
      expect(before).toHaveLength(1);
      expect(store.loadSession('a')).toHaveLength(2);
    });

    it('replaces a session whole, refuses a stale rewrite, and a rolled-back rewrite changes nothing', () => {
      const store = fresh();
      store.registerAgent(agentRow('a'), [FIRST]);
      store.appendSession('a', [
        { role: 'assistant', content: 'one' },
        { role: 'user', content: 'two' },
      ]);
      const summary: SessionItem = { role: 'user', content: 'summary' };
      expect(store.replaceSession('a', [FIRST, summary], 2)).toBe(false);
      expect(store.loadSession('a')).toHaveLength(3);
      expect(() =>
        store.transaction(() => {
          store.replaceSession('a', [summary]);
          throw new Error('boom');
        }),
      ).toThrow('boom');
      expect(store.loadSession('a').map((i) => i.content)).toEqual(['identity + task', 'one', 'two']);
      expect(store.replaceSession('a', [FIRST, summary], 3)).toBe(true);
      store.appendSession('a', [{ role: 'assistant', content: 'after' }]);
      expect(store.loadSession('a').map((i) => i.content)).toEqual(['identity + task', 'summary', 'after']);
    });

    it('keeps async executions: linked once, finished once, continued once', () => {
      const store = fresh();
      store.registerAgent(agentRow('a'), [FIRST]);
      expect(store.linkExecution({ id: 'e1', agentId: 'a', linkedAt: 1 })).toBe(true);
      expect(store.linkExecution({ id: 'e1', agentId: 'a', linkedAt: 2 })).toBe(false);
      expect(store.executionsOf(['a']).map((e) => [e.id, e.status, e.linkedAt])).toEqual([['e1', 'running', 1]]);
      expect(store.finishExecution('e1', { status: 'failed', result: 'boom', at: 3 })).toBe(true);
      expect(store.finishExecution('e1', { status: 'completed', result: 'late', at: 4 })).toBe(false);
      expect(store.finishExecution('nope', { status: 'completed', result: '', at: 4 })).toBe(false);
      expect(store.executionsOf(['a'])).toEqual([{ id: 'e1', agentId: 'a', status: 'failed', result: 'boom', linkedAt: 1, finishedAt: 3, continuedAt: null }]);
      expect(store.markExecutionContinued('e1', 5)).toBe(true);
      expect(store.markExecutionContinued('e1', 6)).toBe(false);
      expect(store.getExecution('e1')).toMatchObject({ continuedAt: 5 });
    });

    it('keeps the in-doubt ledger: started before a tool runs, finished with its result, rolled back with the transaction', () => {
      const store = fresh();
      store.registerAgent(agentRow('a'), [FIRST]);
      const call = (callId: string, turn = 1) => ({ agentId: 'a', turn, callId, tool: 'deploy', argsHash: 'h', startedAt: 10 });
      store.startToolCall(call('c1'));
      store.startToolCall(call('c2'));
      store.startToolCall(call('c1', 2)); // the same call id in a later turn is another call
      expect(store.startedToolCalls('a').map((r) => `${r.turn}:${r.callId}`)).toEqual(['1:c1', '1:c2', '2:c1']);
      store.finishToolCalls('a', 1, ['c1', 'unknown'], 11);
      expect(store.startedToolCalls('a').map((r) => `${r.turn}:${r.callId}`)).toEqual(['1:c2', '2:c1']);
      expect(() =>
        store.transaction(() => {
          store.finishToolCalls('a', 1, ['c2'], 12);
          store.startToolCall(call('c3'));
          throw new Error('boom');
        }),
      ).toThrow('boom');
      expect(store.startedToolCalls('a').map((r) => `${r.turn}:${r.callId}`)).toEqual(['1:c2', '2:c1']);
      // A re-run (idempotent tool) marks the same call started again.
      store.finishToolCalls('a', 2, ['c1'], 13);
      store.startToolCall(call('c1', 2));
      expect(store.startedToolCalls('a')[1]).toMatchObject({ turn: 2, callId: 'c1', tool: 'deploy', argsHash: 'h', status: 'started', finishedAt: null });
      expect(store.startedToolCalls('b')).toEqual([]);
    });
  });
}
