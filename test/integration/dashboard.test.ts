/**
 * The dashboard without a browser: what it reads from the demo's database (team with why agents
 * ended and who waits on whom, timeline, agent), the hostings of a demo killed with SIGKILL and
 * resumed, the guard (token, Host, Origin), actions refused on a run no process drives (nothing
 * written), bad databases and run ids refused with their typed errors, and pushes batched.
 */
import { copyFileSync, writeFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import { spawn } from 'node:child_process';
import { request } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ui } from '../../src/cli/ui.js';
import { readAgent, readTeam, readTimeline } from '../../src/dashboard/readModel.js';
import { startDashboard, type DashboardHandle } from '../../src/dashboard/server.js';
import { databaseSource, fingerprint } from '../../src/dashboard/sources.js';
import { ownerAlive as isOwned } from '../../src/store/ownerLock.js';
import { portOf } from '../../src/store/port.js';
import { openStore, type SqliteStore } from '../../src/store/sqliteStore.js';
import { BIN, fileHashes, workdir } from '../helpers/cli.js';
import { call, captureIo, demoDb, eventBoots, interruptedRun, killedAndResumedDemo } from '../helpers/dashboard.js';

let db: string;
let store: SqliteStore;
let handle: DashboardHandle;

beforeAll(async () => {
  db = await demoDb();
  store = openStore({ path: db, readonly: true });
  handle = await startDashboard(databaseSource(store, db), { port: 0, batchMs: 20 });
});
afterAll(async () => {
  await handle?.close();
  store?.close();
});

describe('what the dashboard reads from the demo run', () => {
  it('the team: five agents with their statuses, counts, and the budget with its reserve line', async () => {
    const team = await readTeam(portOf(store));
    expect(Object.fromEntries(team.agents.map((a) => [a.name, a.status]))).toEqual({
      lead: 'completed',
      scout: 'completed',
      flaky: 'completed',
      talker: 'stopped',
      prober: 'failed',
    });
    expect(team.counts).toEqual({ completed: 3, stopped: 1, failed: 1 });
    expect(team.budget).toMatchObject({ limitUsd: 0.5, reserveStopped: true, budgetStopped: false, paused: false });
    expect(team.budget.reserveUsd).toBeCloseTo(0.45, 10);
    expect(team.budget.spentUsd).toBeCloseTo(
      team.agents.reduce((s, a) => s + a.spentUsd, 0),
      10,
    );
  });

  it('why an agent ended: the stop reason of a stopped one, the error of a failed one, nothing for the completed', async () => {
    const team = await readTeam(portOf(store));
    const why = Object.fromEntries(team.agents.map((a) => [a.name, { stopReason: a.stopReason, code: a.error?.code ?? null }]));
    expect(why).toEqual({
      lead: { stopReason: null, code: null },
      scout: { stopReason: null, code: null },
      flaky: { stopReason: null, code: null },
      talker: { stopReason: 'reserve', code: null },
      prober: { stopReason: null, code: 'PROVIDER_AUTH' },
    });
    expect(team.agents.find((a) => a.name === 'prober')!.error!.message).not.toBe('');
    // Finished: nobody waits on anyone.
    expect(team.agents.flatMap((a) => a.waitingOnIds)).toEqual([]);
  });

  it('the timeline: the reserve trip once, talker stalled before it was stopped, notices on the children’s lanes', async () => {
    const t = await readTimeline(portOf(store));
    expect(t.marks.map((m) => m.kind)).toEqual(['trip']);
    expect(t.marks[0]!.label).toMatch(/^reserve tripped at \$0\.4\d+$/);
    const lane = (name: string) => t.lanes.find((l) => l.name === name)!;
    expect(lane('talker').spans.map((s) => s.status)).toEqual(['running', 'stalled', 'stopped']);
    expect(lane('prober').marks.some((m) => m.kind === 'error' && m.label.startsWith('PROVIDER_AUTH'))).toBe(true);
    // flaky was rate-limited once and retried: the retry and its reason are on its lane.
    expect(
      lane('flaky')
        .marks.filter((m) => m.kind === 'retry')
        .map((m) => m.label),
    ).toEqual([expect.stringMatching(/^retry 1 in \d+ ms after PROVIDER_RATE_LIMITED: /)]);
    expect(
      t.lanes
        .filter((l) => l.name !== 'flaky')
        .flatMap((l) => l.marks)
        .filter((m) => m.kind === 'retry'),
    ).toEqual([]);
    for (const name of ['scout', 'flaky', 'talker', 'prober']) expect(lane(name).marks.filter((m) => m.kind === 'notice')).toHaveLength(1);
    // Every model call is a mark on its agent's lane.
    const calls = t.lanes.reduce((n, l) => n + l.marks.filter((m) => m.kind === 'model').length, 0);
    expect(calls).toBe(store.listUsage(store.listRuns()[0]!.id).length);
  });

  it('an agent: transcript, spend by purpose, children and mailbox', async () => {
    const lead = await readAgent(portOf(store), undefined, 'lead');
    expect(lead.children.map((c) => c.name)).toEqual(['scout', 'flaky', 'talker', 'prober']);
    expect(lead.transcript.some((i) => i.role === 'assistant' && i.toolCalls?.some((c) => c.name === 'spawn_agent'))).toBe(true);
    // A notice from each child, and the coordinator's notice that the reserve tripped.
    expect(
      lead.mailbox
        .filter((m) => m.noticeKey !== null)
        .map((m) => m.fromName)
        .sort(),
    ).toEqual(['flaky', 'prober', 'scout', 'system', 'talker']);
    expect(lead.spentByPurpose.main).toBeGreaterThan(0);
    await expect(readAgent(portOf(store), undefined, 'nobody')).rejects.toMatchObject({ code: 'AGENT_NOT_FOUND' });
  });
});

