/**
 * Replay's mailbox reads (issue 37): a wait that parked in the recording (its mailbox empty) parks in
 * the replay too, even where the mail that woke it has already come when it begins — its read took
 * none, so it takes none, and the mail wakes it as it parks (lifecycle.ts `#rewakeIfMail`), as the
 * mail that came while it was parked woke it.
 */
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { TERMINAL_STATUSES } from '../../../machines/types.js';
import { createCoordinator } from '../../../src/host/createCoordinator.js';
import { scriptedModel, type Script } from '../../../src/model/scriptedModel.js';
import { replayRun } from '../../../src/replay/replayRun.js';
import type { ReplayReads } from '../../../src/replay/recording.js';
import { withHistory } from '../../helpers/replayReads.js';
import { memoryStore } from '../../../src/store/memoryStore.js';
import { CALL_EVENT, INPUT_EVENT, READ_EVENT, type EventRow, type Store } from '../../../src/store/types.js';

/** Record `script`: the lead parks on its second turn's wait; a user message wakes it at 500 ms. */
async function recorded(script: Script) {
  const clock = new SimulatedClock();
  const store = memoryStore();
  const c = createCoordinator({ store, clock, model: scriptedModel(script, { clock }) });
  const root = await c.start({ name: 'lead', task: 'Wait for word.' });
  for (let i = 0; i < 5; i++) {
    await new Promise((r) => setImmediate(r));
    clock.increment(100);
  }
  expect(c.get(root).status).toBe('waiting');
  await c.send(root, { content: 'word' });
  for (let i = 0; i < 300 && !TERMINAL_STATUSES.has(c.get(root).status); i++) {
    await new Promise((r) => setImmediate(r));
    clock.increment(100);
  }
  expect(c.get(root).status).toBe('completed');
  await c.shutdown();
  return { store, runId: c.runId, root };
}

/**
 * The recording with the user's message applied before the answer that asked for the wait (at its
 * time): replayed, the message is in the mailbox when the wait begins.
 */
function messageFirst(store: Store, root: string): ReplayReads {
  return withHistory(store, (events) => {
    const send = events.find((e) => e.type === INPUT_EVENT)!;
    const waitCall = events.find((e) => e.type === CALL_EVENT && e.agentId === root && (e.data as { turn: number }).turn === 2)!;
    const moved: EventRow = { ...send, at: waitCall.at };
    return events.flatMap((e) => (e === send ? [] : e === waitCall ? [moved, e] : [e]));
  });
}

const statusesOf = (store: Store, runId: string, agentId: string) =>
  store
    .historyOf(runId)
    .filter((e) => e.type === 'agent.status' && e.agentId === agentId)
    .map((e) => `${String(e.data.from)}>${String(e.data.to)}`);
const readsOf = (store: Store, runId: string) =>
  store
    .historyOf(runId)
    .filter((e) => e.type === READ_EVENT)
    .map((e) => e.data);

describe('a wait that parked with no mail, replayed where the mail already waits', () => {
  it.each<[string, Script['agents']['lead']]>([
    [
      'sleep_until',
      [
        { tool: 'view_agent_graph', args: {} },
        { tool: 'sleep_until', args: { seconds: 60, reason: 'later' }, delayMs: 100 },
        { tool: 'finish', args: { summary: 'done' } },
      ],
    ],
    [
      'wait_for_agents',
      [
        { tool: 'spawn_agent', args: { name: 'w', task: 'slow' } },
        { tool: 'wait_for_agents', args: { reason: 'w' }, delayMs: 100 },
        { tool: 'wait_for_agents', args: { reason: 'w' } },
        { tool: 'finish', args: { summary: 'done' } },
      ],
    ],
  ])('%s: parks as it did, the mail wakes it, and the replay is identical', async (_, lead) => {
    const script: Script = { agents: { lead: lead!, w: [{ tool: 'agent_finish', args: { summary: 'w done' }, delayMs: 5_000 }] } };
    const { store, runId, root } = await recorded(script);
    // The recording: the wait parked with no mail, and the message woke it.
    expect(statusesOf(store, runId, root).slice(0, 2)).toEqual(['running>waiting', 'waiting>running']);
    expect(readsOf(store, runId)).toContainEqual({ turn: 3, count: 1 });
    expect(readsOf(store, runId).some((r) => 'callId' in r)).toBe(false);

    const result = await replayRun(messageFirst(store, root), runId);
    expect(result.divergence).toBeNull();
    expect(result.outcome).toBe('identical');
    // Parked and woken as recorded, not answered at once; its reads as the recording's.
    expect(statusesOf(result.store, runId, root)).toEqual(statusesOf(store, runId, root));
    expect(readsOf(result.store, runId)).toEqual(readsOf(store, runId));
    expect(result.store.loadSession(root)).toEqual(store.loadSession(root));
  });
});
