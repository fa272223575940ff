/**
 * Every column the SQLite store parses or trusts, damaged in turn: an owner's open refuses the
 * file with STORE_CORRUPT naming the table, the row and the column, before writing anything; a
 * read-only reader gets the same error from the read that meets the row (never a SyntaxError or a
 * half-built row); and a foreign SQLite file is refused untouched.
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { beforeAll, describe, expect, it } from 'vitest';
import { postToInbox } from '../../src/store/inbox.js';
import { openStore, type SqliteStore } from '../../src/store/sqliteStore.js';
import { fileHashes } from '../helpers/cli.js';
import { team, TERMINAL } from '../helpers/team.js';

const require = createRequire(import.meta.url);
const tempDir = () => mkdtempSync(join(tmpdir(), 'troupe-damage-'));

interface Seeded {
  path: string;
  runId: string;
  rootId: string;
  messageId: string;
}

/** A run with a row in every table the store reads. */
async function seed(): Promise<Seeded> {
  const path = join(tempDir(), 'seed.db');
  const store = openStore({ path });
  const t = team(
    {
      agents: {
        lead: [
          { tool: 'spawn_agent', args: { name: 'worker', task: 'check' }, usage: { inputTokens: 10, outputTokens: 5, costUsd: 0.01 } },
          { tool: 'wait_for_agents', args: { reason: 'worker' } },
          { tool: 'finish', args: { summary: 'done' } },
        ],
        worker: [{ tool: 'agent_finish', args: { summary: 'ok' } }],
      },
    },
    { store },
  );
  const rootId = await t.c.start({ name: 'lead', task: 'go' });
  await t.c.waitFor(rootId, [...TERMINAL]);
  await t.c.whenIdle();
  await t.c.shutdown();
  store.appendEvent({ runId: t.c.runId, agentId: null, type: 'cli.run', data: {}, at: 1 });
  store.insertDelegation({
    sessionId: rootId,
    delegationId: 'deleg_0001',
    runId: t.c.runId,
    goal: 'g',
    status: 'running',
    dispatchedAt: 1,
    completedAt: null,
    resultText: null,
    startedBoot: 1,
  });
  store.linkExecution({ id: 'exec1', agentId: rootId, linkedAt: 1 });
  store.putReentryBudget({ sessionId: rootId, count: 1, lastWakeAt: Date.now() });
  const messageId = store.listMessages(t.c.runId)[0]!.id;
  store.close();
  postToInbox(path, { runId: t.c.runId, kind: 'send', payload: { agent: 'lead', content: 'hi' }, at: 1 });
  return { path, runId: t.c.runId, rootId, messageId };
}

interface Damage {
  label: string;
  /** SQL run on a raw connection; `$root`, `$run`, `$msg` are bound. */
  sql: string;
  /** What the error names. */
  names: (s: Seeded) => RegExp;
  /** The read that meets the row in a read-only store. */
  read: (store: SqliteStore, s: Seeded) => unknown;
}

const esc = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const row = (table: string, id: string, what: string) => new RegExp(`${table} row "${esc(id)}" is damaged: ${what}`);

