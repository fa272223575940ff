/**
 * The CLI's logs: pino to .troupe/troupe.log (JSON lines, secrets redacted); with `-v`, also a
 * readable line per record on stderr.
 * @module
 */
import { chmodSync, closeSync, fstatSync, openSync, readSync, writeSync } from 'node:fs';
import { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';
import { createLogger } from '../logging/createLogger.js';
import type { Redactor } from '../logging/redact.js';
import { createFileIfMissing, ensureParentDir } from '../store/files.js';
import { forTerminal } from './terminal.js';

const LEVELS: Record<number, string> = { 10: 'trace', 20: 'debug', 30: 'info', 40: 'warn', 50: 'error', 60: 'fatal' };

/** pino JSON lines → `12:00:01 warn  flaky  transient model error; retrying`. */
function prettyStream(out: NodeJS.WritableStream): Writable {
  return new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (line === '') continue;
        try {
          const record = JSON.parse(line) as { level: number; time: number; msg?: string; agentId?: string; name?: string; err?: { message?: string } };
          const time = new Date(record.time).toISOString().slice(11, 19);
          // Provider errors and agent names are not troupe's text: terminal-safe, like every printer.
          const who = forTerminal(String(record.name ?? record.agentId ?? ''));
          const err = record.err?.message ? `  (${forTerminal(String(record.err.message))})` : '';
          out.write(`${time} ${(LEVELS[record.level] ?? String(record.level)).padEnd(5)} ${who.padEnd(10)} ${forTerminal(String(record.msg ?? ''))}${err}\n`);
        } catch {
          out.write(`${forTerminal(line)}\n`);
        }
      }
      done();
    },
  });
}

/**
 * End a record a kill cut short. Linux stops a write at a page boundary once SIGKILL is pending,
 * so a process killed while logging can leave its last record without its newline; this
 * process's first record would then join that fragment, and neither would parse as JSON (the
 * crash harness lost a line of its own file that way). A newline first keeps them apart.
 * Best effort: a file this process cannot open to read is left as it is.
 */
function endCutRecord(file: string): void {
  let fd: number | undefined;
  try {
    fd = openSync(file, 'a+');
    const size = fstatSync(fd).size;
    const last = Buffer.alloc(1);
    if (size > 0 && readSync(fd, last, 0, 1, size - 1) === 1 && last[0] !== 0x0a) writeSync(fd, '\n');
  } catch {
    // Not readable here: nothing to repair.
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/**
 * The log file is created 0600, like the database (an existing one is tightened to 0600 too): it
 * holds what agents did and said. Secret values known to `redactor` are scrubbed from every record.
 */
export function cliLogger(file: string, verbose: boolean, redactor?: Redactor): Logger {
  ensureParentDir(file);
  createFileIfMissing(file);
  try {
    chmodSync(file, 0o600);
  } catch {
    // Not ours to change (another owner): leave it as it is.
  }
  endCutRecord(file);
  const streams: pino.StreamEntry[] = [{ level: 'info', stream: pino.destination({ dest: file, sync: true, mode: 0o600 }) }];
  if (verbose) streams.push({ level: 'info', stream: prettyStream(process.stderr) });
  return createLogger({ level: 'info', ...(redactor ? { redactor } : {}) }, pino.multistream(streams));
}
