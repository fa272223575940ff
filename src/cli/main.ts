#!/usr/bin/env node
/**
 * The `troupe` command (see `troupe --help` and the README's CLI reference).
 * @module
 */
import { isTroupeError } from '../errors.js';
import { runCli } from './commands.js';
import { EXIT, exitCodeFor } from './exitCodes.js';

const io = {
  out: { write: (text: string) => void process.stdout.write(text) },
  err: { write: (text: string) => void process.stderr.write(text) },
  env: process.env,
  tty: Boolean(process.stdout.isTTY),
};

runCli(process.argv.slice(2), io).then(
  (code) => process.exit(code),
  (err: unknown) => {
    if (isTroupeError(err)) {
      process.stderr.write(`troupe: ${err.code === 'CONFIG_INVALID' ? '' : `${err.code}: `}${err.message}\n`);
      process.exit(exitCodeFor(err.code));
    }
    process.stderr.write(`troupe: internal error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(EXIT.INTERNAL);
  },
);
