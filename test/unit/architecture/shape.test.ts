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

  // ~400 lines keeps a file readable in one sitting; pure type modules are exempt.
  it('no source file over ~400 lines, except pure types', () => {
    const long = [...sources('src'), ...sources('machines')]
      .filter((f) => !f.endsWith('/types.ts'))
      .map((f) => ({ f, lines: readFileSync(path.join(root, f), 'utf8').split('\n').length }))
      .filter(({ lines }) => lines > 420);
    expect(long).toEqual([]);
  });
});
