/**
 * Numbered schema migrations of the PostgreSQL store, the same tables as the SQLite store's
 * (src/store/migrations.ts) in PostgreSQL's dialect, plus what scale-out needs: the lease of each
 * run and the inbox other machines post to. `troupe_schema` holds the version; pending migrations
 * are applied in one transaction under an advisory lock at open. Append; never edit an applied one.
 *
 * Column types match what the shared row decoders (decode.ts) check: times and counters are
 * BIGINT (parsed to numbers), flags INTEGER 0/1, JSON as TEXT (checksums cover the text).
 * @module
 */
import type { Migration } from '../migrations.js';
import { REQUIRE_SQLSTATE } from './batch.js';

export const PG_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    sql: `
      CREATE TABLE troupe_schema (only_row BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (only_row), version INTEGER NOT NULL);
      CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        created_at BIGINT NOT NULL,
        interactive INTEGER NOT NULL,
        root_id TEXT,
        budget TEXT NOT NULL,
        ord BIGSERIAL NOT NULL
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
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        boot BIGINT NOT NULL,
        ord BIGSERIAL NOT NULL
      );
      CREATE INDEX agents_by_run ON agents(run_id, created_at, ord);
      CREATE TABLE messages (
        seq BIGSERIAL PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        run_id TEXT NOT NULL,
        to_agent TEXT NOT NULL REFERENCES agents(id),
        from_id TEXT NOT NULL,
        from_name TEXT NOT NULL,
        type TEXT NOT NULL,
        priority TEXT NOT NULL,
        content TEXT NOT NULL,
        interrupt INTEGER NOT NULL,
        created_at BIGINT NOT NULL,
        delivered_at BIGINT,
        notice_key TEXT UNIQUE,
        boot BIGINT NOT NULL,
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
      );
      CREATE TABLE usage (
        id BIGSERIAL PRIMARY KEY,
        run_id TEXT NOT NULL,
        agent_id TEXT NOT NULL,
        purpose TEXT NOT NULL,
        model TEXT NOT NULL,
        input_tokens BIGINT NOT NULL,
        output_tokens BIGINT NOT NULL,
        cached_input_tokens BIGINT NOT NULL,
        cost_usd DOUBLE PRECISION NOT NULL,
        at BIGINT NOT NULL
      );
      CREATE INDEX usage_by_run ON usage(run_id);
      CREATE TABLE events (
        id BIGSERIAL PRIMARY KEY,
        run_id TEXT NOT NULL,
        agent_id TEXT,
        type TEXT NOT NULL,
        data TEXT NOT NULL,
        at BIGINT NOT NULL,
        boot BIGINT NOT NULL
      );
      CREATE INDEX events_by_run ON events(run_id, id);
      CREATE TABLE delegations (
        session_id TEXT NOT NULL,
        delegation_id TEXT NOT NULL,
        run_id TEXT NOT NULL,
        goal TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed', 'interrupted')),
        dispatched_at BIGINT NOT NULL,
        completed_at BIGINT,
        result_text TEXT,
        started_boot BIGINT NOT NULL,
        ord BIGSERIAL NOT NULL,
        PRIMARY KEY (session_id, delegation_id)
      );
      CREATE INDEX delegations_by_run ON delegations(run_id);
      CREATE TABLE reentry_budgets (
        session_id TEXT PRIMARY KEY,
        count INTEGER NOT NULL,
        last_wake_at BIGINT NOT NULL
      );
      CREATE TABLE executions (
        id TEXT PRIMARY KEY,
        agent_id TEXT NOT NULL,
        status TEXT NOT NULL,
        result TEXT,
        linked_at BIGINT NOT NULL,
        finished_at BIGINT,
        continued_at BIGINT
      );
      CREATE INDEX executions_by_agent ON executions(agent_id);
      CREATE TABLE tool_calls (
        agent_id TEXT NOT NULL,
        turn INTEGER NOT NULL,
        call_id TEXT NOT NULL,
        tool TEXT NOT NULL,
        args_hash TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('started', 'finished')),
        started_at BIGINT NOT NULL,
        finished_at BIGINT,
        boot BIGINT NOT NULL,
        PRIMARY KEY (agent_id, turn, call_id)
      );
      CREATE INDEX tool_calls_started ON tool_calls(agent_id) WHERE status = 'started';
      -- Who hosts each run. epoch is the fencing token: a claim bumps it, and every write of the
      -- run checks it in its transaction. state: runnable (wants a host), parked (released with
      -- nothing due before wake_at), done (nothing will happen unless a message arrives).
      CREATE TABLE run_leases (
        run_id TEXT PRIMARY KEY,
        owner TEXT,
        epoch BIGINT NOT NULL,
        lease_until BIGINT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('runnable', 'parked', 'done')),
        wake_at BIGINT,
        -- Bumped by every post to the inbox: a release is conditional on it, so a wake posted
        -- while the owner decided to let the run go is never lost.
        wake_seq BIGINT NOT NULL DEFAULT 0
      );
      CREATE INDEX run_leases_claimable ON run_leases(state, lease_until);
      -- Requests from any machine (troupe send / stop) to whichever worker hosts the run.
      CREATE TABLE inbox (
        id BIGSERIAL PRIMARY KEY,
        run_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        payload TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        done_at BIGINT,
        result TEXT
      );
      CREATE INDEX inbox_open ON inbox(run_id, id) WHERE done_at IS NULL;
    `,
  },
  {
    // SQLite's migration 4: the inbox takes pause and resume of the budget, and stop without its
    // subtree. A troupe of schema 1 knows only send and stop (always cascading) and must refuse
    // the database rather than misapply such a request; the kinds become part of the schema.
    version: 2,
    sql: `
      ALTER TABLE inbox ADD CONSTRAINT inbox_kind CHECK (kind IN ('send', 'stop', 'pause', 'resume'));
    `,
  },
  {
    // Each commit of an epoch is numbered in its own transaction: a commit retried after its
    // COMMIT went unanswered (a dropped connection, a restart) finds whether it was applied.
    version: 3,
    sql: `
      ALTER TABLE run_leases ADD COLUMN commit_seq BIGINT NOT NULL DEFAULT 0;
    `,
  },
  {
    // SQLite's migration 5: the inbox takes an execution's end from any machine.
    version: 4,
    sql: `
      ALTER TABLE inbox DROP CONSTRAINT inbox_kind;
      ALTER TABLE inbox ADD CONSTRAINT inbox_kind CHECK (kind IN ('send', 'stop', 'pause', 'resume', 'execution'));
    `,
  },
  {
    // SQLite's migration 6: the inbox takes a delegation's end from any machine.
    version: 5,
    sql: `
      ALTER TABLE inbox DROP CONSTRAINT inbox_kind;
      ALTER TABLE inbox ADD CONSTRAINT inbox_kind CHECK (kind IN ('send', 'stop', 'pause', 'resume', 'execution', 'delegation'));
    `,
  },
  {
    // SQLite's migration 7: the live stream, numbered per run by the lease holder's commits.
    version: 6,
    sql: `
      CREATE TABLE stream (
        run_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        agent_id TEXT,
        type TEXT NOT NULL,
        data TEXT NOT NULL,
        at BIGINT NOT NULL,
        PRIMARY KEY (run_id, seq)
      );
    `,
  },
  {
    // SQLite's migration 8: a child's terms set at spawn, and a notice's data.
    version: 7,
    sql: `
      ALTER TABLE agents ADD COLUMN terms TEXT;
      ALTER TABLE messages ADD COLUMN data TEXT;
    `,
  },
  {
    // PostgreSQL only (issue 34 item 2): each model endpoint's quota, shared by the cluster's workers
    // (src/providers/quotaPg.ts): the current minute's requests and tokens, and a 429's pause.
    version: 8,
    sql: `
      CREATE TABLE provider_quota (
        endpoint TEXT PRIMARY KEY,
        window_start BIGINT NOT NULL,
        requests BIGINT NOT NULL,
        tokens BIGINT NOT NULL,
        paused_until BIGINT NOT NULL
      );
    `,
  },
  {
    // SQLite's migration 9: a run's events read by type (durable approvals, at every resume), and
    // the inbox takes an approval's answer.
    version: 9,
    sql: `
      CREATE INDEX events_by_type ON events(run_id, type, id);
      ALTER TABLE inbox DROP CONSTRAINT inbox_kind;
      ALTER TABLE inbox ADD CONSTRAINT inbox_kind CHECK (kind IN ('send', 'stop', 'pause', 'resume', 'execution', 'delegation', 'approval'));
    `,
  },
  {
    // SQLite's migration 10: a proactive fire is claimed by one row keyed by (scope, trigger, tick).
    version: 10,
    sql: `
      CREATE TABLE proactive_fires (
        scope TEXT NOT NULL,
        trigger_name TEXT NOT NULL,
        tick TEXT NOT NULL,
        claimed_at BIGINT NOT NULL,
        request_id BIGINT,
        PRIMARY KEY (scope, trigger_name, tick)
      );
      CREATE INDEX proactive_fires_claimed ON proactive_fires(claimed_at);
    `,
  },
  {
    // PostgreSQL only (issue 34 item 1): each model endpoint's circuit breaker, shared by the
    // cluster's workers (src/providers/breakerPg.ts): its state, the outage's start, the next probe's
    // time and the one probe's claim.
    version: 13,
    sql: `
      CREATE TABLE provider_breaker (
        endpoint TEXT PRIMARY KEY,
        state TEXT NOT NULL,
        failures BIGINT NOT NULL,
        open_since BIGINT,
        probe_at BIGINT NOT NULL,
        probe_claimed_at BIGINT
      );
    `,
  },
  {
    // PostgreSQL only (SQLite commits in-process): a commit is one query of several statements
    // (batch.ts), so a statement that must touch one row (the lease fence, a new run) raises
    // through this function to abort the batch (11–14: other changes' numbers).
    version: 15,
    sql: `
      CREATE FUNCTION troupe_require(ok boolean, code text, message text) RETURNS void LANGUAGE plpgsql AS $fn$
      BEGIN
        IF ok IS NOT TRUE THEN
          RAISE EXCEPTION USING ERRCODE = '${REQUIRE_SQLSTATE}', MESSAGE = code, DETAIL = message;
        END IF;
      END $fn$;
    `,
  },
  {
    // SQLite's migration 11: a person's decision on a proposed note, store-wide (notes/notes.ts).
    version: 16,
    sql: `
      CREATE TABLE notes (
        id TEXT PRIMARY KEY,
        state TEXT NOT NULL CHECK (state IN ('promoted', 'rejected')),
        run_id TEXT NOT NULL,
        agent_name TEXT NOT NULL,
        title TEXT NOT NULL,
        content TEXT NOT NULL,
        proposed_at BIGINT NOT NULL,
        decided_at BIGINT NOT NULL,
        reason TEXT
      );
      CREATE INDEX events_review_notes ON events(id) WHERE type = 'review.note';
    `,
  },
  {
    // SQLite's migration 12: each agent's last streamed status, kept by the stream's append, so a
    // resume reads one row per agent. Backfilled from each agent's last status row by seq; a row
    // whose data is not JSON leaves its agent out (announced again at resume, as one the stream
    // does not show), where a cast in the INSERT would fail the migration and refuse the database.
    version: 17,
    sql: `
      CREATE TABLE stream_status (
        run_id TEXT NOT NULL,
        agent_id TEXT NOT NULL,
        status TEXT NOT NULL,
        seq BIGINT NOT NULL,
        PRIMARY KEY (run_id, agent_id)
      );
      CREATE FUNCTION troupe_streamed_to(data text) RETURNS text LANGUAGE plpgsql AS $fn$
      BEGIN
        RETURN coalesce(data::jsonb->>'to', '');
      EXCEPTION WHEN invalid_text_representation THEN
        RETURN NULL;
      END $fn$;
      INSERT INTO stream_status (run_id, agent_id, status, seq)
        SELECT run_id, agent_id, status, seq FROM (
          SELECT run_id, agent_id, troupe_streamed_to(data) AS status, seq FROM (
            SELECT DISTINCT ON (run_id, agent_id) run_id, agent_id, data, seq FROM stream
            WHERE type = 'agent.status' AND agent_id IS NOT NULL ORDER BY run_id, agent_id, seq DESC
          ) AS last
        ) AS parsed
        WHERE status IS NOT NULL;
      DROP FUNCTION troupe_streamed_to(text);
    `,
  },
  {
    // SQLite's migration 13: events_by_type holds only the types read by type through it (rare
    // ones), not the journal, call log and tool.call rows each turn writes; an agent's started
    // tool calls are read by the primary key's agent prefix.
    version: 18,
    sql: `
      DROP INDEX events_by_type;
      CREATE INDEX events_by_type ON events(run_id, type, id)
        WHERE type IN ('cli.run', 'approval', 'review.note', 'review.turn', 'trace.stint', 'fork.origin');
      DROP INDEX tool_calls_started;
    `,
  },
];

export const PG_SCHEMA_VERSION = PG_MIGRATIONS.at(-1)!.version;
