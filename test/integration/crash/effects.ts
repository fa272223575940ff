/**
 * The in-doubt tools' side-effect file (teams.ts writes it, inDoubtCheck.ts reads it): one JSON
 * line per execution of an append tool, fsynced before the tool returns.
 *
 * A kill -9 can cut a line: Linux copies a write into the page cache a page at a time and stops
 * at a page boundary once SIGKILL is pending, so a line that straddles one is left as a fragment
 * (CI, seed 200116; 950 kills of a process appending such lines here left 2 files cut, each at
 * a page boundary). The next process's line then followed the fragment on the same text line, so
 * neither parsed: the re-run of the cut call was lost to the check, which reported a success
 * without its effect. Every line is therefore written after a newline of its own, and a
 * fragment, which is a tool that never returned, is not an execution.
 */
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, writeSync } from 'node:fs';

/** The side-effect file of a run's database file. */
export const effectsFile = (dbPath: string) => `${dbPath}.effects`;

/** One execution of an append tool. */
export interface EffectLine {
  tool: 'append' | 'append_idem';
  call: string;
  op: string;
  key: string;
  agent: string;
  pid: number;
}

/** Append one line and make it durable: the side effect whose count the harness checks. */
export function appendEffect(path: string, line: EffectLine): void {
  const fd = openSync(path, 'a');
  try {
    writeSync(fd, `\n${JSON.stringify(line)}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** The executions on the file, without the fragments a kill left. */
export function readEffects(path: string): EffectLine[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .split('\n')
    .flatMap((line) => {
      if (line === '') return [];
      try {
        return [JSON.parse(line) as EffectLine];
      } catch {
        return [];
      }
    });
}
