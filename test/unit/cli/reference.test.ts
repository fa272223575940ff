/**
 * `troupe help <topic>` (src/cli/reference.ts), run in-process: each topic prints what the code's
 * tables say — every option with its resolved default, every config key, every exit code with its
 * error codes, every error code with its retryable flag and meaning — in lines of at most 100
 * columns; `help <command>` is `<command> --help`; a misspelt topic is a usage error with a "did you
 * mean", as a misspelt command is. The built command is exercised in test/integration/cliHelp.
 */
import { describe, expect, it } from 'vitest';
import type { Io } from '../../../src/cli/args.js';
import { HELP_TOPICS } from '../../../src/cli/commandHelp.js';
import { CONFIG_SCHEMA } from '../../../src/cli/configSchema.js';
import { EXIT_ROWS } from '../../../src/cli/exitCodes.js';
import { PROFILES, PROVIDERS } from '../../../src/cli/guides.js';
import { runCli } from '../../../src/cli/program.js';
import { MEASUREMENTS } from '../../../src/cli/measurements.js';
import { COMMANDS } from '../../../src/cli/spec.js';
import { ERROR_CODES } from '../../../src/errors.js';
import { DEFAULT_LIMITS } from '../../../src/host/options.js';
import { resolveOptions } from '../../../src/host/resolveOptions.js';
import { LIMIT_DOCS, OPTION_DOCS, type OptionDoc } from '../../../src/host/optionsDoc.js';

async function cli(...argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const io: Io = { out: { write: (t: string) => void (stdout += t) }, err: { write: (t: string) => void (stderr += t) }, env: {}, tty: false };
  const code = await runCli(argv, io);
  return { code, stdout, stderr };
}

