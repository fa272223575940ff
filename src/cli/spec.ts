/**
 * Every `troupe` command, as data: the parser (program.ts), `--help`, `troupe help <command>` and
 * the README's list of commands (generated from here, see test/unit/docs) all read this one table.
 * Adding a flag is one entry in FLAGS (flags.ts) plus its name in the commands that take it; adding
 * a command is one entry in COMMANDS whose `load` imports its handler.
 * @module
 */
import { HELP_TOPICS } from './commandHelp.js';
import type { FlagName, Handler } from './flags.js';

export interface CommandSpec {
  readonly name: string;
  /** Positional arguments in commander syntax: `<agent> <text>`, `[task]`. */
  readonly args: string;
  readonly summary: string;
  readonly flags: readonly FlagName[];
  /** Where a flag means something narrower for this command than FLAGS says (its default, its output). */
  readonly flagHelp?: Partial<Record<FlagName, string>>;
  /** Imported when the command runs, so `troupe status` does not load the model client. */
  readonly load: () => Promise<Handler>;
}

const VIEW: readonly FlagName[] = ['json', 'inspect', 'verbose'];
/** Commands that read a database: with no --db and no troupe.db, they read the demo's (runs.ts defaultReadDb). */
const READ_DB = { db: 'the database file (default .troupe/troupe.db, or .troupe/demo.db while only the demo wrote one), or a postgres:// URL' };
const ONE_DOCUMENT = { json: 'one JSON document on stdout instead of text' };
const MODEL: readonly FlagName[] = ['model', 'baseUrl', 'apiKey', 'budget', 'price'];

