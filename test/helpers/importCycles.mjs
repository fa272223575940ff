// The import graph rule: no cycles between files, and none between the folders of src/ (a folder
// is a concept; two concepts that import each other are one concept or a missing port).
// dpdm parses with the TypeScript compiler, so `.js` specifiers resolve to their `.ts` sources.
// Type-only imports count too (transform: false): they vanish at run time, but two files that
// need each other's types are one concept split in two, or a vocabulary that wants its own file.
// Run by `npm run lint` and by test/unit/architecture.test.ts.
import { parseDependencyTree, parseCircular } from 'dpdm';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** The folder a file belongs to: `src/<folder>` (top-level src files are their own unit) or `machines`. */
export function folderOf(file) {
  const parts = file.split('/');
  if (parts[0] === 'src') return parts.length > 2 ? `src/${parts[1]}` : file;
  return parts[0];
}

/** Strongly connected components with more than one node in a directed graph (Tarjan). */
export function cyclesOf(graph) {
  let index = 0;
  const stack = [];
  const on = new Set();
  const idx = new Map();
  const low = new Map();
  const out = [];
  const visit = (v) => {
    idx.set(v, index);
    low.set(v, index);
    index++;
    stack.push(v);
    on.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!idx.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v), idx.get(w)));
    }
    if (low.get(v) === idx.get(v)) {
      const comp = [];
      let w;
      do {
        w = stack.pop();
        on.delete(w);
        comp.push(w);
      } while (w !== v);
      if (comp.length > 1) out.push(comp.sort());
    }
  };
  for (const v of graph.keys()) if (!idx.has(v)) visit(v);
  return out;
}

/** Edges between folders, each with one file-level import that witnesses it. */
export function folderGraph(tree) {
  const graph = new Map();
  const witness = new Map();
  for (const [file, deps] of Object.entries(tree)) {
    const from = folderOf(file);
    if (!graph.has(from)) graph.set(from, new Set());
    for (const dep of deps ?? []) {
      if (!dep.id || dep.id.includes('node_modules')) continue;
      const to = folderOf(dep.id);
      if (to === from) continue;
      graph.get(from).add(to);
      if (!witness.has(`${from}->${to}`)) witness.set(`${from}->${to}`, `${file} -> ${dep.id}`);
    }
  }
  return { graph, witness };
}

export async function checkImports() {
  const cwd = process.cwd();
  process.chdir(root);
  try {
    const tree = await parseDependencyTree(['src/**/*.ts', 'machines/**/*.ts'], {
      context: root,
      transform: false,
      skipDynamicImports: false,
      include: /\.ts$/,
      exclude: /node_modules/,
    });
    const fileCycles = parseCircular(tree);
    const { graph, witness } = folderGraph(tree);
    const folderCycles = cyclesOf(graph).map((comp) => ({
      folders: comp,
      edges: comp.flatMap((a) => comp.filter((b) => graph.get(a)?.has(b)).map((b) => witness.get(`${a}->${b}`))),
    }));
    return { files: Object.keys(tree).length, fileCycles, folderCycles };
  } finally {
    process.chdir(cwd);
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const { files, fileCycles, folderCycles } = await checkImports();
  for (const c of fileCycles) process.stderr.write(`import cycle between files: ${c.join(' -> ')}\n`);
  for (const c of folderCycles) process.stderr.write(`import cycle between folders ${c.folders.join(', ')}:\n  ${c.edges.join('\n  ')}\n`);
  if (fileCycles.length + folderCycles.length > 0) process.exit(1);
  process.stdout.write(`imports: ${files} files, no cycles between files or folders\n`);
}
