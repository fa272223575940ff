/**
 * The circuit breakers of a PostgreSQL cluster (table `provider_breaker`, one row per endpoint):
 * shared by every worker, so one worker's open breaker parks every worker's calls and one probe
 * goes across the cluster. A step locks the row (`SELECT … FOR UPDATE`) and writes what
 * breakerState.ts's reducer makes of it, in one transaction; times are the callers' clocks, so
 * workers' clocks should agree (as the quota's: quotaPg.ts).
 * @module
 */
import type pg from 'pg';
import type { BreakerStore } from './breaker.js';
import { CLOSED, stepBreaker, type BreakerRow, type BreakerState } from './breakerState.js';

interface Stored {
  state: string;
  failures: string;
  open_since: string | null;
  probe_at: string;
  probe_claimed_at: string | null;
}

const STATES: ReadonlySet<string> = new Set<BreakerState>(['closed', 'open', 'halfOpen']);

const COLUMNS = 'state, failures, open_since, probe_at, probe_claimed_at';

/** A stored row as the reducer's (a row it cannot read is closed: the breaker starts over). */
function decoded(stored: Stored | undefined): BreakerRow {
  if (!stored || !STATES.has(stored.state)) return CLOSED;
  const num = (text: string | null) => (text === null ? null : Number(text));
  return {
    state: stored.state as BreakerState,
    failures: Number(stored.failures),
    openSince: num(stored.open_since),
    probeAt: Number(stored.probe_at),
    probeClaimedAt: num(stored.probe_claimed_at),
  };
}

export function pgBreakerStore(pool: Pick<pg.Pool, 'query' | 'connect'>): BreakerStore {
  return {
    async read(endpoint) {
      const { rows } = await pool.query<Stored>(`SELECT ${COLUMNS} FROM provider_breaker WHERE endpoint = $1`, [endpoint]);
      return decoded(rows[0]);
    },
    async step(endpoint, event, policy) {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        await client.query(`INSERT INTO provider_breaker (endpoint, ${COLUMNS}) VALUES ($1, 'closed', 0, NULL, 0, NULL) ON CONFLICT (endpoint) DO NOTHING`, [
          endpoint,
        ]);
        const { rows } = await client.query<Stored>(`SELECT ${COLUMNS} FROM provider_breaker WHERE endpoint = $1 FOR UPDATE`, [endpoint]);
        const before = decoded(rows[0]);
        const step = stepBreaker(before, event, policy);
        if (step.row !== before) {
          const r = step.row;
          await client.query(
            'UPDATE provider_breaker SET state = $2, failures = $3, open_since = $4, probe_at = $5, probe_claimed_at = $6 WHERE endpoint = $1',
            [endpoint, r.state, r.failures, r.openSince, r.probeAt, r.probeClaimedAt],
          );
        }
        await client.query('COMMIT');
        return step;
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw err;
      } finally {
        client.release();
      }
    },
  };
}
