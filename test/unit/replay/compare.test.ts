/**
 * The replay's item comparison (issue 37): an item is the recorded one when it serialises as it did.
 * A structural walk proves most items equal without serialising them; whatever it cannot prove is
 * left to JSON, so what JSON tells apart is still a divergence and what JSON writes alike is not.
 */
import { describe, expect, it } from 'vitest';
import type { RecordedCall } from '../../../src/host/calls/callLog.js';
import type { ModelRequest, SessionItem } from '../../../src/model/types.js';
import { Requests, sessionDiff } from '../../../src/replay/compare.js';

const agent = { id: 'a1', name: 'lead', turns: 3 };
const call = (args: string): SessionItem => ({ role: 'assistant', content: null, toolCalls: [{ id: 'c1', name: 'noop', arguments: args }] });
const diff = (recorded: unknown, now: unknown) => sessionDiff(agent, [recorded as SessionItem], [now as SessionItem]);

describe('replay item comparison', () => {
  it('finds equal what serialises alike: fresh copies, undefined-valued keys on either side, NaN as null', () => {
    expect(diff(call('{}'), call('{}'))).toBeNull();
    expect(
      diff(
        { role: 'tool', toolCallId: 'c1', name: 'noop', content: 'ok' },
        { role: 'tool', toolCallId: 'c1', name: 'noop', content: 'ok', isError: undefined },
      ),
    ).toBeNull();
    expect(diff({ role: 'user', content: 'x', extra: undefined }, { role: 'user', content: 'x' })).toBeNull();
    expect(diff({ role: 'user', content: 'x', n: null }, { role: 'user', content: 'x', n: NaN })).toBeNull();
  });

  it('tells apart what serialises differently, however deep or however it is built', () => {
    expect(diff(call('{}'), call('{"a":1}'))?.kind).toBe('tool call');
    expect(diff(call('{}'), { ...call('{}'), refusal: 'no' })).not.toBeNull();
    expect(diff({ role: 'user', content: [{ type: 'text', text: 'a' }] }, { role: 'user', content: [{ type: 'text', text: 'b' }] })?.diff).toContain('«');
    expect(diff({ role: 'user', content: 'x', n: [1, 2] }, { role: 'user', content: 'x', n: [1] })).not.toBeNull();
    expect(diff({ role: 'user', content: 'x', n: [1, null] }, { role: 'user', content: 'x', n: [1, undefined] })).toBeNull();
    // Key order is part of what JSON writes: told apart as before.
    expect(diff({ role: 'user', content: 'x' }, { content: 'x', role: 'user' })).not.toBeNull();
    // A boxed string has index keys, but JSON writes it as the string.
    expect(diff({ role: 'user', content: { 0: 'a', 1: 'b' } }, { role: 'user', content: new String('ab') })).not.toBeNull();
    // A toJSON decides what is written.
    expect(diff({ role: 'user', content: 'x', t: {} }, { role: 'user', content: 'x', t: { toJSON: () => 'y' } })).not.toBeNull();
    expect(diff({ role: 'user', content: 'x', t: 'y' }, { role: 'user', content: 'x', t: { toJSON: () => 'y' } })).toBeNull();
    // A missing item.
    expect(sessionDiff(agent, [call('{}')], [])?.diff).toContain('(none)');
  });

  it('checks every kept item of a request again, not only the new ones: an older item the code replaced is a divergence', () => {
    const tools = [{ name: 'noop', description: 'does nothing', parameters: { type: 'object' } }];
    const recorded = (turn: number, keep: number, add: SessionItem[]): RecordedCall => ({
      agentId: 'a1',
      name: 'lead',
      turn,
      purpose: 'main',
      t0: 0,
      keep,
      add,
      ...(turn === 1 ? { system: 'sys', tools } : {}),
    });
    const asked = (turn: number, messages: SessionItem[]): ModelRequest => ({
      agent: { id: 'a1', name: 'lead', parentId: null, depth: 0 },
      system: 'sys',
      messages,
      tools,
      turn,
    });
    const task: SessionItem = { role: 'user', content: 'task' };
    const answer = call('{}');
    const result: SessionItem = { role: 'tool', toolCallId: 'c1', name: 'noop', content: 'ok' };
    const replayed = () => {
      const requests = new Requests();
      expect(requests.check(recorded(1, 0, [{ role: 'user', content: 'task' }]), asked(1, [task]))).toBeNull();
      return requests;
    };
    const next = recorded(2, 1, [call('{}'), { role: 'tool', toolCallId: 'c1', name: 'noop', content: 'ok' }]);
    expect(replayed().check(next, asked(2, [task, answer, result]))).toBeNull();
    // The same second request, its first item now another object saying something else.
    const changed = replayed().check(next, asked(2, [{ role: 'user', content: 'task, rewritten' }, answer, result]));
    expect(changed).toMatchObject({ turn: 2, kind: 'request' });
    expect(changed?.diff).toContain('message 1 of 3');
  });
});
