/**
 * The command line's conventions, as a user meets them: --version, per-command --help (exit 0,
 * every flag), "did you mean", one-line errors for expected failures, --inspect forms, Ctrl-C
 * (exit 130 and the resume command), status saying whether anyone hosts the run, a budget that
 * cannot bind, the first line and event of a piped or --json run, and the exit-code rows this
 * file produces (5 is in cliFiles, 7–10 in cliSend).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { acquireOwnerLock } from '../../src/store/ownerLock.js';
import { createFakeOpenAIServer, type FakeReply } from '../../src/testing/fakeOpenAIServer.js';
import { agentNameOf } from '../../src/testing/wireScript.js';
import { expectOneLine, jsonLines, seedRun, spawnTroupe, troupe, workdir } from '../helpers/cli.js';

const VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

describe('help, version, suggestions', () => {
  it('--version prints the package version; <command> --help exits 0 and lists every flag of the command', async () => {
    const cwd = workdir();
    const version = await troupe(['--version'], cwd);
    expect([version.code, version.stdout.trim()]).toEqual([0, VERSION]);
    const run = await troupe(['run', '--help'], cwd);
    expect(run.code).toBe(0);
    for (const flag of [
      '--model',
      '--base-url',
      '--api-key',
      '--budget',
      '--price',
      '--interactive',
      '--stream',
      '--config',
      '--db',
      '--json',
      '--inspect',
      '--verbose',
    ])
      expect(run.stdout).toContain(flag);
    const resume = await troupe(['resume', '--help'], cwd);
    for (const flag of ['--model', '--base-url', '--budget', '--run']) expect(resume.stdout).toContain(flag);
    // The usage detail the README leaves to --help (src/cli/commandHelp.ts).
    expect(run.stdout).toContain('--price in,out');
    const serve = await troupe(['serve', '--help'], cwd);
    expect([serve.code, serve.stdout.includes('watch_patterns'), serve.stdout.includes('failureThreshold')]).toEqual([0, true, true]);
    const ui = await troupe(['ui', '--help'], cwd);
    expect(ui.stdout).toContain('TROUPE_UI_TOKEN');
    // Each command's help is its own: the demo's database and what it needs (nothing), no model
    // rules; the read commands have no live view; the readers say where they look without --db.
    const demo = await troupe(['demo', '--help'], cwd);
    expect(demo.stdout).toMatch(/--db <file-or-url>\s+the database file \(default\s+\.troupe\/demo\.db\)/);
    expect(demo.stdout).toContain('The demo needs no key and no network');
    for (const text of ['A run needs a model', '--stream', '--interactive']) expect(demo.stdout).not.toContain(text);
    for (const command of ['status', 'tree']) {
      const help = (await troupe([command, '--help'], cwd)).stdout;
      expect(help, command).not.toContain('live view');
      expect(help.replace(/\s+/g, ' '), command).toContain('--json one JSON document on stdout instead of text');
      expect(help.replace(/\s+/g, ' '), command).toContain('or .troupe/demo.db while only the demo wrote one');
    }
    expect(run.stdout).not.toContain('demo.db');
    const top = await troupe([], cwd);
    expect(top.code).toBe(2);
    expect(top.stderr).toContain('serve [options] [task]');
  });

  it('a misspelt command or flag: exit 2, "did you mean", no stack', async () => {
    const cwd = workdir();
    const command = await troupe(['rn', 'x'], cwd);
    expect(command.code).toBe(2);
    expect(command.stderr).toContain('(Did you mean run?)');
    const flag = await troupe(['run', 'x', '--strem'], cwd);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toContain('(Did you mean --stream?)');
    expect(flag.stderr).not.toMatch(/\n\s+at /);
  });
});

describe('--inspect', () => {
  it('a busy port is one line and exit 2; --inspect 0 serves on a free port and keeps serving after the run until Ctrl-C', async () => {
    const cwd = workdir();
    const busy = createServer();
    await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
    const port = (busy.address() as { port: number }).port;
    try {
      const r = await troupe(['demo', '--inspect', String(port), '--json'], cwd);
      expect(r.code).toBe(2);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(r.stderr).toContain(`cannot listen on 127.0.0.1:${port}: the port is in use`);
    } finally {
      busy.close();
    }
    const demo = spawnTroupe(['demo', '--inspect', '0', '--json'], cwd);
    await demo.line(/"type":"run.finished"/);
    await waitFor(() => /keeps serving http:\/\/127\.0\.0\.1:\d+\/\?token=/.test(demo.stderr()));
    expect(demo.child.exitCode).toBeNull();
    demo.child.kill('SIGINT');
    expect(await demo.exited).toEqual({ code: 0, signal: null });
  });
});

/** Poll a condition a child process's output will meet (bounded; the child is the clock). */
async function waitFor(condition: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('Ctrl-C and a run nobody hosts', () => {
  it('SIGINT stops the run cleanly (exit 130) and prints the resume command; status then says no process hosts it', async () => {
    let called!: () => void;
    const calledOnce = new Promise<void>((resolve) => (called = resolve));
    // The model never answers: the run is mid-call when the user presses Ctrl-C.
    await using server = await createFakeOpenAIServer(() => {
      called();
      return { message: { content: 'late' }, delayMs: 600_000 };
    });
    const cwd = workdir();
    const run = spawnTroupe(['run', 'Take your time', '--model', 'm', '--base-url', server.url, '--api-key', 'k'], cwd);
    await run.line(/lead\s+new → running/);
    await calledOnce;
    const live = await troupe(['status'], cwd);
    expect(live.stdout).toMatch(/^host {5}a troupe process hosts this run now$/m);
    run.child.kill('SIGINT');
    expect(await run.exited).toEqual({ code: 130, signal: null });
    expect(run.stderr()).toContain('Carry on with: troupe resume');
    const after = await troupe(['status'], cwd);
    expect(after.stdout).toMatch(/^root {5}lead \(\w+\) running$/m);
    expect(after.stdout).toMatch(/^host {5}no process hosts it: its agents stand still until troupe resume hosts it$/m);
  });
});

describe('resuming a run whose root failed', () => {
  it('does not replay the failure: it says a message revives the root, and how', async () => {
    await using server = await createFakeOpenAIServer([
      { status: 401, body: { error: { message: 'Incorrect API key provided', type: 'x', code: 'invalid_api_key' } } },
    ]);
    const cwd = workdir();
    expect((await troupe(['run', 'x', '--model', 'm', '--base-url', server.url, '--api-key', 'bad'], cwd)).code).toBe(6);
    const resumed = await troupe(['resume'], cwd);
    expect(resumed.code).toBe(6);
    expect(resumed.stdout).toBe('');
    expect(resumed.stderr).toContain('the root lead of run');
    expect(resumed.stderr).toContain('A message revives it: troupe send lead "<what to do now>", then troupe resume');
  });
});

describe('a piped or --json run starts with its root and a run.started event', () => {
  it('piped: the root’s new → running line first; --json: run.started first, then the root', async () => {
    const finish = { message: { toolCalls: [{ name: 'finish', arguments: { summary: 'ok' } }] } };
    await using server = await createFakeOpenAIServer(() => finish);
    const cwd = workdir();
    const piped = await troupe(['run', 'x', '--model', 'm', '--base-url', server.url, '--api-key', 'k'], cwd);
    expect(piped.stdout.split('\n')[0]).toMatch(/^ {2}lead\s+new → running$/);
    const json = jsonLines((await troupe(['run', 'x', '--model', 'm', '--base-url', server.url, '--api-key', 'k', '--json'], cwd)).stdout);
    expect(json[0]).toMatchObject({ type: 'run.started', resumed: false });
    expect(json[1]).toMatchObject({ type: 'agent.status', name: 'lead', from: null, to: 'running' });
  });
});

describe('money settings fail loudly', () => {
  it('--budget with a model troupe has no price for: exit 2 naming --price; with --price the run goes', async () => {
    const finish = { message: { toolCalls: [{ name: 'finish', arguments: { summary: 'ok' } }] }, usage: { promptTokens: 1_000_000, completionTokens: 0 } };
    await using server = await createFakeOpenAIServer(() => finish);
    const cwd = workdir();
    const refused = await troupe(['run', 'x', '--model', 'qwen2.5:7b', '--base-url', server.url, '--budget', '5'], cwd);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('--price <input>,<output>');
    const priced = await troupe(['run', 'x', '--model', 'qwen2.5:7b', '--base-url', server.url, '--budget', '5', '--price', '0.5,1', '--json'], cwd);
    expect(priced.code, priced.stderr).toBe(0);
    expect(jsonLines(priced.stdout).at(-1)).toMatchObject({ budget: { spentUsd: 0.5, limitUsd: 5 } });
    writeFileSync(join(cwd, 'troupe.config.json'), JSON.stringify({ budget: { limtUsd: 5 } }));
    const typo = await troupe(['run', 'x', '--model', 'm', '--base-url', server.url], cwd);
    expect(typo.code).toBe(2);
    expect(typo.stderr).toContain('budget has an unknown key "limtUsd"');
  });
});

describe('a run the budget stopped', () => {
  it('says why (the next call’s estimate against the limit) and prints the children’s reports when the root wrote none', async () => {
    const call = (name: string, args: Record<string, unknown>, promptTokens = 10): FakeReply => ({
      message: { toolCalls: [{ name, arguments: args }] },
      usage: { promptTokens, completionTokens: 0 },
    });
    const lead = [
      call('spawn_agent', { name: 'worker', task: 'find X' }),
      call('wait_for_agents', { reason: 'the worker' }),
      call('view_agent_graph', {}, 9_000),
    ];
    await using server = await createFakeOpenAIServer((request) =>
      agentNameOf(request) === 'lead' ? lead.shift()! : call('agent_finish', { summary: 'worker found X' }),
    );
    const cwd = workdir();
    // $1,000 per 1M tokens: a call reserves ~$4 (its output allowance), 9,000 prompt tokens cost $9.
    const r = await troupe(['run', 'Find X', '--model', 'local', '--base-url', server.url, '--api-key', 'k', '--budget', '10', '--price', '1000,1000'], cwd);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stdout).toMatch(/reserve tripped: lead's call brought the spend to \$9\.\d\d, past the sub-agent reserve line \$9\.00 \(90 % of \$10\.00\)/);
    expect(r.stdout).toMatch(/budget stopped the run: lead's next call, estimated at \$\d+\.\d\d, would take \$9\.\d\d spent past the limit \$10\.00/);
    expect(r.stdout).toContain('Report (stopped):\n(lead wrote none: budget)\nWhat the team reported:\n  worker: worker found X');
  });
});

describe('exit codes: the rows produced here', () => {
  it('1: the root crashed (plain text until the recovery limit); 3: another process owns the database; 4: no database', async () => {
    await using server = await createFakeOpenAIServer(() => ({ message: { content: 'just words' } }));
    const cwd = workdir();
    const crashed = await troupe(['run', 'x', '--model', 'm', '--base-url', server.url, '--api-key', 'k', '--json'], cwd);
    expect(crashed.code, crashed.stderr).toBe(1);
    expect(jsonLines(crashed.stdout).at(-1)).toMatchObject({ status: 'crashed', error: { code: 'RECOVERY_EXHAUSTED' } });

    const db = join(cwd, 'owned.db');
    await seedRun(db, { interactive: true });
    const lock = acquireOwnerLock(db);
    try {
      const locked = await troupe(['resume', '--db', db, '--model', 'm', '--base-url', server.url], cwd);
      expect(locked.code, locked.stderr).toBe(3);
      expectOneLine(locked, 'RUN_LOCKED');
      // What to do instead: another file for a second run, or the inbox commands for this one.
      expect(locked.stderr).toContain(
        `Start a second run on another file (--db .troupe/second.db), or reach that process's runs from here with troupe send / stop / status --db ${db}`,
      );
    } finally {
      lock.release();
    }
    expect((await troupe(['status', '--db', join(cwd, 'none.db')], cwd)).code).toBe(4);
  });
});
