/**
 * The config file's `mcpServers` section drives `troupe run` (issue 21): the team gets the tools,
 * the servers' stderr goes to the log file (never the terminal), header secrets are redacted
 * everywhere and the section is never saved with the run.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/sqliteStore.js';
import { createFakeOpenAIServer } from '../../src/testing/fakeOpenAIServer.js';
import { startHttpFixture, type HttpFixture } from '../fixtures/mcp/server.js';
import { jsonLines, troupe, workdir } from '../helpers/cli.js';
import { callsThenFinish, FIXTURE } from '../helpers/mcp.js';

const fixtures: HttpFixture[] = [];
afterEach(async () => {
  await Promise.all(fixtures.splice(0).map((f) => f.close()));
});

describe('config "mcpServers"', () => {
  it('a server that fails to start: one line on stderr and the run goes on; with --strict-mcp, exit 11 and no run', async () => {
    await using server = await createFakeOpenAIServer(() => ({ message: { toolCalls: [{ name: 'finish', arguments: { summary: 'done without it' } }] } }));
    const cwd = workdir();
    writeFileSync(
      join(cwd, 'troupe.config.json'),
      JSON.stringify({ model: 'm', baseURL: server.url, apiKey: 'k', mcpServers: { gone: { command: '/nonexistent/mcp-server' } } }),
    );
    const r = await troupe(['run', 'Use the tools'], cwd);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr.split('\n').filter((l) => l.includes('MCP'))).toEqual([
      expect.stringMatching(
        /^troupe: MCP server "gone" failed to start \(.*ENOENT.*\); the run goes on without its tools until it starts \(retried with backoff; --strict-mcp makes this fatal\)$/,
      ),
    ]);
    const strict = await troupe(['run', 'Use the tools', '--strict-mcp', '--db', join(cwd, 'strict.db')], cwd);
    expect(strict.code, strict.stderr).toBe(11);
    expect(strict.stderr).toMatch(
      /^troupe: MCP_SERVER_UNAVAILABLE: MCP server "gone" failed to start \(.*\); with strictMcp \(--strict-mcp\) the run does not go on without its tools\n$/,
    );
  });

  it('troupe run offers the servers’ tools; stderr goes to the log; header secrets never reach the log or the database', async () => {
    const web = await startHttpFixture();
    fixtures.push(web);
    const secret = 'Bearer cli-mcp-secret-987654';
    await using server = await createFakeOpenAIServer(
      callsThenFinish([
        { name: 'fx__echo', arguments: { text: 'over stdio' } },
        { name: 'web__echo', arguments: { text: 'over http' } },
      ]),
    );
    const cwd = workdir();
    const mcpServers = { fx: { command: process.execPath, args: [FIXTURE] }, web: { url: web.url, headers: { authorization: secret } } };
    writeFileSync(join(cwd, 'troupe.config.json'), JSON.stringify({ model: 'm', baseURL: server.url, apiKey: 'k', mcpServers }));
    const r = await troupe(['run', 'Use the tools', '--json'], cwd);
    expect(r.code, r.stderr).toBe(0);
    expect(jsonLines(r.stdout).at(-1)).toMatchObject({ type: 'run.finished', status: 'completed' });
    const first = server.requests[0]!.body as { tools: { function: { name: string } }[] };
    expect(first.tools.map((t) => t.function.name)).toEqual(expect.arrayContaining(['fx__echo', 'web__echo']));
    const second = server.requests[1]!.body as { messages: { role: string; content: string }[] };
    expect(second.messages.filter((m) => m.role === 'tool').map((m) => m.content)).toEqual(['echo: over stdio', 'echo: over http']);
    expect(web.headers.every((h) => h.authorization === secret)).toBe(true);
    const log = readFileSync(join(cwd, '.troupe/troupe.log'), 'utf8');
    expect(log).toContain('FIXTURE UP');
    expect(r.stdout + r.stderr).not.toContain('FIXTURE UP');
    expect(log).not.toContain('cli-mcp-secret');
    const db = readFileSync(join(cwd, '.troupe/troupe.db'));
    expect(db.includes('cli-mcp-secret')).toBe(false);
    const store = openStore({ path: join(cwd, '.troupe/troupe.db'), readonly: true });
    try {
      const saved = store.listEvents(store.listRuns().at(-1)!.id).find((e) => e.type === 'cli.run')!;
      expect(saved.data).not.toHaveProperty('mcpServers');
    } finally {
      store.close();
    }

    // resume reads the section from the config file again (it was not saved with the run).
    const resumed = await troupe(['resume', '--json'], cwd);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(readFileSync(join(cwd, '.troupe/troupe.log'), 'utf8').match(/FIXTURE UP/g)).toHaveLength(2);
    writeFileSync(join(cwd, 'other.json'), JSON.stringify({ mcpServers: { fx: { command: '' } } }));
    const bad = await troupe(['resume', '--config', 'other.json'], cwd);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('mcpServers.fx');
  });

  it('an invalid entry is refused with exit 2, naming the server', async () => {
    const cwd = workdir();
    writeFileSync(join(cwd, 'troupe.config.json'), JSON.stringify({ model: 'm', mcpServers: { fx: { command: 'x', url: 'http://127.0.0.1:1/mcp' } } }));
    const r = await troupe(['run', 'x'], cwd);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('mcpServers.fx');
  });
});
