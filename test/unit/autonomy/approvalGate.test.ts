import { describe, expect, it, vi } from 'vitest';
import { SimulatedClock } from 'xstate';
import { ApprovalGate, DEFAULT_APPROVAL_WINDOW_MS, type ApprovalRequest, type Approver } from '../../../src/autonomy/approvalGate.js';
import { EventBus, type AuditEvent } from '../../../src/autonomy/eventBus.js';
import { ConfigError } from '../../../src/errors.js';

function setup(approver?: Approver, windowMs?: number) {
  const clock = new SimulatedClock();
  const bus = new EventBus();
  const events: AuditEvent[] = [];
  bus.on((e) => events.push(e));
  const gate = new ApprovalGate({ ...(approver ? { approver } : {}), ...(windowMs !== undefined ? { windowMs } : {}), clock, bus });
  return { clock, bus, events, gate };
}

const step = (agentId: string, risk: ApprovalRequest['risk'], action = 'write_file'): ApprovalRequest => ({
  agentId,
  action,
  risk,
});

describe('ApprovalGate', () => {
  it('never asks for read_only steps (even without an approver) and emits nothing', async () => {
    const approver = vi.fn(() => false);
    const { gate, events } = setup(approver);
    expect(await gate.request(step('a', 'read_only', 'read_file'))).toEqual({ approved: true, reason: 'read_only' });
    expect(await setup().gate.request(step('a', 'read_only'))).toEqual({ approved: true, reason: 'read_only' });
    expect(approver).not.toHaveBeenCalled();
    expect(events).toEqual([]);
    expect(gate.windowOpen('a')).toBe(false);
  });

  it('asks once for a mutation; the window covers later steps of that agent but not other agents', async () => {
    const approver = vi.fn(() => true);
    const { gate, events } = setup(approver);
    expect(await gate.request({ ...step('a', 'mutation'), agentName: 'alice', reason: 'fix bug' })).toEqual({
      approved: true,
      reason: 'approved',
    });
    expect(approver).toHaveBeenCalledTimes(1);
    expect(approver).toHaveBeenCalledWith({ agentId: 'a', agentName: 'alice', action: 'write_file', risk: 'mutation', reason: 'fix bug' });
    expect(gate.windowOpen('a')).toBe(true);
    expect(await gate.request(step('a', 'mutation', 'edit_file'))).toEqual({ approved: true, reason: 'window' });
    expect(approver).toHaveBeenCalledTimes(1);

    expect(gate.windowOpen('b')).toBe(false);
    expect(await gate.request(step('b', 'mutation'))).toEqual({ approved: true, reason: 'approved' });
    expect(approver).toHaveBeenCalledTimes(2);

    expect(events.map((e) => [e.type, e.agentId, e.reason])).toEqual([
      ['approval.requested', 'a', 'fix bug'],
      ['approval.granted', 'a', 'approved'],
      ['approval.granted', 'a', 'window'],
      ['approval.requested', 'b', undefined],
      ['approval.granted', 'b', 'approved'],
    ]);
    expect(events[1]).toMatchObject({ at: 0, agentName: 'alice', action: 'write_file', risk: 'mutation' });
  });

  it('the window expires windowMs after the last explicit approval, on the injected clock', async () => {
    const approver = vi.fn(() => true);
    const { gate, clock } = setup(approver, 1_000);
    await gate.request(step('a', 'mutation'));
    clock.increment(999);
    expect(await gate.request(step('a', 'mutation'))).toMatchObject({ reason: 'window' });
    clock.increment(1);
    expect(gate.windowOpen('a')).toBe(false);
    expect(await gate.request(step('a', 'mutation'))).toMatchObject({ approved: true, reason: 'approved' });
    expect(approver).toHaveBeenCalledTimes(2);
    // that approval refreshed the window
    clock.increment(999);
    expect(gate.windowOpen('a')).toBe(true);
  });

  it('a step approved by the window does not refresh it', async () => {
    const approver = vi.fn(() => true);
    const { gate, clock } = setup(approver, 1_000);
    await gate.request(step('a', 'mutation'));
    clock.increment(999);
    expect(await gate.request(step('a', 'mutation'))).toMatchObject({ reason: 'window' });
    clock.increment(1);
    expect(gate.windowOpen('a')).toBe(false);
    expect(approver).toHaveBeenCalledTimes(1);
  });

  it('defaults to a 30 minute window', async () => {
    const { gate, clock } = setup(() => true);
    expect(DEFAULT_APPROVAL_WINDOW_MS).toBe(1_800_000);
    await gate.request(step('a', 'mutation'));
    clock.increment(1_799_999);
    expect(gate.windowOpen('a')).toBe(true);
    clock.increment(1);
    expect(gate.windowOpen('a')).toBe(false);
  });

  it('always asks for destructive steps, but approving one opens the window for mutations', async () => {
    const approver = vi.fn(() => true);
    const { gate } = setup(approver);
    await gate.request(step('a', 'mutation'));
    expect(await gate.request(step('a', 'destructive', 'rm_rf'))).toEqual({ approved: true, reason: 'approved' });
    expect(await gate.request(step('a', 'destructive', 'rm_rf'))).toEqual({ approved: true, reason: 'approved' });
    expect(approver).toHaveBeenCalledTimes(3);

    expect(await gate.request(step('b', 'destructive', 'drop_table'))).toMatchObject({ approved: true });
    expect(await gate.request(step('b', 'mutation'))).toEqual({ approved: true, reason: 'window' });
    expect(approver).toHaveBeenCalledTimes(4);
  });

  it('treats an unknown risk as destructive', async () => {
    const approver = vi.fn(() => true);
    const { gate } = setup(approver);
    await gate.request(step('a', 'mutation'));
    await gate.request({ ...step('a', 'mutation'), risk: 'whatever' as 'mutation' });
    expect(approver).toHaveBeenCalledTimes(2);
  });

  it('a denial carries the reason, opens no window and emits approval.denied', async () => {
    const answers = [false, { approved: false, reason: 'too risky' }, { approved: false }];
    const approver = vi.fn(async () => answers.shift() ?? false);
    const { gate, events } = setup(approver);
    expect(await gate.request(step('a', 'mutation'))).toEqual({ approved: false, reason: 'denied: rejected by approver' });
    expect(await gate.request(step('a', 'mutation'))).toEqual({ approved: false, reason: 'denied: too risky' });
    expect(await gate.request(step('a', 'destructive'))).toEqual({ approved: false, reason: 'denied: rejected by approver' });
    expect(gate.windowOpen('a')).toBe(false);
    expect(approver).toHaveBeenCalledTimes(3);
    expect(events.filter((e) => e.type === 'approval.denied')[1]).toMatchObject({
      agentId: 'a',
      action: 'write_file',
      risk: 'mutation',
      reason: 'denied: too risky',
    });
  });

  it('an approver answering { approved: true } (async) approves', async () => {
    const { gate } = setup(() => Promise.resolve({ approved: true, reason: 'ok' }));
    expect(await gate.request(step('a', 'mutation'))).toEqual({ approved: true, reason: 'approved' });
    expect(gate.windowOpen('a')).toBe(true);
  });

  it('an approver that throws or rejects denies; request() never throws', async () => {
    const { gate, events } = setup(() => {
      throw new Error('console closed');
    });
    const decision = await gate.request(step('a', 'mutation'));
    expect(decision.approved).toBe(false);
    expect(decision.reason).toMatch(/^denied: .*console closed/);
    expect(events.at(-1)).toMatchObject({ type: 'approval.denied', agentId: 'a', reason: decision.reason });

    const rejecting = setup(() => Promise.reject(new Error('timed out')));
    expect(await rejecting.gate.request(step('a', 'destructive'))).toMatchObject({ approved: false, reason: expect.stringContaining('timed out') });
    expect(rejecting.gate.windowOpen('a')).toBe(false);
  });

  it('without an approver, denies with reason "no approver" and an approval.denied audit event', async () => {
    const { gate, events } = setup();
    expect(await gate.request({ ...step('a', 'mutation'), agentName: 'alice' })).toEqual({ approved: false, reason: 'no approver' });
    expect(events.at(-1)).toEqual({
      type: 'approval.denied',
      at: 0,
      agentId: 'a',
      agentName: 'alice',
      action: 'write_file',
      risk: 'mutation',
      reason: 'no approver',
    });
  });

  it('closeWindow closes it, and an approval pending across closeWindow does not reopen it', async () => {
    let release!: (answer: boolean) => void;
    const approver = vi.fn(() => new Promise<boolean>((resolve) => (release = resolve)));
    const { gate } = setup(approver);
    const first = gate.request(step('a', 'mutation'));
    release(true);
    await first;
    expect(gate.windowOpen('a')).toBe(true);
    gate.closeWindow('a');
    expect(gate.windowOpen('a')).toBe(false);

    const pending = gate.request(step('a', 'mutation'));
    gate.closeWindow('a');
    release(true);
    expect(await pending).toEqual({ approved: true, reason: 'approved' });
    expect(gate.windowOpen('a')).toBe(false);
  });

  it('onWindowOpen hears every explicit approval, not window approvals or denials; a throwing listener changes nothing', async () => {
    const answers = [true, true, false, true];
    const { gate } = setup(() => answers.shift() ?? false);
    const opened: string[] = [];
    const stop = gate.onWindowOpen((id) => opened.push(id));
    gate.onWindowOpen(() => {
      throw new Error('listener bug');
    });
    expect(await gate.request(step('a', 'mutation'))).toEqual({ approved: true, reason: 'approved' });
    expect(await gate.request(step('a', 'mutation'))).toMatchObject({ reason: 'window' });
    expect(await gate.request(step('b', 'destructive'))).toEqual({ approved: true, reason: 'approved' });
    expect(await gate.request(step('c', 'mutation'))).toMatchObject({ approved: false });
    expect(opened).toEqual(['a', 'b']);
    stop();
    expect(await gate.request(step('a', 'destructive'))).toEqual({ approved: true, reason: 'approved' });
    expect(opened).toEqual(['a', 'b']);
  });

  it('rejects an invalid windowMs', () => {
    expect(() => new ApprovalGate({ windowMs: -1 })).toThrow(ConfigError);
    expect(() => new ApprovalGate({ windowMs: Number.NaN })).toThrow(/windowMs/);
  });
});
