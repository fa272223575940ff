/**
 * `troupe help [topic]`: the reference the README links to instead of holding it, printed from the
 * code it describes, so it cannot drift: the createCoordinator options (OPTION_DOCS, LIMIT_DOCS,
 * defaults from resolveOptions), the config file's keys (CONFIG_SCHEMA), the exit codes
 * (EXIT_ROWS), the error codes (ERROR_CODES), the measured figures (measurements.ts), and the
 * guides to the providers and profiles (guides.ts, with their keys and outcomes from the above).
 * `troupe help <command>` prints that command's --help; an unknown topic is a usage error (exit 2)
 * with a "did you mean", as a misspelt command is. Plain text, wrapped at 100 columns.
 * @module
 */
import { Command, Option } from 'commander';
import { ERROR_CODES } from '../errors.js';
import { DEFAULT_LIMITS } from '../host/options.js';
import { resolveOptions } from '../host/resolveOptions.js';
import { LIMIT_DOCS, OPTION_DOCS, type OptionDoc } from '../host/optionsDoc.js';
import { COMMAND_HELP, HELP_TOPICS, type HelpTopic } from './commandHelp.js';
import { CONFIG_SCHEMA } from './configSchema.js';
import { EXIT, EXIT_ROWS } from './exitCodes.js';
import { PROFILES, PROVIDERS, type Guide } from './guides.js';
import { FLAGS, type FlagName, type Handler } from './flags.js';
import { MEASUREMENTS } from './measurements.js';
import { forTerminal } from './terminal.js';

const WIDTH = 100;

/** Markdown written for the README, read on a terminal: no backticks, a README link named as one. */
const plain = (text: string) => text.replace(/\[([^\]]+)\]\(#[^)]+\)/g, '$1 (README)').replace(/`/g, '');

/** `text` in lines of at most `width` columns (a longer word stands alone). */
function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (line !== '' && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line === '' ? word : `${line} ${word}`;
  }
  return line === '' ? lines : [...lines, line];
}

const paragraph = (text: string) => wrap(text, WIDTH).join('\n');

/**
 * Rows of a term and its description, as commander lists flags: the terms in a column (at most
 * `widest` wide: a longer term has its description on the next line), the descriptions wrapped beside it.
 */
function definitions(rows: readonly (readonly [string, string])[], widest = 28): string {
  const column = Math.min(widest, Math.max(...rows.map(([term]) => term.length))) + 4;
  const out: string[] = [];
  for (const [term, description] of rows) {
    const lines = wrap(description, WIDTH - column);
    const first = `  ${term}`;
    if (first.length + 2 > column) out.push(first, ...lines.map((l) => ' '.repeat(column) + l));
    else out.push(first.padEnd(column) + (lines[0] ?? ''), ...lines.slice(1).map((l) => ' '.repeat(column) + l));
  }
  return out.map((l) => l.trimEnd()).join('\n');
}

function options(): string {
  const resolved = resolveOptions({ model: { complete: () => Promise.reject(new Error('unused')) } });
  const rows: [string, string][] = [];
  for (const [name, doc] of Object.entries(OPTION_DOCS) as [string, OptionDoc][]) {
    rows.push([name, plain(doc.meaning) + (doc.default ? ` (default ${plain(doc.default(resolved))})` : '')]);
    if (name !== 'limits') continue;
    for (const [limit, meaning] of Object.entries(LIMIT_DOCS)) {
      rows.push([`limits.${limit}`, `${meaning} (default ${DEFAULT_LIMITS[limit as keyof typeof DEFAULT_LIMITS].toLocaleString('en-US')})`]);
    }
  }
  return [
    paragraph('createCoordinator(options) and resumeCoordinator take these; the TSDoc of CoordinatorOptions (Limits, BudgetOptions) says more.'),
    definitions(rows),
  ].join('\n\n');
}

interface SchemaNode {
  description?: string;
  properties?: Record<string, SchemaNode>;
}

/** The rows of config keys: each key (with its fields) and its description, then each described field. */
function configRows(keys: readonly string[]): [string, string][] {
  const rows: [string, string][] = [];
  const properties = CONFIG_SCHEMA.properties as Record<string, SchemaNode>;
  for (const key of keys) {
    const node = properties[key];
    if (node === undefined) throw new Error(`troupe help: no config key ${key}`);
    const fields = node.properties ? ` { ${Object.keys(node.properties).join(', ')} }` : '';
    rows.push([`${key}${fields}`, plain(node.description ?? '')]);
    for (const [field, child] of Object.entries(node.properties ?? {})) {
      if (child.description !== undefined) rows.push([`${key}.${field}`, plain(child.description)]);
    }
  }
  return rows;
}

function config(): string {
  const rows = configRows(Object.keys(CONFIG_SCHEMA.properties as Record<string, SchemaNode>).filter((key) => key !== '$schema'));
  return [
    paragraph(
      `./troupe.config.json, or the file --config names. ${CONFIG_SCHEMA.description} Unknown keys are refused (exit 2, naming the key); ` +
        '"$schema": "./node_modules/troupe/fixtures/troupe.config.schema.json" gives an editor completion and checks.',
    ),
    definitions(rows),
  ].join('\n\n');
}

function exitCodes(): string {
  const rows = Object.values(EXIT_ROWS)
    .sort((a, b) => a.code - b.code)
    .map((r): [string, string] => [String(r.code), plain(r.meaning) + (r.errors.length ? ` (${r.errors.join(', ')})` : '')]);
  return [paragraph('The exit codes of the troupe command, with the error codes that end a command with each (troupe help errors).'), definitions(rows)].join(
    '\n\n',
  );
}