const DAMAGES: Damage[] = [
  {
    label: 'runs.budget not JSON',
    sql: 'UPDATE runs SET budget = substr(budget, 2) WHERE id = $run',
    names: (s) => row('runs', s.runId, 'budget is not valid JSON'),
    read: (st) => st.listRuns(),
  },
  {
    label: 'runs.budget wrong shape',
    sql: `UPDATE runs SET budget = json_set(budget, '$.limitUsd', 'lots') WHERE id = $run`,
    names: (s) => row('runs', s.runId, 'budget.limitUsd is invalid'),
    read: (st, s) => st.getRun(s.runId),
  },
  {
    label: 'agents.state a flipped bit',
    sql: "UPDATE agents SET state = 'z' || substr(state, 2) WHERE id = $root",
    names: (s) => row('agents', s.rootId, 'state is not valid JSON'),
    read: (st, s) => st.listAgents(s.runId),
  },
  {
    label: 'agents.state an array',
    sql: "UPDATE agents SET state = '[]' WHERE id = $root",
    names: (s) => row('agents', s.rootId, 'state is not an object'),
    read: (st, s) => st.getAgent(s.rootId),
  },
  {
    label: 'agents.state negative turns',
    sql: `UPDATE agents SET state = json_set(state, '$.turns', -1) WHERE id = $root`,
    names: (s) => row('agents', s.rootId, 'state.turns is invalid'),
    read: (st, s) => st.getAgent(s.rootId),
  },
  {
    label: 'agents.state a report without findings',
    sql: `UPDATE agents SET state = json_remove(state, '$.report.findings') WHERE id = $root`,
    names: (s) => row('agents', s.rootId, 'state.report is invalid'),
    read: (st, s) => st.getAgent(s.rootId),
  },
  {
    label: 'agents.skills not JSON',
    sql: "UPDATE agents SET skills = '[' WHERE id = $root",
    names: (s) => row('agents', s.rootId, 'skills is not valid JSON'),
    read: (st, s) => st.listAgents(s.runId),
  },
  {
    label: 'agents.status unknown',
    sql: "UPDATE agents SET status = 'zombie' WHERE id = $root",
    names: (s) => row('agents', s.rootId, 'status is invalid'),
    read: (st, s) => st.listAgents(s.runId),
  },
  {
    label: 'messages.content changed',
    sql: "UPDATE messages SET content = content || '!' WHERE id = $msg",
    names: (s) => row('messages', s.messageId, 'it failed its checksum'),
    read: (st, s) => st.listMessages(s.runId),
  },
  {
    label: 'messages.priority unknown',
    sql: "UPDATE messages SET priority = 'whenever' WHERE id = $msg",
    names: (s) => row('messages', s.messageId, 'priority is invalid'),
    read: (st, s) => st.listMessages(s.runId),
  },
  {
    label: 'session_items.item changed',
    sql: "UPDATE session_items SET item = item || ' ' WHERE agent_id = $root AND seq = 1",
    names: (s) => row('session_items', `${s.rootId}#1`, 'it failed its checksum'),
    read: (st, s) => st.loadSession(s.rootId),
  },
  {
    label: 'session_items a gap',
    sql: 'DELETE FROM session_items WHERE agent_id = $root AND seq = 1',
    names: (s) => row('session_items', `${s.rootId}#2`, 'expected item 1 here'),
    read: (st, s) => st.loadSession(s.rootId),
  },
  {
    label: 'events.data an array',
    sql: "UPDATE events SET data = '[1]' WHERE type = 'cli.run'",
    names: () => /events row "\d+" is damaged: data is not an object/,
    read: (st, s) => st.listEvents(s.runId),
  },
  {
    label: 'events.data not JSON',
    sql: "UPDATE events SET data = '{\"task\":' WHERE type = 'cli.run'",
    names: () => /events row "\d+" is damaged: data is not valid JSON/,
    read: (st, s) => st.listEvents(s.runId),
  },
  {
    // The open checks event columns in SQL and decodes only the rows that fail (verifyRows.ts EVENT_SUSPECT_SQL).
    label: 'events.at text',
    sql: "UPDATE events SET at = 'noon' WHERE type = 'cli.run'",
    names: () => /events row "\d+" is damaged: at is invalid/,
    read: (st, s) => st.listEvents(s.runId),
  },
  {
    label: 'events.agent_id a blob',
    sql: "UPDATE events SET agent_id = x'00' WHERE type = 'cli.run'",
    names: () => /events row "\d+" is damaged: agent_id is invalid/,
    read: (st, s) => st.listEvents(s.runId),
  },
  {
    label: 'events.boot infinite',
    sql: "UPDATE events SET boot = 9e999 WHERE type = 'cli.run'",
    names: () => /events row "\d+" is damaged: boot is invalid/,
    read: (st, s) => st.listEvents(s.runId),
  },
  {
    label: 'stream.at text',
    sql: "UPDATE stream SET at = 'noon' WHERE seq = 1",
    names: (s) => row('stream', `${s.runId}:1`, 'at is invalid'),
    read: (st, s) => st.readStream(s.runId, 0, 1_000),
  },
  {
    label: 'stream.data a blob',
    sql: "UPDATE stream SET data = x'7b7d' WHERE seq = 1",
    names: (s) => row('stream', `${s.runId}:1`, 'data is invalid'),
    read: (st, s) => st.readStream(s.runId, 0, 1_000),
  },
  {
    // Each agent's last streamed status (migration 12), what a resume reads instead of the stream.
    label: 'stream_status.status a blob',
    sql: "UPDATE stream_status SET status = x'00' WHERE agent_id = $root",
    names: (s) => row('stream_status', `${s.runId}:${s.rootId}`, 'status is invalid'),
    read: (st, s) => st.streamedStatuses(s.runId),
  },
  {
    label: 'stream_status.seq infinite',
    sql: 'UPDATE stream_status SET seq = 9e999 WHERE agent_id = $root',
    names: (s) => row('stream_status', `${s.runId}:${s.rootId}`, 'seq is invalid'),
    read: (st, s) => st.streamedStatuses(s.runId),
  },
  {
    // What a resume reads of it: the rows the store finds unshown, and those with a damaged seq
    // (the root's status here is as its row's: the comparison alone would not select it).
    label: 'stream_status.status a blob, read as unshown',
    sql: "UPDATE stream_status SET status = x'00' WHERE agent_id = $root",
    names: (s) => row('stream_status', `${s.runId}:${s.rootId}`, 'status is invalid'),
    read: (st, s) => st.unshownStatuses(s.runId),
  },
  {
    label: 'stream_status.seq infinite, read as unshown',
    sql: 'UPDATE stream_status SET seq = 9e999 WHERE agent_id = $root',
    names: (s) => row('stream_status', `${s.runId}:${s.rootId}`, 'seq is invalid'),
    read: (st, s) => st.unshownStatuses(s.runId),
  },
  {
    label: 'stream_status.seq text, read as unshown',
    sql: "UPDATE stream_status SET seq = 'late' WHERE agent_id = $root",
    names: (s) => row('stream_status', `${s.runId}:${s.rootId}`, 'seq is invalid'),
    read: (st, s) => st.unshownStatuses(s.runId),
  },
  {
    label: 'usage.cost_usd text',
    sql: "UPDATE usage SET cost_usd = 'free'",
    names: () => /usage row "\d+" is damaged: cost_usd is invalid/,
    read: (st, s) => st.listUsage(s.runId),
  },
  {
    label: 'delegations.dispatched_at text',
    sql: "UPDATE delegations SET dispatched_at = 'yesterday'",
    names: (s) => row('delegations', `${s.rootId}/deleg_0001`, 'dispatched_at is invalid'),
    read: (st, s) => st.listDelegations(s.runId),
  },
  {
    label: 'executions.status unknown',
    sql: "UPDATE executions SET status = 'maybe'",
    names: () => row('executions', 'exec1', 'status is invalid'),
    read: (st) => st.getExecution('exec1'),
  },
  {
    label: 'reentry_budgets.count negative',
    sql: 'UPDATE reentry_budgets SET count = -3',
    names: (s) => row('reentry_budgets', s.rootId, 'count is invalid'),
    read: (st, s) => st.reentryBudgetsOf([s.rootId]),
  },
  {
    label: 'inbox.payload not JSON',
    sql: "UPDATE inbox SET payload = '{agent'",
    names: () => /inbox row "\d+" is damaged: payload is not valid JSON/,
    read: (st, s) => st.openInbox(s.runId),
  },
];

