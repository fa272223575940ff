/** The pure parts of the MCP adapter: declarations, risk from annotations, results, tool sets. */
import { describe, expect, it } from 'vitest';
import { inSets, toolSetOf } from '../../src/mcp/catalog.js';
import { describeServer, mcpServer } from '../../src/mcp/config.js';
import { resultOf, riskOf } from '../../src/mcp/tools.js';
import { isToolOutput, type ToolOutput } from '../../src/tools/toolOutput.js';
import { compileTool } from '../../src/tools/defineTool.js';

const tool = (annotations?: Record<string, boolean>) => ({ name: 't', inputSchema: { type: 'object' as const }, ...(annotations ? { annotations } : {}) });

describe('mcpServer', () => {
  it('accepts a stdio and an HTTP declaration', () => {
    expect(mcpServer({ name: 'fs', command: 'node', args: ['s.js'], env: { A: 'b' } }).kind).toBe('mcp');
    expect(mcpServer({ name: 'web', url: 'http://127.0.0.1:1/mcp', headers: { authorization: 'x' } }).options.name).toBe('web');
  });

  it.each([
    [{ name: 'x' }, /either a command/],
    [{ name: 'x', command: 'a', url: 'http://h' }, /either a command/],
    [{ name: '1x', command: 'a' }, /name to match/],
    [{ name: 'a__very_long_server_name_over_32_chars', command: 'a' }, /name to match/],
    [{ name: 'x', command: 'a', args: [1] }, /args/],
    [{ name: 'x', command: 'a', env: { A: 1 } }, /env to be an object of strings/],
    [{ name: 'x', command: 'a', headers: {} }, /headers only with a url/],
    [{ name: 'x', url: 'ftp://h' }, /http\(s\)/],
    [{ name: 'x', url: 'not a url' }, /to be a URL/],
    [{ name: 'x', url: 'http://h', env: {} }, /env and args only with a command/],
    [{ name: 'x', command: 'a', tools: { t: { risk: 'scary' } } }, /risk to be one of/],
    [{ name: 'x', command: 'a', tools: { t: { idempotent: 'yes' } } }, /idempotent to be a boolean/],
    [{ name: 'x', command: 'a', tools: { t: { timeoutMs: 0 } } }, /timeoutMs to be a number > 0/],
    [{ name: 'x', command: 'a', maxResultChars: -1 }, /maxResultChars/],
  ])('refuses %j with CONFIG_INVALID', (options, message) => {
    expect(() => mcpServer(options as never)).toThrow(message);
    try {
      mcpServer(options as never);
    } catch (err) {
      expect((err as { code: string }).code).toBe('CONFIG_INVALID');
    }
  });

  it('describes a server for logs without headers values, credentials or query', () => {
    const d = describeServer({ name: 'web', url: 'https://user:pw@h.example/mcp?token=abc', headers: { authorization: 'Bearer s3cret' } });
    expect(JSON.stringify(d)).not.toMatch(/s3cret|pw|token=abc/);
    expect(d).toEqual({ mcpServer: 'web', url: 'https://h.example/mcp', headers: ['authorization'] });
  });
});

describe('risk from annotations', () => {
  it('readOnlyHint -> read_only, destructiveHint -> destructive, otherwise mutation', () => {
    expect(riskOf(tool({ readOnlyHint: true }))).toBe('read_only');
    expect(riskOf(tool({ readOnlyHint: true, destructiveHint: true }))).toBe('read_only');
    expect(riskOf(tool({ destructiveHint: true }))).toBe('destructive');
    expect(riskOf(tool({ readOnlyHint: false, destructiveHint: false }))).toBe('mutation');
    expect(riskOf(tool({ idempotentHint: true }))).toBe('mutation');
    expect(riskOf(tool())).toBe('mutation');
  });
});