function errors(): string {
  const width = Math.max(...Object.keys(ERROR_CODES).map((code) => code.length));
  const rows: [string, string][] = [
    [`${'code'.padEnd(width)}  retryable`, 'meaning'],
    ...Object.entries(ERROR_CODES).map(([code, e]): [string, string] => [`${code.padEnd(width)}  ${e.retryable ? 'yes' : 'no'}`, e.description]),
  ];
  const widest = width + '  retryable'.length;
  return [
    paragraph(
      'Every error troupe raises, or returns to a model as a tool result, is a TroupeError with a stable code and a retryable flag ' +
        '(yes: the same operation may succeed later). The troupe command exits with the code of its row in troupe help exit-codes.',
    ),
    definitions(rows, widest),
  ].join('\n\n');
}

function measurements(): string {
  return MEASUREMENTS.map((s) =>
    [`${s.title}:`, paragraph(s.text), ...(s.rows ? [definitions(s.rows)] : []), ...(s.after ? [paragraph(s.after)] : [])].join('\n\n'),
  ).join('\n\n');
}

/** A mechanism's guide (guides.ts): its prose, then its settings, events and typed outcomes as the code holds them. */
function guide(g: Guide): () => string {
  return () => {
    const errorRows = g.errors.map((code): [string, string] => {
      const e = ERROR_CODES[code as keyof typeof ERROR_CODES];
      if (e === undefined) throw new Error(`troupe help: no error code ${code}`);
      return [code, `${plain(e.description)} ${e.retryable ? 'Retryable.' : 'Not retryable.'}`];
    });
    return [
      ...g.text.split('\n\n').map(paragraph),
      'Settings (troupe.config.json; createCoordinator takes the same names, troupe help options):',
      definitions(configRows(g.keys)),
      "Events (subscribe(), troupe follow, the run's event rows):",
      definitions(g.events.map(([name, meaning]): [string, string] => [name, meaning])),
      'Typed outcomes:',
      definitions(errorRows),
    ].join('\n\n');
  };
}

/** Each topic of HELP_TOPICS, printed. */
const REFERENCE: Readonly<Record<HelpTopic, () => string>> = {
  options,
  config,
  'exit-codes': exitCodes,
  errors,
  measurements,
  providers: guide(PROVIDERS),
  profiles: guide(PROFILES),
};

/** What reference.ts needs of a command of spec.ts (given, not imported: spec.ts loads this file). */
interface HelpedCommand {
  readonly name: string;
  readonly args: string;
  readonly summary: string;
  readonly flags: readonly FlagName[];
  readonly flagHelp?: Partial<Record<FlagName, string>>;
}

/** `troupe <command> --help`, built as program.ts builds the command (a test holds the two equal). */
function commandHelp(spec: HelpedCommand): string {
  let text = '';
  const command = new Command('troupe')
    .configureOutput({ writeOut: (t) => (text += t) })
    .command(`${spec.name}${spec.args ? ` ${spec.args}` : ''}`)
    .description(spec.summary);
  for (const name of spec.flags) command.addOption(new Option(FLAGS[name].syntax, spec.flagHelp?.[name] ?? FLAGS[name].help));
  const details = COMMAND_HELP[spec.name];
  if (details !== undefined) command.addHelpText('after', `\n${details}\n`);
  command.outputHelp();
  return text;
}

/** commander's rule for "did you mean": the candidates at the fewest edits, at most 2, that share most of the word. */
function suggestion(word: string, candidates: readonly string[]): string {
  const distance = (a: string, b: string) => {
    let row = Array.from({ length: b.length + 1 }, (_, j) => j);
    for (let i = 1; i <= a.length; i++) {
      const next = [i];
      for (let j = 1; j <= b.length; j++) next[j] = Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
      row = next;
    }
    return row[b.length]!;
  };
  const scored = candidates
    .map((c) => ({ c, d: distance(word, c) }))
    .filter(({ c, d }) => d <= 2 && (Math.max(word.length, c.length) - d) / Math.max(word.length, c.length) > 0.4);
  const best = Math.min(...scored.map((s) => s.d));
  const similar = scored.filter((s) => s.d === best).map((s) => s.c);
  if (similar.length === 0) return '';
  return similar.length === 1 ? `\n(Did you mean ${similar[0]}?)` : `\n(Did you mean one of ${similar.join(', ')}?)`;
}

const isTopic = (topic: string): topic is HelpTopic => Object.hasOwn(HELP_TOPICS, topic);

/** The `help` command's handler, given the command table (spec.ts's COMMANDS). */
export const helpCommand =
  (commands: readonly HelpedCommand[]): Handler =>
  async ([topic = 'help'], _values, io) => {
    if (isTopic(topic)) {
      io.out.write(`${REFERENCE[topic]()}\n`);
      return EXIT.OK;
    }
    const command = commands.find((c) => c.name === topic);
    if (command !== undefined) {
      io.out.write(commandHelp(command));
      return EXIT.OK;
    }
    const known = [...Object.keys(HELP_TOPICS), ...commands.map((c) => c.name)];
    io.err.write(`troupe: unknown help topic '${forTerminal(topic)}'${suggestion(topic, known)}\n(troupe help lists the topics)\n`);
    return EXIT.USAGE;
  };
