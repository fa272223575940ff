/**
 * The package as a user gets it: every TypeScript block of the README typechecks under strict
 * against the built `.d.ts` (imports of `troupe`, `troupe/testing`, `troupe/testing/property`
 * resolve through package.json's exports) with `skipLibCheck: false`; `troupe/testing` loads
 * without fast-check installed; `npm pack` ships dist, the LICENSE and the config schema, not the
 * tests, and builds first (prepack).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { beforeAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

// The project's global setup compiles dist/ without types (test/helpers/buildOnce.ts): the package's
// declarations are emitted here, as `npm run build` emits them, and the package's code must check clean.
beforeAll(() => {
  const parsed = ts.getParsedCommandLineOfConfigFile(join(ROOT, 'src/tsconfig.json'), {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} })!;
  const program = ts.createProgram(parsed.fileNames, { ...parsed.options, incremental: false, tsBuildInfoFile: undefined, emitDeclarationOnly: true });
  const problems = ts
    .getPreEmitDiagnostics(program)
    .map((d) => `${d.file ? relative(ROOT, d.file.fileName) : ''} ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
  expect(problems).toEqual([]);
  const emitted = program.emit();
  expect(emitted.diagnostics.map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'))).toEqual([]);
}, 120_000);

/** How a user's strict project compiles against troupe's declarations (skipLibCheck off). */
const CONSUMER: ts.CompilerOptions = {
  strict: true,
  noEmit: true,
  skipLibCheck: false,
  target: ts.ScriptTarget.ES2023,
  lib: ['lib.es2023.d.ts', 'lib.esnext.disposable.d.ts'],
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  types: ['node'],
};

/** The ```ts blocks of the README, with the line each starts on. */
function readmeBlocks(): { line: number; code: string }[] {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const blocks: { line: number; code: string }[] = [];
  for (const m of readme.matchAll(/^```ts\n([\s\S]*?)^```$/gm)) blocks.push({ line: readme.slice(0, m.index).split('\n').length, code: m[1]! });
  return blocks;
}

describe('the README’s TypeScript', () => {
  it('every ts block typechecks under strict against the built declarations, skipLibCheck off', () => {
    const blocks = readmeBlocks();
    expect(blocks.length).toBeGreaterThanOrEqual(5);
    // Inside the package (dist/ is ignored by git), so `troupe` resolves to this package by name.
    const dir = join(ROOT, 'dist', 'readme-examples');
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    const files = blocks.map((b, i) => {
      const file = join(dir, `block-${i + 1}-line-${b.line}.ts`);
      // Each block is a module of its own (top-level await and imports as a user writes them).
      writeFileSync(file, `${b.code}\nexport {};\n`);
      return file;
    });
    const program = ts.createProgram(files, CONSUMER);
    // troupe's own declarations and the blocks must be clean; other packages' are theirs.
    const ours = (f: ts.SourceFile | undefined) => f !== undefined && f.fileName.startsWith(join(ROOT, 'dist'));
    const problems = ts
      .getPreEmitDiagnostics(program)
      .filter((d) => d.file === undefined || ours(d.file))
      .map(
        (d) =>
          `${d.file ? relative(ROOT, d.file.fileName) : ''}:${d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start).line + 1 : ''} ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`,
      );
    expect(problems).toEqual([]);
  });
});

