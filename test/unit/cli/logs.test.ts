/**
 * The CLI's log file after a process was killed mid-record (cli/logs.ts `endCutRecord`): the next
 * process's records are whole JSON lines, the fragment stays on a line of its own.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { cliLogger } from '../../../src/cli/logs.js';

const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach((dir) => rmSync(dir, { recursive: true, force: true })));

const logFile = (content: string) => {
  const dir = mkdtempSync(join(tmpdir(), 'troupe-logs-'));
  dirs.push(dir);
  const file = join(dir, '.troupe', 'troupe.log');
  cliLogger(file, false); // creates it
  writeFileSync(file, content);
  return file;
};

const records = (file: string) =>
  readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line !== '');

it('a record cut by a kill is ended before this process logs: its own records parse', () => {
  const file = logFile('{"level":30,"time":1,"msg":"before"}\n{"level":30,"time":2,"ms');
  cliLogger(file, false).info('after the crash');
  const lines = records(file);
  expect(lines.slice(0, 2)).toEqual(['{"level":30,"time":1,"msg":"before"}', '{"level":30,"time":2,"ms']);
  expect((JSON.parse(lines[2]!) as { msg: string }).msg).toBe('after the crash');
});

it('a whole file and an empty one are left as they are', () => {
  for (const content of ['{"level":30,"time":1,"msg":"before"}\n', '']) {
    const file = logFile(content);
    cliLogger(file, false).info('next');
    expect(readFileSync(file, 'utf8').startsWith(`${content}{`)).toBe(true);
  }
});
