/** Databases and HTTP calls for the dashboard's tests. */
import Database from 'better-sqlite3';
import { request } from 'node:http';
import { join } from 'node:path';
import { SimulatedClock } from 'xstate';
import { runCli } from '../../src/cli/program.js';
import type { Io } from '../../src/cli/args.js';
import { createCoordinator } from '../../src/host/createCoordinator.js';
import { resumeCoordinator } from '../../src/host/resumeCoordinator.js';
import { scriptedModel } from '../../src/model/scriptedModel.js';
import { openStore } from '../../src/store/sqliteStore.js';
import { NOT_RECORDING } from '../../src/store/types.js';
import { troupe, workdir } from './cli.js';
import { flush } from './team.js';

/** Output streams that keep what was written. */
export function captureIo(): Io & { text: () => { out: string; err: string } } {
  let out = '';
  let err = '';
  return {
    out: { write: (t: string) => void (out += t) },
    err: { write: (t: string) => void (err += t) },
    env: {},
    tty: false,
    text: () => ({ out, err }),
  };
}

/** The offline demo run into a fresh database (in this process): five agents, the reserve trips. */
export async function demoDb(): Promise<string> {
  const db = join(workdir(), 'demo.db');
  const io = captureIo();
  const code = await runCli(['demo', '--db', db, '--json'], io);
  if (code !== 0) throw new Error(`the demo exited ${code}: ${io.text().err}`);
  return db;
}

export interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One HTTP request to 127.0.0.1:`port` with the given headers (Host included, to forge it). */
export function call(port: number, path: string, options: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method: options.method ?? 'GET', headers: options.headers ?? {} }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

/** The boot of each event of `runId` in the file, in row order (the views' events: not the recording, store/types.ts RECORDING_EVENTS). */
export function eventBoots(path: string, runId: string): { boot: number; at: number }[] {
  const raw = new Database(path, { readonly: true, fileMustExist: true });
  try {
    return raw.prepare(`SELECT boot, at FROM events WHERE run_id = ? AND ${NOT_RECORDING} ORDER BY id`).all(runId) as { boot: number; at: number }[];
  } finally {
    raw.close();
  }
}

/**
 * The demo killed with SIGKILL after `turns` turns (`troupe demo --kill-after`, the built CLI),
 * then `troupe resume`d to its end in a new process: a database whose run had two hostings.
 */
export async function killedAndResumedDemo(turns = 4): Promise<string> {
  const cwd = workdir();
  const killed = await troupe(['demo', '--kill-after', String(turns)], cwd);
  if (killed.signal !== 'SIGKILL') throw new Error(`the demo was not killed (exit ${String(killed.code)}): ${killed.stderr}`);
  const resumed = await troupe(['resume', '--json'], cwd);
  if (resumed.code !== 0) throw new Error(`troupe resume exited ${String(resumed.code)}: ${resumed.stderr}`);
  return join(cwd, '.troupe/demo.db');
}

/**
 * A run on a file, interrupted and resumed in this process: `lead` spawns `helper` and answers the
 * user; helper makes a tool call and is mid model call when the first coordinator is dropped (its
 * store closed under it, no shutdown, its clock never moves again). `gapMs` later a second store
 * (the next boot) resumes the run: helper finishes and lead tells the user.
 */
export async function interruptedRun(gapMs = 4_000): Promise<{ db: string; runId: string; rootId: string }> {
  const db = join(workdir(), 'interrupted.db');
  const clock = new SimulatedClock();
  clock.set(Date.UTC(2025, 0, 1, 12));
  const first = openStore({ path: db });
  const c1 = createCoordinator({
    model: scriptedModel(
      {
        agents: {
          lead: [
            { tool: 'spawn_agent', args: { name: 'helper', task: 'Look into it.' } },
            { tool: 'respond_to_user', args: { message: 'helper is on it.' } },
          ],
          helper: [
            { tool: 'view_agent_graph', args: {}, delayMs: 1_500 },
            { text: 'never sent: the process dies first', delayMs: 3_600_000 },
          ],
        },
      },
      { clock },
    ),
    store: first,
    clock,
    interactive: true,
  });
  const rootId = await c1.start({ name: 'lead', task: 'Find out, and tell me.' });
  await c1.waitFor(rootId, ['waiting']);
  const toolCalls = () => first.listEvents(c1.runId).filter((e) => e.type === 'tool.call' && e.agentId !== rootId).length;
  while (toolCalls() === 0) {
    await flush();
    clock.increment(500);
    await flush();
  }
  // Whatever was due is committed (helper's tool call is on the file); helper stays in its model call.
  await flush();
  const runId = c1.runId;
  first.close();

  const later = new SimulatedClock();
  later.set(clock.now() + gapMs);
  const second = openStore({ path: db });
  const c2 = await resumeCoordinator({
    store: second,
    clock: later,
    model: scriptedModel(
      {
        agents: {
          helper: [{ tool: 'agent_finish', args: { summary: 'found it' } }],
          lead: [{ tool: 'respond_to_user', args: { message: 'helper found it.' } }],
        },
      },
      { clock: later },
    ),
  });
  const helperId = c2.list().find((a) => a.name === 'helper')!.id;
  while (c2.list().find((a) => a.id === helperId)!.status === 'running') {
    await flush();
    later.increment(500);
    await flush();
  }
  await c2.waitFor(rootId, ['waiting']);
  await c2.whenIdle();
  await c2.shutdown();
  second.close();
  return { db, runId, rootId };
}
