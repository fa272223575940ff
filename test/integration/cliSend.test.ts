/**
 * `troupe send` applies the coordinator's message rules whether the run is live or not: size
 * (maxMessageBytes, in UTF-8 bytes), reachability (a finished agent of a run that is not
 * interactive) and the mailbox cap, each refusal with its own exit code and one line on stderr;
 * and it says "queued" unless the message is really in the agent's session.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/sqliteStore.js';
import { createFakeOpenAIServer } from '../../src/testing/fakeOpenAIServer.js';
import { expectOneLine, fileHashes, seedRun, spawnTroupe, troupe, workdir, type Spawned } from '../helpers/cli.js';
import { team } from '../helpers/team.js';

/** Undelivered messages in the database, by recipient name. */
function pending(db: string): Record<string, number> {
  const store = openStore({ path: db, readonly: true });
  try {
    const run = store.listRuns().at(-1)!;
    const names = new Map(store.listAgents(run.id).map((a) => [a.id, a.name]));
    const out: Record<string, number> = {};
    for (const m of store.listMessages(run.id)) if (m.deliveredAt === null) out[names.get(m.to)!] = (out[names.get(m.to)!] ?? 0) + 1;
    return out;
  } finally {
    store.close();
  }
}

describe('troupe send to a run no process drives: the coordinator’s rules, from the database', () => {
  it('maxMessageBytes (the run’s saved limit, in bytes) and the mailbox cap; a refusal writes nothing', async () => {
    const cwd = workdir();
    const db = join(cwd, 't.db');
    await seedRun(db, { interactive: true, limits: { maxMessageBytes: 100, maxMailbox: 2 } });

    const before = fileHashes(db);
    // 51 characters, 102 bytes: the limit counts bytes.
    const tooLarge = await troupe(['send', 'lead', 'é'.repeat(51), '--db', db], cwd);
    expect(tooLarge.code, tooLarge.stderr).toBe(7);
    expectOneLine(tooLarge, 'MESSAGE_TOO_LARGE');
    expect(fileHashes(db)).toEqual(before);

    const exact = await troupe(['send', 'lead', 'x'.repeat(100), '--db', db], cwd);
    expect(exact.code, exact.stderr).toBe(0);
    expect(exact.stdout).toMatch(/^queued for lead \(\w+\): no process is running this run/);
    expect((await troupe(['send', 'lead', 'second', '--db', db], cwd)).code).toBe(0);
    const before3 = fileHashes(db);
    const full = await troupe(['send', 'lead', 'third', '--db', db], cwd);
    expect(full.code, full.stderr).toBe(9);
    expectOneLine(full, 'MAILBOX_FULL');
    expect(fileHashes(db)).toEqual(before3);
    expect(pending(db)).toEqual({ lead: 2 });
  });

  it('without saved limits the defaults apply: a 120 KB message is refused (65,536 bytes)', async () => {
    const cwd = workdir();
    const db = join(cwd, 't.db');
    await seedRun(db, { interactive: true });
    const r = await troupe(['send', 'lead', 'x'.repeat(120_000), '--db', db], cwd);
    expect(r.code, r.stderr).toBe(7);
    expectOneLine(r, 'MESSAGE_TOO_LARGE');
    expect(pending(db)).toEqual({});
  });

  it('a completed agent of a run that is not interactive is unreachable; of an interactive run it is not', async () => {
    const cwd = workdir();
    const db = join(cwd, 'auto.db');
    await seedRun(db, { interactive: false });
    for (const agent of ['lead', 'worker']) {
      const r = await troupe(['send', agent, 'anything else?', '--db', db], cwd);
      expect(r.code, r.stderr).toBe(8);
      expectOneLine(r, 'AGENT_NOT_REACHABLE');
    }
    expect(pending(db)).toEqual({});

    const interactive = join(cwd, 'interactive.db');
    await seedRun(interactive, { interactive: true });
    const r = await troupe(['send', 'worker', 'one more thing', '--db', interactive], cwd);
    expect(r.code, r.stderr).toBe(0);
    expect(pending(interactive)).toEqual({ worker: 1 });
  });
});

