/**
 * The notes of a PostgreSQL store (notes.ts), from any machine: a decision is one row, inserted
 * once (the primary key decides between two at once); the store's open migrated it (migration 16).
 * @module
 */
import { toEvent, toNote } from '../store/decode.js';
import type { EventDbRow, NoteDbRow } from '../store/dbRows.js';
import { operationError } from '../store/postgres/connect.js';
import type { PostgresStore } from '../store/postgres/store.js';
import { NOTE_EVENT, notesOver, type Notes } from './notes.js';

/** PostgreSQL's "undefined table": a read-only store of a schema from before migration 16. */
const UNDEFINED_TABLE = '42P01';

/**
 * The notes of `store` (closing them leaves the store open).
 * @example
 * const notes = postgresNotes(await openPostgresStore({ url }));
 * await notes.reject(id, { reason: 'too specific' });
 */
export function postgresNotes(store: Pick<PostgresStore, 'pool'>, now: () => number = Date.now): Notes {
  const all = async <R extends object>(sql: string, params: unknown[], what: string): Promise<R[]> => {
    try {
      return (await store.pool.query<R & Record<string, unknown>>(sql, params)).rows;
    } catch (err) {
      throw operationError(err, what);
    }
  };
  return notesOver(
    {
      proposals: async () => (await all<EventDbRow>('SELECT * FROM events WHERE type = $1 ORDER BY id', [NOTE_EVENT], 'reading notes')).map(toEvent),
      async decisions() {
        try {
          return (await store.pool.query<NoteDbRow & Record<string, unknown>>('SELECT * FROM notes ORDER BY decided_at, id')).rows.map(toNote);
        } catch (err) {
          if ((err as { code?: unknown }).code === UNDEFINED_TABLE) return [];
          throw operationError(err, 'reading notes');
        }
      },
      async decide(row) {
        const inserted = await all<{ id: string }>(
          `INSERT INTO notes (id, state, run_id, agent_name, title, content, proposed_at, decided_at, reason)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (id) DO NOTHING RETURNING id`,
          [row.id, row.state, row.runId, row.agentName, row.title, row.content, row.proposedAt, row.decidedAt, row.reason],
          'deciding a note',
        );
        return inserted.length === 1;
      },
      close: () => Promise.resolve(),
    },
    now,
  );
}
