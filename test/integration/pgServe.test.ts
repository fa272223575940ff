/**
 * `troupe serve --db postgres://…` with proactive triggers and the watchdog, against a real
 * PostgreSQL and the fake OpenAI-compatible server: a file_change fire submits run
 * `proactive-<name>` (hosted by the serving process's worker) and a later fire messages its root
 * through the inbox; an `agent` fire reaches the main run's lead; the watchdog reports the
 * database and the model endpoint going away and coming back.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openPostgresStore, type PostgresStore } from '../../src/store/postgres/store.js';
import { submitRun } from '../../src/worker/submit.js';
import { createFakeOpenAIServer, type FakeRequest } from '../../src/testing/fakeOpenAIServer.js';
import { spawnTroupe, workdir, type Spawned } from '../helpers/cli.js';
import { adminQuery, freshSchema, PG_URL, pgAvailable, pgTitle } from '../helpers/pg.js';

const available = await pgAvailable();

/** Every agent answers the user with the gist of what it last read, so each turn shows as a line. */
function answerGist(request: FakeRequest) {
  const body = request.body as { messages?: { role: string; content?: unknown }[] };
  const last = body.messages?.filter((m) => m.role === 'user').at(-1);
  const text = typeof last?.content === 'string' ? last.content : JSON.stringify(last?.content ?? '');
  const gist = /second\.md|notes\.md|disk is full|Stand by/.exec(text)?.[0] ?? 'something';
  return { message: { toolCalls: [{ name: 'respond_to_user', arguments: { message: `Noted: ${gist}.` } }] } };
}

/** A short pause between two reads of a condition another process makes true. */
const tick = () => new Promise((resolve) => setTimeout(resolve, 20));

/** The first stdout line matching `pattern` printed at index `from` or later. */
function lineAfter(s: Spawned, from: number, pattern: RegExp, timeoutMs = 30_000): Promise<string> {
  return new Promise((resolve, reject) => {
    const check = () => {
      const hit = s.lines.slice(from).find((l) => pattern.test(l));
      if (hit === undefined) return;
      done();
      resolve(hit);
    };
    const timer = setTimeout(() => {
      done();
      reject(new Error(`no line matching ${pattern} after line ${from} within ${timeoutMs} ms\nstdout:\n${s.lines.join('\n')}\nstderr:\n${s.stderr()}`));
    }, timeoutMs);
    const done = () => {
      clearTimeout(timer);
      s.child.stdout!.off('data', check);
    };
    s.child.stdout!.on('data', check);
    check();
  });
}