describe('the hostings of a run', () => {
  it('a demo killed with SIGKILL and resumed in a new process: two hostings, split where the boots change, the gap between them', async () => {
    const path = await killedAndResumedDemo();
    const reader = openStore({ path, readonly: true });
    try {
      const runId = reader.listRuns()[0]!.id;
      const boots = eventBoots(path, runId);
      const distinct = [...new Set(boots.map((b) => b.boot))];
      expect(distinct).toHaveLength(2);
      // The store's reads hand back the boot (owner) that wrote each event row.
      const t = await readTimeline(portOf(reader));
      expect(t.hostings.map((h) => h.boot)).toEqual(distinct);
      const [first, second] = t.hostings as [(typeof t.hostings)[0], (typeof t.hostings)[0]];
      expect(first.from).toBe(t.start);
      expect(second.to).toBe(t.end);
      // Each hosting spans exactly its own boot's events, and the gap between them holds none.
      const ats = (boot: number) => boots.filter((b) => b.boot === boot).map((b) => b.at);
      expect(first.to).toBe(Math.max(...ats(first.boot!)));
      expect(second.from).toBe(Math.min(...ats(second.boot!)));
      expect(second.from).toBeGreaterThan(first.to);
      expect(boots.filter((b) => b.at > first.to && b.at < second.from)).toEqual([]);
      // The resumed run finished: its root completed in the second hosting.
      const lead = t.lanes.find((l) => l.name === 'lead')!;
      expect(lead.spans.at(-1)).toMatchObject({ status: 'completed' });
      expect(lead.spans.at(-1)!.from).toBeGreaterThanOrEqual(second.from);
    } finally {
      reader.close();
    }
  });

  it('a run dropped without a clean stop and resumed on the next boot in this process: two hostings around the gap', async () => {
    const { db: path, runId } = await interruptedRun(4_000);
    const reader = openStore({ path, readonly: true });
    try {
      const t = await readTimeline(portOf(reader), runId);
      expect(t.hostings.map((h) => h.boot)).toEqual([1, 2]);
      expect(t.hostings[1]!.from - t.hostings[0]!.to).toBeGreaterThanOrEqual(4_000);
    } finally {
      reader.close();
    }
  });
});

