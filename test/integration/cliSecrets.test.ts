/**
 * The configured API key never leaves troupe by value: a provider that echoes it in its 401 body
 * puts it in an error, which is stored, logged and printed — every one of those must hold
 * `[redacted]` instead. And what troupe creates is for its owner only (0600 files, 0700 dirs).
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createFakeOpenAIServer } from '../../src/testing/fakeOpenAIServer.js';
import { jsonLines, troupe, workdir } from '../helpers/cli.js';

const KEY = 'sk-troupe-test-0123456789abcdefSECRET';

/** A provider that refuses the key and quotes it back, as some do. */
const echoing401 = () =>
  createFakeOpenAIServer(() => ({
    status: 401,
    body: { error: { message: `Incorrect API key provided: ${KEY}. Check the key ${KEY} and retry.`, type: 'invalid_request_error', code: 'invalid_api_key' } },
  }));

/** Every byte troupe left behind in `cwd/.troupe` (database, -wal, log, lock) plus what it printed. */
function everything(cwd: string, printed: string[]): { name: string; text: string }[] {
  const files = ['troupe.db', 'troupe.db-wal', 'troupe.log', 'troupe.db.lock'].map((f) => join(cwd, '.troupe', f)).filter((p) => existsSync(p));
  return [...files.map((p) => ({ name: p, text: readFileSync(p).toString('latin1') })), ...printed.map((text, i) => ({ name: `output ${i}`, text }))];
}

describe('the API key is scrubbed by value from the database, the log and the output', () => {
  const variants: [string, { env: Record<string, string>; args: string[]; file: boolean }][] = [
    ['OPENAI_API_KEY, --json', { env: { OPENAI_API_KEY: KEY }, args: ['--json'], file: false }],
    ['--api-key, -v (logs on stderr too)', { env: {}, args: ['--api-key', KEY, '-v'], file: false }],
    ['the config file', { env: {}, args: [], file: true }],
  ];
  it.each(variants)('%s', async (_label, variant) => {
    await using server = await echoing401();
    const cwd = workdir();
    if (variant.file) writeFileSync(join(cwd, 'troupe.config.json'), JSON.stringify({ apiKey: KEY }));
    const r = await troupe(['run', 'Say hello', '--model', 'm', '--base-url', server.url, ...variant.args], cwd, variant.env);
    expect(r.code, r.stderr).toBe(6);
    // The key did reach the provider, and the provider did quote it.
    expect(server.requests[0]!.headers.authorization).toBe(`Bearer ${KEY}`);
    if (variant.args.includes('--json')) expect(jsonLines(r.stdout).at(-1)).toMatchObject({ status: 'failed', error: { code: 'PROVIDER_AUTH' } });

    const status = await troupe(['status', '--json'], cwd);
    const tree = await troupe(['tree'], cwd);
    for (const { name, text } of everything(cwd, [r.stdout, r.stderr, status.stdout, status.stderr, tree.stdout, tree.stderr])) {
      expect(text.includes(KEY), `${name} holds the key`).toBe(false);
    }
    // Not merely absent: the error was stored and logged, scrubbed.
    const db =
      readFileSync(join(cwd, '.troupe/troupe.db')).toString('latin1') +
      (existsSync(join(cwd, '.troupe/troupe.db-wal')) ? readFileSync(join(cwd, '.troupe/troupe.db-wal')).toString('latin1') : '');
    expect(db).toContain('Incorrect API key provided: [redacted]. Check the key [redacted]');
    expect(readFileSync(join(cwd, '.troupe/troupe.log'), 'utf8')).toContain('Incorrect API key provided: [redacted]');
  });

  it('a key shorter than 8 characters is not treated as a secret (it would mangle ordinary text)', async () => {
    await using server = await createFakeOpenAIServer([{ message: { toolCalls: [{ name: 'finish', arguments: { summary: 'done: a b c' } }] } }]);
    const cwd = workdir();
    const r = await troupe(['run', 'x', '--model', 'm', '--base-url', server.url, '--api-key', 'a', '--json'], cwd);
    expect(r.code, r.stderr).toBe(0);
    expect(jsonLines(r.stdout).at(-1)).toMatchObject({ report: { summary: 'done: a b c' } });
  });
});

describe('files troupe creates are its owner’s only', () => {
  it('the log is 0600 (an existing 0644 one is tightened), the database and its lock 0600, .troupe 0700', async () => {
    await using server = await createFakeOpenAIServer(() => ({ message: { toolCalls: [{ name: 'finish', arguments: { summary: 'done' } }] } }));
    const cwd = workdir();
    const mode = (p: string) => statSync(join(cwd, p)).mode & 0o777;
    const first = await troupe(['run', 'x', '--model', 'm', '--base-url', server.url, '--api-key', 'k'], cwd);
    expect(first.code, first.stderr).toBe(0);
    expect(mode('.troupe')).toBe(0o700);
    expect(mode('.troupe/troupe.log')).toBe(0o600);
    expect(mode('.troupe/troupe.db')).toBe(0o600);
    expect(mode('.troupe/troupe.db.lock')).toBe(0o600);

    // A log left 0644 by an older troupe (or by hand) is tightened on the next command that logs.
    // So is a .troupe folder left 0755: it is troupe's own (README, Durable runs).
    const other = workdir();
    mkdirSync(join(other, '.troupe'), { mode: 0o755 });
    chmodSync(join(other, '.troupe'), 0o755);
    writeFileSync(join(other, '.troupe/troupe.log'), '', { mode: 0o644 });
    expect(statSync(join(other, '.troupe/troupe.log')).mode & 0o777).toBe(0o644);
    const second = await troupe(['run', 'x', '--model', 'm', '--base-url', server.url, '--api-key', 'k'], other);
    expect(second.code, second.stderr).toBe(0);
    expect(statSync(join(other, '.troupe/troupe.log')).mode & 0o777).toBe(0o600);
    expect(statSync(join(other, '.troupe')).mode & 0o777).toBe(0o700);
  });
});
