/**
 * The database a hosting command (`run`, `demo`, `resume`, `serve`) runs on, whichever store the
 * `--db` value names: a SQLite file this process owns, or a PostgreSQL schema it shares with workers.
 * @module
 */
import type { HostingStore } from '../hosting/hostingStore.js';
import { sqliteHosting, type SqliteHosting } from '../hosting/sqliteHosting.js';
import { portOf } from '../store/port.js';
import type { PortReads } from '../store/postgres/reads.js';
import { isTroupeError, TroupeError } from '../errors.js';
import { openStore, type SqliteStore } from '../store/sqliteStore.js';
import { isPostgresUrl, type Io } from './args.js';
import type { Values } from './flags.js';
import { secrets } from './setup.js';

export interface HostingDb {
  readonly hosting: HostingStore;
  /** Reads of any run without hosting it. */
  readonly reads: PortReads;
  /** The database as the user named it (a path, or a URL without its password). */
  readonly label: string;
  /** The SQLite file and its hosting port (the dashboard reads the file; serve seeds what wants a host); null on PostgreSQL. */
  readonly file: { store: SqliteStore; hosting: SqliteHosting } | null;
  /** Who holds run `runId`'s claim, if another process does (a worker id on PostgreSQL). */
  ownerOf(runId: string): Promise<string | null>;
  close(): Promise<void>;
}

export async function openHostingDb(db: string, values: Values, io: Io): Promise<HostingDb> {
  if (isPostgresUrl(db)) {
    // Loaded only for a PostgreSQL --db.
    const [{ openPg }, { postgresHosting }] = await Promise.all([import('./pgHost.js'), import('../hosting/postgresHosting.js')]);
    const store = await openPg({ ...values, db }, io);
    return {
      hosting: postgresHosting(store),
      reads: store.reads,
      label: store.url,
      file: null,
      ownerOf: async (runId) => (await store.lease(runId))?.owner ?? null,
      close: () => store.close(),
    };
  }
  const store = ownFile(db, io);
  const hosting = sqliteHosting(store);
  // This process owns the file: no other process hosts any of its runs.
  return {
    hosting,
    reads: portOf(store),
    label: db,
    file: { store, hosting },
    ownerOf: () => Promise.resolve(null),
    close: () => Promise.resolve(store.close()),
  };
}

/** The file, owned by this process; owned by another, a RUN_LOCKED that says what to do instead. */
function ownFile(db: string, io: Io): SqliteStore {
  try {
    return openStore({ path: db, ...secrets(io) });
  } catch (err) {
    if (!isTroupeError(err) || err.code !== 'RUN_LOCKED') throw err;
    throw new TroupeError(
      'RUN_LOCKED',
      `${err.message}: another troupe process hosts its runs. Start a second run on another file (--db .troupe/second.db), or reach that process's runs from here with troupe send / stop / status --db ${db}`,
      { cause: err },
    );
  }
}
