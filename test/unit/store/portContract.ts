/**
 * The contract of the async store port (DESIGN §12) that the runtime depends on: batches apply in
 * order, all or nothing, and the reads boot and resume need see what was committed. Run against
 * every implementation (memory and SQLite through `portOf`; PostgreSQL natively).
 */
import { describe, expect, it } from 'vitest';
import type { SessionItem } from '../../../src/model/types.js';
import type { StorePort, WriteOp } from '../../../src/store/port.js';
import { COMMIT_EVENT, type NewMessage, type RunRow } from '../../../src/store/types.js';
import { agentRow } from './storeContract.js';

const RUN: RunRow = {
  id: 'run1',
  createdAt: 1,
  interactive: false,
  rootId: 'a',
  budget: { limitUsd: null, budgetStopped: false, reserveStopped: false, paused: false, resumeEpoch: 0, reserveNoticeClaimed: false },
};
const FIRST: SessionItem = { role: 'user', content: 'identity + task' };
const msg = (id: string, to: string, over: Partial<NewMessage> = {}): NewMessage => ({
  id,
  runId: 'run1',
  to,
  from: 'user',
  fromName: 'user',
  type: 'instruction',
  priority: 'normal',
  content: `content of ${id}`,
  interrupt: true,
  createdAt: 5,
  ...over,
});

