/**
 * Integration and bench global setup: compile once so child processes (the crash harness, the CLI,
 * workers) run plain node from dist/.
 *
 * File by file, without type checking: `isolatedModules` holds, so each file's JavaScript is what
 * `tsc -p tsconfig.json` emits (module ESNext with forced module detection is NodeNext's output for
 * this `"type": "module"` package). Checking types is `npm run typecheck`'s job (CI runs it before
 * the tests); package.test.ts emits and checks the published declarations itself. Measured on
 * 2 cores: the checked build held every test back ~35 s, this ~8 s (and ~1 s when nothing changed:
 * a file whose source and options hash as last time is not compiled again).
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const MANIFEST = join(ROOT, 'dist', '.transpiled.json');

export default function setup(): void {
  const parsed = ts.getParsedCommandLineOfConfigFile(
    join(ROOT, 'tsconfig.json'),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => {
        throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
      },
    },
  )!;
  const compilerOptions: ts.CompilerOptions = {
    ...parsed.options,
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    moduleDetection: ts.ModuleDetectionKind.Force,
    declaration: false,
    sourceMap: true,
  };
  const outDir = parsed.options.outDir!;
  const optionsHash = createHash('sha256').update(JSON.stringify(compilerOptions)).update(ts.version).digest('hex');
  const before = readManifest();
  const after: Record<string, string> = {};
  for (const file of parsed.fileNames) {
    if (file.endsWith('.d.ts')) continue;
    const source = readFileSync(file, 'utf8');
    const hash = createHash('sha256').update(optionsHash).update(source).digest('hex');
    const js = join(outDir, relative(ROOT, file)).replace(/\.ts$/, '.js');
    after[file] = hash;
    if (before[file] === hash && existsSync(js)) continue;
    const { outputText, sourceMapText, diagnostics } = ts.transpileModule(source, { compilerOptions, fileName: file, reportDiagnostics: true });
    if (diagnostics?.length) throw new Error(`${relative(ROOT, file)}: ${ts.flattenDiagnosticMessageText(diagnostics[0]!.messageText, '\n')}`);
    // The map names its source relative to itself, as tsc's does.
    const map = JSON.parse(sourceMapText!) as { file: string; sources: string[] };
    map.file = basename(js);
    map.sources = [relative(dirname(js), file)];
    mkdirSync(dirname(js), { recursive: true });
    writeFileSync(js, outputText);
    writeFileSync(`${js}.map`, JSON.stringify(map));
  }
  mkdirSync(dirname(MANIFEST), { recursive: true });
  writeFileSync(MANIFEST, JSON.stringify(after));
}

function readManifest(): Record<string, string> {
  try {
    return JSON.parse(readFileSync(MANIFEST, 'utf8')) as Record<string, string>;
  } catch {
    return {};
  }
}
