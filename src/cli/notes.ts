/**
 * `troupe notes`, `troupe notes promote <id>` and `troupe notes reject <id>`: the notes background
 * reviews proposed (quarantined), and a person's decision on each (notes/notes.ts), on every store
 * and from any process. A promoted note is read by the root of every run started after it.
 * @module
 */
import { ConfigError } from '../errors.js';
import type { Note, Notes } from '../notes/notes.js';
import { isPostgresUrl, type Io } from './args.js';
import { EXIT } from './exitCodes.js';
import type { Values } from './flags.js';
import { defaultReadDb, requireDatabase } from './runs.js';
import { forTerminal, jsonLine } from './terminal.js';

const USAGE = 'Usage: troupe notes [promote <note> | reject <note> [--reason <text>]]';

/** The notes of the database `--db` names; a PostgreSQL store is opened read-only to list. */
async function openNotes(values: Values, readOnly: boolean): Promise<Notes> {
  if (isPostgresUrl(values.db)) {
    const [{ openPostgresStore }, { postgresNotes }] = await Promise.all([import('../store/postgres/store.js'), import('../notes/postgresNotes.js')]);
    const store = await openPostgresStore({ url: values.db, ...(readOnly ? { readOnly: true } : {}) });
    const notes = postgresNotes(store);
    return { ...notes, close: () => store.close() };
  }
  const db = defaultReadDb(values.db);
  requireDatabase(db);
  const { sqliteNotes } = await import('../notes/sqliteNotes.js');
  return sqliteNotes(db);
}

const when = (at: number) => new Date(at).toISOString().replace(/\.\d+Z$/, 'Z');

const line = (n: Note) =>
  `${n.id}  ${n.state.padEnd(11)}  ${n.title}  (${n.agentName}, run ${n.runId}, ${when(n.proposedAt)})` + (n.reason ? `  reason: ${n.reason}` : '');

/** `troupe notes [--json]`, `troupe notes promote <note>`, `troupe notes reject <note> [--reason]`. */
export async function notes(args: string[], values: Values, io: Io): Promise<number> {
  const [action, id, ...rest] = args;
  if (action === undefined) {
    if (values.reason !== undefined) throw new ConfigError(`--reason goes with reject. ${USAGE}`);
    const store = await openNotes(values, true);
    try {
      const all = await store.list();
      if (values.json) io.out.write(`${jsonLine({ notes: all })}\n`);
      else if (all.length === 0) io.out.write('no notes: background review (config "review") proposes them\n');
      else io.out.write(`${all.map((n) => forTerminal(line(n))).join('\n')}\n`);
      return EXIT.OK;
    } finally {
      await store.close();
    }
  }
  if ((action !== 'promote' && action !== 'reject') || id === undefined || rest.length > 0) throw new ConfigError(USAGE);
  if (action === 'promote' && values.reason !== undefined) throw new ConfigError(`--reason goes with reject. ${USAGE}`);
  const store = await openNotes(values, false);
  try {
    const result = action === 'promote' ? await store.promote(id) : await store.reject(id, values.reason === undefined ? {} : { reason: values.reason });
    if (!result.ok) throw result.error;
    const { note } = result;
    if (values.json) io.out.write(`${jsonLine({ note })}\n`);
    else {
      const then = action === 'promote' ? ': the root of every run started from now on reads it' : ': no run reads it';
      io.out.write(`${forTerminal(`${note.id} ${note.state} (${note.title})`)}${then}\n`);
    }
    return EXIT.OK;
  } finally {
    await store.close();
  }
}