describe('the guard', () => {
  const api = (path: string) => `${path}${path.includes('?') ? '&' : '?'}token=${handle.token}`;
  const host = () => ({ Host: `127.0.0.1:${handle.port}` });

  it('the token: the page and every API call without it, or with a wrong one, are refused', async () => {
    const page = await call(handle.port, `/?token=${handle.token}`, { headers: host() });
    expect(page.status).toBe(200);
    expect(page.headers['content-security-policy']).toMatch(/script-src 'self';.*frame-ancestors 'none'/);
    for (const path of ['/', '/?token=wrong', `/?token=${handle.token}x`, '/api/team', '/api/team?token=wrong', '/api/events?token=wrong']) {
      const r = await call(handle.port, path, { headers: host() });
      expect(r.status, path).toBe(403);
    }
    expect(JSON.parse((await call(handle.port, '/api/team?token=wrong', { headers: host() })).body)).toMatchObject({
      error: { message: expect.stringMatching(/token/) },
    });
  });

  it('a Host that is not loopback (DNS rebinding) and a page of another origin are refused', async () => {
    expect((await call(handle.port, api('/api/team'), { headers: { Host: 'evil.example' } })).status).toBe(403);
    const post = (origin: string) =>
      call(handle.port, api('/api/action'), { method: 'POST', headers: { ...host(), Origin: origin, 'Content-Type': 'application/json' }, body: '{}' });
    expect((await post('http://evil.example')).status).toBe(403);
    // The same origin gets through the guard (and is then told what is wrong with its action).
    expect((await post(`http://127.0.0.1:${handle.port}`)).status).toBe(400);
  });

  it('an action is JSON only', async () => {
    const r = await call(handle.port, api('/api/action'), { method: 'POST', headers: { ...host(), 'Content-Type': 'text/plain' }, body: 'kind=stop' });
    expect(r.status).toBe(415);
  });

  it('a body over 256 KB: a 413 with a JSON error, answered without resetting the connection', async () => {
    for (const bytes of [256 * 1024 + 1, 4 * 1024 * 1024]) {
      const body = JSON.stringify({ kind: 'send', content: 'x'.repeat(bytes) });
      // `call` rejects on a reset (ECONNRESET, "socket hang up"): the answer must arrive whole.
      const r = await call(handle.port, api('/api/action'), { method: 'POST', headers: { ...host(), 'Content-Type': 'application/json' }, body });
      expect(r.status, `${bytes} bytes`).toBe(413);
      expect(JSON.parse(r.body)).toEqual({ error: { code: 'CONFIG_INVALID', message: 'The request body is over 262144 bytes' } });
    }
    // Just under the cap is read and judged (an action with no run: 400, not 413).
    const under = await call(handle.port, api('/api/action'), {
      method: 'POST',
      headers: { ...host(), 'Content-Type': 'application/json' },
      body: JSON.stringify({ pad: 'x'.repeat(200 * 1024) }),
    });
    expect(under.status).toBe(400);
  });
});

