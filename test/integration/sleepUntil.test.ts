/**
 * Durable timers (issue 33 item 5): `sleep_until` parks an agent dormant until a time it chose —
 * 0 model calls meanwhile, one wake at the deadline with `timer_fired` — a message wakes it sooner,
 * a stop stops it, the deadlock watch leaves it alone, and the deadline survives a restart
 * (SQLite). The failover on PostgreSQL is in pgSleepUntil.test.ts.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { createCoordinator } from '../../src/host/createCoordinator.js';
import { resumeCoordinator } from '../../src/host/resumeCoordinator.js';
import { scriptedModel, type ScriptStep } from '../../src/model/scriptedModel.js';
import { openStore } from '../../src/store/sqliteStore.js';
import { flush, team, TERMINAL } from '../helpers/team.js';

const DAY = 86_400_000;
const HOUR = 3_600_000;
const sleep = (args: Record<string, unknown>): ScriptStep => ({ tool: 'sleep_until', args: { reason: 'check the build', ...args } });
const finish: ScriptStep = { tool: 'finish', args: { summary: 'done' } };

/** The results of an agent's sleep_until calls, in order. */
const sleeps = (t: ReturnType<typeof team>, id: string) =>
  t
    .toolResults(id)
    .filter((r) => r.name === 'sleep_until')
    .map((r) => r.result);

