/**
 * Replay's mailbox reads (issue 37): a recording keeps how many waiting messages each read took
 * (`replay.read`, in the commit of what it read), and a replay's read takes as many, once that many
 * have come — when a turn reads its mailbox is the timings', not the recording's. A recording
 * without reads (older) keeps the old rule: a read takes what waits.
 */
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { TERMINAL_STATUSES } from '../../../machines/types.js';
import { createCoordinator } from '../../../src/host/createCoordinator.js';
import { scriptedModel, type Script } from '../../../src/model/scriptedModel.js';
import { replayRun } from '../../../src/replay/replayRun.js';
import type { ReplayReads } from '../../../src/replay/recording.js';
import { withHistory } from '../../helpers/replayReads.js';
import { spawnStep } from '../../helpers/team.js';
import { memoryStore } from '../../../src/store/memoryStore.js';
import { READ_EVENT, type EventRow } from '../../../src/store/types.js';

/** Two workers that report at the same instant: the lead's woken wait reads both reports at once. */
const script: Script = {
  agents: {
    lead: [
      spawnStep(['a', 'one'], ['b', 'two']),
      { tool: 'wait_for_agents', args: { reason: 'both' } },
      { tool: 'wait_for_agents', args: { reason: 'both' } },
      { tool: 'finish', args: { summary: 'done' } },
    ],
    a: [{ tool: 'agent_finish', args: { summary: 'a done' }, delayMs: 50 }],
    b: [{ tool: 'agent_finish', args: { summary: 'b done' }, delayMs: 50 }],
  },
};

async function recorded() {
  const clock = new SimulatedClock();
  const store = memoryStore();
  const c = createCoordinator({ store, clock, model: scriptedModel(script, { clock }) });
  const root = await c.start({ name: 'lead', task: 'Split.' });
  const done = c.waitFor(root, [...TERMINAL_STATUSES]);
  for (let i = 0; i < 200 && !TERMINAL_STATUSES.has(c.get(root).status); i++) {
    await new Promise((r) => setImmediate(r));
    clock.increment(100);
  }
  await done;
  await c.shutdown();
  return { store, runId: c.runId, root };
}

/** The recording's reads, each read event as `edit` makes it (null: left out), and `more` after them. */
function edited(store: ReturnType<typeof memoryStore>, edit: (read: EventRow) => EventRow | null, more: EventRow[] = []): ReplayReads {
  return withHistory(store, (events) =>
    events.flatMap((e) => {
      if (e.type !== READ_EVENT) return [e];
      const read = edit(e);
      return read ? [read, ...more] : [];
    }),
  );
}

describe('replay of mailbox reads', () => {
  it('records the read that took both reports, and replays it identically', async () => {
    const { store, runId, root } = await recorded();
    const reads = store.historyOf(runId).filter((e) => e.type === READ_EVENT);
    // Both were the last reports: the read says so (the wait's result too), and the replay takes it.
    expect(reads).toMatchObject([{ agentId: root, data: { turn: 3, count: 2, last: true } }]);
    const result = await replayRun(store, runId);
    expect(result.divergence).toBeNull();
    expect(result.outcome).toBe('identical');
    // The replay's own recording reads as the recording did.
    expect(
      result.store
        .historyOf(runId)
        .filter((e) => e.type === READ_EVENT)
        .map((e) => e.data),
    ).toEqual([{ turn: 3, count: 2, last: true }]);
  });

  it("gives a woken wait the recording's `last`, not its own (whether others are active is timing)", async () => {
    const { store, runId, root } = await recorded();
    const woken = store.loadSession(root).find((i) => i.role === 'tool' && i.content.includes('"pending_messages":2'));
    expect(woken).toMatchObject({ content: expect.stringContaining('"no_active_agents":true') });
    // The same read recorded as not the last (as an older recording's): the replay's wait says so too.
    const notLast = edited(store, (e) => ({ ...e, data: { turn: 3, count: 2 } }));
    const result = await replayRun(notLast, runId);
    expect(result.outcome).toBe('diverged');
    expect(result.divergence).toMatchObject({ agent: 'lead', kind: 'tool call' });
    expect(result.divergence!.diff).toContain('pending_messages\\":2,\\"note');
  });

  it('takes as many messages as the recorded read did, not what waits (a read said to take one diverges there)', async () => {
    const { store, runId, root } = await recorded();
    const one = edited(store, (e) => ({ ...e, data: { ...e.data, count: 1 } }));
    const result = await replayRun(one, runId);
    expect(result.outcome).toBe('diverged');
    // The lead's woken wait now reports the one message its read took (the recording's session has two).
    expect(result.divergence).toMatchObject({ agent: 'lead', kind: 'tool call' });
    expect(result.divergence!.diff).toContain('pending_messages\\":1');
    // …and the read took that one: the other report still waits, undelivered.
    const session = result.store.loadSession(root);
    expect(session.filter((i) => i.role === 'user' && typeof i.content === 'string' && i.content.startsWith('[Message from')).length).toBe(1);
    expect(result.store.listMessages(runId).filter((m) => m.to === root && m.deliveredAt === null)).toHaveLength(1);
  });

  it('holds a read until the messages it took have come, and says so when they never do', async () => {
    const { store, runId } = await recorded();
    const three = edited(store, (e) => ({ ...e, data: { ...e.data, count: 3 } }));
    const result = await replayRun(three, runId);
    expect(result.outcome).toBe('diverged');
    expect(result.divergence).toMatchObject({ agent: 'lead', kind: 'notice' });
    expect(result.divergence!.diff).toBe("the recording's turn 3 read 3 waiting messages; only 2 came");
  });

  it('reports a read of the recording the code never made', async () => {
    const { store, runId, root } = await recorded();
    const read = store.historyOf(runId).find((e) => e.type === READ_EVENT)!;
    const more = edited(store, (e) => e, [{ ...read, data: { turn: 9, count: 1 } }]);
    const result = await replayRun(more, runId);
    expect(result.outcome).toBe('diverged');
    expect(result.divergence).toEqual({
      agent: 'lead',
      agentId: root,
      turn: 0,
      kind: 'notice',
      diff: "the recording's turn 9 read 1 waiting messages; the code never made that read",
    });
  });

  it('keeps the old rule for a recording without reads: a read takes what waits', async () => {
    const { store, runId } = await recorded();
    const older = edited(store, () => null);
    const result = await replayRun(older, runId);
    expect(result.divergence).toBeNull();
    expect(result.outcome).toBe('identical');
  });
});
