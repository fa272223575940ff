/**
 * A delegation's end from another process: posted to the run's inbox (a `delegation` request, the
 * same on every store), applied by whoever hosts the run — the process driving it on SQLite, a
 * worker on PostgreSQL — recorded once, and its agent is messaged the result. Reported again, it
 * changes nothing and says so.
 */
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { Coordinator } from '../../src/host/createCoordinator.js';
import { sqliteHosting } from '../../src/hosting/sqliteHosting.js';
import type { RunStore } from '../../src/hosting/runStore.js';
import { postgresRuns } from '../../src/hosting/postgresRuns.js';
import { sqliteRuns } from '../../src/hosting/sqliteRuns.js';
import { recording } from '../helpers/models.js';
import type { StorePort } from '../../src/store/port.js';
import { openPostgresStore } from '../../src/store/postgres/store.js';
import { openStore } from '../../src/store/sqliteStore.js';
import type { InboxResult } from '../../src/store/types.js';
import { submitRun } from '../../src/worker/submit.js';
import { startWorker } from '../../src/worker/worker.js';
import { troupe, workdir } from '../helpers/cli.js';
import { freshSchema, PG_URL, pgAvailable, pgTitle } from '../helpers/pg.js';

async function until<T>(what: string, probe: () => Promise<T | undefined | null | false>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`${what} never happened`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** Post a delegation's end from outside and read the host's answer. */
async function postReport(runs: RunStore, runId: string, delegation: string, result: string): Promise<InboxResult> {
  const id = await runs.post({ runId, kind: 'delegation', payload: { agent: 'lead', delegation, status: 'completed', result }, at: Date.now() });
  return until(`request ${id}'s answer`, async () => (await runs.request(id))?.result);
}

/** How a test reports a delegation's end: the API (`runs.post`) or the CLI. */
type Report = (runs: RunStore, runId: string, delegation: string, result: string) => Promise<Pick<InboxResult, 'ok' | 'message'>>;

/** `troupe finish-delegation` from another process: its exit code and the line it prints are the host's answer. */
const cliReport =
  (path: string): Report =>
  async (_runs, runId, delegation, result) => {
    const r = await troupe(['finish-delegation', 'lead', delegation, 'completed', result, '--db', path, '--run', runId], workdir());
    return { ok: r.code === 0, message: (r.code === 0 ? r.stdout : r.stderr).trim() };
  };

/** Both stores: the report reaches the host, the agent sees the result once, and a repeat changes nothing. */
async function reportTwice(runs: RunStore, runId: string, delegation: string, seen: string[], report: Report = postReport): Promise<void> {
  const first = await report(runs, runId, delegation, '42 files');
  expect(first).toMatchObject({
    ok: true,
    message: expect.stringMatching(new RegExp(`^delegation ${delegation} completed: lead \\(\\w+\\) is messaged its result$`)),
  });
  const text = `Delegation ${delegation} (index the repo) completed: 42 files`;
  await until('the result in a model call', async () => seen.some((s) => s.includes(text)));
  const again = await report(runs, runId, delegation, 'late');
  expect(again).toMatchObject({ ok: true, message: `delegation ${delegation} of lead had already completed; nothing changed` });
  const rows = (await runs.reads.listMessages(runId)).filter((m) => m.type === 'delegation_result');
  expect(rows.map((m) => m.content)).toEqual([text]);
}

describe('a delegation ended from another process, on SQLite', () => {
  it('reaches the process hosting the run (the hosting loop over the file it owns) through its inbox', () => onSqlite());
  it('troupe finish-delegation: from another process, the same', () => onSqlite(cliReport));
});

/** A run hosted by the hosting loop over its file; its root delegates, and the end is reported from outside (`via`: the CLI; default the API). */
async function onSqlite(via?: (path: string) => Report): Promise<void> {
  const path = join(workdir(), 'team.db');
  const store = openStore({ path });
  const { model, seen } = recording();
  let delegation: string | undefined;
  let runId: string | undefined;
  const worker = await startWorker({
    store: sqliteHosting(store),
    pollMs: 20,
    hostOptions: () => ({ model, interactive: true, boot: { root: { name: 'lead', task: 'index the repo in the background' } } }),
    onHost: (c: Coordinator<StorePort>) => {
      runId = c.runId;
      // The run's own work: once its root waits on its user, it dispatches background work.
      c.subscribe((e) => {
        if (e.type === 'agent.status' && e.to === 'waiting' && delegation === undefined) delegation = c.delegations.dispatch(e.agentId, 'index the repo');
      });
    },
  });
  const runs = sqliteRuns(path);
  try {
    await worker.keep('run_delegation');
    await until('the delegation row', async () => delegation !== undefined && store.listDelegations('run_delegation').length === 1);
    expect(runId).toBe('run_delegation');
    await reportTwice(runs, 'run_delegation', delegation!, seen, via?.(path));
  } finally {
    await worker.stop();
    await runs.close();
    store.close();
  }
}

const available = await pgAvailable();

describe.skipIf(!available)(pgTitle(available, 'a delegation ended from another process, on PostgreSQL'), () => {
  const { schema, drop } = freshSchema();
  afterAll(async () => {
    await drop();
  });

  it('reaches the worker hosting the run through its inbox', async () => {
    const own = await openPostgresStore({ url: PG_URL, schema });
    const other = await openPostgresStore({ url: PG_URL, schema });
    const runs = postgresRuns(other);
    const { model, seen } = recording();
    let delegation: string | undefined;
    const worker = await startWorker({
      store: own,
      pollMs: 60_000,
      ttlMs: 3_000,
      hostOptions: () => ({ model }),
      // The run's own work: its root dispatches background work as soon as it is first hosted.
      onHost: (c: Coordinator<StorePort>) => {
        const root = c.list().find((a) => a.parentId === null);
        if (root && delegation === undefined) delegation = c.delegations.dispatch(root.id, 'index the repo');
      },
    });
    try {
      const { runId } = await submitRun(own, { root: { name: 'lead', task: 'index the repo in the background' }, interactive: true });
      await until('the delegation row', async () => delegation !== undefined && (await own.reads.listDelegations(runId)).length === 1);
      await reportTwice(runs, runId, delegation!, seen);
    } finally {
      await worker.stop();
      await runs.close();
      await own.close();
    }
  });
});