describe('sleep_until', () => {
  it('a timer a simulated day away: 0 model calls until the deadline, then exactly one wake with timer_fired; one timer is not a storm', async () => {
    // A re-entry budget of one wake: the timer is counted, and one is within it.
    const t = team({ agents: { lead: [sleep({ seconds: 86_400 }), finish] } }, { reentry: { maxWakes: 1, spacingMs: 0 } });
    const rootId = await t.c.start({ name: 'lead', task: 'Come back tomorrow.' });
    expect(await t.c.waitFor(rootId, ['waiting'])).toMatchObject({ waitKind: 'timer' });
    expect(t.model.calls).toHaveLength(1);
    // Its system prompt told it the tool is there, and what it is for.
    expect(t.model.calls[0]!.request.system).toMatch(/Use sleep_until to come back to something at a later time/);
    // Parked: no actor, its deadline persisted as the wait's start and length.
    expect(t.store.getAgent(rootId)).toMatchObject({ status: 'waiting', waitKind: 'timer', waitingSince: 0, waitTimeoutMs: DAY });
    await t.advance(DAY - 1, HOUR);
    expect(t.model.calls).toHaveLength(1);
    expect(t.store.listEvents(t.c.runId).filter((e) => e.type === 'run.deadlock')).toEqual([]);
    await t.advance(1, 1);
    expect(await t.c.waitFor(rootId, TERMINAL)).toMatchObject({ status: 'completed' });
    expect(t.model.calls).toHaveLength(2);
    expect(t.model.calls[1]!.at).toBe(DAY);
    expect(sleeps(t, rootId)).toEqual([{ wait_outcome: 'timer_fired', note: expect.any(String) }]);
    await t.advance(2 * DAY, HOUR);
    expect(t.model.calls).toHaveLength(2);
    await t.c.shutdown();
  });

  it('a timer wake is a counted self-wake: a loop of short sleeps past the re-entry budget is stopped with reason reentry', async () => {
    const t = team({ agents: { lead: [sleep({ seconds: 60 }), sleep({ seconds: 60 }), finish] } }, { reentry: { maxWakes: 1, spacingMs: 0 } });
    const rootId = await t.c.start({ name: 'lead', task: 'Poll every minute.' });
    await t.c.waitFor(rootId, ['waiting']);
    await t.advance(60_000, 10_000);
    await t.c.waitFor(rootId, ['waiting']);
    expect(t.model.calls).toHaveLength(2);
    await t.advance(60_000, 10_000);
    expect(await t.c.waitFor(rootId, TERMINAL)).toMatchObject({ status: 'stopped' });
    expect(t.store.getAgent(rootId)?.stopReason).toBe('reentry');
    expect(t.store.listEvents(t.c.runId).find((e) => e.type === 'reentry.spent')?.data).toEqual({ source: 'timer', wakes: 1, maxWakes: 1 });
    expect(t.model.calls).toHaveLength(2);
    await t.c.shutdown();
  });

  it('a message wakes it sooner with message_arrived; the old deadline then wakes nobody', async () => {
    const t = team({ agents: { lead: [sleep({ seconds: 86_400 }), sleep({ seconds: 7_200 }), finish] } });
    const rootId = await t.c.start({ name: 'lead', task: 'Come back tomorrow.' });
    await t.c.waitFor(rootId, ['waiting']);
    await t.advance(HOUR, HOUR);
    await t.c.send(rootId, { content: 'Something changed.' });
    await flush();
    await t.c.waitFor(rootId, ['waiting']);
    expect(t.model.calls).toHaveLength(2);
    expect(sleeps(t, rootId)[0]).toMatchObject({ wait_outcome: 'message_arrived', pending_messages: 1 });
    // The second sleep (2 h from the message) fires at 3 h, not a moment before; the first deadline is gone.
    await t.advance(2 * HOUR - 1, 60_000);
    expect(t.model.calls).toHaveLength(2);
    await t.advance(1, 1);
    expect(await t.c.waitFor(rootId, TERMINAL)).toMatchObject({ status: 'completed' });
    expect(t.model.calls.map((c) => c.at)).toEqual([0, HOUR, 3 * HOUR]);
    await t.advance(2 * DAY, HOUR);
    expect(t.model.calls).toHaveLength(3);
    await t.c.shutdown();
  });

  it('a stop stops it at once, and its timer never fires', async () => {
    const t = team({ agents: { lead: [sleep({ seconds: 86_400 }), finish] } });
    const rootId = await t.c.start({ name: 'lead', task: 'Come back tomorrow.' });
    await t.c.waitFor(rootId, ['waiting']);
    expect(await t.c.stop(rootId)).toEqual([rootId]);
    expect(t.c.get(rootId).status).toBe('stopped');
    await t.advance(2 * DAY, HOUR);
    expect(t.model.calls).toHaveLength(1);
    await t.c.shutdown();
  });

  it('an agent asleep is no dead wait: its parent waiting on it is not woken by the deadlock watch, but by its report', async () => {
    const t = team(
      {
        agents: {
          lead: [
            { tool: 'spawn_agent', args: { name: 'watcher', task: 'Look again in an hour.' } },
            { tool: 'wait_for_agents', args: { reason: 'watcher' } },
            finish,
          ],
          watcher: [sleep({ seconds: 3_600 }), { tool: 'agent_finish', args: { summary: 'looked again' } }],
        },
      },
      // No idle timeout within the test: only the deadlock watch or the report could wake the lead.
      { idleResumeMs: DAY },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'Delegate.' });
    await flush();
    const watcher = t.byName('watcher').id;
    await t.c.waitFor(watcher, ['waiting']);
    await t.c.waitFor(rootId, ['waiting']);
    await t.advance(HOUR - 1, 60_000);
    expect(t.model.calls).toHaveLength(3);
    expect(t.store.listEvents(t.c.runId).filter((e) => e.type === 'run.deadlock')).toEqual([]);
    await t.advance(1, 1);
    expect(await t.c.waitFor(rootId, TERMINAL)).toMatchObject({ status: 'completed' });
    expect(t.toolResults(rootId).find((r) => r.name === 'wait_for_agents')?.result).toMatchObject({ wait_outcome: 'message_arrived' });
    expect(t.model.calls).toHaveLength(5);
    await t.c.shutdown();
  });

  it('refuses bad input with TOOL_INPUT_INVALID; a time already past answers at once', async () => {
    const t = team({
      agents: {
        lead: [
          sleep({}),
          sleep({ seconds: 60, until: '2026-12-05T09:00:00Z' }),
          sleep({ until: '2026-12-05 09:00' }),
          sleep({ until: 'tomorrow' }),
          sleep({ seconds: 31 * 86_400 }),
          sleep({ until: new Date(31 * DAY).toISOString() }),
          sleep({ until: '1970-01-01T00:00:00Z' }),
          sleep({ seconds: 0 }),
          finish,
        ],
      },
    });
    const rootId = await t.c.start({ name: 'lead', task: 'Sleep badly.' });
    expect(await t.c.waitFor(rootId, TERMINAL)).toMatchObject({ status: 'completed' });
    const results = sleeps(t, rootId);
    expect(results.slice(0, 6).map((r) => (r.error as { code?: string } | undefined)?.code)).toEqual(Array(6).fill('TOOL_INPUT_INVALID'));
    expect(results.slice(6)).toEqual([
      { wait_outcome: 'timer_fired', note: 'That time has already come.' },
      { wait_outcome: 'timer_fired', note: 'That time has already come.' },
    ]);
    // Nothing parked: one model call per step, no time passed.
    expect(t.model.calls.map((c) => c.at)).toEqual(Array(9).fill(0));
    await t.c.shutdown();
  });

  it.each([
    ['before the deadline', 20 * HOUR, DAY],
    ['after the deadline (it was down then)', DAY + 5 * HOUR, DAY + 5 * HOUR],
  ])('the deadline survives a restart on SQLite, resumed %s: exactly one wake, none before', async (_label, resumeAt, wakeAt) => {
    const path = join(mkdtempSync(join(tmpdir(), 'troupe-')), 'run.db');
    const clock = new SimulatedClock();
    const first = scriptedModel({ agents: { lead: [sleep({ until: new Date(DAY).toISOString() })] } }, { clock });
    const store = openStore({ path });
    const c = createCoordinator({ model: first, store, clock });
    const rootId = await c.start({ name: 'lead', task: 'Come back tomorrow.' });
    await c.waitFor(rootId, ['waiting']);
    clock.increment(10 * HOUR);
    await flush();
    expect(first.calls).toHaveLength(1);
    await c.shutdown();
    store.close();

    // Down until `resumeAt`; the second host reads the deadline from the file.
    clock.increment(resumeAt - 10 * HOUR);
    const second = scriptedModel({ agents: { lead: [finish] } }, { clock });
    const reopened = openStore({ path });
    const again = await resumeCoordinator({ store: reopened, model: second, clock });
    await flush();
    // A simulated clock runs a timer due now only when it moves (a real one runs it at once).
    clock.increment(0);
    await flush();
    if (resumeAt < wakeAt) {
      // Not a moment before the deadline.
      while (clock.now() < wakeAt - 1) {
        clock.increment(Math.min(60_000, wakeAt - 1 - clock.now()));
        await flush();
      }
      expect(second.calls).toHaveLength(0);
      clock.increment(1);
      await flush();
    }
    expect(await again.waitFor(rootId, TERMINAL)).toMatchObject({ status: 'completed' });
    expect(second.calls.map((call) => call.at)).toEqual([wakeAt]);
    const results = reopened
      .loadSession(rootId)
      .filter((i) => i.role === 'tool')
      .map((i) => JSON.parse(i.content as string) as unknown);
    expect(results).toEqual([
      { wait_outcome: 'timer_fired', note: expect.any(String) },
      { success: true, run_completed: true },
    ]);
    clock.increment(2 * DAY);
    await flush();
    expect(second.calls).toHaveLength(1);
    await again.shutdown();
    reopened.close();
  });
});