describe('a damaged row: STORE_CORRUPT naming table, row and column', () => {
  let seeded: Seeded;
  beforeAll(async () => {
    seeded = await seed();
  });

  function damaged(sql: string): string {
    const path = join(tempDir(), 't.db');
    copyFileSync(seeded.path, path);
    const db = new Database(path);
    const params = { root: seeded.rootId, run: seeded.runId, msg: seeded.messageId };
    const stmt = db.prepare(sql);
    const used = Object.fromEntries(Object.entries(params).filter(([k]) => sql.includes(`$${k}`)));
    expect(stmt.run(used).changes, sql).toBeGreaterThan(0);
    db.close();
    return path;
  }

  it('the undamaged file opens and reads', () => {
    const store = openStore({ path: seeded.path, readonly: true });
    store.verify();
    for (const d of DAMAGES) d.read(store, seeded);
    store.close();
  });

  it.each(DAMAGES.map((d) => [d.label, d]))('%s', (_label, d) => {
    const path = damaged(d.sql);
    const before = fileHashes(path);
    const expected = expect.objectContaining({ code: 'STORE_CORRUPT', message: expect.stringMatching(d.names(seeded)) });
    // The owner: refused at open, nothing written.
    expect(() => openStore({ path })).toThrow(expected);
    expect(fileHashes(path)).toEqual(before);
    // A reader: the same error from the read that meets the row, and from a full verify.
    const reader = openStore({ path, readonly: true });
    try {
      expect(() => d.read(reader, seeded)).toThrow(expected);
      expect(() => reader.verify()).toThrow(expected);
    } finally {
      reader.close();
    }
    expect(fileHashes(path)).toEqual(before);
  });

  it('damage still in the -wal of a killed writer: refused, and the WAL is not folded into the file', () => {
    const path = join(tempDir(), 't.db');
    copyFileSync(seeded.path, path);
    // A writer that damages a row and dies before any checkpoint (as kill -9 would leave it).
    const script = `const Database = require(${JSON.stringify(require.resolve('better-sqlite3'))});
      const db = new Database(${JSON.stringify(path)}); db.pragma('wal_autocheckpoint = 0');
      db.prepare("UPDATE agents SET state = 'z' || substr(state, 2) WHERE id = ?").run(${JSON.stringify(seeded.rootId)});
      process.kill(process.pid, 'SIGKILL');`;
    expect(() => execFileSync(process.execPath, ['-e', script], { stdio: 'ignore' })).toThrow();
    expect(existsSync(`${path}-wal`) && statSync(`${path}-wal`).size > 0).toBe(true);
    const before = fileHashes(path);
    expect(() => openStore({ path })).toThrow(expect.objectContaining({ code: 'STORE_CORRUPT', message: expect.stringContaining('state is not valid JSON') }));
    expect(fileHashes(path)).toEqual(before);
  });

  it('a SQLite file of another program is refused untouched, not given troupe tables', () => {
    const path = join(tempDir(), 'other.db');
    const db = new Database(path);
    db.exec("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes (body) VALUES ('keep me')");
    db.close();
    const before = fileHashes(path);
    expect(() => openStore({ path })).toThrow(
      expect.objectContaining({ code: 'STORE_CORRUPT', message: expect.stringContaining('is not a troupe database (it holds tables notes)') }),
    );
    expect(() => openStore({ path, readonly: true })).toThrow(expect.objectContaining({ code: 'STORE_CORRUPT' }));
    expect(fileHashes(path)).toEqual(before);
  });
});