describe('bad input: a clear typed error, nothing written', () => {
  it('an action on a run no process drives is RUN_NOT_LIVE, and the file is untouched', async () => {
    const before = fileHashes(db);
    const runId = store.listRuns()[0]!.id;
    for (const body of [
      { run: runId, kind: 'send', agent: 'lead', content: 'hello' },
      { run: runId, kind: 'stop', agent: 'talker' },
      { run: runId, kind: 'pause' },
    ]) {
      const r = await call(handle.port, `/api/action?token=${handle.token}`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify(body),
      });
      expect(r.status).toBe(409);
      expect(JSON.parse(r.body)).toMatchObject({ error: { code: 'RUN_NOT_LIVE' } });
    }
    expect(fileHashes(db)).toEqual(before);
  });

  it('a run id that does not exist: RUN_NOT_FOUND in the page’s API and from troupe ui', async () => {
    const r = await call(handle.port, `/api/team?run=run_nope&token=${handle.token}`);
    expect(r.status).toBe(404);
    expect(JSON.parse(r.body)).toMatchObject({ error: { code: 'RUN_NOT_FOUND' } });
    await expect(ui([], { db: db, run: 'run_nope', port: '0' }, captureIo())).rejects.toMatchObject({ code: 'RUN_NOT_FOUND' });
  });

  it('a file that is not troupe’s, and a missing one: refused by troupe ui before anything is served, nothing written', async () => {
    const dir = workdir();
    const notOurs = join(dir, 'notes.db');
    writeFileSync(notOurs, 'just some text, not a database\n'.repeat(200));
    const before = fileHashes(notOurs);
    await expect(ui([], { db: notOurs, port: '0' }, captureIo())).rejects.toMatchObject({ code: expect.stringMatching(/^STORE_(CORRUPT|OPEN_FAILED)$/) });
    expect(fileHashes(notOurs)).toEqual(before);
    await expect(ui([], { db: join(dir, 'missing.db'), port: '0' }, captureIo())).rejects.toMatchObject({ code: 'RUN_NOT_FOUND' });
  });

  it('a database of a newer schema: STORE_SCHEMA_TOO_NEW, nothing written', async () => {
    const newer = join(workdir(), 'newer.db');
    copyFileSync(db, newer);
    const raw = new Database(newer);
    raw.pragma('user_version = 999');
    raw.close();
    const before = fileHashes(newer);
    await expect(ui([], { db: newer, port: '0' }, captureIo())).rejects.toMatchObject({ code: 'STORE_SCHEMA_TOO_NEW' });
    expect(fileHashes(newer)).toEqual(before);
  });

  it('a file locked by another program: STORE_OPEN_FAILED (locked), nothing written', async () => {
    const locked = join(workdir(), 'locked.db');
    copyFileSync(db, locked);
    const before = fileHashes(locked);
    const holder = new Database(locked);
    holder.pragma('locking_mode = EXCLUSIVE');
    holder.exec('BEGIN EXCLUSIVE');
    try {
      await expect(ui([], { db: locked, port: '0' }, captureIo())).rejects.toMatchObject({
        code: 'STORE_OPEN_FAILED',
        message: expect.stringMatching(/locked/),
      });
    } finally {
      holder.exec('ROLLBACK');
      holder.close();
    }
    expect(fileHashes(locked)).toEqual(before);
  });

  it('whether a process drives a database: its lock held or not, found without writing', () => {
    const path = join(workdir(), 'owned.db');
    expect(isOwned(path)).toBe(false);
    const owner = openStore({ path });
    expect(isOwned(path)).toBe(true);
    owner.close();
    expect(isOwned(path)).toBe(false);
  });
});

describe('live updates', () => {
  /** The stream's `changed` frames as they arrive. */
  function stream(handle: DashboardHandle): { frames: Record<string, unknown>[]; next: (n: number) => Promise<void>; close: () => void } {
    const frames: Record<string, unknown>[] = [];
    const waiters: (() => void)[] = [];
    let buffer = '';
    const req = request({ host: '127.0.0.1', port: handle.port, path: `/api/events?token=${handle.token}` }, (res) => {
      res.setEncoding('utf8').on('data', (chunk: string) => {
        buffer += chunk;
        let end;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const data = block.split('\n').find((l) => l.startsWith('data: '));
          if (data) frames.push(JSON.parse(data.slice(6)) as Record<string, unknown>);
          for (const w of waiters.splice(0)) w();
        }
      });
    });
    req.on('error', () => {});
    req.end();
    const next = (n: number) =>
      new Promise<void>((resolve) => {
        const check = () => (frames.length >= n ? resolve() : waiters.push(check));
        check();
      });
    return { frames, next, close: () => req.destroy() };
  }

  it('troupe ui on a database another connection writes: the poll sees the change', async () => {
    const copy = join(workdir(), 'polled.db');
    copyFileSync(db, copy);
    const owner = openStore({ path: copy });
    const reader = openStore({ path: copy, readonly: true });
    const source = databaseSource(reader, copy, 20);
    let calls = 0;
    let wake = () => {};
    const unwatch = source.watch(() => {
      calls++;
      wake();
    });
    const nextCall = () => new Promise<void>((resolve) => (wake = resolve));
    try {
      await nextCall(); // the first poll: nothing seen before
      expect(source.live(owner.listRuns()[0]!.id)).toBe(true);
      // Stable while nothing is written (no push every second for nothing).
      const before = await fingerprint(portOf(reader));
      expect(await fingerprint(portOf(reader))).toBe(before);
      const run = owner.listRuns()[0]!;
      const seen = calls;
      const changed = nextCall();
      owner.appendEvent({ runId: run.id, agentId: null, type: 'test.note', data: {}, at: 1 });
      await changed;
      expect(calls).toBe(seen + 1);
      expect(await fingerprint(portOf(reader))).not.toBe(before);
    } finally {
      unwatch();
      reader.close();
      owner.close();
    }
  });

  it('a burst of changes reaches the page as one push', async () => {
    // Nothing else tells this server of changes: only the burst below.
    const handle = await startDashboard({ port: portOf(store), db, live: () => false, watch: () => () => {} }, { port: 0, batchMs: 20 });
    const s = stream(handle);
    try {
      await s.next(1); // the frame every (re)connection starts with
      for (let i = 0; i < 500; i++) handle.changed();
      await s.next(2);
      expect(s.frames[1]).toMatchObject({ changes: 500 });
      handle.changed();
      await s.next(3);
      expect(s.frames[2]).toMatchObject({ changes: 1 });
      expect(Number(s.frames[2]!.version)).toBe(Number(s.frames[1]!.version) + 1);
    } finally {
      s.close();
      await handle.close();
    }
  });
});