describe.skipIf(!available)(pgTitle(available, 'troupe serve on PostgreSQL: proactive triggers and the watchdog'), { timeout: 180_000 }, () => {
  const { schema, drop } = freshSchema();
  const other = freshSchema();
  const running: Spawned[] = [];
  afterAll(async () => {
    for (const r of running) if (r.child.exitCode === null && r.child.signalCode === null) r.child.kill('SIGKILL');
    await drop();
    await other.drop();
  });

  it('fires reach their runs through the database, and the watchdog reports the database and the model endpoint', async () => {
    const server = await createFakeOpenAIServer(answerGist);
    const db = `${PG_URL}?schema=${schema}`;
    const cwd = workdir();
    const watched = join(cwd, 'watched');
    const alerts = join(cwd, 'alerts');
    mkdirSync(watched);
    mkdirSync(alerts);
    const config = join(cwd, 'serve.json');
    writeFileSync(
      config,
      JSON.stringify({
        model: 'm',
        baseURL: server.url,
        apiKey: 'k',
        proactive: {
          triggers: [
            {
              name: 'docs',
              trigger_type: 'file_change',
              watch_path: watched,
              watch_patterns: ['*.md'],
              prompt_template: 'The file ${path} changed; review it.',
              cooldown_seconds: 0,
            },
            {
              name: 'disk',
              trigger_type: 'file_change',
              watch_path: alerts,
              prompt_template: 'The disk is full (${trigger_name}).',
              cooldown_seconds: 0,
              agent: 'lead',
            },
          ],
        },
        watchdog: { intervalMs: 200 },
      }),
    );
    const s = spawnTroupe(['serve', 'Stand by for alerts', '--db', db, '--config', config], cwd);
    running.push(s);
    const ready = await s.line(/^ready +serving .* as worker .* main run run_/);
    expect(ready).toContain('2 proactive trigger(s) (docs, disk)');
    expect(ready).toContain('health checks every 0.2 s (store, model, queue)');
    const mainRunId = /main run (run_\S+)/.exec(ready)![1]!;
    // The serving process is the only worker: it hosts its main run.
    await s.line(/^\[main\] lead +says: Noted: Stand by\./);

    // A root fire submits run proactive-docs for the workers; a later one messages its root.
    writeFileSync(join(watched, 'notes.md'), '# Notes\n');
    await s.line(/^proactive {2}docs → started run proactive-docs \(root \S+\)/);
    await s.line(/^\[proactive-docs\] docs +says: Noted: notes\.md\./);
    writeFileSync(join(watched, 'second.md'), '# Second\n');
    await s.line(/^proactive {2}docs → message to \S+ in run proactive-docs posted/);
    await s.line(/^\[proactive-docs\] docs +says: Noted: second\.md\./);
    // An agent fire reaches the lead of the main run.
    writeFileSync(join(alerts, 'full.txt'), '99%\n');
    await s.line(new RegExp(`^proactive {2}disk → message to \\S+ in run ${mainRunId} posted`));
    await s.line(/^\[main\] lead +says: Noted: disk is full\./);

    // The first rounds found everything healthy: the database, the endpoint, the hosted runs.
    await s.line(/^watchdog +store healthy/);
    await s.line(/^watchdog +model healthy/);
    await s.line(/^watchdog +queue healthy/);

    const store = await openPostgresStore({ url: PG_URL, schema });
    try {
      const run = await store.reads.getRun('proactive-docs');
      expect(run).toMatchObject({ interactive: true });
      const root = (await store.reads.listAgents('proactive-docs')).find((a) => a.id === run!.rootId)!;
      expect(root).toMatchObject({ name: 'docs', task: `The file ${join(watched, 'notes.md')} changed; review it.` });
      const proactive = (runId: string) => store.reads.listMessages(runId).then((ms) => ms.filter((m) => m.type === 'proactive').map((m) => m.content));
      expect(await proactive('proactive-docs')).toContain(`The file ${join(watched, 'second.md')} changed; review it.`);
      expect(await proactive(mainRunId)).toContain('The disk is full (disk).');
      // Saved with the run for whichever worker hosts it: serve's settings, never its key.
      expect((await store.reads.eventsOf('proactive-docs', 'cli.run'))[0]!.data).toMatchObject({ model: 'm', baseURL: server.url });
      expect(JSON.stringify(await store.reads.eventsOf('proactive-docs', 'cli.run'))).not.toContain('"apiKey"');

      // The database loses troupe's runs table, then gets it back: the store check says so both times.
      const before = s.lines.length;
      await adminQuery(`ALTER TABLE ${schema}.runs RENAME TO runs_away`);
      try {
        await lineAfter(s, before, /^watchdog +store unhealthy: .*runs/);
      } finally {
        await adminQuery(`ALTER TABLE ${schema}.runs_away RENAME TO runs`);
      }
      await lineAfter(s, before, /^watchdog +store healthy/);
      // The model endpoint goes away.
      await server.close();
      await s.line(/^watchdog +model unhealthy: GET .*\/models failed/);
    } finally {
      await store.close();
      await server.close().catch(() => undefined);
    }

    s.child.kill('SIGTERM');
    expect(await s.exited, s.stderr()).toEqual({ code: 0, signal: null });
    expect(s.lines.at(-1)).toMatch(/^stopped\b/);
  });

  it('serve --resume says which worker holds its main run, takes it once that worker lets it go, and keeps it while it is parked', async () => {
    await using server = await createFakeOpenAIServer(answerGist);
    const cwd = workdir();
    const db = `${PG_URL}?schema=${other.schema}`;
    const config = join(cwd, 'serve.json');
    writeFileSync(config, JSON.stringify({ apiKey: 'k', watchdog: { intervalMs: 100 } }));
    const store: PostgresStore = await openPostgresStore({ url: PG_URL, schema: other.schema });
    try {
      const { runId, rootId } = await submitRun(store, {
        root: { name: 'lead', task: 'Stand by for alerts' },
        interactive: true,
        event: { type: 'cli.run', data: { model: 'm', baseURL: server.url } },
      });
      // Another worker took the run over (while serve was down, say).
      const elsewhere = await store.claim(runId, { owner: 'other-worker', ttlMs: 120_000, heartbeatMs: 0 });
      const s = spawnTroupe(['serve', '--resume', '--db', db, '--config', config, '--json'], cwd);
      running.push(s);
      expect(JSON.parse(await s.line(/"type":"serve.main_elsewhere"/))).toMatchObject({ runId, owner: 'other-worker' });
      const ready = JSON.parse(await s.line(/"type":"serve.ready"/)) as { worker: string; mainRunId: string };
      expect(ready.mainRunId).toBe(runId);

      // The other worker lets it go (parked), and a message wakes it: serve claims it and hosts it.
      expect(await elsewhere.release({ state: 'parked', wakeAt: null })).toBe(true);
      await store.wake(runId);
      for (;;) {
        const root = (await store.reads.listAgents(runId)).find((a) => a.id === rootId)!;
        if (root.status === 'waiting' && (await store.reads.loadSession(rootId)).some((i) => i.role === 'assistant')) break;
        await tick();
      }
      const leaseOf = async () => (await store.leases()).find((l) => l.run_id === runId)!;
      const hosted = await leaseOf();
      expect(hosted).toMatchObject({ owner: ready.worker, state: 'runnable' });
      // Its root waits on the user: a worker would let it go now. Serve keeps it, round after round of
      // its watchdog (each round asks the fake server for /models).
      const rounds = () => server.requests.filter((r) => r.path === '/v1/models').length;
      const seen = rounds();
      while (rounds() < seen + 5) await tick();
      expect(await leaseOf()).toMatchObject({ owner: ready.worker, epoch: hosted.epoch, state: 'runnable' });

      s.child.kill('SIGTERM');
      expect(await s.exited, s.stderr()).toEqual({ code: 0, signal: null });
      // Let go when serve stops, as its rows say: its root waits on the user and nothing is due, so
      // it is parked (a message wakes it for any worker), not runnable for a worker to host for nothing.
      expect(await leaseOf()).toMatchObject({ owner: null, state: 'parked', wake_at: null });
    } finally {
      await store.close();
    }
  });
});
