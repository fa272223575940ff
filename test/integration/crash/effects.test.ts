/**
 * The side-effect file survives a kill that cuts a line (effects.ts): the next process's line is
 * read, the fragment is not an execution. The cut is made by hand where a kill -9 makes it.
 */
import { mkdtempSync, rmSync, statSync, truncateSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { appendEffect, readEffects, type EffectLine } from './effects.js';

const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach((dir) => rmSync(dir, { recursive: true, force: true })));

const line = (call: string): EffectLine => ({ tool: 'append_idem', call, op: `op-${call}`, key: `run:agent:3:${call}`, agent: 'agent', pid: 1 });

it('a line cut by a kill is skipped, and the line the next process appends after it is read', () => {
  const dir = mkdtempSync(join(tmpdir(), 'troupe-effects-'));
  dirs.push(dir);
  const path = join(dir, 'run.db.effects');
  appendEffect(path, line('a'));
  appendEffect(path, line('b'));
  // The kill stopped the write of `b` partway (at a page boundary, in CI).
  truncateSync(path, statSync(path).size - 40);
  appendEffect(path, line('b'));
  appendEffect(path, line('c'));
  expect(readEffects(path).map((l) => l.call)).toEqual(['a', 'b', 'c']);
});

it('no file: no executions', () => {
  expect(readEffects(join(tmpdir(), 'troupe-effects-none', 'run.db.effects'))).toEqual([]);
});
