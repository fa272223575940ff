/** The bounded readers of MCP messages (src/mcp/limits.ts): which request a skipped line answered, and the stdio line reader. */
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { mcpServer } from '../../src/mcp/config.js';
import { BoundedLineBuffer, isTooLarge, messageLimit, MIN_MESSAGE_BYTES, oversizedKind, type OversizedLine } from '../../src/mcp/limits.js';

const ends = (line: string) => ({ head: line.slice(0, 512), tail: line.slice(-512) });
const pad = 'x'.repeat(2_000);

describe('oversizedKind: what a line too large to read was, from its ends', () => {
  it.each<[string, string, ReturnType<typeof oversizedKind>]>([
    ['a TypeScript SDK response (id last)', `{"result":{"content":[{"type":"text","text":"${pad}"}]},"jsonrpc":"2.0","id":5}`, { kind: 'response', id: 5 }],
    ['a Python SDK response (id first)', `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"${pad}"}]}}`, { kind: 'response', id: 7 }],
    ['an error response with a string id', `{"jsonrpc":"2.0","id":"req-1","error":{"code":-1,"message":"${pad}"}}`, { kind: 'response', id: 'req-1' }],
    ['a request from the server (method first)', `{"method":"sampling/createMessage","params":{"x":"${pad}"},"jsonrpc":"2.0","id":3}`, { kind: 'request' }],
    ['a request with id before method', `{"jsonrpc":"2.0","id":3,"method":"ping","params":{"x":"${pad}"}}`, { kind: 'request' }],
    ['a notification', `{"method":"notifications/message","params":{"data":"${pad}"},"jsonrpc":"2.0"}`, { kind: 'request' }],
    ['only a nested id', `{"result":{"x":"${pad}","y":{"id":9}}}`, { kind: 'unknown' }],
    ['not JSON-RPC at all', pad, { kind: 'unknown' }],
  ])('%s', (_name, line, kind) => {
    expect(oversizedKind(ends(line))).toEqual(kind);
  });
});

describe('BoundedLineBuffer', () => {
  const LIMIT = 1_000;
  function reader() {
    const skipped: OversizedLine[] = [];
    const buffer = new BoundedLineBuffer(
      LIMIT,
      (line) => JSON.parse(line) as JSONRPCMessage,
      (line) => skipped.push(line),
    );
    const feed = (text: string, piece = 7) => {
      for (let i = 0; i < text.length; i += piece) buffer.append(Buffer.from(text.slice(i, i + piece)));
    };
    const drain = () => {
      const out: JSONRPCMessage[] = [];
      for (let m = buffer.readMessage(); m !== null; m = buffer.readMessage()) out.push(m);
      return out;
    };
    return { buffer, skipped, feed, drain };
  }

  it('parses lines whatever the chunks (LF and CRLF), skipping blank ones', () => {
    const r = reader();
    r.feed('{"jsonrpc":"2.0","id":1,"result":{}}\n\n{"jsonrpc":"2.0","method":"n"}\r\n{"jsonrpc":"2.0","id":2,"re');
    expect(r.drain()).toEqual([
      { jsonrpc: '2.0', id: 1, result: {} },
      { jsonrpc: '2.0', method: 'n' },
    ]);
    r.feed('sult":{}}\n');
    expect(r.drain()).toEqual([{ jsonrpc: '2.0', id: 2, result: {} }]);
  });

  it('a response over the limit is skipped as it streams past and answered with an error for its id; the next line reads', () => {
    const r = reader();
    const big = `{"result":{"content":[{"type":"text","text":"${'y'.repeat(50_000)}"}]},"jsonrpc":"2.0","id":42}`;
    r.feed(`${big}\n{"jsonrpc":"2.0","id":43,"result":{}}\n`, 4_096);
    const [tooLarge, next] = r.drain();
    expect(tooLarge).toMatchObject({ jsonrpc: '2.0', id: 42, error: { code: -32603 } });
    expect(isTooLarge((tooLarge as { error?: unknown }).error)).toBe(LIMIT);
    expect(next).toEqual({ jsonrpc: '2.0', id: 43, result: {} });
    expect(r.skipped.map((s) => s.bytes)).toEqual([big.length]);
  });

  it('a line exactly at the limit is read; one byte more is skipped', () => {
    const r = reader();
    const at = (n: number, id: number) => {
      const base = `{"jsonrpc":"2.0","id":${id},"result":{"t":""}}`;
      return `{"jsonrpc":"2.0","id":${id},"result":{"t":"${'z'.repeat(n - base.length)}"}}`;
    };
    r.feed(`${at(LIMIT, 1)}\n${at(LIMIT + 1, 2)}\n`, 100);
    expect(r.drain().map((m) => ('error' in m ? 'too large' : 'read'))).toEqual(['read', 'too large']);
  });

  it('a request or notification over the limit is dropped; a line whose id cannot be found throws (the SDK closes the connection)', () => {
    const r = reader();
    r.feed(`{"method":"notifications/message","params":{"data":"${'n'.repeat(5_000)}"},"jsonrpc":"2.0"}\n`);
    expect(r.drain()).toEqual([]);
    expect(r.skipped).toHaveLength(1);
    expect(() => r.feed(`${'?'.repeat(5_000)}\n`, 10_000)).toThrow(expect.objectContaining({ code: 'MCP_RESULT_TOO_LARGE' }));
  });
});

describe('limits of a server', () => {
  it(`reads any message up to ${MIN_MESSAGE_BYTES} bytes, or 8 bytes per maxResultChars character when that is more`, () => {
    expect(messageLimit({})).toBe(MIN_MESSAGE_BYTES);
    expect(messageLimit({ maxResultChars: 1_000 })).toBe(MIN_MESSAGE_BYTES);
    expect(messageLimit({ maxResultChars: 2_000_000 })).toBe(16_000_000);
  });

  it.each([
    [{ maxTools: 0 }, /maxTools to be an integer > 0/],
    [{ maxTools: 1.5 }, /maxTools to be an integer > 0/],
    [{ maxTools: '10' }, /maxTools to be an integer > 0/],
    [{ maxListPages: -1 }, /maxListPages to be an integer > 0/],
  ])('refuses %j with CONFIG_INVALID', (extra, message) => {
    expect(() => mcpServer({ name: 'x', command: 'a', ...(extra as object) })).toThrow(message);
    expect(() => mcpServer({ name: 'x', command: 'a', ...(extra as object) })).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID' }));
  });

  it('accepts maxTools and maxListPages', () => {
    expect(mcpServer({ name: 'x', command: 'a', maxTools: 1_000, maxListPages: 3 }).options).toMatchObject({ maxTools: 1_000, maxListPages: 3 });
  });
});