describe('troupe send that would revive a finished child: maxChildren, as for a spawn', () => {
  it('refused (exit 10, nothing written) while the parent has maxChildren active children; queued otherwise', async () => {
    const cwd = workdir();
    const db = join(cwd, 'team.db');
    // lead has two children: worker completed, helper still in a model call when the process stops.
    const store = openStore({ path: db });
    const t = team(
      {
        agents: {
          lead: [
            { tools: ['worker', 'helper'].map((name) => ({ name: 'spawn_agent', args: { name, task: 'a part' } })) },
            { tool: 'wait_for_agents', args: { reason: 'reports' } },
            { tool: 'wait_for_agents', args: { reason: 'the helper' } },
          ],
          worker: [{ tool: 'agent_finish', args: { summary: 'done' } }],
          helper: [{ tool: 'view_agent_graph', args: {}, delayMs: 60_000 }],
        },
      },
      { store, interactive: true },
    );
    const rootId = await t.c.start({ name: 'lead', task: 'Split the work.' });
    await t.c.waitFor(rootId, ['waiting']);
    await t.c.waitFor(t.byName('worker').id, ['completed']);
    expect(t.byName('helper').status).toBe('running');
    store.appendEvent({ runId: t.c.runId, agentId: null, type: 'cli.run', data: { limits: { maxChildren: 1 } }, at: 1 });
    await t.c.shutdown();
    store.close();

    const before = fileHashes(db);
    const refused = await troupe(['send', 'worker', 'one more thing', '--db', db], cwd);
    expect(refused.code, refused.stderr).toBe(10);
    expectOneLine(refused, 'MAX_CHILDREN_EXCEEDED');
    expect(fileHashes(db)).toEqual(before);
    // A message to an active agent revives nobody: the limit does not apply.
    expect((await troupe(['send', 'helper', 'keep going', '--db', db], cwd)).code).toBe(0);
    expect(pending(db)).toEqual({ helper: 1 });
  });
});

describe('troupe send to a live run: the same rules, typed exit codes, and delivered only when it is', () => {
  const running: Spawned[] = [];
  afterEach(() => {
    for (const r of running.splice(0)) if (r.child.exitCode === null && r.child.signalCode === null) r.child.kill('SIGKILL');
  });

  it('a refusal from the live run exits with its code (not 70); an accepted message is delivered', async () => {
    await using server = await createFakeOpenAIServer((request) =>
      request.index === 0
        ? { message: { toolCalls: [{ name: 'respond_to_user', arguments: { message: 'Ready when you are.' } }] } }
        : { message: { toolCalls: [{ name: 'finish', arguments: { summary: 'answered' } }] } },
    );
    const cwd = workdir();
    writeFileSync(join(cwd, 'troupe.config.json'), JSON.stringify({ model: 'm', baseURL: server.url, apiKey: 'k', limits: { maxMessageBytes: 100 } }));
    const run = spawnTroupe(['run', 'Wait for the user', '--interactive'], cwd);
    running.push(run);
    await run.line(/lead +running → waiting/);

    const tooLarge = await troupe(['send', 'lead', 'x'.repeat(101)], cwd);
    expect(tooLarge.code, tooLarge.stderr).toBe(7);
    expectOneLine(tooLarge, 'MESSAGE_TOO_LARGE');
    const nobody = await troupe(['send', 'nobody', 'hi'], cwd);
    expect(nobody.code, nobody.stderr).toBe(4);
    expectOneLine(nobody, 'AGENT_NOT_FOUND');

    const ok = await troupe(['send', 'lead', 'hello'], cwd);
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toMatch(/^delivered to lead \(\w+\)\n$/);
    expect(await run.exited).toEqual({ code: 0, signal: null });
  });

  it('an agent parked on the budget does not read its mail: the message is queued, not delivered', async () => {
    await using server = await createFakeOpenAIServer([{ message: { toolCalls: [{ name: 'finish', arguments: { summary: 'never reached' } }] } }]);
    const cwd = workdir();
    // The first call's estimate (prompt + 4,096 output tokens at $1,000 per 1M) does not fit under $0.01: pause.
    const budget = { limitUsd: 0.01, policy: 'pause', prices: { m: { inputPer1M: 1_000, outputPer1M: 1_000 } } };
    writeFileSync(join(cwd, 'troupe.config.json'), JSON.stringify({ model: 'm', baseURL: server.url, apiKey: 'k', budget }));
    const run = spawnTroupe(['run', 'Work within the budget', '--interactive'], cwd);
    running.push(run);
    await run.line(/lead +running → budgetPaused/);

    const r = await troupe(['send', 'lead', 'are you there?'], cwd);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^queued for lead \(\w+\): it waits in the agent's mailbox \(budgetPaused\)/);
    expect(server.requests).toHaveLength(0);
  });
});
