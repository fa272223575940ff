/**
 * The CLI's streams, and checks of flag values shared by every command.
 * @module
 */
import { ConfigError } from '../errors.js';
import type { Redactor } from '../logging/redact.js';
import type { Output } from './view.js';

export interface Io {
  out: Output;
  err: Output;
  env: NodeJS.ProcessEnv;
  /** Whether stdout is a terminal (the live tree redraws in place). */
  tty: boolean;
  /** The terminal's width in columns (a live view truncates its lines to it); default 80. */
  columns?: () => number;
  /** Called with a redraw function whenever the terminal is resized; returns the unsubscribe. */
  onResize?: (redraw: () => void) => () => void;
  /** Lines typed on the terminal (interactive runs); absent when stdin is not a terminal. */
  stdin?: NodeJS.ReadableStream & { isTTY?: boolean };
  /**
   * The secrets to scrub from what is stored and logged (the CLI's output streams already scrub
   * them); commands add the API key they end up with.
   */
  redactor?: Redactor;
}

/** A flag's number: finite and > 0 (with `zero`, >= 0), whole with `integer`. */
export function number(name: string, value: string | undefined, integer = false, zero = false): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || (zero ? n < 0 : n <= 0) || (integer && !Number.isInteger(n))) {
    throw new ConfigError(`Expected --${name} to be ${integer ? 'a whole number' : 'a number'} ${zero ? '>= 0' : '> 0'}, got "${value}"`);
  }
  return n;
}

/** Whether `--db` names a PostgreSQL server rather than a SQLite file. */
export const isPostgresUrl = (db: string | undefined): db is string => db !== undefined && /^postgres(ql)?:\/\//.test(db);

/** `troupe finish-delegation <agent> <delegation> completed|failed [result]`, checked. */
export function finishDelegationArgs(args: string[]): { agent: string; delegation: string; status: 'completed' | 'failed'; result: string } {
  const [agent, delegation, status, result = ''] = args;
  const usage = 'Usage: troupe finish-delegation <agent> <delegation> completed|failed ["<result>"]';
  if (!agent || !delegation) throw new ConfigError(usage);
  if (status !== 'completed' && status !== 'failed') throw new ConfigError(`${usage}: the status is completed or failed, got ${JSON.stringify(status ?? '')}`);
  return { agent, delegation, status, result };
}

/** `troupe finish-execution <execution> completed|failed [result]`, checked (the same on every store). */
export function finishExecutionArgs(args: string[]): { id: string; status: 'completed' | 'failed'; result: string } {
  const [id, status, result = ''] = args;
  const usage = 'Usage: troupe finish-execution <execution> completed|failed ["<result>"]';
  if (!id) throw new ConfigError(usage);
  if (status !== 'completed' && status !== 'failed') throw new ConfigError(`${usage}: the status is completed or failed, got ${JSON.stringify(status ?? '')}`);
  return { id, status, result };
}
