/**
 * `run --interactive` on a real pseudo-terminal (util-linux `script` gives the CLI a TTY): the
 * root's multi-line reply is shown whole; Ctrl-D ends input with a line that says what happens to
 * the run and how to reach its root; Ctrl-C then saves the run and exits 130 with the resume
 * command, as the README says. Before, the first Ctrl-C or a Ctrl-D left a dead prompt.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createFakeOpenAIServer } from '../../src/testing/fakeOpenAIServer.js';
import { BIN, workdir } from '../helpers/cli.js';

const SCRIPT = '/usr/bin/script';
const REPLY =
  'First finding: the parser accepts trailing commas.\nSecond finding: the cache is never invalidated after a schema change, which explains the stale reads.';

/** What a terminal shows, as plain text: no escape sequences, no carriage returns, one space for any run of blanks. */
const plain = (screen: string) =>
  screen
    .replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '')
    .replace(/\r/g, '')
    .replace(/\s+/g, ' ');

const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/** `troupe run --interactive` on a pseudo-terminal: what it shows, and a way to type and to wait for text. */
async function interactiveRun(serverUrl: string) {
  const cwd = workdir();
  const db = join(cwd, 'talk.db');
  const command = [process.execPath, BIN, 'run', 'Review the parser', '--interactive', '--model', 'm', '--base-url', serverUrl, '--api-key', 'k', '--db', db]
    .map(quote)
    .join(' ');
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('OPENAI_')));
  const child = spawn(SCRIPT, ['-qfec', command, '/dev/null'], { cwd, env: { ...clean, TERM: 'xterm' }, stdio: ['pipe', 'pipe', 'pipe'] });
  let screen = '';
  const waiters: { text: string; resolve: () => void }[] = [];
  const seen = (chunk: string) => {
    screen += chunk;
    for (const w of waiters.splice(0))
      if (plain(screen).includes(w.text)) w.resolve();
      else waiters.push(w);
  };
  child.stdout!.setEncoding('utf8').on('data', seen);
  child.stderr!.setEncoding('utf8').on('data', seen);
  return {
    db,
    type: (keys: string) => child.stdin!.write(keys),
    screen: () => plain(screen),
    exited: new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code))),
    // Resolves once the terminal shows `text`; the test's timeout says it never did.
    shown: (text: string) => new Promise<void>((resolve) => (plain(screen).includes(text) ? resolve() : waiters.push({ text, resolve }))),
  };
}

const title = existsSync(SCRIPT) ? 'run --interactive on a pseudo-terminal' : `run --interactive on a pseudo-terminal (skipped: no ${SCRIPT})`;

describe.skipIf(!existsSync(SCRIPT))(title, () => {
  it('shows the whole reply; Ctrl-D ends input and says what happens; Ctrl-C then saves and exits 130', async () => {
    await using server = await createFakeOpenAIServer(() => ({ message: { toolCalls: [{ name: 'respond_to_user', arguments: { message: REPLY } }] } }));
    const run = await interactiveRun(server.url);
    await run.shown('lead waits for you ›');
    // The whole reply, its last words included (a frame line would have cut it at 80 columns).
    await run.shown('which explains the stale reads.');
    expect(run.screen()).toContain(plain(REPLY));
    run.type('\x04');
    await run.shown(
      `input closed (Ctrl-D): the run goes on without you; troupe send lead "…" --db ${run.db} from another shell reaches lead, Ctrl-C saves and exits`,
    );
    run.type('\x03');
    expect(await run.exited).toBe(130);
    expect(run.screen()).toContain(`Carry on with: troupe resume --db ${run.db}`);
  });

  it('Ctrl-C at the prompt saves the run and exits 130 (the terminal is raw there: no signal of its own)', async () => {
    await using server = await createFakeOpenAIServer(() => ({ message: { toolCalls: [{ name: 'respond_to_user', arguments: { message: 'Ready.' } }] } }));
    const run = await interactiveRun(server.url);
    await run.shown('lead waits for you ›');
    run.type('\x03');
    expect(await run.exited).toBe(130);
    expect(run.screen()).toContain(`interrupted (SIGINT); every agent's state is saved. Carry on with: troupe resume --db ${run.db}`);
  });
});