describe('the CLI: troupe ui and demo --ui', () => {
  /** Start the built CLI; `stderrMatch` resolves with the first match of a pattern on its stderr. */
  function start(args: string[], cwd: string) {
    const child = spawn(process.execPath, [BIN, ...args], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    let stdout = '';
    const watchers = new Set<() => void>();
    child.stderr.setEncoding('utf8').on('data', (c: string) => ((stderr += c), [...watchers].forEach((w) => w())));
    child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    const stderrMatch = (pattern: RegExp) =>
      new Promise<RegExpExecArray>((resolve, reject) => {
        const check = () => {
          const m = pattern.exec(stderr);
          if (m) {
            watchers.delete(check);
            resolve(m);
          }
        };
        watchers.add(check);
        child.on('exit', () => reject(new Error(`exited before ${pattern}: ${stderr}${stdout}`)));
        check();
      });
    return { child, exited, stderrMatch, stdout: () => stdout };
  }
  const URL_PATTERN = /http:\/\/127\.0\.0\.1:(\d+)\/\?token=([\w-]+)/;

  it('troupe ui serves a database until Ctrl-C, then exits 0', async () => {
    const p = start(['ui', '--db', db, '--port', '0'], workdir());
    try {
      const [, port, token] = await p.stderrMatch(URL_PATTERN);
      const team = JSON.parse((await call(Number(port), `/api/team?token=${token}`)).body) as { agents: unknown[]; live: boolean };
      expect(team.agents).toHaveLength(5);
      expect(team.live).toBe(false);
      p.child.kill('SIGINT');
      expect(await p.exited).toBe(0);
    } finally {
      p.child.kill('SIGKILL');
    }
  });

  it('demo --ui=0: the dashboard is live during the run and keeps serving after it ends, until Ctrl-C', async () => {
    const cwd = workdir();
    const p = start(['demo', '--ui=0', '--db', join(cwd, 'd.db')], cwd);
    try {
      const [, port, token] = await p.stderrMatch(URL_PATTERN);
      await p.stderrMatch(/The run has ended; the dashboard keeps serving/);
      const team = JSON.parse((await call(Number(port), `/api/team?token=${token}`)).body) as { agents: { status: string }[]; live: boolean };
      expect(team.agents.map((a) => a.status).sort()).toEqual(['completed', 'completed', 'completed', 'failed', 'stopped']);
      // After the run, actions are refused: nothing applies the inbox any more.
      expect(team.live).toBe(false);
      p.child.kill('SIGINT');
      expect(await p.exited).toBe(0);
      expect(p.stdout()).toMatch(/Report \(completed\)/);
    } finally {
      p.child.kill('SIGKILL');
    }
  });
});
