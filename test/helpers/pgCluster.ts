/**
 * A private, throw-away PostgreSQL cluster owned by one test, so the test can stop, crash and
 * restart the database server without touching the shared server (test/helpers/pg.ts).
 *
 * The cluster lives under a fresh temporary directory (data/, the server log, its Unix socket) and
 * listens on 127.0.0.1 on a free port, with trust authentication for the user `troupe`. Server
 * binaries: $PG_BIN, else the newest /usr/lib/postgresql/<version>/bin (Debian), else initdb and
 * pg_ctl on the PATH. initdb refuses to run as root: as root, the directory is given to the
 * `postgres` user and initdb/pg_ctl run through `runuser -u postgres --`; otherwise they run as
 * the current user.
 *
 * fsync=off, for speed: a PostgreSQL stop, even `-m immediate` (the crash of every server process),
 * keeps everything committed, because committing write()s the WAL into the kernel, which survives
 * the server; only a crash of the machine would lose it. synchronous_commit stays on (with it off,
 * a commit could still be in the server's WAL buffers when it is killed).
 *
 * Cleanup: `destroy()` (in afterAll). Should the test process exit without it, an 'exit' hook stops
 * the server; should it be killed, a detached watchdog shell (polling the test's pid each second)
 * stops the server and removes the directory.
 */
