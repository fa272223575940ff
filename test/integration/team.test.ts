import { describe, expect, it } from 'vitest';
import { flush, STINT_ITEMS, team, TERMINAL } from '../helpers/team.js';

/** Items that closed each child's stint, per child name. */
function stintItems(t: ReturnType<typeof team>, rootId: string) {
  const counts: Record<string, string[]> = {};
  for (const m of t.messagesTo(rootId)) {
    if (m.from === 'user' || m.from === 'system') continue;
    (counts[m.fromName] ??= []).push(m.type);
  }
  return counts;
}

describe('a scripted team: one report, one plain-text talker, one provider error', () => {
  it('autonomous: the talker crashes; the root hears once from each child, then finishes', async () => {
    const t = team('team-autonomous');
    const rootId = await t.c.start({ name: 'lead', task: 'Review the repository.' });
    const root = await t.c.waitFor(rootId, [...TERMINAL]);
    await t.c.whenIdle();

    expect(root.status).toBe('completed');
    expect(root.report?.summary).toContain('alice reported');
    expect(t.byName('alice').status).toBe('completed');
    expect(t.byName('bob')).toMatchObject({ status: 'crashed', error: { code: 'RECOVERY_EXHAUSTED' } });
    expect(t.byName('carol')).toMatchObject({ status: 'failed', error: { code: 'PROVIDER_AUTH' } });
    expect(stintItems(t, rootId)).toEqual({ alice: ['completion'], bob: ['crashed'], carol: ['failed'] });
    // Every message reached the root's session exactly once.
    expect(t.messagesTo(rootId).every((m) => m.deliveredAt !== null)).toBe(true);
    t.model.assertComplete();
    await t.c.shutdown();
  });

  it('the talker was nudged twice, with persisted nudges naming the attempt', async () => {
    const t = team('team-autonomous');
    const rootId = await t.c.start({ name: 'lead', task: 'Review the repository.' });
    await t.c.waitFor(rootId, [...TERMINAL]);
    const nudges = t
      .session(t.byName('bob').id)
      .filter((i) => i.role === 'user' && typeof i.content === 'string' && i.content.includes('recovery attempt'))
      .map((i) => (i.content as string).match(/recovery attempt \d\/3/)?.[0]);
    expect(nudges).toEqual(['recovery attempt 1/3', 'recovery attempt 2/3']);
    await t.c.shutdown();
  });

  it('interactive: the talker stalls instead, finish is refused until the root stops it', async () => {
    const t = team('team-interactive', { interactive: true });
    const rootId = await t.c.start({ name: 'lead', task: 'Review the repository.' });
    const root = await t.c.waitFor(rootId, [...TERMINAL]);
    await t.c.whenIdle();

    expect(root.status).toBe('completed');
    expect(t.byName('bob')).toMatchObject({ status: 'stopped', stopReason: 'requested' });
    expect(t.byName('carol').status).toBe('failed');
    // The stall notice is extra: it does not take the single terminal item of bob's stint.
    expect(stintItems(t, rootId)).toEqual({ alice: ['completion'], bob: ['stalled', 'stopped'], carol: ['failed'] });
    const refused = t.toolResults(rootId).find((r) => r.name === 'finish' && r.result.success === false);
    expect(refused?.result.error?.code).toBe('FINISH_REFUSED');
    expect(refused?.result.error?.message).toContain('bob');
    t.model.assertComplete();
    await t.c.shutdown();
  });

  it('each child owes exactly one stint item in both modes', async () => {
    for (const [script, interactive] of [
      ['team-autonomous', false],
      ['team-interactive', true],
    ] as const) {
      const t = team(script, { interactive });
      const rootId = await t.c.start({ name: 'lead', task: 'Review the repository.' });
      await t.c.waitFor(rootId, [...TERMINAL]);
      for (const [, kinds] of Object.entries(stintItems(t, rootId))) {
        expect(kinds.filter((k) => STINT_ITEMS.has(k))).toHaveLength(1);
      }
      await t.c.shutdown();
    }
  });
});

describe('idle auto-resume', () => {
  it('fires twice, then the agent stalls and its parent gets exactly one stall notice', async () => {
    const t = team('idle-stall');
    const rootId = await t.c.start({ name: 'lead', task: 'Delegate and wait.' });
    await flush();
    const waiterId = t.byName('waiter').id;
    expect(await t.c.waitFor(waiterId, ['waiting'])).toMatchObject({ status: 'waiting', waitKind: 'agents' });
    // busy's model call runs for 190 s, so the run is not quiescent: the idle timer ends the wait.
    expect(t.byName('busy').status).toBe('running');

    await t.advance(119_000);
    const timeouts = () => t.toolResults(waiterId).filter((r) => r.result.wait_outcome === 'timeout').length;
    expect(timeouts()).toBe(1);
    expect(t.c.get(waiterId).status).toBe('waiting');
    await t.advance(1_000);
    expect(timeouts()).toBe(2);
    await t.advance(59_000);
    expect(t.c.get(waiterId).status).toBe('waiting');
    await t.advance(1_000);
    await t.advance(10_000); // busy reports at 190 s

    const root = await t.c.waitFor(rootId, [...TERMINAL]);
    expect(root.status).toBe('completed');
    const fromWaiter = t.messagesTo(rootId).filter((m) => m.from === waiterId);
    expect(fromWaiter.map((m) => m.type)).toEqual(['stalled', 'stopped']);
    expect(fromWaiter[0]!.content).toContain('[Agent stalled] waiter');
    expect(fromWaiter[0]!.createdAt).toBe(180_000);
    expect(fromWaiter[0]!.interrupt).toBe(false);
    t.model.assertComplete();
    await t.c.shutdown();
  });
});