describe('the declarations as a user installs them', () => {
  it('typecheck with skipLibCheck off when only the dependencies are installed (no dev dependency)', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> };
    // What a user's install does not have: every dev dependency but the compiler and Node's types
    // (a TypeScript user has both).
    const hidden = Object.keys(pkg.devDependencies)
      .filter((name) => name !== 'typescript' && name !== '@types/node')
      .map((name) => join(ROOT, 'node_modules', name) + '/');
    const visible = (path: string) => !hidden.some((dir) => path.startsWith(dir));
    const dir = join(ROOT, 'dist', 'consumer');
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    const file = join(dir, 'consumer.ts');
    // Every public module, so every declaration they reach is checked.
    writeFileSync(file, "import * as troupe from 'troupe';\nimport * as testing from 'troupe/testing';\nexport const all = [troupe, testing];\n");
    const host = ts.createCompilerHost(CONSUMER);
    const fileExists = host.fileExists.bind(host);
    const directoryExists = host.directoryExists?.bind(host);
    host.fileExists = (path) => visible(path) && fileExists(path);
    host.directoryExists = (path) => visible(`${path}/`) && (directoryExists?.(path) ?? true);
    const program = ts.createProgram([file], CONSUMER, host);
    const problems = ts
      .getPreEmitDiagnostics(program)
      .filter((d) => d.file === undefined || d.file.fileName.startsWith(join(ROOT, 'dist')))
      .map((d) => `${d.file ? relative(ROOT, d.file.fileName) : ''} ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
    expect(problems).toEqual([]);
  });
});

describe('the package', () => {
  it('troupe/testing loads without fast-check; troupe/testing/property is where fast-check is needed', () => {
    // A resolve hook makes fast-check absent, as for a user who did not install it.
    const hook = `data:text/javascript,${encodeURIComponent(
      `export async function resolve(specifier, context, next) { if (specifier === 'fast-check' || specifier.startsWith('@fast-check/')) { const e = new Error("Cannot find package 'fast-check'"); e.code = 'ERR_MODULE_NOT_FOUND'; throw e; } return next(specifier, context); }`,
    )}`;
    const register = `import { register } from 'node:module'; register(${JSON.stringify(hook)});`;
    const load = (entry: string) =>
      spawnSync(
        process.execPath,
        [
          '--import',
          `data:text/javascript,${encodeURIComponent(register)}`,
          '--input-type=module',
          '-e',
          `await import(${JSON.stringify(join(ROOT, entry))}); console.log('loaded');`,
        ],
        { encoding: 'utf8' },
      );
    const testing = load('dist/src/testing/index.js');
    expect(testing.stdout.trim(), testing.stderr).toBe('loaded');
    const property = load('dist/src/testing/property.js');
    expect(property.status).not.toBe(0);
    expect(property.stderr).toContain("Cannot find package 'fast-check'");
  });

  it('a run on SQLite with no OpenTelemetry SDK loads neither pg nor @opentelemetry/api: each loads at its first use', () => {
    // Each cost every process ~70 and ~35 ms (a crash-harness child, every `troupe run`) for nothing.
    const dir = join(ROOT, 'dist', 'lazy-load');
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    const script = `
      import { createRequire } from 'node:module';
      const { createCoordinator, openStore, scriptedModel } = await import(${JSON.stringify(join(ROOT, 'dist/src/index.js'))});
      const model = scriptedModel({ agents: { lead: [{ tool: 'finish', args: { summary: 'done' } }] } });
      const c = createCoordinator({ model, store: openStore({ path: ${JSON.stringify(join(dir, 'run.db'))} }) });
      const root = await c.waitFor(await c.start({ name: 'lead', task: 't' }), ['completed']);
      await c.shutdown();
      const loaded = Object.keys(createRequire(import.meta.url).cache);
      console.log(JSON.stringify({ status: root.status, pg: loaded.some((p) => p.includes('/node_modules/pg/')), otel: loaded.some((p) => p.includes('/@opentelemetry/api/')) }));`;
    const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
    expect(JSON.parse(run.stdout.trim().split('\n').pop() ?? '{}'), run.stderr).toEqual({ status: 'completed', pg: false, otel: false });
  });

  it('npm pack ships dist, LICENSE and the config schema, not the tests; prepack builds', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string>; exports: Record<string, unknown> };
    expect(pkg.scripts.prepack).toBeDefined();
    // npm start builds incrementally (a second start found ~20 s of work to redo; now ~1 s), with its
    // build info in dist/ so that deleting dist/ rebuilds everything; the build info is not shipped.
    expect(pkg.scripts.build).toBe('tsc -b src');
    const build = JSON.parse(readFileSync(join(ROOT, 'src/tsconfig.json'), 'utf8')) as { compilerOptions: { incremental?: boolean; tsBuildInfoFile?: string } };
    expect(build.compilerOptions).toMatchObject({ incremental: true, tsBuildInfoFile: expect.stringMatching(/^\.\.\/dist\//) });
    expect(Object.keys(pkg.exports)).toEqual(['.', './testing', './testing/property']);
    const [packed] = JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: ROOT, encoding: 'utf8' })) as [
      { files: { path: string }[] },
    ];
    const paths = packed.files.map((f) => f.path);
    for (const path of [
      'LICENSE',
      'README.md',
      'package.json',
      'fixtures/troupe.config.schema.json',
      'fixtures/scenarios/demo.json',
      'dist/src/index.js',
      'dist/src/index.d.ts',
      'dist/src/cli/main.js',
      'dist/src/testing/property.d.ts',
      'dist/machines/agentMachine.js',
    ]) {
      expect(paths, path).toContain(path);
    }
    expect(
      paths.filter(
        (p) =>
          p.startsWith('dist/test') ||
          p.startsWith('dist/readme-examples') ||
          p.startsWith('test/') ||
          p.endsWith('.tsbuildinfo') ||
          (p.startsWith('src/') && !p.startsWith('src/dashboard/public/')),
      ),
    ).toEqual([]);
  });
});
