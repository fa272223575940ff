/**
 * `troupe help <topic>` as a user runs it (the built command): each reference topic the README
 * links to exits 0 and prints the code's tables (the same text as src/cli/reference.ts renders
 * now; test/unit/cli/reference checks that text against ERROR_CODES, EXIT_ROWS, OPTION_DOCS and
 * CONFIG_SCHEMA); `help <command>` is `<command> --help`; a misspelt topic exits 2 with "did you
 * mean", as a misspelt command does.
 */
import { describe, expect, it } from 'vitest';
import type { Io } from '../../src/cli/args.js';
import { HELP_TOPICS } from '../../src/cli/commandHelp.js';
import { runCli } from '../../src/cli/program.js';
import { ERROR_CODES } from '../../src/errors.js';
import { troupe, workdir } from '../helpers/cli.js';

/** What the code prints for `argv`, in this process. */
async function inProcess(argv: string[]): Promise<string> {
  let out = '';
  const io: Io = { out: { write: (t: string) => void (out += t) }, err: { write: () => undefined }, env: {}, tty: false };
  await runCli(argv, io);
  return out;
}

describe('troupe help', () => {
  it('every reference topic exits 0 and prints what the code renders; help alone lists them', async () => {
    const cwd = workdir();
    const topics = Object.keys(HELP_TOPICS);
    const results = await Promise.all(topics.map((topic) => troupe(['help', topic], cwd)));
    for (const [i, r] of results.entries()) {
      expect([r.code, r.stderr], topics[i]).toEqual([0, '']);
      expect(r.stdout, topics[i]).toBe(await inProcess(['help', topics[i]!]));
    }
    const errors = results[topics.indexOf('errors')]!.stdout;
    for (const [code, e] of Object.entries(ERROR_CODES)) expect(errors).toMatch(new RegExp(`^  ${code} +${e.retryable ? 'yes' : 'no'} `, 'm'));
    const bare = await troupe(['help'], cwd);
    expect(bare.code).toBe(0);
    for (const topic of topics) expect(bare.stdout).toContain(`  ${topic} `);
  });

  it('help <command> is <command> --help; a misspelt topic: exit 2, "did you mean", no stack', async () => {
    const cwd = workdir();
    const [viaHelp, viaFlag, typo] = await Promise.all([troupe(['help', 'run'], cwd), troupe(['run', '--help'], cwd), troupe(['help', 'erors'], cwd)]);
    expect(viaHelp.code).toBe(0);
    expect(viaHelp.stdout).toBe(viaFlag.stdout);
    expect(viaHelp.stdout).toContain('--price in,out');
    expect([typo.code, typo.stdout]).toEqual([2, '']);
    expect(typo.stderr).toBe("troupe: unknown help topic 'erors'\n(Did you mean errors?)\n(troupe help lists the topics)\n");
  });
});