/** Words as a reader sees them: one space between, no Markdown backticks or README links. */
const words = (text: string) =>
  text
    .replace(/\[([^\]]+)\]\(#[^)]+\)/g, '$1 (README)')
    .replace(/`/g, '')
    .replace(/\s+/g, ' ')
    .trim();

/** The text of `help <topic>` with each row's wrapped lines joined: one string of words. */
const topic = async (name: string) => {
  const r = await cli('help', name);
  expect([r.code, r.stderr], name).toEqual([0, '']);
  for (const line of r.stdout.split('\n')) expect(line.length, `${name}: ${line}`).toBeLessThanOrEqual(100);
  return { raw: r.stdout, text: words(r.stdout) };
};

describe('troupe help <topic>', () => {
  it('help alone lists every topic, as help --help does, and exits 0', async () => {
    const bare = await cli('help');
    expect(bare.code).toBe(0);
    for (const name of Object.keys(HELP_TOPICS)) expect(bare.stdout).toMatch(new RegExp(`^  ${name} +\\S`, 'm'));
    expect(bare.stdout).toBe((await cli('help', '--help')).stdout);
    expect((await cli('--help')).stdout).toMatch(/^ {2}help \[topic\] +the reference: options, config, exit-codes, errors, measurements/m);
  });

  it('options: every createCoordinator option and limit, with the default resolveOptions gives it', async () => {
    const { text } = await topic('options');
    const resolved = resolveOptions({ model: { complete: () => Promise.reject(new Error('unused')) } });
    for (const [name, doc] of Object.entries(OPTION_DOCS) as [string, OptionDoc][]) {
      expect(text, name).toContain(words(`${name} ${doc.meaning}${doc.default ? ` (default ${doc.default(resolved)})` : ''}`));
    }
    for (const [limit, meaning] of Object.entries(LIMIT_DOCS)) {
      expect(text, limit).toContain(`limits.${limit} ${meaning} (default ${DEFAULT_LIMITS[limit as keyof typeof DEFAULT_LIMITS].toLocaleString('en-US')})`);
    }
  });

  it('config: every key of the config schema, with its fields and meaning', async () => {
    const { text } = await topic('config');
    interface Node {
      description?: string;
      properties?: Record<string, Node>;
    }
    for (const [key, node] of Object.entries(CONFIG_SCHEMA.properties as Record<string, Node>)) {
      if (key === '$schema') continue;
      const fields = node.properties ? ` { ${Object.keys(node.properties).join(', ')} }` : '';
      expect(text, key).toContain(words(`${key}${fields} ${node.description ?? ''}`));
      for (const [field, child] of Object.entries(node.properties ?? {}))
        if (child.description) expect(text).toContain(words(`${key}.${field} ${child.description}`));
    }
  });

  it('exit-codes: every exit code in order, with its meaning and the error codes behind it', async () => {
    const { raw, text } = await topic('exit-codes');
    const rows = Object.values(EXIT_ROWS).sort((a, b) => a.code - b.code);
    for (const row of rows) expect(text).toContain(words(`${row.code} ${row.meaning}${row.errors.length ? ` (${row.errors.join(', ')})` : ''}`));
    expect([...raw.matchAll(/^ {2}(\d+) /gm)].map((m) => Number(m[1]))).toEqual(rows.map((r) => r.code));
  });

  it('errors: every error code, once, with its retryable flag and meaning', async () => {
    const { raw, text } = await topic('errors');
    for (const [code, e] of Object.entries(ERROR_CODES)) expect(text, code).toContain(words(`${code} ${e.retryable ? 'yes' : 'no'} ${e.description}`));
    expect([...raw.matchAll(/^ {2}([A-Z_]+) /gm)].map((m) => m[1])).toEqual(Object.keys(ERROR_CODES));
  });

  it('measurements: every section, with the command that measures it', async () => {
    const { text } = await topic('measurements');
    for (const section of MEASUREMENTS) {
      expect(text).toContain(words(`${section.title}: ${section.text}`));
      for (const [what, figure] of section.rows ?? []) expect(text).toContain(words(`${what} ${figure}`));
    }
    for (const command of ['npm run bench', 'npm run bench:against', 'npm run test:pg-failover']) expect(text).toContain(command);
  });

  it('providers and profiles: the guide, then its config keys, events and typed outcomes as the code describes them', async () => {
    for (const [name, guide] of [
      ['providers', PROVIDERS],
      ['profiles', PROFILES],
    ] as const) {
      const { text } = await topic(name);
      expect(text, name).toContain(words(guide.text.split('\n\n')[0]!));
      const properties = CONFIG_SCHEMA.properties as Record<string, { description?: string }>;
      for (const key of guide.keys) expect(text, `${name}: ${key}`).toContain(words(properties[key]!.description!));
      for (const [event] of guide.events) expect(text, `${name}: ${event}`).toContain(event);
      for (const code of guide.errors) {
        const e = ERROR_CODES[code as keyof typeof ERROR_CODES];
        expect(text, `${name}: ${code}`).toContain(words(`${code} ${e.description} ${e.retryable ? 'Retryable.' : 'Not retryable.'}`));
      }
    }
    // The guides name the settings, events and outcomes issue 34 asks to be explained.
    expect(PROVIDERS.keys).toEqual(expect.arrayContaining(['breaker', 'quota', 'idleTimeoutMs']));
    expect(PROVIDERS.errors).toContain('PROVIDER_CIRCUIT_OPEN');
    expect(PROVIDERS.events.map(([e]) => e)).toEqual(expect.arrayContaining(['provider.breaker', 'provider.quota']));
    expect(PROFILES.keys).toEqual(expect.arrayContaining(['profiles', 'auxiliaryModel', 'review', 'notes']));
  });

  it('help <command> prints exactly what <command> --help prints, for every command', async () => {
    for (const command of COMMANDS) {
      const viaHelp = await cli('help', command.name);
      const viaFlag = await cli(command.name, '--help');
      expect(viaHelp.code, command.name).toBe(0);
      expect(viaHelp.stdout, command.name).toBe(viaFlag.stdout);
    }
  });

  it('a misspelt topic: exit 2, one "did you mean", nothing on stdout; a word like no topic: no guess', async () => {
    const typo = await cli('help', 'erors');
    expect(typo).toEqual({ code: 2, stdout: '', stderr: "troupe: unknown help topic 'erors'\n(Did you mean errors?)\n(troupe help lists the topics)\n" });
    expect((await cli('help', 'exit-code')).stderr).toContain('(Did you mean exit-codes?)');
    // Commands are topics too.
    expect((await cli('help', 'worke')).stderr).toContain('(Did you mean worker?)');
    const none = await cli('help', 'zzzzzz');
    expect([none.code, none.stderr]).toEqual([2, "troupe: unknown help topic 'zzzzzz'\n(troupe help lists the topics)\n"]);
    // A topic is printed safely: control characters in it are shown, not sent to the terminal.
    expect((await cli('help', 'x\u001b[2J')).stderr).toContain("'x\\x1b[2J'");
  });
});
