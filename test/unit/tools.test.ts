import { describe, expect, it } from 'vitest';
import { FailureTracker } from '../../src/turn/failureTracker.js';
import { BUILTIN_TOOLS } from '../../src/tools/builtin.js';
import { compileTool, defineTool } from '../../src/tools/defineTool.js';

describe('defineTool', () => {
  it('validates arguments against the JSON Schema, with useful messages', () => {
    const tool = compileTool(
      defineTool({
        name: 'search',
        description: 'search',
        parameters: { type: 'object', properties: { q: { type: 'string', minLength: 1 } }, required: ['q'], additionalProperties: false },
        execute: () => 'ok',
      }),
    );
    expect(tool.validate({ q: 'x' })).toBeNull();
    expect(tool.validate({})?.message).toContain("must have required property 'q'");
    expect(tool.validate({ q: '' })?.code).toBe('TOOL_INPUT_INVALID');
    expect(tool.validate({ q: 'x', extra: 1 })?.message).toContain('must NOT have additional properties');
  });

  it.each([
    [{ name: '', description: 'd', parameters: {}, execute: (): number => 1 }, 'Expected tool name'],
    [{ name: 'ok', description: '', parameters: {}, execute: (): number => 1 }, 'non-empty description'],
    [{ name: 'ok', description: 'd', parameters: {} }, 'execute function'],
    [{ name: 'ok', description: 'd', parameters: {}, execute: (): number => 1, timeoutMs: 0 }, 'timeoutMs'],
  ])('refuses a bad definition at definition time %#', (tool, message) => {
    expect(() => defineTool(tool as never)).toThrow(message);
  });
});

describe('built-in tools', () => {
  it('every built-in has a schema that refuses unknown arguments', () => {
    expect([...BUILTIN_TOOLS.keys()].sort()).toEqual(
      [
        'agent_finish',
        'finish',
        'record_assent',
        'respond_to_user',
        'send_message',
        'sleep_until',
        'spawn_agent',
        'spawn_agents',
        'stop_agent',
        'view_agent_graph',
        'wait_for_agents',
      ].sort(),
    );
    for (const tool of BUILTIN_TOOLS.values()) {
      expect(tool.validate({ definitely_not_a_parameter: 1 })?.code, tool.name).toBe('TOOL_INPUT_INVALID');
    }
  });
});

describe('FailureTracker', () => {
  it('signals at exactly the threshold, resets on success, keeps lifetime totals', () => {
    const t = new FailureTracker(3);
    expect([t.recordFailure('sh', 'e1'), t.recordFailure('sh', 'e2'), t.recordFailure('sh', 'e3')]).toEqual([false, false, true]);
    expect(t.recordFailure('sh', 'e4')).toBe(false);
    expect(t.strategyPrompt('sh')).toContain("The tool 'sh' has failed 4 times consecutively. Last error: e4");
    t.recordSuccess('sh');
    expect(t.stats().sh).toEqual({ consecutive: 0, total: 4, lastError: 'e4' });
    expect([t.recordFailure('sh', 'x'), t.recordFailure('sh', 'x'), t.recordFailure('sh', 'x')]).toEqual([false, false, true]);
    t.resetAll();
    expect(t.stats()).toEqual({});
  });
});
