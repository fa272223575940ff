/**
 * An MCP tool cut by a crash is treated like any other tool (issue 14's ledger, issue 21): its
 * risk comes from the server's annotations, so a mutation is marked started before it runs and
 * reported TOOL_IN_DOUBT after the restart, never re-run; an idempotent one is re-run with the
 * same key (which reaches the server); a read-only one is re-run; one never started is TOOL_NOT_RUN.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { createCoordinator } from '../../src/host/createCoordinator.js';
import { resumeCoordinator } from '../../src/host/resumeCoordinator.js';
import { scriptedModel } from '../../src/model/scriptedModel.js';
import { openStore } from '../../src/store/sqliteStore.js';
import { codeOf, logSink, stdioServer, toolItems } from '../helpers/mcp.js';
import { TERMINAL } from '../helpers/team.js';

describe('MCP tool calls cut by a crash', () => {
  it('are resolved by their annotations: mutation in doubt, idempotent and read-only re-run, unstarted not run', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'troupe-mcp-'));
    const path = join(dir, 'run.db');
    const fixtureLog = join(dir, 'fixture.log');
    const server = () => stdioServer({ env: { FIXTURE_LOG: fixtureLog } });
    const sink = logSink();
    const first = scriptedModel({
      agents: {
        lead: [
          {
            tools: [
              { name: 'echo', args: { text: 'look' } },
              { name: 'charge', args: {} },
              { name: 'write_note', args: { note: 'n1' } },
              { name: 'slow', args: {} },
              { name: 'write_note', args: { note: 'n2' } },
            ],
          },
        ],
      },
    });
    const c = createCoordinator({ model: first, store: openStore({ path }), logger: sink.logger, tools: [server()] });
    const rootId = await c.start({ name: 'lead', task: 'Charge and note.' });
    await sink.until((r) => r.stderr?.startsWith('SLOW') === true);
    // The ledger marked every call that may have effects (by annotation) before it ran.
    expect(c.store.startedToolCalls(rootId).map((r) => r.tool)).toEqual(['charge', 'write_note', 'slow']);
    // The process stops while slow runs: nothing of this turn's results was committed.
    await c.shutdown();
    c.store.close();

    const store = openStore({ path });
    const second = scriptedModel({ agents: { lead: [{ tool: 'finish', args: { summary: 'checked' } }] } });
    const again = await resumeCoordinator({ store, model: second, tools: [server()] });
    expect((await again.waitFor(rootId, TERMINAL)).status).toBe('completed');
    const items = toolItems(store.loadSession(rootId));
    expect(items.map((i) => [i.name, codeOf(i)])).toEqual([
      ['echo', null],
      ['charge', null],
      ['write_note', 'TOOL_IN_DOUBT'],
      ['slow', 'TOOL_IN_DOUBT'],
      ['write_note', 'TOOL_NOT_RUN'],
      ['finish', null],
    ]);
    await again.shutdown();
    store.close();
    const log = readFileSync(fixtureLog, 'utf8').split('\n');
    // The mutation ran once (before the crash), never again; the idempotent call twice with one key.
    expect(log.filter((l) => l.startsWith('NOTE'))).toEqual(['NOTE n1']);
    const charges = log.filter((l) => l.startsWith('CHARGE'));
    expect(charges).toHaveLength(2);
    expect(charges[0]).toBe(charges[1]);
    expect(charges[0]).toMatch(new RegExp(`^CHARGE run_[^:]+:${rootId}:1:`));
    expect(items[1]!.content).toBe(charges[0]!.replace('CHARGE', 'charged'));
  });

  it('after a real kill -9 mid-call, the resumed run reports the MCP mutation in doubt and does not re-run it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'troupe-mcp-'));
    const path = join(dir, 'run.db');
    const fixtureLog = join(dir, 'fixture.log');
    const child = spawn(process.execPath, [fileURLToPath(new URL('../../dist/test/fixtures/mcp/crashChild.js', import.meta.url)), path, fixtureLog], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const exited = new Promise((resolve) => child.once('exit', resolve));
    let rootId = '';
    for await (const line of createInterface({ input: child.stdout })) {
      if (line.startsWith('ROOT ')) rootId = line.slice(5);
      if (line === 'READY') break;
    }
    child.kill('SIGKILL');
    await exited;

    const store = openStore({ path });
    const again = await resumeCoordinator({
      store,
      model: scriptedModel({ agents: { lead: [{ tool: 'finish', args: { summary: 'checked' } }] } }),
      tools: [stdioServer({ env: { FIXTURE_LOG: fixtureLog } })],
    });
    expect((await again.waitFor(rootId, TERMINAL)).status).toBe('completed');
    expect(toolItems(store.loadSession(rootId)).map((i) => [i.name, codeOf(i)])).toEqual([
      ['write_note', 'TOOL_IN_DOUBT'],
      ['slow', 'TOOL_IN_DOUBT'],
      ['finish', null],
    ]);
    await again.shutdown();
    store.close();
    expect(
      readFileSync(fixtureLog, 'utf8')
        .split('\n')
        .filter((l) => l.startsWith('NOTE')),
    ).toEqual(['NOTE before the crash']);
  });
});
