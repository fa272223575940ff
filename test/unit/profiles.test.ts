import { describe, expect, it } from 'vitest';
import { describeProfiles, profileOf, resolveProfiles } from '../../src/host/profiles.js';
import { mcpServer } from '../../src/mcp/config.js';
import { defineTool } from '../../src/tools/defineTool.js';

const lookup = defineTool({ name: 'lookup', description: 'd', parameters: { type: 'object', properties: {} }, execute: () => 1 });
const ctx = { tools: [lookup, mcpServer({ name: 'fs', command: 'node' })], prices: {}, limitUsd: null };
const resolve = (value: unknown, c: Parameters<typeof resolveProfiles>[1] = ctx) => resolveProfiles(value, c);
const model = { name: 'm', complete: async () => ({ text: '', toolCalls: [] }) };

describe('resolveProfiles', () => {
  it('accepts a full profile and names a user tool, an MCP server or one of its tools', () => {
    const profiles = resolve({
      cheap: { description: 'd', systemPrompt: 'p', model, tools: ['lookup', 'fs', 'fs__read'], limits: { maxTurns: 3 } },
      plain: { description: 'only a description' },
    });
    expect(profiles.get('cheap')).toMatchObject({ name: 'cheap', model, tools: ['lookup', 'fs', 'fs__read'], maxTurns: 3, systemPrompt: 'p' });
    expect(profiles.get('plain')).toMatchObject({ model: null, tools: null, maxTurns: null });
    expect(resolve(undefined).size).toBe(0);
  });

  it.each([
    ['not an object', [], /profiles to be an object/],
    ['a bad name', { 'two words': { description: 'd' } }, /profile names/],
    ['no description', { a: {} }, /description to be a non-empty string/],
    ['an unknown key', { a: { description: 'd', prompt: 'x' } }, /Unknown option profiles\["a"\]\.prompt/],
    ['an unknown tool', { a: { description: 'd', tools: ['lookup', 'shell'] } }, /"shell", which is neither a tool nor an MCP server/],
    ['tools not strings', { a: { description: 'd', tools: [1] } }, /tools to be a list/],
    ['a model without complete', { a: { description: 'd', model: { name: 'x' } } }, /model to be an object with a complete/],
    ['maxTurns 0', { a: { description: 'd', limits: { maxTurns: 0 } } }, /maxTurns to be an integer >= 1/],
    ['a limit that is not per agent', { a: { description: 'd', limits: { maxAgents: 3 } } }, /Unknown option profiles\["a"\]\.limits\.maxAgents/],
    ['a systemPrompt not a string', { a: { description: 'd', systemPrompt: 3 } }, /systemPrompt to be a string/],
  ])('refuses %s with CONFIG_INVALID', (_what, value, message) => {
    expect(() => resolve(value)).toThrow(message);
    expect(() => resolve(value)).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID' }));
  });

  it('refuses a profile model the budget cannot price, naming the profile', () => {
    expect(() => resolve({ a: { description: 'd', model } }, { ...ctx, limitUsd: 1 })).toThrow(/profiles\["a"\]\.model/);
    expect(resolve({ a: { description: 'd', model } }, { ...ctx, limitUsd: 1, prices: { m: { inputPer1M: 1, outputPer1M: 1 } } }).size).toBe(1);
  });

  it('profileOf: none without a name, PROFILE_UNKNOWN for a name not configured', () => {
    const profiles = resolve({ a: { description: 'd' } });
    expect(profileOf(profiles, undefined)).toBeNull();
    expect(profileOf(profiles, 'a')?.name).toBe('a');
    expect(() => profileOf(profiles, 'b')).toThrow(expect.objectContaining({ code: 'PROFILE_UNKNOWN', retryable: false }));
  });

  it('describeProfiles lists each name with its description, on one line each', () => {
    expect(describeProfiles(resolve({}))).toBe('');
    expect(describeProfiles(resolve({ a: { description: 'first\nline' }, b: { description: 'second' } }))).toBe(
      ' Profiles you may give it (`profile`):\n- a: first line\n- b: second',
    );
  });
});
