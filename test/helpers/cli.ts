/** The built `troupe` CLI as a subprocess (integration tests build it once before they run). */
import { execFile, spawn, type ChildProcess, type ExecFileException } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openStore } from '../../src/store/sqliteStore.js';
import { team, TERMINAL } from './team.js';

export const BIN = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));

export interface Result {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Who runs the CLI: another user (`uid`, `gid`), and/or under a wrapper command (`prefix`, e.g. setpriv). */
export interface RunAs {
  uid?: number;
  gid?: number;
  prefix?: string[];
}

/** Run the CLI; resolves when it exits (the timeout bounds a hang, it does not pace the test). */
export function troupe(args: string[], cwd: string, env: Record<string, string> = {}, as?: RunAs): Promise<Result> {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('OPENAI_')));
  const { prefix = [], ...ids } = as ?? {};
  const [file, ...argv] = [...prefix, process.execPath, BIN, ...args];
  return new Promise((resolve) => {
    execFile(file!, argv, { cwd, env: { ...clean, ...env }, timeout: 60_000, ...ids }, (err: ExecFileException | null, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, signal: err?.signal ?? null, stdout, stderr });
    });
  });
}

export interface Spawned {
  child: ChildProcess;
  lines: string[];
  stderr: () => string;
  /** Resolves with the first stdout line matching `pattern` (already printed or to come); rejects if the process exits first. */
  line(pattern: RegExp, timeoutMs?: number): Promise<string>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Start a long-running CLI command (a live run) and watch its stdout line by line. Kill it when done. */
export function spawnTroupe(args: string[], cwd: string, env: Record<string, string> = {}): Spawned {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('OPENAI_')));
  const child = spawn(process.execPath, [BIN, ...args], { cwd, env: { ...clean, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  let partial = '';
  let stderr = '';
  const watchers = new Set<() => void>();
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    const parts = (partial + chunk).split('\n');
    partial = parts.pop()!;
    lines.push(...parts);
    for (const w of [...watchers]) w();
  });
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  const line = (pattern: RegExp, timeoutMs = 30_000) =>
    new Promise<string>((resolve, reject) => {
      const found = () => lines.find((l) => pattern.test(l));
      const done = () => {
        clearTimeout(timer);
        watchers.delete(watch);
        child.off('exit', onExit);
      };
      const watch = () => {
        const hit = found();
        if (hit === undefined) return;
        done();
        resolve(hit);
      };
      const onExit = () => {
        done();
        const hit = found();
        if (hit !== undefined) resolve(hit);
        else reject(new Error(`exited before printing ${pattern}\nstdout:\n${lines.join('\n')}\nstderr:\n${stderr}`));
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`no line matching ${pattern} within ${timeoutMs} ms\nstdout:\n${lines.join('\n')}\nstderr:\n${stderr}`));
      }, timeoutMs);
      watchers.add(watch);
      child.on('exit', onExit);
      watch();
    });
  return { child, lines, stderr: () => stderr, line, exited };
}

/** What `troupe status --json` prints that the tests read. */
export interface RunStatus {
  hosted: boolean;
  host: { state: string; owner: string | null } | null;
  root: { status: string } | null;
}

/** `troupe status --db <db> --json` until `ok` holds (another process is making it true); fails after 30 s or on a failing status. */
export async function statusWhere(db: string, cwd: string, ok: (s: RunStatus) => boolean): Promise<RunStatus> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const r = await troupe(['status', '--db', db, '--json'], cwd);
    if (r.code !== 0) throw new Error(`troupe status exited ${r.code}: ${r.stderr}`);
    const s = JSON.parse(r.stdout) as RunStatus;
    if (ok(s)) return s;
    if (Date.now() > deadline) throw new Error(`status never matched: ${r.stdout}`);
  }
}

export const workdir = () => mkdtempSync(join(tmpdir(), 'troupe-cli-'));
export const jsonLines = (text: string) =>
  text
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);

/** SHA-256 of a database file and of its -wal (a missing file counts as empty): "left untouched" means equal. */
export function fileHashes(path: string): { db: string; wal: string } {
  const hash = (p: string) =>
    createHash('sha256')
      .update(existsSync(p) ? readFileSync(p) : Buffer.alloc(0))
      .digest('hex');
  return { db: hash(path), wal: hash(`${path}-wal`) };
}

/** A failed command's stderr: exactly one line, naming `code`, without a stack trace. */
export function expectOneLine(r: Result, code: string): void {
  const lines = r.stderr.split('\n').filter((l) => l !== '');
  if (lines.length !== 1 || !lines[0]!.startsWith(`troupe: ${code}: `) || /\n\s+at /.test(r.stderr)) {
    throw new Error(`expected one "troupe: ${code}: …" line on stderr, got ${JSON.stringify(r.stderr)} (exit ${String(r.code)})`);
  }
}

/**
 * A database at `path` with one run, as `troupe run` would leave it: `lead` spawned `worker`,
 * which reported; then lead waits on the user (interactive) or finished. With `limits`, they are
 * saved as the run's settings (the `cli.run` event troupe resume and troupe send read).
 */
export async function seedRun(
  path: string,
  options: { interactive: boolean; limits?: Record<string, number> },
): Promise<{ runId: string; rootId: string; workerId: string }> {
  const store = openStore({ path });
  const t = team(
    {
      agents: {
        lead: [
          { tool: 'spawn_agent', args: { name: 'worker', task: 'check the licence' } },
          { tool: 'wait_for_agents', args: { reason: 'the worker reports' } },
          options.interactive ? { tool: 'respond_to_user', args: { message: 'Ready when you are.' } } : { tool: 'finish', args: { summary: 'all done' } },
        ],
        worker: [{ tool: 'agent_finish', args: { summary: 'MIT' } }],
      },
    },
    { store, interactive: options.interactive },
  );
  const rootId = await t.c.start({ name: 'lead', task: 'Review the repository.' });
  await t.c.waitFor(rootId, options.interactive ? ['waiting'] : [...TERMINAL]);
  await t.c.whenIdle();
  store.appendEvent({ runId: t.c.runId, agentId: null, type: 'cli.run', data: options.limits ? { limits: options.limits } : {}, at: 1 });
  const workerId = t.byName('worker').id;
  await t.c.shutdown();
  store.close();
  return { runId: t.c.runId, rootId, workerId };
}

/** Poll what other processes decide until `ok` holds (a deadline, never a fixed sleep standing in for it). */
export async function until<T>(what: string, read: () => Promise<T>, ok: (value: T) => boolean, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (ok(value)) return value;
    if (Date.now() > deadline) throw new Error(`${what}: never (last ${JSON.stringify(value)})`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
