/**
 * Model text reaches the terminal through troupe's printers: an agent's name, what it said and its
 * report carry an OSC title sequence, SGR colours, an 8-bit CSI, a carriage return, DEL and a bidi
 * override. Whatever the live view (piped or redrawn), status, tree and --json print must hold
 * none of them raw: visible escapes instead, and the same values after JSON.parse.
 */
import { describe, expect, it } from 'vitest';
import { createCoordinator } from '../../src/host/createCoordinator.js';
import { attachView } from '../../src/cli/liveView.js';
import { forTerminal, jsonLine } from '../../src/cli/terminal.js';
import { scriptedModel } from '../../src/model/scriptedModel.js';
import { createFakeOpenAIServer, type FakeReply } from '../../src/testing/fakeOpenAIServer.js';
import { agentNameOf } from '../../src/testing/wireScript.js';
import { jsonLines, spawnTroupe, troupe, workdir } from '../helpers/cli.js';
import { TERMINAL } from '../helpers/team.js';

const OSC_TITLE = '\x1b]0;pwned\x07';
const SGR = '\x1b[31mRED\x1b[0m';
const EVIL_NAME = `w${OSC_TITLE}${SGR}`;
const EVIL_SAID = `hello ${OSC_TITLE}${SGR} \u009b2J wiped\rover\x7f \u202egnp.exe\nsecond line`;
const EVIL_SUMMARY = `done ${OSC_TITLE}${SGR}\u009b31m \u202etxt.exe\u202c`;

/** Raw characters a terminal acts on (newline and tab are the only controls allowed through). */
const RAW_CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/;

const call = (name: string, args: Record<string, unknown>): FakeReply => ({ message: { toolCalls: [{ name, arguments: args }] } });

describe('control characters from the model are neutralised in everything the CLI prints', () => {
  it('the piped live view, the report, status and tree; --json keeps the values, escaped', async () => {
    const lead = [
      call('spawn_agent', { name: EVIL_NAME, task: 'look around' }),
      call('wait_for_agents', { reason: 'it reports' }),
      call('respond_to_user', { message: EVIL_SAID }),
      call('finish', { summary: EVIL_SUMMARY }),
    ];
    await using server = await createFakeOpenAIServer((request) =>
      agentNameOf(request) === 'lead' ? lead.shift()! : call('agent_finish', { summary: EVIL_SUMMARY }),
    );
    const cwd = workdir();
    const run = spawnTroupe(['run', 'Say something', '--model', 'm', '--base-url', server.url, '--api-key', 'k', '--interactive'], cwd);
    await run.line(/says: hello/);
    expect((await troupe(['send', 'lead', 'thanks'], cwd)).code).toBe(0);
    expect(await run.exited).toEqual({ code: 0, signal: null });
    const live = run.lines.join('\n');

    const status = await troupe(['status'], cwd);
    const tree = await troupe(['tree'], cwd);
    for (const [label, text] of [
      ['live view', live],
      ['status', status.stdout],
      ['tree', tree.stdout],
    ] as const) {
      expect(RAW_CONTROL.exec(text), `${label}: ${JSON.stringify(text)}`).toBeNull();
    }
    // Shown, not hidden: the sequences appear as visible escapes.
    expect(live).toContain(`w\\x1b]0;pwned\\x07\\x1b[31mRED\\x1b[0m`);
    expect(live).toContain('\\x9b2J wiped\\x0dover\\x7f \\u202egnp.exe\nsecond line');
    expect(live).toContain(`Report (completed):\ndone \\x1b]0;pwned\\x07`);
    expect(status.stdout).toContain('report   done \\x1b]0;pwned\\x07');
    expect(tree.stdout).toContain(`w\\x1b]0;pwned\\x07\\x1b[31mRED\\x1b[0m (`);

    // --json: valid JSON lines whose values are the model's text exactly, with nothing raw.
    const statusJson = await troupe(['status', '--json'], cwd);
    const treeJson = await troupe(['tree', '--json'], cwd);
    for (const text of [statusJson.stdout, treeJson.stdout]) expect(RAW_CONTROL.exec(text.replace(/\n$/, ''))).toBeNull();
    expect((jsonLines(statusJson.stdout)[0] as { report: { summary: string } }).report.summary).toBe(EVIL_SUMMARY);
    expect(JSON.stringify(jsonLines(treeJson.stdout)[0])).toContain(JSON.stringify(EVIL_NAME).slice(1, -1));
  });

  it('the redrawn terminal view (TTY) and the --json event stream of a live run', async () => {
    const model = scriptedModel({
      agents: {
        lead: [
          { tool: 'spawn_agent', args: { name: EVIL_NAME, task: 'look' } },
          { tool: 'wait_for_agents', args: { reason: 'it reports' } },
          { tool: 'respond_to_user', args: { message: EVIL_SAID } },
        ],
        [EVIL_NAME]: [{ tool: 'agent_finish', args: { summary: EVIL_SUMMARY } }],
      },
    });
    const c = createCoordinator({ model, interactive: true });
    let tty = '';
    let json = '';
    const detachTty = attachView(c, 'tty', { write: (t) => (tty += t) }, { intervalMs: 1 });
    const detachJson = attachView(c, 'json', { write: (t) => (json += t) });
    const rootId = await c.start({ name: 'lead', task: 'go' });
    await c.waitFor(rootId, ['waiting', ...TERMINAL]);
    await c.whenIdle();
    detachTty.stop();
    detachJson.stop();
    await c.shutdown();
    // The view's own redraw sequences (cursor up N lines, clear to the end) are the only ESCs.
    const own = tty.replace(/\x1b\[\d+F\x1b\[0J/g, '');
    expect(RAW_CONTROL.exec(own), JSON.stringify(own)).toBeNull();
    expect(own).toContain(`  lead: says: hello \\x1b]0;pwned\\x07\\x1b[31mRED\\x1b[0m`);
    expect(own).toContain(`w\\x1b]0;pwned\\x07\\x1b[31mRED\\x1b[0m (`);
    expect(RAW_CONTROL.exec(json.replace(/\n/g, ''))).toBeNull();
    const said = json
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { type: string; text?: string; name?: string })
      .find((e) => e.type === 'agent.said');
    expect(said).toMatchObject({ name: 'lead', text: EVIL_SAID });
  });

  it('forTerminal and jsonLine: one line or many, every control shown, JSON values unchanged', () => {
    expect(forTerminal('a\x1b[2Jb\nc\td\re\u0085f\u2066g')).toBe('a\\x1b[2Jb\\x0ac\td\\x0de\\x85f\\u2066g');
    expect(forTerminal('a\nb\r\n', true)).toBe('a\nb\\x0d\n');
    expect(forTerminal('plain text, ünïcödé, emoji 🎭')).toBe('plain text, ünïcödé, emoji 🎭');
    const value = { s: `x\u009b\u007f\u202e\u2028${OSC_TITLE}` };
    const line = jsonLine(value);
    expect(RAW_CONTROL.exec(line)).toBeNull();
    expect(JSON.parse(line)).toEqual(value);
  });
});