import { execFile, execFileSync, spawn } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { appendFile, chown, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const USER = 'troupe';
const REQUIRED = process.env.TROUPE_REQUIRE_PG === '1';

export interface PgCluster {
  /** postgres://troupe@127.0.0.1:<port>/postgres (trust authentication). */
  readonly url: string;
  readonly port: number;
  /** The temporary directory: data/, server.log, the Unix socket. */
  readonly dir: string;
  /** pg_ctl stop -w; 'immediate' (the default) is a crash of the server: recovery runs at the next start. */
  stop(mode?: 'immediate' | 'fast'): Promise<void>;
  /** pg_ctl start -w: same data directory, same port. */
  start(): Promise<void>;
  /** stop(mode) then start(). */
  restart(mode?: 'immediate' | 'fast'): Promise<void>;
  /** Stop the server (immediately, if running) and remove the directory. Idempotent. */
  destroy(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

type PgClusterCheck = { ok: true } | { ok: false; reason: string };

interface Tools {
  bin: string;
  /** The command prefix that runs a server binary as a user allowed to (runuser as root). */
  runAs: string[];
  /** Who must own the cluster's directory (as root), or undefined (the current user). */
  owner: { uid: number; gid: number } | undefined;
}

let tools: Promise<Tools | string> | undefined;

/** The server binaries and how to run them here, or why not (memoized). */
function findTools(): Promise<Tools | string> {
  tools ??= (async () => {
    const bin = await binDir();
    if (!bin && process.env.PG_BIN) return `PG_BIN=${process.env.PG_BIN} lacks initdb, pg_ctl or postgres`;
    if (!bin) return 'no PostgreSQL server binaries (set PG_BIN, or install them: /usr/lib/postgresql/<version>/bin)';
    let runAs: string[] = [];
    let owner: Tools['owner'];
    if (process.getuid?.() === 0) {
      // initdb and postgres refuse to run as root.
      try {
        const id = async (flag: string) => Number((await run('id', [flag, 'postgres'])).stdout.trim());
        owner = { uid: await id('-u'), gid: await id('-g') };
      } catch {
        return 'running as root, and there is no postgres user to run the server as';
      }
      runAs = ['runuser', '-u', 'postgres', '--'];
    }
    try {
      await runTool({ bin, runAs, owner }, 'initdb', ['--version'], tmpdir());
    } catch (err) {
      return `${join(bin, 'initdb')} cannot run here: ${(err as Error).message.split('\n')[0]}`;
    }
    return { bin, runAs, owner };
  })();
  return tools;
}

async function binDir(): Promise<string | undefined> {
  const has = (dir: string) => existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'pg_ctl')) && existsSync(join(dir, 'postgres'));
  if (process.env.PG_BIN) return has(process.env.PG_BIN) ? process.env.PG_BIN : undefined;
  const debian = '/usr/lib/postgresql';
  const versions = existsSync(debian) ? (await readdir(debian)).filter((v) => /^\d+(\.\d+)?$/.test(v)).sort((a, b) => Number(b) - Number(a)) : [];
  for (const v of versions) if (has(join(debian, v, 'bin'))) return join(debian, v, 'bin');
  return (process.env.PATH ?? '').split(delimiter).find((dir) => dir && has(dir));
}

function runTool(t: Tools, tool: string, args: string[], cwd: string) {
  const [cmd, ...rest] = [...t.runAs, join(t.bin, tool), ...args];
  // cwd: a directory the server's user can enter (as root, ours may not be).
  return run(cmd!, rest, { cwd, timeout: 120_000 });
}

/** Whether a private cluster can be started here, and if not, why. */
async function pgClusterAvailable(): Promise<PgClusterCheck> {
  const t = await findTools();
  return typeof t === 'string' ? { ok: false, reason: t } : { ok: true };
}

/**
 * The suite convention of test/helpers/pg.ts for private clusters: whether to skip, and the
 * suite's title. Without the server binaries the suite skips under one line on stderr, unless
 * TROUPE_REQUIRE_PG=1, when this throws (the suite fails).
 */
export async function pgClusterSuite(name: string): Promise<{ skip: boolean; title: string }> {
  const check = await pgClusterAvailable();
  if (check.ok) return { skip: false, title: name };
  if (REQUIRED) throw new Error(`TROUPE_REQUIRE_PG=1 but a private PostgreSQL cluster cannot be started: ${check.reason}`);
  process.stderr.write(`Private PostgreSQL cluster suites skipped: ${check.reason} (TROUPE_REQUIRE_PG=1 to fail instead)\n`);
  return { skip: true, title: `SKIPPED (${check.reason}): ${name}` };
}

/** A port free on 127.0.0.1 now (another process could still take it before the server binds it: start retries). */
async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** initdb a fresh cluster in a temporary directory and start it on a free port. */
export async function startPgCluster(options: { maxConnections?: number } = {}): Promise<PgCluster> {
  const t = await findTools();
  if (typeof t === 'string') throw new Error(`cannot start a private PostgreSQL cluster: ${t}`);
  const dir = await mkdtemp(join(tmpdir(), 'troupe-pg-'));
  if (t.owner) await chown(dir, t.owner.uid, t.owner.gid);
  const data = join(dir, 'data');
  const log = join(dir, 'server.log');
  const ctl = (args: string[]) => runTool(t, 'pg_ctl', ['-D', data, ...args], dir);
  const ctlArgs = (args: string[]) => [...t.runAs, join(t.bin, 'pg_ctl'), '-D', data, ...args];
  /** The error of a failed pg_ctl, with the end of the server log (why it did not start). */
  const failed = async (what: string, err: unknown) => {
    const tail = (await readFile(log, 'utf8').catch(() => '')).trimEnd().split('\n').slice(-8).join('\n');
    return new Error(`private PostgreSQL cluster in ${dir}: ${what} failed: ${(err as Error).message.trim()}\n${tail}`, { cause: err });
  };

  try {
    await runTool(t, 'initdb', ['-D', data, '-A', 'trust', '-U', USER, '-E', 'UTF8', '--locale=C', '--no-sync', '--no-instructions'], dir);
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw await failed('initdb', err);
  }

  // Should this process exit without destroy(): the exit hook, or if it is killed, the watchdog. destroy() undoes both.
  const onExit = () => {
    try {
      const [cmd, ...args] = ctlArgs(['-m', 'immediate', 'stop']);
      execFileSync(cmd!, args, { cwd: dir, stdio: 'ignore', timeout: 10_000 });
    } catch {
      // not running
    }
    rmSync(dir, { recursive: true, force: true });
  };
  process.on('exit', onExit);
  // sh -c SCRIPT pgCluster-watchdog PID DIR CMD...: wait for this process to go, then stop the server and remove DIR.
  const watchdog = spawn(
    'sh',
    [
      '-c',
      'pid=$1; dir=$2; shift 2; while kill -0 "$pid" 2>/dev/null; do sleep 1; done; "$@" >/dev/null 2>&1; rm -rf "$dir"',
      'pgCluster-watchdog',
      String(process.pid),
      dir,
      ...ctlArgs(['-m', 'immediate', 'stop']),
    ],
    { detached: true, stdio: 'ignore' },
  );
  watchdog.on('error', () => undefined);
  watchdog.unref();

  let destroyed = false;
  const destroy = async () => {
    if (destroyed) return;
    destroyed = true;
    process.off('exit', onExit);
    await ctl(['-m', 'immediate', '-w', 'stop']).catch(() => undefined); // not running
    try {
      if (watchdog.pid && watchdog.exitCode === null) process.kill(-watchdog.pid); // its process group: sh and its sleep
    } catch {
      // already gone
    }
    await rm(dir, { recursive: true, force: true });
  };

  const settings = (port: number) =>
    [
      '',
      '# pgCluster.ts (the last value of a setting wins)',
      `port = ${port}`,
      "listen_addresses = '127.0.0.1'",
      `unix_socket_directories = '${dir}'`, // ours, never the shared server's
      `max_connections = ${options.maxConnections ?? 50}`,
      'shared_buffers = 16MB',
      'fsync = off', // safe against a server crash (-m immediate), see the header
      '',
    ].join('\n');

  // The port was free a moment ago; should someone take it before the server binds it, try another.
  let port = 0;
  for (let attempt = 1; ; attempt++) {
    port = await freePort();
    await appendFile(join(data, 'postgresql.conf'), settings(port));
    try {
      await ctl(['-l', log, '-w', '-t', '60', 'start']);
      break;
    } catch (err) {
      if (attempt < 3 && /could not bind|could not create any TCP\/IP sockets/.test(await readFile(log, 'utf8').catch(() => ''))) continue;
      const error = await failed('start', err);
      await destroy();
      throw error;
    }
  }

  const stop = async (mode: 'immediate' | 'fast' = 'immediate') => {
    await ctl(['-m', mode, '-w', 'stop']).catch(async (err) => {
      throw await failed(`stop -m ${mode}`, err);
    });
  };
  const start = async () => {
    await ctl(['-l', log, '-w', '-t', '60', 'start']).catch(async (err) => {
      throw await failed('start', err);
    });
  };
  return {
    url: `postgres://${USER}@127.0.0.1:${port}/postgres`,
    port,
    dir,
    stop,
    start,
    restart: async (mode) => {
      await stop(mode);
      await start();
    },
    destroy,
    [Symbol.asyncDispose]: destroy,
  };
}
