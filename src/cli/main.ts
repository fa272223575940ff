#!/usr/bin/env node
/**
 * The `troupe` command (see `troupe --help` and the README's CLI reference).
 * @module
 */
import { isTroupeError } from '../errors.js';
import { createRedactor } from '../logging/redact.js';
import type { Io } from './args.js';
import { runCli } from './program.js';
import { EXIT, exitCodeFor } from './exitCodes.js';
import { forTerminal } from './terminal.js';

// Every byte the CLI prints passes here: the API key's value (from the environment now, from the
// config file or --api-key once a command reads them) never reaches stdout or stderr.
const redactor = createRedactor([process.env.OPENAI_API_KEY]);
const io: Io = {
  out: { write: (text: string) => void process.stdout.write(redactor.scrub(text)) },
  err: { write: (text: string) => void process.stderr.write(redactor.scrub(text)) },
  env: process.env,
  tty: Boolean(process.stdout.isTTY),
  columns: () => process.stdout.columns || 80,
  onResize: (redraw) => {
    process.stdout.on('resize', redraw);
    return () => process.stdout.off('resize', redraw);
  },
  stdin: process.stdin,
  redactor,
};

// Piped into `head` or a closed pager: stop quietly, as other command-line tools do.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(EXIT.OK);
    throw err;
  });
}

runCli(process.argv.slice(2), io).then(
  (code) => process.exit(code),
  (err: unknown) => {
    if (isTroupeError(err)) {
      // One line per error (usage text aside), never a stack: the code says what kind of failure it is.
      io.err.write(`troupe: ${err.code === 'CONFIG_INVALID' ? '' : `${err.code}: `}${forTerminal(err.message, true)}\n`);
      process.exit(exitCodeFor(err.code));
    }
    io.err.write(`troupe: internal error: ${forTerminal(err instanceof Error ? (err.stack ?? err.message) : String(err), true)}\n`);
    process.exit(EXIT.INTERNAL);
  },
);
