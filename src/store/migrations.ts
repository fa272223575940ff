/**
 * Numbered schema migrations. `PRAGMA user_version` holds the schema version; pending migrations
 * are applied in one transaction at open. Append new migrations; never edit an applied one.
 * @module
 */

export interface Migration {
  version: number;
  sql: string;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    sql: `
      CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        created_at INTEGER NOT NULL,
        interactive INTEGER NOT NULL,
        root_id TEXT,
        budget TEXT NOT NULL
      );
      CREATE TABLE boots (
        id INTEGER PRIMARY KEY,
        started_at INTEGER NOT NULL,
        pid INTEGER NOT NULL
      );
      CREATE TABLE agents (
        id TEXT PRIMARY KEY,
        run_id TEXT NOT NULL REFERENCES runs(id),
        name TEXT NOT NULL,
        parent_id TEXT,
        depth INTEGER NOT NULL,
        task TEXT NOT NULL,
        skills TEXT NOT NULL,
        status TEXT NOT NULL,
        notice_claimed INTEGER NOT NULL,
        stint INTEGER NOT NULL,
        state TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        boot INTEGER NOT NULL
      );
      CREATE INDEX agents_by_run ON agents(run_id, created_at);
      CREATE TABLE messages (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        run_id TEXT NOT NULL,
        to_agent TEXT NOT NULL REFERENCES agents(id),
        from_id TEXT NOT NULL,
        from_name TEXT NOT NULL,
        type TEXT NOT NULL,
        priority TEXT NOT NULL,
        content TEXT NOT NULL,
        interrupt INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        delivered_at INTEGER,
        notice_key TEXT UNIQUE,
        boot INTEGER NOT NULL,
        checksum TEXT NOT NULL
      );
      CREATE INDEX messages_pending ON messages(to_agent, seq) WHERE delivered_at IS NULL;
      CREATE INDEX messages_by_run ON messages(run_id, seq);
      CREATE TABLE session_items (
        agent_id TEXT NOT NULL REFERENCES agents(id),
        seq INTEGER NOT NULL,
        item TEXT NOT NULL,
        checksum TEXT NOT NULL,
        PRIMARY KEY (agent_id, seq)
      ) WITHOUT ROWID;
      CREATE TABLE usage (
        id INTEGER PRIMARY KEY,
        run_id TEXT NOT NULL,
        agent_id TEXT NOT NULL,
        purpose TEXT NOT NULL,
        model TEXT NOT NULL,
        input_tokens INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL,
        cached_input_tokens INTEGER NOT NULL,
        cost_usd REAL NOT NULL,
        at INTEGER NOT NULL
      );
      CREATE INDEX usage_by_run ON usage(run_id);
      CREATE TABLE events (
        id INTEGER PRIMARY KEY,
        run_id TEXT NOT NULL,
        agent_id TEXT,
        type TEXT NOT NULL,
        data TEXT NOT NULL,
        at INTEGER NOT NULL,
        boot INTEGER NOT NULL
      );
      CREATE INDEX events_by_run ON events(run_id, id);
      CREATE TABLE delegations (
        session_id TEXT NOT NULL,
        delegation_id TEXT NOT NULL,
        run_id TEXT NOT NULL,
        goal TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed', 'interrupted')),
        dispatched_at INTEGER NOT NULL,
        completed_at INTEGER,
        result_text TEXT,
        started_boot INTEGER NOT NULL,
        PRIMARY KEY (session_id, delegation_id)
      );
      CREATE INDEX delegations_running ON delegations(status) WHERE status = 'running';
      CREATE TABLE reentry_budgets (
        session_id TEXT PRIMARY KEY,
        count INTEGER NOT NULL,
        last_wake_at INTEGER NOT NULL
      );
      CREATE TABLE executions (
        id TEXT PRIMARY KEY,
        agent_id TEXT NOT NULL,
        status TEXT NOT NULL,
        result TEXT,
        linked_at INTEGER NOT NULL,
        finished_at INTEGER,
        continued_at INTEGER
      );
    `,
  },
  {
    // Requests from other processes (troupe send / stop) to the process that owns a live run.
    version: 2,
    sql: `
      CREATE TABLE inbox (
        id INTEGER PRIMARY KEY,
        run_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        payload TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        done_at INTEGER,
        result TEXT
      );
      CREATE INDEX inbox_open ON inbox(run_id, id) WHERE done_at IS NULL;
    `,
  },
  {
    // The in-doubt ledger: a tool that may have effects is marked started (committed) before it
    // runs and finished in the transaction that records its result. A started row without a
    // result after a crash is a call that may or may not have taken effect.
    version: 3,
    sql: `
      CREATE TABLE tool_calls (
        agent_id TEXT NOT NULL,
        turn INTEGER NOT NULL,
        call_id TEXT NOT NULL,
        tool TEXT NOT NULL,
        args_hash TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('started', 'finished')),
        started_at INTEGER NOT NULL,
        finished_at INTEGER,
        boot INTEGER NOT NULL,
        PRIMARY KEY (agent_id, turn, call_id)
      ) WITHOUT ROWID;
      CREATE INDEX tool_calls_started ON tool_calls(agent_id) WHERE status = 'started';
    `,
  },
  {
    // The inbox takes pause and resume of the budget, and stop without its subtree (payload
    // cascade: false). A troupe of schema 3 knows only send and stop, always cascading: it must
    // refuse this file (STORE_SCHEMA_TOO_NEW) rather than misread such a request, and a poster
    // must not send them to a file of schema 3 (postToInbox). The trigger makes the kinds part
    // of the schema: a new kind needs a new migration.
    version: 4,
    sql: `
      CREATE TRIGGER inbox_kind BEFORE INSERT ON inbox
      WHEN NEW.kind NOT IN ('send', 'stop', 'pause', 'resume')
      BEGIN SELECT RAISE(ABORT, 'inbox kind must be send, stop, pause or resume'); END;
    `,
  },
  {
    // The inbox takes an execution's end from any process (troupe finish-execution): the owner
    // finishes it and the agent that started it continues. A troupe of schema 4 would refuse it.
    version: 5,
    sql: `
      DROP TRIGGER inbox_kind;
      CREATE TRIGGER inbox_kind BEFORE INSERT ON inbox
      WHEN NEW.kind NOT IN ('send', 'stop', 'pause', 'resume', 'execution')
      BEGIN SELECT RAISE(ABORT, 'inbox kind must be send, stop, pause, resume or execution'); END;
    `,
  },
  {
    // The inbox takes a delegation's end from any process: the owner records it and messages the
    // agent that dispatched it. A troupe of schema 5 would refuse it.
    version: 6,
    sql: `
      DROP TRIGGER inbox_kind;
      CREATE TRIGGER inbox_kind BEFORE INSERT ON inbox
      WHEN NEW.kind NOT IN ('send', 'stop', 'pause', 'resume', 'execution', 'delegation')
      BEGIN SELECT RAISE(ABORT, 'inbox kind must be send, stop, pause, resume, execution or delegation'); END;
    `,
  },
  {
    // The live stream (issue 38): what a run's subscribers saw, numbered per run by its owner, so
    // that another process (troupe ui's /api/stream, troupe follow) follows it and resumes after a
    // seq. A troupe of schema 6 would open the file and never write it: refused instead.
    version: 7,
    sql: `
      CREATE TABLE stream (
        run_id TEXT NOT NULL REFERENCES runs(id),
        seq INTEGER NOT NULL,
        agent_id TEXT,
        type TEXT NOT NULL,
        data TEXT NOT NULL,
        at INTEGER NOT NULL,
        PRIMARY KEY (run_id, seq)
      ) WITHOUT ROWID;
    `,
  },
  {
    // Issue 35: a child's terms (its budget allowance, its result's schema) set at spawn, and what
    // a notice says as data (the child's value, stop reason, error code). Both nullable: older rows
    // have none. A troupe of schema 7 would drop both: refused instead.
    version: 8,
    sql: `
      ALTER TABLE agents ADD COLUMN terms TEXT;
      ALTER TABLE messages ADD COLUMN data TEXT;
    `,
  },
  {
    // Issue 33: durable approvals are a run's `approval` event rows, read by type at every resume
    // and by `troupe approvals`; and the inbox takes an approval's answer, which a troupe of schema
    // 8 would not know (store/inbox.ts refuses to post it to such a file).
    version: 9,
    sql: `
      CREATE INDEX events_by_type ON events(run_id, type, id);
      DROP TRIGGER inbox_kind;
      CREATE TRIGGER inbox_kind BEFORE INSERT ON inbox
      WHEN NEW.kind NOT IN ('send', 'stop', 'pause', 'resume', 'execution', 'delegation', 'approval')
      BEGIN SELECT RAISE(ABORT, 'inbox kind must be send, stop, pause, resume, execution, delegation or approval'); END;
    `,
  },
  {
    // Issue 33 item 6: a proactive fire is claimed by one row keyed by (scope, trigger, tick), so
    // a tick fires once whichever process sees it; request_id is the inbox request its claim posted
    // in the same transaction (null: the claim submitted the run named by its scope).
    version: 10,
    sql: `
      CREATE TABLE proactive_fires (
        scope TEXT NOT NULL,
        trigger_name TEXT NOT NULL,
        tick TEXT NOT NULL,
        claimed_at INTEGER NOT NULL,
        request_id INTEGER,
        PRIMARY KEY (scope, trigger_name, tick)
      ) WITHOUT ROWID;
      CREATE INDEX proactive_fires_claimed ON proactive_fires(claimed_at);
    `,
  },
  {
    // Issue 34 item 8: a person's decision on a note a background review proposed (the proposal is
    // its run's review.note event; notes/notes.ts). A promoted note is read by every later run's
    // root, so the row keeps the text as promoted; run_id is where it was proposed. The partial
    // index lists the store's proposals without reading every event.
    version: 11,
    sql: `
      CREATE TABLE notes (
        id TEXT PRIMARY KEY,
        state TEXT NOT NULL CHECK (state IN ('promoted', 'rejected')),
        run_id TEXT NOT NULL,
        agent_name TEXT NOT NULL,
        title TEXT NOT NULL,
        content TEXT NOT NULL,
        proposed_at INTEGER NOT NULL,
        decided_at INTEGER NOT NULL,
        reason TEXT
      ) WITHOUT ROWID;
      CREATE INDEX events_review_notes ON events(id) WHERE type = 'review.note';
    `,
  },
  {
    // Issue 36 item 5: each agent's last streamed status (the `to` of its last agent.status stream
    // row), kept by the stream's append in the same transaction, so that a resume reads one row per
    // agent instead of scanning every status row the stream ever held. Backfilled from the stream:
    // the last row by seq wins (SQLite takes the bare columns from the max(seq) row); a row whose
    // data is not JSON (the open does not parse stream data) backfills a null status, which no
    // status equals, so that agent is announced again.
    version: 12,
    sql: `
      CREATE TABLE stream_status (
        run_id TEXT NOT NULL REFERENCES runs(id),
        agent_id TEXT NOT NULL,
        status TEXT,
        seq INTEGER NOT NULL,
        PRIMARY KEY (run_id, agent_id)
      ) WITHOUT ROWID;
      INSERT INTO stream_status (run_id, agent_id, status, seq)
        SELECT run_id, agent_id, CASE WHEN json_valid(data) THEN json_extract(data, '$.to') END, max(seq) FROM stream
        WHERE type = 'agent.status' AND agent_id IS NOT NULL GROUP BY run_id, agent_id;
    `,
  },
  {
    // Fewer pages per commit (issue 36): events_by_type holds only the types read by type through
    // it (types.ts BY_TYPE_EVENTS, rare ones), not the 3-4 rows of the journal, the call log and
    // tool.call each turn writes; their reads by type go over the run's events in order. And the
    // in-doubt ledger's reads (an agent's started calls, at a re-entered turn) go by the primary
    // key's agent prefix: the partial index was written twice per tool call (start, finish) to
    // serve a read that happens only after a crash. Measured, 120 agents x 10 tool turns on NORMAL:
    // 13.9 -> 9.6 pages per commit, 98 -> 68 KB per turn sent to the disk.
    version: 13,
    sql: `
      DROP INDEX events_by_type;
      CREATE INDEX events_by_type ON events(run_id, type, id)
        WHERE type IN ('cli.run', 'approval', 'review.note', 'review.turn', 'trace.stint', 'fork.origin');
      DROP INDEX tool_calls_started;
    `,
  },
];

export const SCHEMA_VERSION = MIGRATIONS.at(-1)!.version;
