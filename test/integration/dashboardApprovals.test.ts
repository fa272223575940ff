/**
 * Approvals on the dashboard without a browser (issue 33 item 1): the read model serves a run's
 * approvals from its rows (pending first), read by a connection that does not host the run; the
 * `approval` action is validated before anything is posted (CONFIG_INVALID), refused like the
 * other actions on a run no process drives (RUN_NOT_LIVE), and otherwise answered by the run's
 * host through the inbox, with its typed refusals (APPROVAL_NOT_FOUND, TOOL_INPUT_INVALID). On
 * PostgreSQL, a process that does not host the run reads its approvals the same.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hostInLoop } from '../../src/worker/library.js';
import { readApprovals, readTeam } from '../../src/dashboard/readModel.js';
import { startDashboard, type DashboardHandle } from '../../src/dashboard/server.js';
import { coordinatorSource, databaseSource, runsSource } from '../../src/dashboard/sources.js';
import { sqliteRuns } from '../../src/hosting/sqliteRuns.js';
import { resumeCoordinator } from '../../src/host/resumeCoordinator.js';
import { portOf } from '../../src/store/port.js';
import { openStore, type SqliteStore } from '../../src/store/sqliteStore.js';
import { createCoordinator } from '../../src/host/createCoordinator.js';
import { scriptedModel } from '../../src/model/scriptedModel.js';
import type { StorePort } from '../../src/store/port.js';
import type { PostgresStore } from '../../src/store/postgres/store.js';
import { SimulatedClock } from 'xstate';
import { fileHashes, workdir } from '../helpers/cli.js';
import { pgAvailable, pgTitle, twoHostsOnOneSchema } from '../helpers/pg.js';
import { call, demoDb } from '../helpers/dashboard.js';
import { flush, team } from '../helpers/team.js';
import { dropTableTool } from '../helpers/approvals.js';

const available = await pgAvailable();

const post = (handle: DashboardHandle, body: unknown) =>
  call(handle.port, `/api/action?token=${handle.token}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });

describe('the approval action on a run no process drives', () => {
  let db: string;
  let store: SqliteStore;
  let handle: DashboardHandle;
  beforeAll(async () => {
    db = await demoDb();
    store = openStore({ path: db, readonly: true });
    handle = await startDashboard(databaseSource(store, db), { port: 0 });
  });
  afterAll(async () => {
    await handle?.close();
    store?.close();
  });

  it('a malformed answer is CONFIG_INVALID, a well-formed one RUN_NOT_LIVE as send and stop are; nothing is written', async () => {
    const run = store.listRuns()[0]!.id;
    const before = fileHashes(db);
    const bad: [Record<string, unknown>, RegExp][] = [
      [{ approve: true }, /id of the approval/],
      [{ approval: '', approve: true }, /id of the approval/],
      [{ approval: 'ap-1' }, /approve: true or false/],
      [{ approval: 'ap-1', approve: 'yes' }, /approve: true or false/],
      [{ approval: 'ap-1', approve: true, args: ['users'] }, /JSON object/],
      [{ approval: 'ap-1', approve: true, args: null }, /JSON object/],
      [{ approval: 'ap-1', approve: true, args: '{"table":"x"}' }, /JSON object/],
      [{ approval: 'ap-1', approve: false }, /reason/],
      [{ approval: 'ap-1', approve: false, reason: '   ' }, /reason/],
      [{ approval: 'ap-1', approve: false, reason: 'no', args: {} }, /no arguments/],
    ];
    for (const [body, message] of bad) {
      const r = await post(handle, { run, kind: 'approval', ...body });
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(JSON.parse(r.body)).toMatchObject({ error: { code: 'CONFIG_INVALID', message: expect.stringMatching(message) } });
    }
    for (const body of [
      { approval: 'ap-1', approve: true },
      { approval: 'ap-1', approve: true, args: { table: 'x' } },
      { approval: 'ap-1', approve: false, reason: 'no' },
    ]) {
      const r = await post(handle, { run, kind: 'approval', ...body });
      expect(r.status).toBe(409);
      expect(JSON.parse(r.body)).toMatchObject({ error: { code: 'RUN_NOT_LIVE' } });
    }
    expect(fileHashes(db)).toEqual(before);
    // The demo asked nothing: its approvals read as none.
    expect(await readApprovals(portOf(store), run)).toEqual({ runId: run, approvals: [] });
  });
});

describe('an approval of a run nobody hosts (a worker lets a run go while its agent waits)', () => {
  it('is answered by the dashboard itself, as troupe approve does; the next host runs the step once', async () => {
    const { runs, tool: dropTable } = dropTableTool();
    const db = join(workdir(), 'parked.db');
    // The run's clock reads the real time: the dashboard applies the answer on the real clock, where
    // a wait begun at simulated time 0 would be decades overdue and its idle timer would wake the agent.
    const clock = new SimulatedClock();
    clock.set(Date.now());
    const script = {
      agents: { lead: [{ tools: [{ name: 'drop_table', args: { table: 'a' } }] }, { tools: [{ name: 'wait_for_agents', args: { reason: 'the approval' } }] }] },
    };
    const first = openStore({ path: db });
    const t = team(script, { store: first, clock, tools: [dropTable], interactive: true, approvals: { ask: ['destructive'] } });
    const lead = await t.c.start({ name: 'lead', task: 'Clean up.' });
    await t.c.waitFor(lead, ['waiting']);
    await flush();
    await t.c.shutdown();
    first.close();

    const runStore = sqliteRuns(db);
    const handle = await startDashboard(runsSource(runStore), { port: 0 });
    try {
      const team = JSON.parse((await call(handle.port, `/api/team?run=${t.c.runId}&token=${handle.token}`)).body) as {
        live: boolean;
        answersApprovals: boolean;
      };
      expect(team).toMatchObject({ live: false, answersApprovals: true });
      const r = await post(handle, { run: t.c.runId, kind: 'approval', approval: 'ap-1', approve: true, args: { table: 'a_tmp' } });
      expect([r.status, JSON.parse(r.body)]).toEqual([
        200,
        {
          ok: true,
          message: expect.stringMatching(/^approval ap-1 approved with edited arguments: drop_table runs for lead \(\w+\) once the run is next hosted$/),
        },
      ]);
      expect(runs).toEqual([]);
    } finally {
      await handle.close();
      await runStore.close();
    }
    const store = openStore({ path: db });
    const model = scriptedModel({ agents: { lead: [{ tools: [{ name: 'respond_to_user', args: { message: 'done' } }] }] } }, { clock });
    const again = await resumeCoordinator({ store, model, clock, tools: [dropTable], approvals: { ask: ['destructive'] } });
    await flush();
    expect(runs).toEqual([{ table: 'a_tmp' }]);
    // Its wait on the approval lasts until the approved step's result: its first call carries it.
    expect(JSON.stringify(model.calls[0]?.request.messages)).toContain('dropped a_tmp');
    await again.shutdown();
    store.close();
  });
});

describe('the approvals of a live run', () => {
  it('read from the rows by another connection, pending first; answered by the host through the inbox, refusals typed', async () => {
    const { runs, tool: dropTable } = dropTableTool();
    const db = join(workdir(), 'approvals.db');
    const store = openStore({ path: db });
    const t = team(
      {
        agents: {
          lead: [
            {
              tools: [
                { name: 'drop_table', args: { table: 'a' } },
                { name: 'drop_table', args: { table: 'b' } },
              ],
            },
            { tools: [{ name: 'wait_for_agents', args: { reason: 'the approvals' } }] },
            { tools: [{ name: 'wait_for_agents', args: { reason: 'the other approval' } }] },
            { tools: [{ name: 'respond_to_user', args: { message: 'done' } }] },
          ],
        },
      },
      { store, tools: [dropTable], interactive: true, approvals: { ask: ['destructive'] } },
    );
    const lead = await t.c.start({ name: 'lead', task: 'Clean up.' });
    await t.c.waitFor(lead, ['waiting']);
    await flush();
    const stopInbox = hostInLoop(t.c, store, 20);
    const handle = await startDashboard(
      coordinatorSource(t.c, store, db, () => true),
      { port: 0 },
    );
    // Another connection to the file, as `troupe ui` in another process reads it.
    const reader = openStore({ path: db, readonly: true });
    const read = async () => (await readApprovals(portOf(reader), t.c.runId)).approvals;
    const api = async () => JSON.parse((await call(handle.port, `/api/approvals?run=${t.c.runId}&token=${handle.token}`)).body) as { runId: string };
    try {
      expect(await read()).toMatchObject([
        { id: 'ap-1', agentId: lead, agentName: 'lead', tool: 'drop_table', risk: 'destructive', args: { table: 'a' }, state: 'pending' },
        { id: 'ap-2', agentName: 'lead', args: { table: 'b' }, state: 'pending' },
      ]);
      expect(await api()).toEqual({ runId: t.c.runId, approvals: await read() });
      // The team says what the agent waits on: its pending approvals.
      const waits = async () => (await readTeam(portOf(reader), t.c.runId)).agents.map((a) => [a.name, a.status, a.waitingOn]);
      expect(await waits()).toEqual([['lead', 'waiting', 'approval ap-1, ap-2']]);

      // The host's refusals come back typed; nothing runs.
      let r = await post(handle, { run: t.c.runId, kind: 'approval', approval: 'ap-9', approve: true });
      expect([r.status, JSON.parse(r.body)]).toEqual([
        404,
        { error: { code: 'APPROVAL_NOT_FOUND', message: expect.stringMatching(/has no approval "ap-9"/) } },
      ]);
      r = await post(handle, { run: t.c.runId, kind: 'approval', approval: 'ap-2', approve: true, args: { table: 5 } });
      expect(r.status).toBe(400);
      expect(JSON.parse(r.body)).toMatchObject({ error: { code: 'TOOL_INPUT_INVALID' } });

      // Denied with a reason: the answered one goes after the one still pending.
      r = await post(handle, { run: t.c.runId, kind: 'approval', approval: 'ap-1', approve: false, reason: 'a is in use' });
      expect([r.status, JSON.parse(r.body)]).toEqual([200, { ok: true, message: expect.stringMatching(/^approval ap-1 denied: lead \(\w+\) is told why$/) }]);
      expect(await read()).toMatchObject([
        { id: 'ap-2', state: 'pending' },
        { id: 'ap-1', state: 'denied', answer: { approved: false, reason: 'a is in use' } },
      ]);
      await expect.poll(waits).toEqual([['lead', 'waiting', 'approval ap-2']]);

      // Approved with edited arguments: it runs once with them; the newest answer reads first.
      r = await post(handle, { run: t.c.runId, kind: 'approval', approval: 'ap-2', approve: true, args: { table: 'b_tmp' } });
      expect(JSON.parse(r.body)).toEqual({
        ok: true,
        message: expect.stringMatching(/^approval ap-2 approved with edited arguments: drop_table runs for lead/),
      });
      await expect.poll(read).toMatchObject([
        { id: 'ap-2', state: 'ran', answer: { approved: true, args: { table: 'b_tmp' } }, result: expect.stringContaining('dropped b_tmp') },
        { id: 'ap-1', state: 'denied' },
      ]);
      r = await post(handle, { run: t.c.runId, kind: 'approval', approval: 'ap-2', approve: true });
      expect(JSON.parse(r.body)).toMatchObject({ ok: true, message: expect.stringMatching(/already approved; nothing changed$/) });
      expect(runs).toEqual([{ table: 'b_tmp' }]);
      await expect.poll(waits).toEqual([['lead', 'waiting', 'the user']]);
    } finally {
      await handle.close();
      await stopInbox();
      await t.c.shutdown();
      reader.close();
      store.close();
    }
  });
});

describe.skipIf(!available)(pgTitle(available, 'the approvals of a run on PostgreSQL'), () => {
  let a: PostgresStore;
  let b: PostgresStore;
  twoHostsOnOneSchema((x, y) => ([a, b] = [x, y]));

  it('read by a process that does not host the run, pending then ran', async () => {
    const runId = 'asks';
    const { runs, tool } = dropTableTool();
    const clock = new SimulatedClock();
    const held = await a.claim(runId, { owner: 'A', ttlMs: 600_000, heartbeatMs: 0 });
    const model = scriptedModel(
      {
        agents: {
          lead: [
            { tools: [{ name: 'drop_table', args: { table: 'users' } }] },
            { tools: [{ name: 'wait_for_agents', args: { reason: 'the approval' } }] },
            { tools: [{ name: 'respond_to_user', args: { message: 'done' } }] },
          ],
        },
      },
      { clock },
    );
    const host = createCoordinator<StorePort>({ store: held.port, runId, clock, model, tools: [tool], interactive: true, approvals: { ask: ['destructive'] } });
    try {
      const lead = await host.start({ name: 'lead', task: 'Clean up.' });
      await host.waitFor(lead, ['waiting']);
      const read = async () => (await readApprovals(b.reads, runId)).approvals;
      await expect
        .poll(read, { timeout: 10_000 })
        .toMatchObject([{ id: 'ap-1', agentId: lead, agentName: 'lead', args: { table: 'users' }, state: 'pending' }]);
      expect((await readTeam(b.reads, runId)).agents.map((x) => x.waitingOn)).toEqual(['approval ap-1']);
      await host.approvals.approve('ap-1', { args: { table: 'users_tmp' } });
      await expect
        .poll(read, { timeout: 10_000 })
        .toMatchObject([
          { id: 'ap-1', state: 'ran', answer: { approved: true, args: { table: 'users_tmp' } }, result: expect.stringContaining('dropped users_tmp') },
        ]);
      expect(runs).toEqual([{ table: 'users_tmp' }]);
    } finally {
      await host.shutdown();
      await held.release({ state: 'done' });
    }
  });
});
