/**
 * The `troupe` command line, parsed with commander (per-command `--help`, `--version`, "did you
 * mean" for misspelt commands and flags, usage listing every flag) from the table in spec.ts.
 * Output goes through the given streams, so tests can run it in-process too.
 * @module
 */
import { Command, CommanderError, Option } from 'commander';
import type { Io } from './args.js';
import { EXIT } from './exitCodes.js';
import { packageVersion } from './paths.js';
import { COMMAND_HELP } from './commandHelp.js';
import { FLAGS, type Values } from './flags.js';
import { COMMANDS, ENVIRONMENT, type CommandSpec } from './spec.js';

/**
 * `--inspect 8089` and `--inspect=8089` are the port; a bare `--inspect` is the default port (and
 * `--ui` likewise). The
 * word after a bare `--inspect` stays what it is (a task, another flag), so the value is written
 * into the flag here and commander never has to guess.
 */
function normalizeInspect(argv: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--') {
      out.push(...argv.slice(i));
      break;
    }
    const flag = a === '--inspect' ? { name: 'inspect', port: 8080 } : a === '--ui' ? { name: 'ui', port: 7070 } : null;
    if (flag) {
      const next = argv[i + 1];
      if (next !== undefined && /^\d+$/.test(next)) {
        out.push(`--${flag.name}=${next}`);
        i++;
      } else out.push(`--${flag.name}=${flag.port}`);
    } else out.push(a);
  }
  return out;
}

function addCommand(program: Command, spec: CommandSpec, io: Io, done: (code: number) => void): void {
  const command = program.command(`${spec.name}${spec.args ? ` ${spec.args}` : ''}`).description(spec.summary);
  for (const name of spec.flags) command.addOption(new Option(FLAGS[name].syntax, spec.flagHelp?.[name] ?? FLAGS[name].help));
  const details = COMMAND_HELP[spec.name];
  if (details !== undefined) command.addHelpText('after', `\n${details}\n`);
  command.action(async (...received: unknown[]) => {
    // commander passes the positionals, then the options object, then the command.
    const args = received.slice(0, -2).filter((a): a is string => typeof a === 'string');
    const values = received.at(-2) as Values;
    done(await (await spec.load())(args, values, io));
  });
}

function buildProgram(io: Io, done: (code: number) => void): Command {
  const program = new Command('troupe')
    .description('A durable coordinator for teams of LLM agents.')
    .version(packageVersion(), '--version', 'print the version')
    .showSuggestionAfterError(true)
    .showHelpAfterError('(troupe <command> --help lists its flags)')
    .configureOutput({
      writeOut: (text) => io.out.write(text),
      writeErr: (text) => io.err.write(text),
      outputError: (text, write) => write(`troupe: ${text.replace(/^error: /, '')}`),
    })
    .exitOverride()
    .addHelpText('after', `\n${ENVIRONMENT}`);
  for (const spec of COMMANDS) addCommand(program, spec, io, done);
  for (const command of program.commands) {
    command
      .exitOverride()
      .configureOutput(program.configureOutput())
      .showSuggestionAfterError(true)
      .showHelpAfterError(`(troupe ${command.name()} --help lists its flags)`);
  }
  return program;
}

/** Run the command line `argv` (without node and the script); resolves with the exit code. */
export async function runCli(argv: string[], io: Io): Promise<number> {
  let code: number = EXIT.OK;
  const program = buildProgram(io, (c) => (code = c));
  if (argv.length === 0) {
    io.err.write(`${program.helpInformation()}\n${ENVIRONMENT}\n`);
    return EXIT.USAGE;
  }
  try {
    await program.parseAsync(normalizeInspect(argv), { from: 'user' });
  } catch (err) {
    if (!(err instanceof CommanderError)) throw err;
    // Help and version were asked for; anything else commander refused is a usage error (printed).
    return err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || err.code === 'commander.help' ? EXIT.OK : EXIT.USAGE;
  }
  return code;
}