export function describePortContract(name: string, create: () => Promise<{ port: StorePort; close: () => Promise<void> | void }>) {
  describe(`StorePort contract: ${name}`, () => {
    const fresh = async () => {
      const made = await create();
      await made.port.commit([
        { op: 'insertRun', run: RUN },
        { op: 'registerAgent', agent: agentRow('a'), firstInput: [FIRST] },
        { op: 'registerAgent', agent: agentRow('b', { parentId: 'a', depth: 1 }), firstInput: [FIRST] },
      ]);
      return made;
    };

    it('applies a batch in order and reads it back', async () => {
      const { port, close } = await fresh();
      await port.commit([
        { op: 'updateAgent', id: 'b', patch: { status: 'waiting', waitKind: 'agents', turns: 3 } },
        { op: 'appendSession', agentId: 'a', items: [{ role: 'assistant', content: 'one' }] },
        { op: 'appendSession', agentId: 'a', items: [{ role: 'assistant', content: 'two' }] },
        {
          op: 'recordUsage',
          row: { runId: 'run1', agentId: 'a', purpose: 'main', model: 'm', inputTokens: 1, outputTokens: 2, cachedInputTokens: 0, costUsd: 0.5, at: 6 },
        },
        {
          op: 'recordUsage',
          row: { runId: 'run1', agentId: 'a', purpose: 'main', model: 'm', inputTokens: 1, outputTokens: 2, cachedInputTokens: 0, costUsd: 0.25, at: 7 },
        },
        {
          op: 'recordUsage',
          row: { runId: 'run1', agentId: 'b', purpose: 'compaction', model: 'm', inputTokens: 1, outputTokens: 2, cachedInputTokens: 0, costUsd: 1, at: 8 },
        },
        { op: 'appendEvent', row: { runId: 'run1', agentId: 'a', type: 'x', data: { n: 1 }, at: 9 } },
        { op: 'appendEvent', row: { runId: 'run1', agentId: null, type: COMMIT_EVENT, data: { ops: [] }, at: 9 } },
      ]);
      expect((await port.listRuns()).map((r) => r.id)).toEqual(['run1']);
      expect(await port.getRun('run1')).toMatchObject({ rootId: 'a' });
      expect((await port.listAgents('run1')).find((r) => r.id === 'b')).toMatchObject({ status: 'waiting', waitKind: 'agents', turns: 3 });
      expect((await port.loadSession('a')).map((i) => i.content)).toEqual(['identity + task', 'one', 'two']);
      const spend = (await port.spendOf('run1')).sort((x, y) => x.agentId.localeCompare(y.agentId));
      expect(spend).toEqual([
        { agentId: 'a', purpose: 'main', costUsd: 0.75 },
        { agentId: 'b', purpose: 'compaction', costUsd: 1 },
      ]);
      expect((await port.listUsage('run1')).map((u) => u.costUsd)).toEqual([0.5, 0.25, 1]);
      // The commit journal is read by type, never with the views' events.
      expect((await port.listEvents('run1')).map((e) => e.type)).toEqual(['x']);
      expect((await port.eventsOf('run1', COMMIT_EVENT)).map((e) => e.data)).toEqual([{ ops: [] }]);
      await close();
    });

    it('a batch that fails applies nothing of itself, and the port keeps working', async () => {
      const { port, close } = await fresh();
      await expect(
        port.commit([
          { op: 'appendSession', agentId: 'a', items: [{ role: 'assistant', content: 'lost' }] },
          { op: 'registerAgent', agent: agentRow('a'), firstInput: [FIRST] }, // a duplicate: the store refuses it
        ]),
      ).rejects.toBeTruthy();
      expect((await port.loadSession('a')).map((i) => i.content)).toEqual(['identity + task']);
      await port.commit([{ op: 'appendSession', agentId: 'a', items: [{ role: 'assistant', content: 'kept' }] }]);
      expect((await port.loadSession('a')).map((i) => i.content)).toEqual(['identity + task', 'kept']);
      await close();
    });

    it('a failed batch leaves nothing behind for the next one (no read in between)', async () => {
      const { port, close } = await fresh();
      await expect(
        port.commit([
          {
            op: 'appendSession',
            agentId: 'b',
            items: [
              { role: 'assistant', content: 'lost 1' },
              { role: 'assistant', content: 'lost 2' },
            ],
          },
          { op: 'updateAgent', id: 'b', patch: { turns: 9 } },
          { op: 'registerAgent', agent: agentRow('b'), firstInput: [FIRST] }, // a duplicate: the store refuses it
        ]),
      ).rejects.toBeTruthy();
      await port.commit([
        { op: 'appendSession', agentId: 'b', items: [{ role: 'assistant', content: 'kept' }] },
        { op: 'updateAgent', id: 'b', patch: { status: 'waiting', waitKind: 'agents' } },
      ]);
      expect((await port.loadSession('b')).map((i) => i.content)).toEqual(['identity + task', 'kept']);
      expect((await port.listAgents('run1')).find((r) => r.id === 'b')).toMatchObject({ status: 'waiting', turns: 0 });
      await close();
    });

    it('keeps the mailbox: pending in order, delivered up to a message, notice keys told once', async () => {
      const { port, close } = await fresh();
      await port.commit([
        { op: 'enqueueMessage', message: msg('m1', 'a') },
        { op: 'enqueueMessage', message: msg('m2', 'b') },
        { op: 'enqueueMessage', message: msg('m3', 'a', { noticeKey: 'notice:b:0', from: 'b', fromName: 'n-b', type: 'completed' }) },
        { op: 'enqueueMessage', message: msg('m4', 'a') },
      ]);
      expect((await port.pendingMessagesOf('run1')).map((m) => m.id)).toEqual(['m1', 'm2', 'm3', 'm4']);
      await port.commit([{ op: 'markDelivered', agentId: 'a', upToId: 'm3', at: 10 }]);
      expect((await port.pendingMessagesOf('run1')).map((m) => m.id)).toEqual(['m2', 'm4']);
      expect(await port.noticeKeysOf('run1')).toEqual(['notice:b:0']);
      // The store's unique key is a backstop: a repeated notice key is ignored, not an error.
      await port.commit([{ op: 'enqueueMessage', message: msg('m5', 'a', { noticeKey: 'notice:b:0' }) }]);
      expect((await port.listMessages('run1')).map((m) => m.id)).toEqual(['m1', 'm2', 'm3', 'm4']);
      const delivered = (await port.listMessages('run1')).filter((m) => m.deliveredAt !== null).map((m) => m.id);
      expect(delivered).toEqual(['m1', 'm3']);
      await close();
    });

    it("keeps a report's value and a notice's data (typed results) as JSON, and reads null data for plain messages", async () => {
      const { port, close } = await fresh();
      const value = { total: 42, parts: [1, 'two', null, { deep: true }] };
      const report = { summary: 's', findings: [], openItems: [], success: true, value };
      const data = { agentId: 'b', name: 'n-b', status: 'completed', stint: 0, success: true, value, stopReason: null, errorCode: null };
      await port.commit([
        { op: 'updateAgent', id: 'b', patch: { status: 'completed', report } },
        { op: 'enqueueMessage', message: msg('m1', 'a', { noticeKey: 'notice:b:0', from: 'b', fromName: 'n-b', type: 'completion', data }) },
        { op: 'enqueueMessage', message: msg('m2', 'a') },
      ]);
      expect((await port.listAgents('run1')).find((r) => r.id === 'b')?.report).toEqual(report);
      expect((await port.listMessages('run1')).map((m) => [m.id, m.data])).toEqual([
        ['m1', data],
        ['m2', null],
      ]);
      await close();
    });

    it("keeps a child's terms (its allowance and output schema) as registered, and null for an agent without", async () => {
      const { port, close } = await fresh();
      const terms = { allowanceUsd: 1.25, output: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] } };
      await port.commit([{ op: 'registerAgent', agent: agentRow('c', { parentId: 'a', depth: 1, terms }), firstInput: [FIRST] }]);
      const rows = await port.listAgents('run1');
      expect(rows.find((r) => r.id === 'c')?.terms).toEqual(terms);
      expect(rows.find((r) => r.id === 'b')?.terms).toBeNull();
      await close();
    });

    it('keeps delegations, executions and the in-doubt ledger', async () => {
      const { port, close } = await fresh();
      const ops: WriteOp[] = [
        {
          op: 'insertDelegation',
          row: {
            sessionId: 'a',
            delegationId: 'deleg_0001',
            runId: 'run1',
            goal: 'g',
            status: 'running',
            dispatchedAt: 1,
            completedAt: null,
            resultText: null,
            startedBoot: port.boot,
          },
        },
        { op: 'linkExecution', row: { id: 'e1', agentId: 'a', linkedAt: 2 } },
        { op: 'linkExecution', row: { id: 'e2', agentId: 'b', linkedAt: 2 } },
        { op: 'startToolCall', row: { agentId: 'a', turn: 1, callId: 'c1', tool: 'deploy', argsHash: 'h', startedAt: 3 } },
        { op: 'startToolCall', row: { agentId: 'a', turn: 1, callId: 'c2', tool: 'deploy', argsHash: 'h', startedAt: 3 } },
      ];
      await port.commit(ops);
      await port.commit([
        { op: 'finishDelegation', sessionId: 'a', delegationId: 'deleg_0001', end: { status: 'completed', at: 4, resultText: 'done' } },
        { op: 'finishExecution', id: 'e1', end: { status: 'completed', result: 'ok', at: 5 } },
        { op: 'finishToolCalls', agentId: 'a', turn: 1, callIds: ['c1'], at: 6 },
      ]);
      expect(await port.listDelegations('run1')).toMatchObject([{ delegationId: 'deleg_0001', status: 'completed', resultText: 'done' }]);
      expect((await port.executionsOf(['a', 'b'])).map((e) => `${e.id}:${e.status}`).sort()).toEqual(['e1:completed', 'e2:running']);
      expect((await port.executionsOf(['b'])).map((e) => e.id)).toEqual(['e2']);
      await port.commit([
        { op: 'markExecutionContinued', id: 'e1', at: 7 },
        { op: 'putReentryBudget', row: { sessionId: 'a', count: 2, lastWakeAt: 8 } },
        { op: 'appendEvent', row: { runId: 'run1', agentId: 'a', type: 'review.note', data: { title: 't' }, at: 9 } },
        { op: 'appendEvent', row: { runId: 'run1', agentId: 'a', type: 'other', data: {}, at: 9 } },
      ]);
      expect(await port.reentryBudgetsOf(['a', 'b'])).toEqual([{ sessionId: 'a', count: 2, lastWakeAt: 8 }]);
      expect((await port.eventsOf('run1', 'review.note')).map((e) => e.data)).toEqual([{ title: 't' }]);
      expect(await port.getExecution('e1')).toMatchObject({ continuedAt: 7 });
      expect((await port.startedToolCalls('a')).map((r) => r.callId)).toEqual(['c2']);
      await close();
    });

    it('one batch means its ops in order: an agent and its mail, repeated notice keys, a delivery and updates of one agent', async () => {
      const { port, close } = await fresh();
      await port.commit([
        { op: 'enqueueMessage', message: msg('m1', 'a') },
        { op: 'registerAgent', agent: agentRow('c', { parentId: 'a', depth: 1 }), firstInput: [FIRST] },
        { op: 'enqueueMessage', message: msg('m2', 'c') },
        { op: 'appendSession', agentId: 'c', items: [{ role: 'assistant', content: 'c one' }] },
        { op: 'updateAgent', id: 'c', patch: { status: 'waiting', waitKind: 'agents', turns: 1 } },
        { op: 'updateAgent', id: 'c', patch: { status: 'running', waitKind: null, turns: 2 } },
        { op: 'enqueueMessage', message: msg('m3', 'a', { noticeKey: 'notice:c:0', from: 'c', fromName: 'n-c', type: 'completed' }) },
        { op: 'enqueueMessage', message: msg('m4', 'a', { noticeKey: 'notice:c:0', from: 'c', fromName: 'n-c', type: 'completed' }) },
        { op: 'enqueueMessage', message: msg('m5', 'a') },
        { op: 'markDelivered', agentId: 'a', upToId: 'm3', at: 10 },
        { op: 'appendSession', agentId: 'c', items: [{ role: 'assistant', content: 'c two' }] },
        { op: 'appendEvent', row: { runId: 'run1', agentId: 'c', type: 'x', data: { n: 1 }, at: 11 } },
        { op: 'appendEvent', row: { runId: 'run1', agentId: 'c', type: 'x', data: { n: 2 }, at: 11 } },
      ]);
      expect((await port.listMessages('run1')).map((m) => [m.id, m.deliveredAt])).toEqual([
        ['m1', 10],
        ['m2', null],
        ['m3', 10],
        ['m5', null],
      ]);
      expect((await port.loadSession('c')).map((i) => i.content)).toEqual(['identity + task', 'c one', 'c two']);
      expect((await port.listAgents('run1')).find((r) => r.id === 'c')).toMatchObject({ status: 'running', waitKind: null, turns: 2 });
      expect((await port.eventsOf('run1', 'x')).map((e) => e.data)).toEqual([{ n: 1 }, { n: 2 }]);
      await close();
    });

    it('replaces a session and updates a run', async () => {
      const { port, close } = await fresh();
      await port.commit([
        { op: 'appendSession', agentId: 'a', items: [{ role: 'assistant', content: 'old' }] },
        { op: 'replaceSession', agentId: 'a', items: [FIRST, { role: 'user', content: 'summary' }] },
        { op: 'updateRun', id: 'run1', patch: { budget: { ...RUN.budget, limitUsd: 5, reserveStopped: true } } },
      ]);
      expect((await port.loadSession('a')).map((i) => i.content)).toEqual(['identity + task', 'summary']);
      expect((await port.getRun('run1'))!.budget).toMatchObject({ limitUsd: 5, reserveStopped: true });
      await close();
    });

    it("reads each agent's last status in the run's stream (what a resume need not announce again)", async () => {
      const { port, close } = await fresh();
      expect(await port.streamedStatuses('run1')).toEqual(new Map());
      const row = (seq: number, agentId: string | null, type: string, data: Record<string, unknown>) => ({ runId: 'run1', seq, agentId, type, data, at: seq });
      await port.commit([
        {
          op: 'appendStream',
          rows: [
            row(1, 'a', 'agent.status', { name: 'a', from: null, to: 'running' }),
            row(2, 'b', 'agent.status', { name: 'b', from: null, to: 'running' }),
            row(3, 'a', 'agent.status', { name: 'a', from: 'running', to: 'waiting' }),
            row(4, 'b', 'agent.said', { name: 'b', text: 'to: completed' }),
            row(5, null, 'run.deadlock', { waits: [] }),
          ],
        },
      ]);
      expect(await port.streamedStatuses('run1')).toEqual(
        new Map([
          ['a', 'waiting'],
          ['b', 'running'],
        ]),
      );
      await port.commit([{ op: 'appendStream', rows: [row(6, 'a', 'agent.status', { name: 'a', from: 'waiting', to: 'running' })] }]);
      expect(await port.streamedStatuses('run1')).toEqual(
        new Map([
          ['a', 'running'],
          ['b', 'running'],
        ]),
      );
      // A batch that fails keeps none of its statuses; the same rows commit after it.
      const later = [
        row(7, 'a', 'agent.status', { name: 'a', from: 'running', to: 'completed' }),
        row(8, 'c', 'agent.status', { name: 'c', from: null, to: 'running' }),
      ];
      await expect(
        port.commit([
          { op: 'appendStream', rows: later },
          { op: 'registerAgent', agent: agentRow('a'), firstInput: [FIRST] }, // a duplicate: the store refuses it
        ]),
      ).rejects.toBeTruthy();
      expect(await port.streamedStatuses('run1')).toEqual(
        new Map([
          ['a', 'running'],
          ['b', 'running'],
        ]),
      );
      await port.commit([{ op: 'appendStream', rows: later }]);
      expect(await port.streamedStatuses('run1')).toEqual(
        new Map([
          ['a', 'completed'],
          ['b', 'running'],
          ['c', 'running'],
        ]),
      );
      expect(await port.streamedStatuses('elsewhere')).toEqual(new Map());
      await close();
    });

    it('reads the agents whose status the stream does not show as their last, against their rows', async () => {
      const { port, close } = await fresh();
      const row = (seq: number, agentId: string, from: string | null, to: string) => ({
        runId: 'run1',
        seq,
        agentId,
        type: 'agent.status',
        data: { name: agentId, from, to },
        at: seq,
      });
      // The run's stream has no status row: null (every agent unshown), not a map of every agent.
      expect(await port.unshownStatuses('run1')).toBeNull();
      await port.commit([{ op: 'appendStream', rows: [row(1, 'a', null, 'running')] }]);
      // a's row is running, as shown; b has no status row: unshown, showing none.
      expect(await port.unshownStatuses('run1')).toEqual(new Map([['b', null]]));
      await port.commit([{ op: 'appendStream', rows: [row(2, 'b', null, 'waiting')] }]);
      // b's row is running, the stream shows waiting.
      expect(await port.unshownStatuses('run1')).toEqual(new Map([['b', 'waiting']]));
      await port.commit([{ op: 'updateAgent', id: 'b', patch: { status: 'waiting', waitKind: 'agents' } }]);
      expect(await port.unshownStatuses('run1')).toEqual(new Map());
      // A change committed without the row that tells it (a crash between the two).
      await port.commit([{ op: 'updateAgent', id: 'a', patch: { status: 'completed' } }]);
      expect(await port.unshownStatuses('run1')).toEqual(new Map([['a', 'running']]));
      await port.commit([{ op: 'appendStream', rows: [row(3, 'a', 'running', 'completed')] }]);
      expect(await port.unshownStatuses('run1')).toEqual(new Map());
      expect(await port.unshownStatuses('elsewhere')).toBeNull();
      await close();
    });
  });
}
