import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
// @ts-expect-error -- a plain .mjs module (also run by `npm run lint`), no declarations
import { cyclesOf, folderGraph } from '../../helpers/importCycles.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

function sources(dir: string): string[] {
  return readdirSync(path.join(root, dir)).flatMap((name) => {
    const rel = `${dir}/${name}`;
    return statSync(path.join(root, rel)).isDirectory() ? sources(rel) : rel.endsWith('.ts') ? [rel] : [];
  });
}

describe('the shape of the code', () => {
  it('the cycle finder sees a cycle between folders and none in a chain', () => {
    const tree = {
      'src/a/x.ts': [{ id: 'src/b/y.ts' }],
      'src/b/y.ts': [{ id: 'src/c/z.ts' }],
      'src/c/z.ts': [{ id: 'src/a/w.ts' }],
      'src/a/w.ts': [],
    };
    const { graph, witness } = folderGraph(tree);
    expect(cyclesOf(graph)).toEqual([['src/a', 'src/b', 'src/c']]);
    expect(witness.get('src/c->src/a')).toBe('src/c/z.ts -> src/a/w.ts');
    delete (tree as Record<string, unknown>)['src/c/z.ts'];
    expect(cyclesOf(folderGraph(tree).graph)).toEqual([]);
  });

  // The repository-wide cycle check runs in `npm run lint` (dpdm parses every file: ~7 s).

  // Files are sized by concept: ~400 lines is a smell to look at, not a cap to trim to (a file
  // split only to fit scatters one concept). What this catches is a file grown to hold several:
  // past 600 lines, split it by what it is about. Pure type modules are exempt.
  it('no source file holds several concepts (over 600 lines), except pure types', () => {
    const long = [...sources('src'), ...sources('machines')]
      .filter((f) => !f.endsWith('/types.ts'))
      .map((f) => ({ f, lines: readFileSync(path.join(root, f), 'utf8').split('\n').length }))
      .filter(({ lines }) => lines > 600);
    expect(long).toEqual([]);
  });

  // Every CLI spawn pays for what its command imports at start-up: the reading and mailing
  // commands load neither the MCP SDK (and its zod) nor the model client nor pg. Only `import
  // type` is erased (verbatimModuleSyntax keeps `import { type X }` as a load).
  it('troupe status, tree, send and stop load no MCP SDK, model client or pg', () => {
    const heavy = /^(@modelcontextprotocol\/|zod$|zod\/|openai$|openai\/|pg$)/;
    const seen = new Map<string, string | null>();
    const queue = ['src/cli/main.ts', 'src/cli/readCommands.ts', 'src/cli/mail.ts'];
    for (const f of queue) seen.set(f, null);
    const reached: string[] = [];
    while (queue.length > 0) {
      const file = queue.shift()!;
      const text = readFileSync(path.join(root, file), 'utf8');
      for (const m of text.matchAll(/^(import|export)\s+(type\s)?[^;]*?from\s+'([^']+)'|^import\s+'([^']+)'/gms)) {
        if (m[2] !== undefined) continue;
        const spec = (m[3] ?? m[4])!;
        if (!spec.startsWith('.')) {
          if (heavy.test(spec)) reached.push(`${file} -> ${spec}`);
          continue;
        }
        const target = path.posix.join(path.posix.dirname(file), spec).replace(/\.js$/, '.ts');
        if (seen.has(target)) continue;
        seen.set(target, file);
        queue.push(target);
      }
    }
    expect(seen.has('src/host/runtime.ts'), 'the walk follows the imports').toBe(true);
    expect(reached).toEqual([]);
  });
});
