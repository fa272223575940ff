/** Helpers for the MCP tests: the stdio fixture's path, a log sink to wait on, tool results. */
import { fileURLToPath } from 'node:url';
import { pino, type Logger } from 'pino';
import { mcpServer, type McpServerOptions } from '../../src/mcp/config.js';
import type { SessionItem } from '../../src/model/types.js';
import type { FakeRequest, FakeScript } from '../../src/testing/fakeOpenAIServer.js';

export const FIXTURE = fileURLToPath(new URL('../../dist/test/fixtures/mcp/server.js', import.meta.url));

type LogRecord = Record<string, unknown> & { msg?: string; stderr?: string; mcpServer?: string };

/** A pino logger whose records a test can wait on (events, not sleeps). */
export function logSink(): { logger: Logger; records: LogRecord[]; raw: string[]; until(pred: (r: LogRecord) => boolean): Promise<LogRecord> } {
  const records: LogRecord[] = [];
  const raw: string[] = [];
  const waiters: { pred: (r: LogRecord) => boolean; resolve: (r: LogRecord) => void }[] = [];
  const stream = {
    write(line: string) {
      raw.push(line);
      const record = JSON.parse(line) as LogRecord;
      records.push(record);
      for (const w of [...waiters]) {
        if (!w.pred(record)) continue;
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(record);
      }
    },
  };
  return {
    logger: pino({ level: 'debug' }, stream),
    records,
    raw,
    until: (pred) => {
      const seen = records.find(pred);
      return seen ? Promise.resolve(seen) : new Promise((resolve) => waiters.push({ pred, resolve }));
    },
  };
}

export const stdioServer = (extra: Partial<McpServerOptions> = {}, name = 'fx') =>
  mcpServer({ name, command: process.execPath, args: [FIXTURE], ...extra } as McpServerOptions);

export const toolItems = (session: readonly SessionItem[]) =>
  session
    .filter((i): i is Extract<SessionItem, { role: 'tool' }> => i.role === 'tool')
    .map((i) => ({ name: i.name, content: i.content, isError: i.isError === true }));

/** The error code of a tool result, or null for a success. */
export const codeOf = (item: { content: string; isError: boolean }) =>
  item.isError ? (JSON.parse(item.content) as { error: { code: string } }).error.code : null;

/** A fake server's answers for a CLI run: `toolCalls` in the first request, then finish once a tool result came back. */
export const callsThenFinish =
  (toolCalls: { name: string; arguments: Record<string, unknown> }[]): FakeScript =>
  (request: FakeRequest) =>
    (request.body as { messages: { role: string }[] }).messages.some((m) => m.role === 'tool')
      ? { message: { toolCalls: [{ name: 'finish', arguments: { summary: 'all done' } }] } }
      : { message: { toolCalls } };