describe('results', () => {
  it('text blocks are joined; structured content comes with them; images are described', () => {
    expect(
      resultOf(
        's',
        't',
        {
          content: [
            { type: 'text', text: 'a' },
            { type: 'text', text: 'b' },
          ],
        },
        100,
      ),
    ).toBe('a\nb');
    expect(resultOf('s', 't', { content: [], structuredContent: { n: 1 } }, 100)).toEqual({ content: '', structuredContent: { n: 1 } });
    expect(resultOf('s', 't', { content: [{ type: 'audio', data: 'AAAA', mimeType: 'audio/wav' }] }, 100)).toBe('[audio audio/wav, 3 bytes]');
    expect(resultOf('s', 't', { content: [{ type: 'resource', resource: { uri: 'file:///a', text: 'inside' } }] }, 100)).toBe('inside');
  });

  it('an image the model takes is described and carried as an image; others only described, saying why', () => {
    const png = { type: 'image' as const, data: 'AAAA', mimeType: 'image/png' };
    const shown = resultOf('s', 't', { content: [png, { type: 'text', text: 'a square' }] }, 1_000);
    expect(isToolOutput(shown)).toBe(true);
    const out = shown as ToolOutput;
    expect(out.value).toBe('[image image/png, 3 bytes: shown to you after the tool results]\na square');
    expect(out.images).toEqual([{ mimeType: 'image/png', data: 'AAAA' }]);
    // A type models do not take, data that is not base64: described, not carried.
    expect(resultOf('s', 't', { content: [{ ...png, mimeType: 'image/svg+xml' }] }, 1_000)).toMatch(
      /^\[image image\/svg\+xml, 3 bytes: not shown, the model takes only PNG/,
    );
    expect(resultOf('s', 't', { content: [{ ...png, data: 'AA AA' }] }, 1_000)).toMatch(/not shown, its data is not base64\]$/);
    // The limit counts the text and every image's base64: the image that would cross it is left
    // out, the one before it kept (266 characters of text leave room for 4 of base64).
    const two = resultOf('s', 't', { content: [{ type: 'text', text: 'x'.repeat(80) }, png, { ...png, data: 'BBBBBBBB' }] }, 270) as ToolOutput;
    expect(two.images).toEqual([{ mimeType: 'image/png', data: 'AAAA' }]);
    expect(two.value).toContain('[image image/png, 6 bytes: not shown, the result would be over its limit of 270 characters]');
    expect((two.value as string).length + 4).toBeLessThanOrEqual(270);
    expect(resultOf('s', 't', { content: [{ ...png, data: 'A'.repeat(104) }] }, 100)).toMatch(
      /^\[image image\/png, 78 bytes: not shown, the result would be over its limit/,
    );
    // An error result carries no image.
    expect(() => resultOf('s', 't', { content: [png], isError: true }, 1_000)).toThrow(expect.objectContaining({ code: 'TOOL_FAILED' }));
  });

  it('an error result is TOOL_FAILED with its text; an oversized one MCP_RESULT_TOO_LARGE', () => {
    expect(() => resultOf('s', 't', { content: [{ type: 'text', text: 'bad' }], isError: true }, 100)).toThrow(
      expect.objectContaining({ code: 'TOOL_FAILED', message: expect.stringContaining('bad') }),
    );
    expect(() => resultOf('s', 't', { content: [{ type: 'text', text: 'x'.repeat(101) }] }, 100)).toThrow(
      expect.objectContaining({ code: 'MCP_RESULT_TOO_LARGE' }),
    );
    expect(resultOf('s', 't', { content: [{ type: 'text', text: 'x'.repeat(100) }] }, 100)).toHaveLength(100);
  });
});

describe('tool sets', () => {
  const entry = (name: string, server: string | null) => ({
    tool: compileTool({ name, description: 'd', parameters: { type: 'object' }, execute: () => null }),
    server,
  });

  it('skills tools:<name> name a set; no such skill means no restriction', () => {
    expect(toolSetOf(['review', 'tools:web', 'tools: fx__echo '])).toEqual(['web', 'fx__echo']);
    expect(toolSetOf(['review'])).toBeNull();
  });

  it('a tool is offered when every set (the agent and its ancestors) names it or its server', () => {
    const webEcho = entry('web__echo', 'web');
    const local = entry('search', null);
    expect(inSets(webEcho, [])).toBe(true);
    expect(inSets(webEcho, [['web']])).toBe(true);
    expect(inSets(webEcho, [['web__echo'], ['web']])).toBe(true);
    expect(inSets(webEcho, [['web'], ['fx']])).toBe(false);
    expect(inSets(local, [['web']])).toBe(false);
    expect(inSets(local, [['search']])).toBe(true);
  });
});