export const COMMANDS: readonly CommandSpec[] = [
  {
    name: 'demo',
    args: '',
    summary: 'the offline demo team: real SQLite and openai client, a bundled fake server; no key, no network',
    flags: ['db', 'killAfter', 'otel', 'ui', ...VIEW],
    flagHelp: { db: 'the database file (default .troupe/demo.db), or a postgres:// URL (see Scale out)' },
    load: async () => (await import('./runCommands.js')).demo,
  },
  {
    name: 'run',
    args: '<task>',
    summary: 'start a team on any OpenAI-compatible model',
    flags: [...MODEL, 'interactive', 'stream', 'config', 'db', 'detach', 'strictMcp', 'otel', 'ui', ...VIEW],
    load: async () => (await import('./runCommands.js')).run,
  },
  {
    name: 'resume',
    args: '',
    summary: 'continue a run with its saved settings (flags given override them)',
    flags: [...MODEL, 'config', 'stream', 'db', 'run', 'detach', 'strictMcp', 'otel', 'ui', ...VIEW],
    flagHelp: READ_DB,
    load: async () => (await import('./runCommands.js')).resume,
  },
  {
    name: 'ui',
    args: '',
    summary: 'the web dashboard of a live or finished run, on 127.0.0.1',
    flags: ['db', 'run', 'port'],
    flagHelp: READ_DB,
    load: async () => (await import('./ui.js')).ui,
  },
  {
    name: 'status',
    args: '',
    summary: "a run's state: root, agents, mail, budget, report, whether a process hosts it",
    flags: ['db', 'run', 'json'],
    flagHelp: { ...READ_DB, ...ONE_DOCUMENT },
    load: async () => (await import('./readCommands.js')).status,
  },
  {
    name: 'tree',
    args: '',
    summary: 'the agent tree with status, turns, spend, last tool and approvals asked',
    flags: ['db', 'run', 'json'],
    flagHelp: { ...READ_DB, ...ONE_DOCUMENT },
    load: async () => (await import('./readCommands.js')).tree,
  },
  {
    name: 'follow',
    args: '',
    summary: "a run's live stream from any process: statuses, what agents say and write, tools, until the run is over",
    flags: ['db', 'run', 'after', 'json'],
    flagHelp: { ...READ_DB, json: 'every event of the stream as a JSON line with its seq' },
    load: async () => (await import('./follow.js')).follow,
  },
  {
    name: 'send',
    args: '<agent> <text>',
    summary: 'message an agent by name or id: a live run at once, otherwise on resume',
    flags: ['db', 'run'],
    flagHelp: READ_DB,
    load: async () => (await import('./mail.js')).send,
  },
  {
    name: 'stop',
    args: '<agent>',
    summary: 'stop an agent and its descendants, in a live run or not',
    flags: ['db', 'run'],
    flagHelp: READ_DB,
    load: async () => (await import('./mail.js')).stop,
  },
  {
    name: 'finish-execution',
    args: '<execution> <status> [result]',
    summary: 'report that an async execution a tool started ended (status completed or failed): its agent continues with the result, once',
    flags: ['db', 'run'],
    flagHelp: READ_DB,
    load: async () => (await import('./mail.js')).finishExecution,
  },
  {
    name: 'finish-delegation',
    args: '<agent> <delegation> <status> [result]',
    summary: 'report that background work an agent delegated ended (status completed or failed): the agent is messaged the result, once',
    flags: ['db', 'run'],
    flagHelp: READ_DB,
    load: async () => (await import('./mail.js')).finishDelegation,
  },
  {
    name: 'approvals',
    args: '',
    summary: "list a run's approvals: the steps its rules hold for a person, pending first",
    flags: ['db', 'run', 'json'],
    flagHelp: READ_DB,
    load: async () => (await import('./approvals.js')).listApprovals,
  },
  {
    name: 'approve',
    args: '<approval>',
    summary: 'approve a step (--args: with edited arguments): it runs once, in a live run or when the run is next hosted',
    flags: ['db', 'run', 'args'],
    flagHelp: READ_DB,
    load: async () => (await import('./approvals.js')).approve,
  },
  {
    name: 'deny',
    args: '<approval>',
    summary: 'deny a step with --reason: it does not run, and the agent is told why',
    flags: ['db', 'run', 'reason'],
    flagHelp: READ_DB,
    load: async () => (await import('./approvals.js')).deny,
  },
  {
    name: 'notes',
    args: '[action] [note]',
    summary: 'list the notes background reviews proposed; promote <note> (every later run reads it) or reject <note> [--reason]',
    flags: ['db', 'reason', 'json'],
    flagHelp: { ...READ_DB, reason: 'why the note is rejected (kept with it)', ...ONE_DOCUMENT },
    load: async () => (await import('./notes.js')).notes,
  },
  {
    name: 'replay',
    args: '<run>',
    summary: 'replay a recorded run offline with its recorded answers and tool results: identical (exit 0), or where the code first differs (exit 1)',
    flags: ['db', 'config', 'json', 'liveFrom', 'model', 'baseUrl', 'apiKey'],
    flagHelp: READ_DB,
    load: async () => (await import('./replay.js')).replay,
  },
  {
    name: 'fork',
    args: '<run>',
    summary: "a new run from a committed point of <run>, as it was right after --at's turn; prints its id (troupe resume --run continues it)",
    flags: ['db', 'at'],
    flagHelp: READ_DB,
    load: async () => (await import('./fork.js')).fork,
  },
  {
    name: 'serve',
    args: '[task]',
    summary: 'long-running: proactive triggers, a watchdog, an optional interactive main run',
    flags: [...MODEL, 'config', 'stream', 'resume', 'db', 'strictMcp', 'otel', 'ui', ...VIEW],
    load: async () => (await import('./serve.js')).serveCommand,
  },
  {
    name: 'worker',
    args: '',
    summary: 'long-running: host runs of a shared PostgreSQL --db; Ctrl-C releases them',
    flags: ['db', 'concurrency', 'model', 'baseUrl', 'apiKey', 'config', 'verbose'],
    load: async () => (await import('./pg.js')).pgHandler('worker'),
  },
  {
    name: 'help',
    args: '[topic]',
    summary: `the reference: ${Object.keys(HELP_TOPICS).join(', ')}; or a command's --help`,
    flags: [],
    // Given the table, so that reference.ts (which prints a command's help from it) imports no spec.ts.
    load: async () => (await import('./reference.js')).helpCommand(COMMANDS),
  },
];

export const ENVIRONMENT = `Environment: OPENAI_API_KEY, OPENAI_BASE_URL. Config file: ./troupe.config.json or --config.
Logs: .troupe/troupe.log (-v also prints them).`;
